"""Exchanges: named routers from a message's routing key to the queues bound to them.

Rules this module owns (qpidd's and Broker-J's exchanges, AMQP 0-10's types):

* Types: ``direct`` (the binding key equals the routing key; a hash lookup), ``topic``
  (the binding key is a pattern, see :mod:`proton_broker.exchanges.topic`), ``fanout``
  (every bound queue, keys ignored) and ``headers`` (the binding's arguments select by the
  message's application properties, see :mod:`proton_broker.exchanges.headers`).
* The broker starts with ``amq.direct``, ``amq.topic``, ``amq.fanout`` and ``amq.match``
  (headers). Names beginning ``amq.`` or ``qpid.`` are reserved (qpidd) and cannot be
  declared or deleted.
* A binding is (exchange, queue, binding key) with arguments; binding the same three again
  replaces the arguments and is not a second binding. A message reaches each queue at most
  once, however many of its bindings match.
* Routing cost: direct and topic grow with the bindings that match, fanout with the queues
  bound; headers bindings are each tested (as qpidd's headers exchange does). Unbinding
  everything of one queue costs that queue's bindings only.
* A binding whose arguments hold ``x-filter-jms-selector`` (Broker-J's name; JMS
  subscriptions put their selector there) also needs the message to match that selector
  (a bad selector is refused with ``InvalidField``, field ``filter``). Only queues with such
  bindings pay for it: their bindings are checked again, one by one.
* The routing key of a message (:func:`routing_key`), in Broker-J's order
  (``NodeReceivingDestination.getRoutingAddress``): the key of the address the sender
  attached to, or the relay's ``to`` named (``exchange/key``), whatever the message says;
  else the application property ``routing-key`` or ``routing_key``; else its ``subject``
  (qpidd's only source: it knows neither ``exchange/key`` nor the property); else its ``to``
  with the exchange's name and a ``/`` taken off the front; else ``""``.
* Unroutable messages: dropped and counted (qpidd; Broker-J's default ``DISCARD``), unless
  the exchange was declared with Broker-J's argument ``unroutableMessageBehaviour:
  REJECT``: then the sender is told (``rejected``, ``amqp:not-found``, "Unknown
  destination"), unless its link asks to discard them (Broker-J's ``DISCARD_UNROUTABLE``
  capability). :attr:`Exchange.rejects_unroutable` says which.
* qpidd's exchange arguments ``qpid.msg_sequence`` (a sequence number stamped on what
  the exchange routes) and ``qpid.ive`` (the last message replayed to each new binding)
  are not implemented: a new exchange that asks for them (a true value) is refused
  (:func:`unsupported_arguments`, ``amqp:not-implemented`` / 501) rather than made without.
* Argument names: those above are the ones an exchange here reads, with Broker-J's
  ``description`` and ``context`` (kept, no effect). An exchange declared by the
  configuration file or by management with any other name is refused
  (:func:`unknown_argument`), as Broker-J's exchanges refuse "Unknown attributes
  provided": a misspelt ``unroutableMessageBehavior`` or ``alternate_exchange`` would
  otherwise be kept, unread, and the messages it was meant to keep lost. qpidd keeps any
  argument, and an AMQP attach's node properties still become a new exchange's arguments
  as qpidd keeps them (what qpid::messaging's ``x-declare`` sends is not this broker's to
  vet).
* Counters: ``routed`` (messages that reached at least one queue) and ``dropped`` (reached
  none: unroutable, counted, and what happens to them is the broker's rule), each with its
  bytes; management's ``resetStatistics`` sets them back to zero.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from proton_broker.errors import InvalidField, NotImplementedByBroker
from proton_broker.exchanges.headers import SELECTOR_ARGUMENT, HeadersMatch
from proton_broker.exchanges.topic import TopicIndex, pattern_matches, words
from proton_broker.message import Message
from proton_broker.queues.settings import to_alternate, to_bool
from proton_broker.selector import Selector, parse_selector

DIRECT = "direct"
TOPIC = "topic"
FANOUT = "fanout"
HEADERS = "headers"
EXCHANGE_TYPES = (DIRECT, TOPIC, FANOUT, HEADERS)
DEFAULT_EXCHANGES = {
    "amq.direct": DIRECT,
    "amq.topic": TOPIC,
    "amq.fanout": FANOUT,
    "amq.match": HEADERS,
}
RESERVED_PREFIXES = ("amq.", "qpid.")
UNROUTABLE = "unroutableMessageBehaviour"  # Broker-J's exchange attribute
UNROUTABLE_CHOICES = ("DISCARD", "REJECT")
# Where what an exchange routes nowhere goes instead: qpidd's and Broker-J's names.
ALTERNATE_ARGUMENTS = ("alternate-exchange", "alternateExchange", "alternateBinding")


def check_declarable(name: str, kind: str) -> None:
    """InvalidField unless ``name`` may be declared as an exchange of type ``kind``."""
    if not name:
        raise InvalidField("an exchange needs a name", "name")
    if name.startswith(RESERVED_PREFIXES):
        raise InvalidField(
            f"exchange names beginning {' or '.join(RESERVED_PREFIXES)} are reserved "
            f"for the broker's own: '{name}'",
            "name",
        )
    if kind not in EXCHANGE_TYPES:
        raise InvalidField(
            f"unknown exchange type '{kind}' (one of {', '.join(EXCHANGE_TYPES)})",
            "exchange-type",
        )


ROUTING_KEY_PROPERTIES = ("routing-key", "routing_key")


def routing_key(message: Message, exchange: str, default: str | None = None) -> str:
    """The key ``message`` is routed with through ``exchange`` (see the module rules);
    ``default``: the key of the address it was sent to (``exchange/key``)."""
    if default:
        return default
    if message.app_properties_span is not None:
        for name in ROUTING_KEY_PROPERTIES:
            value = message.application_property(name)
            if isinstance(value, str) and value:
                return value
    if message.subject:
        return message.subject
    to = message.to
    if not to or to == exchange:
        return ""
    prefix = exchange + "/"
    return to[len(prefix) :] if to.startswith(prefix) else to


@dataclass(frozen=True)
class ExchangeAddress:
    """An address that names an exchange: ``exchange`` or ``exchange/subject``."""

    exchange: Exchange
    subject: str | None = None


@dataclass(frozen=True)
class Binding:
    """One binding, as listings and the store see it."""

    exchange: str
    queue: str
    key: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


class _Routes(Protocol):
    """How one exchange type finds the queues for a message."""

    def add(self, queue: str, key: str, arguments: Mapping[str, Any]) -> None: ...

    def remove(self, queue: str, key: str) -> None: ...

    def match(self, key: str, message: Message) -> set[str] | frozenset[str]: ...

    def covers(self, queue: str, binding_key: str, key: str, message: Message) -> bool:
        """Whether the one binding (queue, binding_key) matches."""
        ...


class _DirectRoutes:
    def __init__(self) -> None:
        self._by_key: dict[str, set[str]] = {}

    def add(self, queue: str, key: str, arguments: Mapping[str, Any]) -> None:
        self._by_key.setdefault(key, set()).add(queue)

    def remove(self, queue: str, key: str) -> None:
        queues = self._by_key.get(key)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._by_key[key]

    def match(self, key: str, message: Message) -> set[str] | frozenset[str]:
        return self._by_key.get(key, frozenset())

    def covers(self, queue: str, binding_key: str, key: str, message: Message) -> bool:
        return binding_key == key


class _TopicRoutes:
    def __init__(self) -> None:
        self._index: TopicIndex[str] = TopicIndex()

    def add(self, queue: str, key: str, arguments: Mapping[str, Any]) -> None:
        self._index.add(key, queue)

    def remove(self, queue: str, key: str) -> None:
        self._index.remove(key, queue)

    def match(self, key: str, message: Message) -> set[str] | frozenset[str]:
        return self._index.match(key)

    def covers(self, queue: str, binding_key: str, key: str, message: Message) -> bool:
        return pattern_matches(words(binding_key), words(key))


class _FanoutRoutes:
    def __init__(self) -> None:
        self._keys: Counter[str] = Counter()  # queue -> how many bindings (keys) it has

    def add(self, queue: str, key: str, arguments: Mapping[str, Any]) -> None:
        self._keys[queue] += 1

    def remove(self, queue: str, key: str) -> None:
        self._keys[queue] -= 1
        if self._keys[queue] <= 0:
            del self._keys[queue]

    def match(self, key: str, message: Message) -> set[str] | frozenset[str]:
        return frozenset(self._keys)

    def covers(self, queue: str, binding_key: str, key: str, message: Message) -> bool:
        return True


class _HeadersRoutes:
    def __init__(self) -> None:
        self._matches: dict[tuple[str, str], HeadersMatch] = {}

    def add(self, queue: str, key: str, arguments: Mapping[str, Any]) -> None:
        self._matches[(queue, key)] = HeadersMatch.parse(arguments)

    def remove(self, queue: str, key: str) -> None:
        self._matches.pop((queue, key), None)

    def match(self, key: str, message: Message) -> set[str] | frozenset[str]:
        if not self._matches:
            return frozenset()
        properties = message.application_properties
        return {queue for (queue, _), match in self._matches.items() if match.matches(properties)}

    def covers(self, queue: str, binding_key: str, key: str, message: Message) -> bool:
        match = self._matches.get((queue, binding_key))
        return match is not None and match.matches(message.application_properties)


_ROUTES: dict[str, type[_DirectRoutes | _TopicRoutes | _FanoutRoutes | _HeadersRoutes]] = {
    DIRECT: _DirectRoutes,
    TOPIC: _TopicRoutes,
    FANOUT: _FanoutRoutes,
    HEADERS: _HeadersRoutes,
}


class Exchange:
    """One exchange and its bindings. Used only from the event-loop thread."""

    def __init__(
        self,
        name: str,
        kind: str,
        durable: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        if kind not in EXCHANGE_TYPES:
            raise InvalidField(f"unknown exchange type '{kind}'", "exchange-type")
        self.name = name
        self.kind = kind
        self.durable = durable
        self.arguments = dict(arguments or {})  # as declared, for listings and the store
        self.rejects_unroutable = _unroutable(self.arguments) == "REJECT"
        self.alternate = _alternate(self.arguments)  # a queue or exchange name, or None
        self._routes: _Routes = _ROUTES[kind]()
        self._bindings: dict[tuple[str, str], Binding] = {}
        self._keys_of: dict[str, set[str]] = {}  # queue -> its binding keys here
        self._selectors: dict[tuple[str, str], Selector] = {}  # bindings with a selector
        self._selected: Counter[str] = Counter()  # queue -> how many of those it has
        self.routed = 0
        self.dropped = 0
        self.routed_bytes = 0
        self.dropped_bytes = 0
        self.deleted = False  # set when the broker deletes it (links still holding it see)

    @property
    def builtin(self) -> bool:
        return self.name in DEFAULT_EXCHANGES

    def bind(self, queue: str, key: str = "", arguments: Mapping[str, Any] | None = None) -> bool:
        """Bind ``queue`` with ``key``; False if that binding existed (its arguments are
        replaced). InvalidField for arguments a headers binding cannot use."""
        arguments = dict(arguments or {})
        if self.kind == HEADERS:
            HeadersMatch.parse(arguments)  # refused before anything changes
        selector = _selector(arguments)
        existed = (queue, key) in self._bindings
        if existed:
            self._remove(queue, key)
        self._routes.add(queue, key, arguments)
        if selector is not None:
            self._selectors[(queue, key)] = selector
            self._selected[queue] += 1
        self._bindings[(queue, key)] = Binding(self.name, queue, key, arguments)
        self._keys_of.setdefault(queue, set()).add(key)
        return not existed

    def unbind(self, queue: str, key: str = "") -> bool:
        """Remove one binding; False if there was none."""
        if self._bindings.pop((queue, key), None) is None:
            return False
        self._remove(queue, key)
        keys = self._keys_of[queue]
        keys.discard(key)
        if not keys:
            del self._keys_of[queue]
        return True

    def unbind_queue(self, queue: str) -> int:
        """Remove every binding of ``queue`` (it is being deleted); returns how many."""
        keys = self._keys_of.pop(queue, set())
        for key in keys:
            del self._bindings[(queue, key)]
            self._remove(queue, key)
        return len(keys)

    def _remove(self, queue: str, key: str) -> None:
        self._routes.remove(queue, key)
        if self._selectors.pop((queue, key), None) is not None:
            self._selected[queue] -= 1
            if not self._selected[queue]:
                del self._selected[queue]

    def is_bound(self, queue: str, key: str | None = None) -> bool:
        if key is None:
            return queue in self._keys_of
        return (queue, key) in self._bindings

    def bindings(self) -> list[Binding]:
        return list(self._bindings.values())

    def bindings_of(self, queue: str) -> list[Binding]:
        """``queue``'s bindings here (at the cost of those alone)."""
        return [self._bindings[(queue, key)] for key in sorted(self._keys_of.get(queue, ()))]

    @property
    def binding_count(self) -> int:
        return len(self._bindings)

    def route(self, key: str, message: Message) -> set[str] | frozenset[str]:
        """The names of the queues ``message`` goes to (counted as routed or dropped).
        The set returned may be the exchange's own: read it, do not change it."""
        queues = self._routes.match(key, message)
        if self._selected and queues:
            queues = {
                q for q in queues if q not in self._selected or self._selects(q, key, message)
            }
        if queues:
            self.routed += 1
            self.routed_bytes += message.size
        else:
            self.dropped += 1
            self.dropped_bytes += message.size
        return queues

    def rearrange(self, arguments: Mapping[str, Any]) -> None:
        """Take new ``arguments`` (management's UPDATE: the alternate and what becomes of
        unroutable messages may change on a live exchange, as in Broker-J); refused with
        ``InvalidField``, changing nothing, if they do not read."""
        arguments = dict(arguments)
        rejects, alternate = _unroutable(arguments) == "REJECT", _alternate(arguments)
        self.arguments, self.rejects_unroutable, self.alternate = arguments, rejects, alternate

    def reset_statistics(self) -> None:
        """Management's resetStatistics: the counters start again from zero."""
        self.routed = self.dropped = self.routed_bytes = self.dropped_bytes = 0

    def _selects(self, queue: str, key: str, message: Message) -> bool:
        """Whether one of ``queue``'s bindings matches ``message``, its selector too."""
        for binding_key in self._keys_of[queue]:
            selector = self._selectors.get((queue, binding_key))
            if self._routes.covers(queue, binding_key, key, message) and (
                selector is None or selector.matches(message)
            ):
                return True
        return False


def _selector(arguments: Mapping[str, Any]) -> Selector | None:
    text = arguments.get(SELECTOR_ARGUMENT)
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidField(f"{SELECTOR_ARGUMENT} must be a string, not {text!r}", "filter")
    return parse_selector(text) if text.strip() else None


def _alternate(arguments: Mapping[str, Any]) -> str | None:
    given = [name for name in ALTERNATE_ARGUMENTS if arguments.get(name) is not None]
    if not given:
        return None
    names = {to_alternate(name, arguments[name]) for name in given}
    if len(names) > 1:
        raise InvalidField(
            f"exchange arguments {', '.join(given)} name different alternates", given[0]
        )
    return names.pop()


_UNSUPPORTED = {
    "qpid.msg_sequence": "stamps a sequence number on each message it routes",
    "qpid.ive": "replays its last message to each new binding",
}


def unsupported_arguments(arguments: Mapping[str, Any]) -> None:
    """NotImplementedByBroker naming the first qpidd argument asked for (true) that this
    broker does not implement (see the module rules)."""
    for name, what in _UNSUPPORTED.items():
        value = arguments.get(name)
        if value is not None and to_bool(name, value):
            raise NotImplementedByBroker(
                f"exchange argument '{name}' (qpidd's: the exchange {what}) is not "
                "supported by this broker"
            )


KNOWN_ARGUMENTS = (*ALTERNATE_ARGUMENTS, UNROUTABLE, "description", "context", *_UNSUPPORTED)


def unknown_argument(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first argument name this broker does not know (see the module rules) and a
    sentence saying so, with the known name it is closest to; None if all are known."""
    for name in arguments:
        if name not in KNOWN_ARGUMENTS:
            close = difflib.get_close_matches(str(name), KNOWN_ARGUMENTS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            return str(name), (
                f"unknown exchange argument '{name}' ({hint}known: {', '.join(KNOWN_ARGUMENTS)})"
            )
    return None


def _unroutable(arguments: Mapping[str, Any]) -> str:
    value = arguments.get(UNROUTABLE, "DISCARD")
    text = str(value).upper()
    if text not in UNROUTABLE_CHOICES:
        raise InvalidField(
            f"{UNROUTABLE} must be {' or '.join(UNROUTABLE_CHOICES)}, not {value!r}", UNROUTABLE
        )
    return text
