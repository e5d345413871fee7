"""Queue settings: one dataclass, one parser for every place settings come from.

Attach properties, the config file and management all call :func:`parse_options`, so an
option has the same names, types and checks wherever it is given. Both brokers' names are
accepted: the Qpid C++ argument names (``qpid.last_value_queue_key``, ``qpid.max_count``,
...) and the Broker-J attribute names (``lvqKey``, ``maximumQueueDepthMessages``, ...),
with the aliases listed in docs/queues.md.

Rules this module owns:

* Values may arrive as AMQP longs or as strings (qpid::messaging sends ``1`` or ``'1'``), so
  conversion accepts both where the meaning is clear, and nothing else: ``"ten"`` for a
  count is refused, naming the key and the value.
* Unknown keys are handed back, not dropped, so each caller refuses them in its own terms.
* Impossible combinations are refused here, once: at most one of priorities, sort key and
  LVQ key (the Qpid brokers pick one type per queue), and message groups only on a
  standard queue (the Qpid documentation rules out groups on LVQ and priority queues).
* Two aliases of one setting given with different values are a conflict, not a choice.
* Limits (``qpid.max_count``/``maximumQueueDepthMessages``, ``qpid.max_size``/
  ``maximumQueueDepthBytes``): a negative value disables a limit (Broker-J). Zero is where
  the two brokers disagree: qpid-cpp ignores a zero limit (its users write 0 for "none"),
  Broker-J enforces it. Since Broker-J ignores node properties over AMQP 1.0, whoever sends
  the ``qpid.`` names on an attach expects qpid-cpp, so 0 under a ``qpid.`` name is no
  limit and 0 under a Broker-J name is a limit of zero. A flow threshold of 0 is off
  (qpid-cpp). Thresholds that contradict each other (resume above stop, a flow stop above
  a reject limit, a flow stop that differs from the limit under producer flow control) are
  refused; see :mod:`proton_broker.queues.overflow` for what they mean.
* Dead-lettering (see :mod:`proton_broker.deadletters`): the alternate is named by qpidd's
  ``alternate-exchange`` or Broker-J's ``alternateBinding`` (a map whose ``destination``
  names a queue or an exchange, or that name alone); Broker-J's ``x-qpid-dlq-enabled``
  asks for a ``<queue>_DLQ`` instead, so the two together are a conflict.
  ``maximumDeliveryAttempts`` / ``x-qpid-maximum-delivery-count`` 0 means no maximum;
  absent, the broker's ``queue.maximum_delivery_attempts`` applies.
* Which messages a durable queue's store keeps is Broker-J's ``messageDurability``
  (``qpid.message_durability`` in its queue arguments): DEFAULT the durable ones, ALWAYS
  every one, NEVER none; it may change on a live queue, for the messages that arrive
  after. A queue that is not durable keeps none, and reads NEVER, as on Broker-J.
* The deprecated ``qpid.last_value_queue`` and ``qpid.last_value_queue_no_browse`` make a
  last-value queue keyed by ``qpid.LVQ_key`` (the key the old C++ modes used), with a
  deprecation warning the broker logs as it creates the queue; browsing such a queue works
  as on any LVQ.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proton_broker.codec.encode import KEY_SEQUENCE, SEQUENCE_NUMBER
from proton_broker.errors import InvalidField, NotImplementedByBroker
from proton_broker.queues.filters import check_default_filters
from proton_broker.selector import parse_selector

NONE, RING, REJECT = "none", "ring", "reject"
# Broker-J's context variable for the flow resume percentage (QueueSettings.resume_percent).
FLOW_RESUME_CONTEXT = "queue.queueFlowResumeLimit"
PRODUCER_FLOW_CONTROL, FLOW_TO_DISK = "producer_flow_control", "flow_to_disk"
SELF_DESTRUCT = "self_destruct"  # qpidd's: the queue deletes itself (queues/overflow.py)
OVERFLOW_POLICIES = (NONE, RING, REJECT, PRODUCER_FLOW_CONTROL, FLOW_TO_DISK, SELF_DESTRUCT)

GROUPS_NONE, GROUPS_STANDARD, GROUPS_SHARED = "none", "standard", "shared"

# What happens to a message whose time to live ran out (Broker-J's expiryPolicy): it is
# deleted (both Qpid brokers' default) or routed to the queue's alternate.
EXPIRE_DELETE, EXPIRE_TO_ALTERNATE = "delete", "route_to_alternate"
EXPIRY_POLICIES = (EXPIRE_DELETE, EXPIRE_TO_ALTERNATE)

# Which messages a durable queue's store keeps (Broker-J's messageDurability): the durable
# ones (both brokers' rule), every one, or none. A queue that is not durable keeps none,
# whatever it was given: Broker-J sets NEVER on such a queue as it opens.
KEEP_DURABLE, KEEP_ALWAYS, KEEP_NEVER = "default", "always", "never"
MESSAGE_DURABILITIES = (KEEP_DURABLE, KEEP_ALWAYS, KEEP_NEVER)
# What the store keeps under each: (messages that are not durable, durable ones), as
# Broker-J's MessageDurability.persist(persistent) answers.
KEPT: Mapping[str, tuple[bool, bool]] = {
    KEEP_DURABLE: (False, True),
    KEEP_ALWAYS: (True, True),
    KEEP_NEVER: (False, False),
}

PERMANENT, DELETE_ON_CLOSE = "permanent", "delete-on-close"
DELETE_IF_UNUSED, DELETE_IF_UNUSED_AND_EMPTY = "delete-if-unused", "delete-if-unused-and-empty"
DELETE_IF_EMPTY = "delete-if-empty"
LIFETIME_POLICIES = (
    PERMANENT,
    DELETE_ON_CLOSE,
    DELETE_IF_UNUSED,
    DELETE_IF_UNUSED_AND_EMPTY,
    DELETE_IF_EMPTY,
)
# The AMQP 1.0 lifetime policies (section 3.5.10), by descriptor code and name.
_AMQP_LIFETIMES = {
    0x2B: DELETE_ON_CLOSE,
    "delete-on-close": DELETE_ON_CLOSE,
    0x2C: DELETE_IF_UNUSED,
    "delete-on-no-links": DELETE_IF_UNUSED,
    0x2D: DELETE_IF_EMPTY,
    "delete-on-no-messages": DELETE_IF_EMPTY,
    0x2E: DELETE_IF_UNUSED_AND_EMPTY,
    "delete-on-no-links-or-messages": DELETE_IF_UNUSED_AND_EMPTY,
}

AUTO_DELETE_NAMES = ("auto-delete", "auto_delete", "autoDelete")
EXCLUSIVE_NAMES = ("exclusive", "qpid.exclusive", "qpid.exclusivity_policy")  # last: Broker-J's
LIFETIME_NAMES = (
    "qpid.lifetime-policy",
    "qpid.lifetime_policy",
    "lifetimePolicy",
    "lifetime-policy",
)
_AMQP_LIFETIME_SYMBOLS = {
    policy: f"amqp:{name}:list" for name, policy in _AMQP_LIFETIMES.items() if isinstance(name, str)
}


def amqp_lifetime(policy: str) -> str | None:
    """The descriptor symbol of AMQP 1.0's lifetime policy for ``policy`` (None for
    ``permanent``, which AMQP has none for): how qpidd writes a queue's policy back."""
    return _AMQP_LIFETIME_SYMBOLS.get(policy)


LEGACY_LVQ_KEY = "qpid.LVQ_key"
MAX_PRIORITIES = 10
# Where JMS puts JMSXGroupID: naming it as the group key means "use properties.group-id".
_GROUP_ID_ALIASES = ("JMSXGroupID", "JMSXGroupId")


@dataclass(frozen=True)
class QueueSettings:
    """Everything that defines a queue's behaviour; immutable once the queue exists."""

    durable: bool = False
    # queue type (at most one of the three)
    priorities: int | None = None  # number of priority levels; None: not a priority queue
    # qpidd's fair share over the levels (queues/entries.py FairshareOrder): how many
    # messages a level hands out in a row before the next lower one gets a turn, for every
    # level, and for the levels given (level -> share); 0: no bound
    fairshare: int | None = None
    fairshare_levels: Mapping[int, int] | None = None
    sort_key: str | None = None  # application property giving the sort order
    lvq_key: str | None = None  # application property giving the last-value key
    # per-key sequence numbers and history (the LVQ key, or this on other queues)
    sequence_key: str | None = None
    # qpidd's qpid.filter: a JMS selector a message must match to join (Queue.enqueue)
    queue_filter: str | None = None
    # qpidd's qpid.queue_msg_sequence: every delivery also carries the message's queue
    # number (a uint, modulo 2^32) as the message annotation of this name
    sequence_annotation: str | None = None
    max_key_updates: int | None = None  # versions kept per key; None: the broker default
    # message groups
    group_mode: str = GROUPS_NONE
    group_key: str | None = None  # application property; None: properties.group-id
    default_group: str | None = None  # None: the broker's default-message-group
    # limits and overflow
    max_count: int | None = None
    max_size: int | None = None
    overflow_policy: str = NONE
    flow_stop_count: int | None = None
    flow_stop_size: int | None = None
    flow_resume_count: int | None = None
    flow_resume_size: int | None = None
    flow_resume_percent: int | None = None
    # Broker-J's maximumLiveConsumers: consumers beyond it wait in standby (0: no bound;
    # queues/dispatching.py)
    max_live_consumers: int = 0
    # qpidd's no-local (Broker-J's noLocal): what a connection publishes does not join the
    # queue while that connection consumes from it (the broker keeps count: broker.py)
    no_local: bool = False
    # delivery control
    ensure_nondestructive: bool = False
    default_filters: Mapping[str, Any] | None = None
    min_ttl: int | None = None  # milliseconds
    max_ttl: int | None = None
    hold_on_publish: bool = False
    # dead-lettering (proton_broker.deadletters)
    alternate: str | None = None  # a queue or exchange; None: none (or the DLQ below)
    dead_letter_queue: bool | None = None  # <name>_DLQ as the alternate; None: broker default
    max_delivery_attempts: int | None = None  # 0: no maximum; None: the broker default
    expiry_policy: str = EXPIRE_DELETE
    # which messages a durable queue's store keeps (MESSAGE_DURABILITIES; see kept)
    message_durability: str = KEEP_DURABLE
    # lifetime
    lifetime_policy: str = PERMANENT
    auto_delete_timeout: int | None = None  # seconds
    exclusive: bool = False
    # made as a subscription queue (exchanges/subscriptions.py): SHARED_SUBSCRIPTION or
    # EXCLUSIVE_SUBSCRIPTION, stored with the queue so a restart still knows it
    subscription: str | None = None
    # duplicate detection (queues/duplicates.py): remember the last N message-ids and/or
    # the ids seen in the last T seconds; both None: off
    duplicate_count: int | None = None
    duplicate_seconds: float | None = None
    # What Broker-J's objects say of themselves (its ``description`` and ``context``
    # attributes): kept, shown and changed by management. Of the context's variables the
    # queue reads Broker-J's ``queue.queueFlowResumeLimit`` (resume_percent); the rest are
    # kept only.
    description: str | None = None
    context: Mapping[str, str] | None = None

    @property
    def resume_percent(self) -> float | None:
        """The percentage of the limits at which stopped producers resume: the queue's own
        option, else Broker-J's context variable ``queue.queueFlowResumeLimit`` (None: the
        default, see queues/overflow.py)."""
        if self.flow_resume_percent is not None:
            return self.flow_resume_percent
        if self.context is not None and FLOW_RESUME_CONTEXT in self.context:
            return _context_percent(self.context[FLOW_RESUME_CONTEXT])
        return None

    @property
    def messages_kept(self) -> str:
        """Which messages the store keeps (Broker-J's messageDurability, as it reads on the
        queue): none on a queue that is not durable."""
        return self.message_durability if self.durable else KEEP_NEVER

    @property
    def kept(self) -> tuple[bool, bool]:
        """Whether the store keeps a message on this queue: (one that is not durable, a
        durable one)."""
        return KEPT[self.messages_kept]

    @property
    def detects_duplicates(self) -> bool:
        return self.duplicate_count is not None or self.duplicate_seconds is not None

    @property
    def kind(self) -> str:
        """The queue type, by Broker-J's names: standard, priority, sorted or lvq."""
        if self.priorities is not None:
            return "priority"
        if self.sort_key is not None:
            return "sorted"
        if self.lvq_key is not None:
            return "lvq"
        return "standard"

    @property
    def grouped(self) -> bool:
        return self.group_mode != GROUPS_NONE


@dataclass
class ParsedOptions:
    """The result of reading an option map: settings, what was given, what was not known."""

    settings: QueueSettings
    given: dict[str, str] = field(default_factory=dict)  # settings field -> option name used
    unknown: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, str] = field(default_factory=dict)  # recognised option -> value as text
    # Warnings for whoever creates a queue with these options (deprecated names): logged
    # there, once, since the same options are read several times on their way.
    notices: list[str] = field(default_factory=list)


# ---- converters: (option name, value) -> setting value; InvalidField names both --------

SHARED_SUBSCRIPTION, EXCLUSIVE_SUBSCRIPTION = "shared", "exclusive"
SUBSCRIPTION_MODES = (SHARED_SUBSCRIPTION, EXCLUSIVE_SUBSCRIPTION)

NOTHING = object()  # what a converter returns for a value that asks for nothing (echoed only)


def _bad(name: str, value: Any, expected: str) -> InvalidField:
    return InvalidField(f"queue option '{name}' must be {expected}, got {value!r}", name)


def to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no"):
        return value.strip().lower() in ("1", "true", "yes")
    raise _bad(name, value, "a boolean (true/false, 1/0)")


def _to_int(name: str, value: Any) -> int:
    """An integer, from a number or its text, that fits AMQP's long (the widest integer the
    broker answers in ``$management`` and stores; Broker-J's attributes are Java longs)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value.strip())
    if number is None:
        raise _bad(name, value, "an integer")
    if not -(2**63) <= number < 2**63:
        raise _bad(name, value, "an integer that fits in 64 bits")
    return number


def to_limit(name: str, value: Any) -> int | None:
    """A message or byte limit. A negative value disables it (Broker-J). Zero means "no
    limit" under the C++ names (``qpid.max_count``, ``qpid.max_size``: qpid-cpp ignores a
    zero limit, and its users write 0 to turn a limit off; Broker-J ignores these node
    properties over AMQP 1.0, so whoever sends them expects qpid-cpp) and "nothing may be
    queued" under the Broker-J names, as Broker-J has it."""
    number = _to_int(name, value)
    if number < 0 or (number == 0 and name.startswith("qpid.")):
        return None
    return number


def to_threshold(name: str, value: Any) -> int | None:
    """A flow-control threshold (``qpid.flow_stop_count`` and the like): a non-negative
    integer; 0 turns it off, as in qpid-cpp's ``QueueFlowLimit``."""
    number = to_count(name, value)
    return number or None


def _int_in(name: str, value: Any, low: int, high: float, what: str) -> int:
    """An integer from ``low`` to ``high``; anything else is refused as not ``what``."""
    number = _to_int(name, value)
    if not low <= number <= high:
        raise _bad(name, value, what)
    return number


def to_count(name: str, value: Any) -> int:
    """A non-negative integer (a threshold, a time)."""
    return _int_in(name, value, 0, math.inf, "a non-negative integer")


def to_percent(name: str, value: Any) -> int:
    return _int_in(name, value, 0, 100, "a percentage from 0 to 100")


def to_positive(name: str, value: Any) -> int:
    """An integer of at least 1 (a window of message-ids)."""
    return _int_in(name, value, 1, math.inf, "an integer of at least 1")


def to_seconds(name: str, value: Any) -> float:
    """A number of seconds greater than zero (an integer, a float or their text)."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if (
        isinstance(number, bool)
        or not isinstance(number, (int, float))
        or not 0 < number < float("inf")
    ):
        raise _bad(name, value, "a number of seconds greater than 0")
    return float(number)


def to_priorities(name: str, value: Any) -> Any:
    """A number of priority levels from 1 to 10; 0 asks for none, as qpidd reads it (a
    plain queue)."""
    levels = _int_in(
        name, value, 0, MAX_PRIORITIES, f"a number of priority levels from 0 to {MAX_PRIORITIES}"
    )
    return levels or NOTHING


# Broker-J's ExclusivityPolicy names: NONE, and the one this broker's exclusive queue is
# (the connection that made it, or the next to attach, owns it); the others are refused.
_EXCLUSIVITY = {"NONE": False, "CONNECTION": True}
_OTHER_EXCLUSIVITY = ("SESSION", "CONTAINER", "PRINCIPAL", "LINK", "SHARED_SUBSCRIPTION")


def to_exclusive(name: str, value: Any) -> bool:
    """A boolean, or Broker-J's ``ExclusivityPolicy``: ``NONE`` is false, ``CONNECTION``
    true (what this broker's exclusive queue is); its other policies are not supported."""
    policy = value.strip().upper() if isinstance(value, str) else None
    if policy in _EXCLUSIVITY:
        return _EXCLUSIVITY[policy]
    if policy in _OTHER_EXCLUSIVITY:
        raise NotImplementedByBroker(
            f"queue option '{name}': exclusivity policy {policy} is not "
            "supported (NONE, or CONNECTION: the queue belongs to one connection)"
        )
    return to_bool(name, value)


def to_single_active(name: str, value: Any) -> int:
    """RabbitMQ's ``x-single-active-consumer``, as Broker-J reads it: true is one live
    consumer at a time (``maximumLiveConsumers`` 1), false no such limit (0)."""
    return 1 if to_bool(name, value) else 0


def to_key(name: str, value: Any) -> str:
    """The name of a message property: a non-empty string."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise _bad(name, value, "a non-empty property name")


def to_text(name: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise _bad(name, value, "a non-empty string")


# The message annotations the broker itself sets on every delivery, which no queue's
# qpid.queue_msg_sequence may name.
_BROKER_ANNOTATIONS = frozenset({SEQUENCE_NUMBER, KEY_SEQUENCE})


def to_annotation_name(name: str, value: Any) -> str | None:
    """qpidd's ``qpid.queue_msg_sequence``: the message annotation (a symbol, so ASCII) each
    delivery carries the queue's number of the message under; empty, as in qpidd, is off."""
    if isinstance(value, str) and value.isascii() and value not in _BROKER_ANNOTATIONS:
        return value or None
    raise _bad(name, value, "an annotation name (ASCII text, not one the broker sets)")


def to_selector_text(name: str, value: Any) -> str | None:
    """qpidd's ``qpid.filter``: a JMS selector every message must match to join the queue
    (blank: none, as an empty selector selects everything)."""
    if not isinstance(value, str):
        raise _bad(name, value, "a JMS selector (text)")
    try:
        parse_selector(value)
    except InvalidField as exc:
        raise InvalidField(f"queue option '{name}': {exc.description}", name) from None
    return value if value.strip() else None


def to_description(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _bad(name, value, "a string")


def _context_percent(text: str) -> float | None:
    """A context variable's percentage (Broker-J reads it as a double), or None if it is
    not a number from 0 to 100."""
    try:
        percent = float(text)
    except ValueError:
        return None
    return percent if 0.0 <= percent <= 100.0 else None


def to_context(name: str, value: Any) -> dict[str, str]:
    """Broker-J's ``context``: a map of variable names to text (or JSON text of one)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise _bad(name, value, "a map of names to values") from None
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise _bad(name, value, "a map of names to values")
    return {key: str(item) for key, item in value.items()}


def to_policy(name: str, value: Any) -> str:
    text = value.strip().lower().replace("-", "_") if isinstance(value, str) else None
    if text in OVERFLOW_POLICIES:
        return text
    choices = ", ".join(OVERFLOW_POLICIES)
    raise _bad(name, value, f"one of {choices}")


# qpidd's "manual", and Broker-J's policy names that are one of ours (spelt lower case with
# hyphens); its DELETE_ON_SESSION_END, IN_USE and DELETE_ON_NO_OUTBOUND_LINKS are not.
_LIFETIME_ALIASES = {
    "manual": PERMANENT,
    "delete-on-connection-close": DELETE_ON_CLOSE,
    "delete-on-creating-link-close": DELETE_ON_CLOSE,
}


def to_lifetime(name: str, value: Any) -> str:
    """A lifetime policy: a Qpid name, or an AMQP 1.0 policy as a described value (by
    symbol, as qpid::messaging sends it, or by code, as Qpid JMS does)."""
    descriptor = getattr(value, "descriptor", None)
    if isinstance(descriptor, int) and descriptor in _AMQP_LIFETIMES:
        return _AMQP_LIFETIMES[descriptor]
    text = str(descriptor if descriptor is not None else value).strip().lower()
    text = text.removeprefix("amqp:").removesuffix(":list").replace("_", "-")
    text = _LIFETIME_ALIASES.get(text, text)
    text = _AMQP_LIFETIMES.get(text, text)
    if text in LIFETIME_POLICIES:
        return text
    raise _bad(name, value, "one of " + ", ".join(LIFETIME_POLICIES))


def _named(name: str, value: Any, choices: tuple[str, ...], expected: str) -> str:
    """One of Broker-J's enum names ``choices`` (kept lower case), in any case."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text in choices:
        return text
    raise _bad(name, value, expected)


def to_expiry_policy(name: str, value: Any) -> str:
    return _named(name, value, EXPIRY_POLICIES, "DELETE or ROUTE_TO_ALTERNATE")


def to_message_durability(name: str, value: Any) -> str:
    """Broker-J's ``messageDurability``: DEFAULT, ALWAYS or NEVER."""
    return _named(name, value, MESSAGE_DURABILITIES, "DEFAULT, ALWAYS or NEVER")


def to_alternate(name: str, value: Any) -> str:
    """An alternate: a name (qpidd's ``alternate-exchange``), or Broker-J's
    ``alternateBinding`` map ``{"destination": name}`` (also as JSON text)."""
    if isinstance(value, str) and value.strip().startswith("{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if isinstance(value, Mapping):
        value = value.get("destination")
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise _bad(name, value, 'a queue or exchange name (or {"destination": name})')


def to_auto_delete(name: str, value: Any) -> str:
    return DELETE_IF_UNUSED if to_bool(name, value) else PERMANENT


def to_shared_groups(name: str, value: Any) -> Any:
    """qpid.shared_msg_group: 1, "1" or true turn on shared groups (C++ and Broker-J); 0
    asks for nothing (a group key alone then means standard groups)."""
    return GROUPS_SHARED if to_bool(name, value) else NOTHING


def to_group_type(name: str, value: Any) -> str:
    text = str(value).strip().upper() if isinstance(value, str) else ""
    modes = {"NONE": GROUPS_NONE, "STANDARD": GROUPS_STANDARD, "SHARED_GROUPS": GROUPS_SHARED}
    if text in modes:
        return modes[text]
    raise _bad(name, value, "one of NONE, STANDARD, SHARED_GROUPS")


def to_subscription(name: str, value: Any) -> str:
    if value in SUBSCRIPTION_MODES:
        return str(value)
    raise _bad(name, value, "one of " + ", ".join(SUBSCRIPTION_MODES))


def to_filters(name: str, value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # as the config file or a tool may give it
            value = json.loads(value)
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        check_default_filters(value)
        return dict(value)
    raise _bad(name, value, "a map from filter name to its type and arguments")


def to_dist_modes(name: str, value: Any) -> str:
    """supported-dist-modes as qpid::messaging sends it: understood, not a setting."""
    modes = value if isinstance(value, (list, tuple)) else str(value).replace(",", " ").split()
    if modes and all(str(mode) in ("move", "copy") for mode in modes):
        return " ".join(str(mode) for mode in modes)
    raise _bad(name, value, "'move' and/or 'copy'")


# ---- the table: every option name (all aliases) -> (settings field, converter) ----------

Converter = Callable[[str, Any], Any]
_OPTIONS: dict[str, tuple[str, Converter]] = {}


def _option(target: str, convert: Converter, *names: str) -> None:
    for name in names:
        _OPTIONS[name] = (target, convert)


_option("durable", to_bool, "durable")
_option("priorities", to_priorities, "qpid.priorities", "x-qpid-priorities", "priorities")
_option("fairshare", to_count, "qpid.fairshare", "x-qpid-fairshare")
_option("sort_key", to_key, "qpid.queue_sort_key", "sortKey")
_option("lvq_key", to_key, "qpid.last_value_queue_key", "lvqKey")
_option("sequence_key", to_key, "sequenceKey", "qpid.sequence_key")
_option("sequence_annotation", to_annotation_name, "qpid.queue_msg_sequence")
_option("queue_filter", to_selector_text, "qpid.filter")
_option("max_key_updates", to_count, "max_key_updates", "maxKeyUpdates")
_option(
    "group_key", to_key, "qpid.group_header_key", "messageGroupKeyOverride", "messageGroupKey"
)  # messageGroupKey: Broker-J before 6.1
_option("group_mode", to_shared_groups, "qpid.shared_msg_group", "messageGroupSharedGroups")
_option("group_mode", to_group_type, "messageGroupType")
_option("default_group", to_text, "qpid.default-message-group", "messageGroupDefaultGroup")
_option("max_count", to_limit, "qpid.max_count", "maximumQueueDepthMessages")
_option("max_size", to_limit, "qpid.max_size", "maximumQueueDepthBytes")
_option("overflow_policy", to_policy, "qpid.policy_type", "overflowPolicy")
_option("flow_stop_count", to_threshold, "qpid.flow_stop_count")
_option("flow_stop_size", to_threshold, "qpid.flow_stop_size", "x-qpid-capacity")
_option("flow_resume_count", to_threshold, "qpid.flow_resume_count")
_option("flow_resume_size", to_threshold, "qpid.flow_resume_size", "x-qpid-flow-resume-capacity")
_option("flow_resume_percent", to_percent, "queueFlowResumeLimit", "qpid.flow_resume_limit")
_option(
    "ensure_nondestructive",
    to_bool,
    "ensureNondestructiveConsumers",
    "qpid.ensure_nondestructive_consumers",
    "qpid.browse-only",
)
_option("default_filters", to_filters, "defaultFilters", "qpid.default_filters")
_option("min_ttl", to_count, "minimumMessageTtl", "qpid.minimum_message_ttl")
_option("max_ttl", to_count, "maximumMessageTtl", "qpid.maximum_message_ttl")
_option("hold_on_publish", to_bool, "holdOnPublishEnabled", "qpid.hold_on_publish")
_option("lifetime_policy", to_lifetime, *LIFETIME_NAMES)
_option("lifetime_policy", to_auto_delete, *AUTO_DELETE_NAMES)
_option("auto_delete_timeout", to_count, "qpid.auto_delete_timeout")
_option("exclusive", to_exclusive, *EXCLUSIVE_NAMES)
_option("subscription", to_subscription, "subscription")
_option(
    "alternate",
    to_alternate,
    "alternate-exchange",
    "alternateExchange",
    "qpid.alternate_exchange",
    "alternateBinding",
)
_option("dead_letter_queue", to_bool, "x-qpid-dlq-enabled", "deadLetterQueueEnabled")
_option(
    "max_delivery_attempts",
    to_count,
    "maximumDeliveryAttempts",
    "x-qpid-maximum-delivery-count",
    "qpid.max_delivery_attempts",
)
_option("expiry_policy", to_expiry_policy, "expiryPolicy")
_option("duplicate_count", to_positive, "duplicateDetectionCount", "duplicate_detection_count")
_option("duplicate_seconds", to_seconds, "duplicateDetectionSeconds", "duplicate_detection_seconds")
_option("message_durability", to_message_durability, "messageDurability", "qpid.message_durability")
_option("max_live_consumers", to_count, "maximumLiveConsumers")
_option("max_live_consumers", to_single_active, "x-single-active-consumer")
_option("no_local", to_bool, "no-local", "noLocal")
_option("description", to_description, "description", "x-qpid-description")
_option("context", to_context, "context")
# Understood but not settings of the queue: checked, echoed, otherwise ignored.
_option("", to_dist_modes, "supported-dist-modes")
_option("", to_key, "type", "node-type")  # x-declare's 'type' for a queue node
# Deprecated C++ LVQ modes: handled in _legacy_lvq.
_DEPRECATED_LVQ = ("qpid.last_value_queue", "qpid.last_value_queue_no_browse")
_FAIRSHARE_LEVEL = ("qpid.fairshare-", "x-qpid-fairshare-")  # qpidd's per-level shares
# qpidd's options with nothing to change here (alerts are QMF events, the rest tune its
# store, paging and federation): accepted, echoed, and logged as having no effect, so
# addresses written for qpidd attach unchanged. Broker-J's alert thresholds (log messages
# there) likewise, and its maximumDistinctGroups: the number of buckets its standard groups
# are hashed into (groups that share one share a consumer); groups here are never merged.
# qpidd's qpid.group_timestamp feeds only its QMF group query ("not actually used", its
# QueueSettings.h says).
_NO_EFFECT = frozenset(
    (
        "qpid.group_timestamp",
        "qpid.alert_count",
        "qpid.alert_size",
        "qpid.alert_repeat_gap",
        "qpid.alert_count_up",
        "qpid.alert_size_up",
        "qpid.alert_count_down",
        "qpid.alert_size_down",
        "x-qpid-minimum-alert-repeat-gap",
        "x-qpid-maximum-message-count",
        "x-qpid-maximum-message-size",
        "x-qpid-maximum-message-age",
        "x-qpid-maximum-queue-depth",
        "qpid.file_count",
        "qpid.file_size",
        "qpid.paging",
        "qpid.max_pages_loaded",
        "qpid.page_factor",
        "qpid.trace.id",
        "qpid.trace.exclude",
        "qpid.replicate",
        "alertThresholdQueueDepthMessages",
        "alertThresholdQueueDepthBytes",
        "alertThresholdMessageAge",
        "alertThresholdMessageSize",
        "alertRepeatGap",
        "maximumDistinctGroups",
    )
)


@dataclass(frozen=True)
class OptionInfo:
    """One queue setting as a form offers it: every name it goes by (declaration order),
    the kind of value it takes (``bool``, ``int``, ``number``, ``text``, ``map``) and, for
    a choice, the values allowed."""

    setting: str
    names: tuple[str, ...]
    kind: str
    choices: tuple[str, ...] = ()


def option_table() -> list[OptionInfo]:
    """Every setting an option can set, once (for the web console's create form; the
    parser stays the judge of every value)."""
    kinds: dict[Converter, str] = {
        to_bool: "bool",
        to_exclusive: "bool",
        to_shared_groups: "bool",
        to_limit: "int",
        to_threshold: "int",
        to_count: "int",
        to_percent: "int",
        to_positive: "int",
        to_priorities: "int",
        to_seconds: "number",
        to_filters: "map",
        to_context: "map",
    }
    choices: dict[Converter, tuple[str, ...]] = {
        to_policy: tuple(p.upper() for p in OVERFLOW_POLICIES),
        to_lifetime: tuple(LIFETIME_POLICIES),
        to_expiry_policy: tuple(p.upper() for p in EXPIRY_POLICIES),
        to_message_durability: tuple(p.upper() for p in MESSAGE_DURABILITIES),
        to_group_type: ("NONE", "STANDARD", "SHARED_GROUPS"),
        to_subscription: SUBSCRIPTION_MODES,
    }
    names: dict[tuple[str, Converter], list[str]] = {}
    for name, (setting, convert) in _OPTIONS.items():
        if setting:  # not the understood-but-ignored ones
            names.setdefault((setting, convert), []).append(name)
    return [
        OptionInfo(setting, tuple(aliases), kinds.get(convert, "text"), choices.get(convert, ()))
        for (setting, convert), aliases in names.items()
    ]


def option_names() -> list[str]:
    """Every option name the parser knows (for help texts and management)."""
    return sorted([*_OPTIONS, *_DEPRECATED_LVQ, *_NO_EFFECT])


def parse_options(options: Mapping[Any, Any]) -> ParsedOptions:
    """Read an option map into settings; unknown keys are returned, not dropped.

    Raises :class:`InvalidField` for a bad value, a conflict between aliases or an
    impossible combination, and :class:`NotImplementedByBroker` for a recognised option
    whose feature the broker does not have.
    """
    values: dict[str, Any] = {}
    parsed = ParsedOptions(QueueSettings())
    for raw_key, value in options.items():
        key = str(raw_key)
        if key.startswith(_FAIRSHARE_LEVEL):
            _fairshare_level(key, value, values, parsed)
            continue
        if key in _NO_EFFECT:
            parsed.echo[key] = _as_text(value)
            parsed.notices.append(f"queue option '{key}' has no effect here")
            continue
        if key in _DEPRECATED_LVQ:
            _legacy_lvq(key, value, values, parsed)
            continue
        spec = _OPTIONS.get(key)
        if spec is None:
            parsed.unknown[key] = value
            continue
        target, convert = spec
        converted = convert(key, _typed_text_read(value))
        parsed.echo[key] = _as_text(value)
        if target and converted is not NOTHING:
            _assign(values, parsed.given, target, key, converted)
    _infer_group_mode(values, parsed.given)
    _qpidd_limit_defaults(values, parsed.given)
    settings = QueueSettings(**values)
    validate(settings, parsed.given)
    parsed.settings = settings
    return parsed


def parse_settings(options: Mapping[Any, Any], where: str = "queue") -> QueueSettings:
    """Settings from ``options``, refusing unknown keys (config file, management)."""
    parsed = parse_options(options)
    if parsed.unknown:
        raise unknown_options_error(where, parsed.unknown)
    return parsed.settings


def unknown_options_error(where: str, unknown: Mapping[str, Any]) -> InvalidField:
    listed = ", ".join(f"'{k}'={v!r}" for k, v in sorted(unknown.items()))
    first = sorted(unknown)[0]
    return InvalidField(f"unknown queue option(s) for '{where}': {listed}", first)


def _assign(
    values: dict[str, Any], given: dict[str, str], target: str, key: str, value: Any
) -> None:
    if target in values and values[target] != value:
        raise InvalidField(
            f"queue options '{given[target]}' and '{key}' conflict: "
            f"{values[target]!r} versus {value!r}",
            key,
        )
    values[target] = value
    given[target] = key


def _fairshare_level(key: str, value: Any, values: dict[str, Any], parsed: ParsedOptions) -> None:
    """qpidd's ``qpid.fairshare-N`` (``x-qpid-fairshare-N``): level N's share."""
    level = key.rsplit("-", 1)[-1]
    if not (level.isascii() and level.isdigit()):
        raise _bad(key, key, "qpid.fairshare-N with N a priority level (0, 1, ...)")
    levels = values.setdefault("fairshare_levels", {})
    levels[int(level)] = to_count(key, _typed_text_read(value))
    parsed.echo[key] = _as_text(value)
    parsed.given.setdefault("fairshare_levels", key)


def _legacy_lvq(key: str, value: Any, values: dict[str, Any], parsed: ParsedOptions) -> None:
    """qpidd's deprecated LVQ keys: present, whatever their value, they make a last-value
    queue keyed by ``qpid.LVQ_key``, as both anchors read them (they look for the key)."""
    parsed.notices.append(
        f"queue option '{key}' is deprecated; using a last-value queue keyed by "
        f"'{LEGACY_LVQ_KEY}' (use qpid.last_value_queue_key)"
    )
    parsed.echo[key] = _as_text(value)
    _assign(values, parsed.given, "lvq_key", key, LEGACY_LVQ_KEY)


# qpid-cpp's broker options default-flow-stop-threshold and default-flow-resume-threshold
QPIDD_FLOW_STOP_PERCENT, QPIDD_FLOW_RESUME_PERCENT = 80, 70


def _qpidd_limit_defaults(values: dict[str, Any], given: dict[str, str]) -> None:
    """A limit given under the C++ names (``qpid.max_count``, ``qpid.max_size``: Broker-J
    ignores them over AMQP 1.0, so whoever sends them expects qpid-cpp) gets qpid-cpp's
    defaults: the ``reject`` policy unless one is given, and on a queue that rejects,
    flow control from 80% of the limit, resuming below 70%, unless thresholds are given
    (``QueueFlowLimit::createLimit``: stop rounded, resume truncated)."""
    qpidd = [m for m in ("count", "size") if given.get(f"max_{m}", "").startswith("qpid.")]
    if not qpidd:
        return
    values.setdefault("overflow_policy", REJECT)
    if values["overflow_policy"] != REJECT or any(
        f"flow_{edge}_{m}" in given for edge in ("stop", "resume") for m in ("count", "size")
    ):
        return
    for measure in qpidd:
        limit = values.get(f"max_{measure}")
        if limit is None:
            continue
        values[f"flow_stop_{measure}"] = int(limit * QPIDD_FLOW_STOP_PERCENT / 100 + 0.5) or None
        values[f"flow_resume_{measure}"] = int(limit * QPIDD_FLOW_RESUME_PERCENT / 100) or None


def _infer_group_mode(values: dict[str, Any], given: dict[str, str]) -> None:
    """A group key turns groups on (standard unless shared was asked for); JMSXGroupID as
    the key means properties.group-id."""
    key = values.get("group_key")
    if key is not None and "group_mode" not in values:
        values["group_mode"] = GROUPS_STANDARD
    if key in _GROUP_ID_ALIASES:
        values["group_key"] = None


def validate(settings: QueueSettings, given: Mapping[str, str] | None = None) -> None:
    """Refuse combinations the Qpid brokers rule out (``given``: the option name each
    setting came from, so that a refusal names what the client wrote)."""
    kinds = [
        (name, getattr(settings, attr))
        for name, attr in (
            ("priorities", "priorities"),
            ("sort key", "sort_key"),
            ("LVQ key", "lvq_key"),
        )
        if getattr(settings, attr) is not None
    ]
    if len(kinds) > 1:
        (a, va), (b, vb) = kinds[:2]
        raise InvalidField(
            f"a queue cannot have both a {a} ({va!r}) and a {b} ({vb!r})",
            "qpid.queue_sort_key" if "sort key" in (a, b) else "qpid.priorities",
        )
    if settings.grouped and settings.kind != "standard":
        raise InvalidField(
            f"message groups are not supported on a {settings.kind} queue "
            f"(group key {settings.group_key or 'group-id'!r})",
            "qpid.group_header_key",
        )
    if (
        settings.min_ttl is not None
        and settings.max_ttl is not None
        and settings.min_ttl > settings.max_ttl
    ):
        raise InvalidField(
            f"minimumMessageTtl {settings.min_ttl} is greater than "
            f"maximumMessageTtl {settings.max_ttl}",
            "minimumMessageTtl",
        )
    if settings.alternate is not None and settings.dead_letter_queue:
        given = given or {}
        named = given.get("alternate", "alternate-exchange")
        dlq = given.get("dead_letter_queue", "x-qpid-dlq-enabled")
        raise InvalidField(
            f"queue options '{named}' ({settings.alternate!r}) and '{dlq}' conflict: "
            "a queue has one alternate",
            dlq,
        )
    _validate_flow(settings, given or {})
    _validate_context(settings, given or {})
    _validate_fairshare(settings, given or {})


def _validate_fairshare(settings: QueueSettings, given: Mapping[str, str]) -> None:
    """qpidd's checks: fair shares need priorities, and a level the queue has."""
    levels = settings.fairshare_levels or {}
    if settings.fairshare is None and not levels:
        return
    named = given.get("fairshare") or given.get("fairshare_levels", "qpid.fairshare")
    if settings.priorities is None:
        raise InvalidField(  # qpidd's words
            f"queue option '{named}': cannot specify fairshare settings when queue is not "
            "enabled for priorities",
            named,
        )
    beyond = sorted(level for level in levels if level >= settings.priorities)
    if beyond:
        raise InvalidField(
            f"queue option 'qpid.fairshare-{beyond[0]}': the queue has priority levels 0 to "
            f"{settings.priorities - 1}",
            f"qpid.fairshare-{beyond[0]}",
        )


def _validate_context(settings: QueueSettings, given: Mapping[str, str]) -> None:
    """The context variables a queue reads must be what Broker-J's would accept."""
    context = settings.context or {}
    if FLOW_RESUME_CONTEXT in context and _context_percent(context[FLOW_RESUME_CONTEXT]) is None:
        raise InvalidField(  # Broker-J's words, with the value
            f"context variable '{FLOW_RESUME_CONTEXT}' "
            f"({context[FLOW_RESUME_CONTEXT]!r}): flow resume limit value cannot be greater "
            "than 100 or lower than 0",
            given.get("context", "context"),
        )


def _validate_flow(settings: QueueSettings, given: Mapping[str, str]) -> None:
    """Flow-control thresholds must make sense together (qpid-cpp's ``QueueFlowLimit``
    checks, plus the ones a policy adds); see proton_broker.queues.overflow."""
    pfc = settings.overflow_policy == PRODUCER_FLOW_CONTROL
    for measure in ("count", "size"):
        stop_field, resume_field = f"flow_stop_{measure}", f"flow_resume_{measure}"
        limit_field = f"max_{measure}"
        stop, resume = getattr(settings, stop_field), getattr(settings, resume_field)
        limit = getattr(settings, limit_field)
        stop_name = given.get(stop_field, f"qpid.{stop_field}")
        limit_name = given.get(limit_field, f"qpid.{limit_field}")
        if stop is not None and pfc and limit is not None and stop != limit:
            raise InvalidField(
                f"queue options '{stop_name}' ({stop}) and '{limit_name}' "
                f"({limit}) conflict: with producer flow control the limit "
                "is the stop threshold",
                stop_name,
            )
        if (
            stop is not None
            and settings.overflow_policy == REJECT
            and limit is not None
            and stop > limit
        ):
            raise InvalidField(
                f"queue option '{stop_name}' ({stop}) must not be more than "
                f"'{limit_name}' ({limit})",
                stop_name,
            )
        effective = stop if stop is not None else (limit if pfc else None)
        if resume is None or effective is None:
            continue  # a resume threshold alone is ignored, with a warning (as qpid-cpp)
        resume_name = given.get(resume_field, f"qpid.{resume_field}")
        if resume > effective:
            raise InvalidField(
                f"queue option '{resume_name}' ({resume}) must not be more "
                f"than the flow stop threshold ({effective})",
                resume_name,
            )


def differences(settings: QueueSettings, parsed: ParsedOptions) -> list[str]:
    """The settings a request gives that differ from an existing queue's, described."""
    out = []
    for target, key in parsed.given.items():
        wanted, actual = getattr(parsed.settings, target), getattr(settings, target)
        if wanted != actual:
            out.append(f"'{key}' is {actual!r} on the queue, not {wanted!r}")
    return out


# The limits, the overflow policy and the flow thresholds: a live queue takes new ones at
# once (Queue.update_settings rebuilds its limits), as Broker-J does.
LIMIT_SETTINGS = (
    "max_count",
    "max_size",
    "overflow_policy",
    "flow_stop_count",
    "flow_stop_size",
    "flow_resume_count",
    "flow_resume_size",
    "flow_resume_percent",
)
# Settings a live queue can take at once (Queue.update_settings): each is read when a
# consumer attaches or a message arrives, and nothing already queued depends on it, or
# (the limits) the queue applies them at once.
LIVE_SETTINGS = frozenset(
    {
        "ensure_nondestructive",
        "min_ttl",
        "max_ttl",
        "default_filters",
        "alternate",
        "max_delivery_attempts",
        "expiry_policy",
        "description",
        "context",
        "exclusive",  # the broker's lifetimes apply it (proton_broker/lifetime.py)
        "message_durability",  # for messages that arrive from now on
        *LIMIT_SETTINGS,
    }
)


def check_live_change(current: QueueSettings, new: QueueSettings) -> None:
    """InvalidField, naming them, if ``new`` differs from ``current`` in settings a live
    queue cannot take (anything outside :data:`LIVE_SETTINGS`)."""
    fixed = sorted(
        name
        for name in new.__dataclass_fields__
        if name not in LIVE_SETTINGS and getattr(new, name) != getattr(current, name)
    )
    if fixed:
        raise InvalidField("cannot change on a live queue: " + ", ".join(fixed), fixed[0])


# How an earlier version of this broker kept a number of an AMQP type as text ("uint(5)",
# Proton's repr), in the store among a queue's options: read back as the number's text.
_TYPED_TEXT = re.compile(r"(?:u?byte|u?short|u?int|u?long|int32|float32)\((-?[0-9.eE+-]+)\)")


def _typed_text_read(value: Any) -> Any:
    if isinstance(value, str):
        match = _TYPED_TEXT.fullmatch(value.strip())
        if match is not None:
            return match.group(1)
    return value


def _as_text(value: Any) -> str:
    """How a recognised option is echoed: as a string, as the Qpid C++ broker does (a map as
    JSON text, which the option's parser reads back: the echo is what a queue keeps)."""
    descriptor = getattr(value, "descriptor", None)
    if descriptor is not None:
        return str(descriptor)
    if isinstance(value, Mapping):
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):  # an AMQP type (uint, ulong...) reads "uint(5)" as text
        return str(int(value))
    if isinstance(value, float):
        return str(float(value))
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    return str(value)
