"""Reading and echoing link termini (source/target) the way Qpid clients expect.

Capabilities arrive as a bare symbol or as an array of symbols (qpid::messaging sends one
capability bare); both are read. The reply echoes only the capabilities the broker honours,
because ``qpid::messaging``'s ``assert`` option checks the echo.

Queue options are read from two places (as qpidd's ``docs/amqp-1.0.txt`` describes them):

* the terminus ``dynamic-node-properties`` map, where qpid::messaging puts
  ``node.x-declare.arguments`` (also for a non-dynamic terminus, as the Qpid C++ broker
  reads them). Every key there is a queue option; unknown ones are refused.
* the link ``properties`` map. Clients use link properties for other purposes too, so only
  keys that name queue options are taken from it: known option names, and any key starting
  with ``qpid.`` or ``x-qpid-`` (an unknown one of those is refused, not ignored).

Both maps are decoded by the broker's own decoder from the bytes Proton re-encodes, never by
``Data.get_object`` (python-qpid-proton 0.40 crashes on maps with binary keys). The reply
carries the recognised options as strings, as the C++ broker writes them, since
qpid::messaging's ``assert`` compares them as strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cproton_ffi import ffi, lib
from proton import Array, Data, Described, Link, Terminus, symbol, ulong

from proton_broker.codec.encode import SEQUENCE_NUMBER
from proton_broker.codec.values import DecodeError, decode_value
from proton_broker.codec.values import Described as DecodedDescribed
from proton_broker.errors import InvalidField, NotImplementedByBroker
from proton_broker.exchanges.exchange import ALTERNATE_ARGUMENTS, Exchange
from proton_broker.message import property_text
from proton_broker.queues.filters import REPLAY_PERIOD, replay_seconds
from proton_broker.queues.history import SEQUENCE, SEQUENCE_KEY, sequence_start
from proton_broker.queues.settings import (
    AUTO_DELETE_NAMES,
    DELETE_ON_CLOSE,
    EXCLUSIVE_NAMES,
    LIFETIME_NAMES,
    PERMANENT,
    amqp_lifetime,
    option_names,
    to_auto_delete,
    to_bool,
    to_exclusive,
    to_lifetime,
)
from proton_broker.selector import Selector, parse_selector

_OPTION_NAMES = frozenset(option_names())
_OPTION_PREFIXES = ("qpid.", "x-qpid-")


def capabilities_of(terminus: Terminus) -> list[str]:
    """The capabilities on ``terminus`` as plain strings, whatever their encoding."""
    return symbols_in(_value(terminus.capabilities))


def _value(data: Data) -> Any:
    data.rewind()
    if not data.next():
        return None
    return data.get_object()


def symbols_in(value: Any) -> list[str]:
    """The symbols of a capabilities field, sent as one symbol or as an array."""
    if value is None:
        return []
    if isinstance(value, Array):
        return [str(v) for v in value.elements]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def echo_terminus(
    local: Terminus, remote: Terminus, address: str | None, honoured: Iterable[str]
) -> None:
    """Fill our side of the attach: the node address, whether it is dynamic (echoed, as
    Broker-J answers) and the capabilities we honour.

    The durability is at most ``configuration``, as Broker-J answers: the broker keeps a
    durable node and its subscriptions across a restart, never a link's unsettled state."""
    local.address = address
    local.dynamic = remote.dynamic  # AMQP 1.0 3.5.3: the node was made for this link
    local.durability = min(remote.durability, Terminus.CONFIGURATION)
    local.expiry_policy = remote.expiry_policy
    local.timeout = remote.timeout
    keep = [c for c in capabilities_of(remote) if c in set(honoured)]
    if keep:
        local.capabilities.put_array(False, Data.SYMBOL)
        local.capabilities.enter()
        for cap in keep:
            local.capabilities.put_symbol(symbol(cap))
        local.capabilities.exit()


def node_options(link: Link, terminus: Terminus) -> dict[str, Any]:
    """The queue options a client put on this attach (see the module rules)."""
    options = _map_of(terminus.properties, "dynamic-node-properties")
    impl = lib.pn_link_remote_properties(link._impl)  # NULL when the peer sent none
    link_props = _map_of(Data(impl), "link properties") if impl != ffi.NULL else {}
    for key, value in link_props.items():
        if key == REPLAY_PERIOD or (
            key not in _OPTION_NAMES and not key.startswith(_OPTION_PREFIXES)
        ):
            continue  # the replay period is a consumer filter: see replay_period()
        if key in options and options[key] != value:
            raise InvalidField(
                f"queue option '{key}' is {options[key]!r} in the node "
                f"properties but {value!r} in the link properties",
                key,
            )
        options[key] = value
    return options


EXCHANGE_TYPE = "exchange-type"
# Node options about the node itself when it is an exchange, not about a queue.
_EXCHANGE_OPTIONS = (EXCHANGE_TYPE, "supported-dist-modes", "durable", "type", "node-type")


def exchange_options(
    terminus: Terminus, options: dict[str, Any]
) -> tuple[bool, str | None, dict[str, Any]]:
    """Whether the attach asks for an exchange, the type it names (None: it names none),
    and the options left for a queue. An exchange is asked for by ``exchange-type``, by
    ``supported-dist-modes`` ``copy`` (what qpid::messaging sends for a topic node, beside
    the ``topic`` capability), by the ``temporary-topic`` capability on a
    dynamic node (Qpid JMS) or the ``topic`` capability without ``queue`` (Qpid JMS's
    topics; Broker-J makes an exchange for them)."""
    rest = {k: v for k, v in options.items() if k not in _EXCHANGE_OPTIONS}
    kind = options.get(EXCHANGE_TYPE)
    if kind is not None:
        return True, str(property_text(kind)), rest
    modes = options.get("supported-dist-modes")
    modes_text = " ".join(str(m) for m in modes) if isinstance(modes, (list, tuple)) else str(modes)
    capabilities = set(capabilities_of(terminus))
    wanted = (
        (modes is not None and "copy" in modes_text and "move" not in modes_text)
        or (terminus.dynamic and "temporary-topic" in capabilities)
        or ("topic" in capabilities and "queue" not in capabilities)
    )
    return (True, None, rest) if wanted else (False, None, options)


def node_type(terminus: Terminus) -> str | None:
    """The kind of node the link asks for by its capabilities, ``queue`` or ``topic``
    (qpid::messaging's ``node: {type: ...}``, Qpid JMS's queues and topics); None for
    neither, or both: qpidd's ``Session::resolve`` takes asking for both as asking for
    neither."""
    capabilities = set(capabilities_of(terminus))
    queue, topic = "queue" in capabilities, "topic" in capabilities
    if queue == topic:
        return None
    return "queue" if queue else "topic"


def node_durable(terminus: Terminus, options: Mapping[str, Any]) -> bool:
    """Whether the node an attach asks for is durable by its node properties (``durable``,
    as qpid::messaging's ``node: {durable: True}`` sends it) or its ``durable`` capability:
    qpidd's ``NodeProperties::isDurable``."""
    said = options.get("durable")
    return (said is not None and to_bool("durable", said)) or "durable" in capabilities_of(terminus)


def replay_period(link: Link, source: Terminus) -> tuple[float | None, Any]:
    """The replay period (seconds) a consumer asked for, and the filter entry to echo.

    Our mapping (no broker publishes one): a source filter whose key is
    ``x-qpid-replay-period``, its value described (``apache.org:x-qpid-replay-period:string``
    or any descriptor) or plain, a number of seconds or a numeric string; or the same key
    in the link properties. (None, None) when the attach has none: the queue's default
    filter applies then."""
    filters = _map_of(source.filter, "source filter")
    raw = filters.get(REPLAY_PERIOD)
    if raw is None:
        impl = lib.pn_link_remote_properties(link._impl)
        if impl != ffi.NULL:
            raw = _map_of(Data(impl), "link properties").get(REPLAY_PERIOD)
        if raw is None:
            return None, None
    value = raw.value if isinstance(raw, DecodedDescribed) else raw
    return replay_seconds(value), raw


def sequence_filter(source: Terminus) -> tuple[tuple[int | str, str | None] | None, dict[str, Any]]:
    """The history replay a consumer asked for with the source filters ``x-opt-sequence``
    (a number, ``first`` or ``last``) and ``x-opt-sequence-key`` (one key), and the filter
    entries to echo; (None, {}) without one. ``x-opt-sequence-key`` alone is refused
    (amqp:invalid-field): it says which key to replay, and without a replay it would be a
    consumer taking every key's messages that believes it took one key's."""
    filters = _map_of(source.filter, "source filter")
    raw = filters.get(SEQUENCE)
    if raw is None:
        if SEQUENCE_KEY in filters:
            raise InvalidField(
                f"{SEQUENCE_KEY} names the key of a replay: it needs the {SEQUENCE} filter "
                "(a number, 'first' or 'last')",
                SEQUENCE_KEY,
            )
        return None, {}
    start = sequence_start(raw.value if isinstance(raw, DecodedDescribed) else raw)
    echoed = {SEQUENCE: raw}
    key_raw = filters.get(SEQUENCE_KEY)
    key = key_raw.value if isinstance(key_raw, DecodedDescribed) else key_raw
    if key is not None:
        key = property_text(key)
        echoed[SEQUENCE_KEY] = key_raw
    return (start, key), echoed


def sequence_number_filter(source: Terminus) -> tuple[int | None, dict[str, Any]]:
    """Browse from a queue sequence number: the source filter ``x-opt-sequence-number``
    whose value is a ulong or long N >= 0, plain or described (by any descriptor, as
    ``x-opt-sequence`` is read); N and the entry to echo, or (None, {}) without one.
    Anything else is refused with amqp:invalid-field."""
    filters = _map_of(source.filter, "source filter")
    raw = filters.get(SEQUENCE_NUMBER)
    if raw is None:
        return None, {}
    value = raw.value if isinstance(raw, DecodedDescribed) else raw
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidField(
            f"{SEQUENCE_NUMBER} filter must be a sequence number (a ulong or "
            f"a non-negative long), got {value!r}",
            SEQUENCE_NUMBER,
        )
    if SEQUENCE in filters:
        raise InvalidField(
            f"{SEQUENCE_NUMBER} (browse from a queue sequence number) and "
            f"{SEQUENCE} (replay a key's history) cannot be combined",
            SEQUENCE_NUMBER,
        )
    return value, {SEQUENCE_NUMBER: raw}


# The JMS selector filter (the AMQP filter registry's apache.org:selector-filter:string): by its
# descriptor, numeric or symbolic, never by its key (JMS says jms-selector, Proton Python
# and qpid::messaging say selector). Broker-J also takes the legacy symbol.
SELECTOR_DESCRIPTORS = frozenset(
    {
        0x0000468C00000004,
        "apache.org:selector-filter:string",
        "apache.org:jms-selector-filter:string",
    }
)


def selector_filter(source: Terminus) -> tuple[Selector | None, dict[str, Any]]:
    """The JMS selector a consumer asked for, compiled, and the filter entry to echo;
    (None, {}) without one. A selector that is not a string, or does not parse, or two of
    them, are refused with amqp:invalid-field (field ``filter``)."""
    filters = _map_of(source.filter, "source filter")
    found = {
        name: raw
        for name, raw in filters.items()
        if isinstance(raw, DecodedDescribed) and raw.descriptor in SELECTOR_DESCRIPTORS
    }
    if not found:
        return None, {}
    if len(found) > 1:
        raise InvalidField(f"one selector filter at most, got {sorted(found)}", "filter")
    ((name, raw),) = found.items()
    if not isinstance(raw.value, str):
        raise InvalidField(
            f"selector filter '{name}' must be a string, got {raw.value!r}", "filter"
        )
    return parse_selector(raw.value), found


def echo_filters(local: Terminus, applied: Mapping[str, Any]) -> None:
    """Write the filters the broker applied into our source, as the client sent them."""
    echoed = {}
    for name, raw in applied.items():
        if isinstance(raw, DecodedDescribed):
            descriptor = raw.descriptor
            raw = Described(
                symbol(descriptor) if isinstance(descriptor, str) else ulong(descriptor), raw.value
            )
        echoed[symbol(name)] = raw
    local.filter.put_dict(echoed)


def filters_of(source: Terminus) -> dict[str, Any]:
    """The source's filter map, decoded (InvalidField if it cannot be read)."""
    return _map_of(source.filter, "source filter")


def _map_of(data: Data, what: str) -> dict[str, Any]:
    encoded = bytes(data.encode())
    if not encoded:
        return {}
    try:
        value = decode_value(encoded, 0)
    except DecodeError as exc:
        raise InvalidField(f"{what} could not be read: {exc}", what) from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidField(f"{what} must be a map, got {value!r}", what)
    return {str(property_text(k)): v for k, v in value.items()}


def echo_exchange_properties(local: Terminus, asked: Mapping[str, Any], exchange: Exchange) -> None:
    """Answer node properties given for an exchange with what the exchange is, as qpidd's
    ``NodeProperties::write`` does (nothing when none were given): ``supported-dist-modes``
    ``copy``, and, where they were asked about, ``durable`` (when it is), ``exchange-type``
    (its own, whatever was asked: qpid::messaging's ``assert`` compares them) and its
    ``alternate-exchange`` (when it has one)."""
    if not asked:
        return
    echo: dict[str, Any] = {"supported-dist-modes": "copy"}
    if "durable" in asked and exchange.durable:
        echo["durable"] = True
    if EXCHANGE_TYPE in asked:
        echo[EXCHANGE_TYPE] = exchange.kind
    if exchange.alternate is not None and any(k in asked for k in ALTERNATE_ARGUMENTS):
        echo["alternate-exchange"] = exchange.alternate
    if any(k in asked for k in AUTO_DELETE_NAMES):
        echo["auto-delete"] = False  # this broker's exchanges never delete themselves
    local.properties.put_dict({symbol(k): v for k, v in echo.items()})


def sender_exchange_arguments(options: Mapping[str, Any], dynamic: bool = False) -> dict[str, Any]:
    """The arguments a new exchange takes from the node properties of a sender's attach
    that are not about an exchange's routing (qpid::messaging's ``x-declare`` for a topic
    node): as qpidd, they are the exchange's arguments, kept and otherwise unused (those it
    implements and this broker does not are refused when it is declared), except
    ``auto-delete`` and ``exclusive``, read as a queue's are: false is what every exchange
    here is, true is refused (not implemented), not ignored; and another queue option,
    which is refused (``InvalidField``). An existing exchange takes none of them (qpidd
    ignores them). A ``dynamic`` node's ``delete-on-close`` lifetime (Qpid JMS's temporary
    topic) is what it gets anyway: it goes with the link that made it."""
    arguments = {}
    for key, value in options.items():
        if key in AUTO_DELETE_NAMES or key in EXCLUSIVE_NAMES:
            _refuse_if_asked(key, value)
        elif dynamic and key in LIFETIME_NAMES and to_lifetime(key, value) == DELETE_ON_CLOSE:
            continue
        elif key in _OPTION_NAMES:
            raise InvalidField(f"queue option '{key}' does not apply to an exchange", key)
        else:
            arguments[key] = value
    return arguments


def _refuse_if_asked(key: str, value: Any) -> None:
    """NotImplementedByBroker if ``auto-delete`` or ``exclusive`` (``key``) is asked of an
    exchange: this broker's exchanges are neither."""
    exclusive = key in EXCLUSIVE_NAMES
    if to_exclusive(key, value) if exclusive else to_auto_delete(key, value) != PERMANENT:
        raise NotImplementedByBroker(
            f"exchange option '{key}': this broker's exchanges are never "
            f"{'exclusive' if exclusive else 'auto-deleted'}"
        )


def echo_properties(local: Terminus, echo: Mapping[str, str], lifetime: str | None = None) -> None:
    """Write the recognised queue options into our terminus' node properties: as text
    (see the module rules), but a lifetime policy as AMQP's described value of the queue's
    own policy (``lifetime``), as qpidd writes it: qpid::messaging's ``assert`` reads no
    other form."""
    if echo:
        local.properties.put_dict({symbol(k): _echoed(k, v, lifetime) for k, v in echo.items()})


def _echoed(key: str, text: str, lifetime: str | None) -> Any:
    policy = amqp_lifetime(lifetime) if lifetime is not None and key in LIFETIME_NAMES else None
    return Described(symbol(policy), []) if policy is not None else text
