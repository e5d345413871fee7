"""The broker's own message record.

Queues never see Proton objects: they hold this record, which keeps the message exactly as
the producer encoded it (``data``) and only the few fields that queue semantics need,
extracted once on arrival by :mod:`proton_broker.codec.sections`. Forwarding ``data`` unchanged
keeps every AMQP type intact (clients read back exactly the types they sent) and avoids a
decode/encode per message.

Rules owned here, for memory (a queue holds millions of these records):

* One record is one slotted object. The header's five fields are one :class:`Header`
  tuple, and the properties fields read as a message arrives (to, subject,
  absolute-expiry-time, group-id) one :class:`Fields` tuple; the codec shares each among
  the messages that send the same values (:data:`NO_FIELDS` when none is set). Both are
  read as attributes (``message.durable``, ``message.subject``); hot paths read
  ``message.header`` directly.
* The message-id, the creation time and the other properties fields are read from the
  bytes when asked: nearly every message carries a message-id, few features read it
  (duplicate detection, selectors, management), and its decoded text would cost each
  queued message about 140 bytes with its tuple.
* What few messages need (decoded sections, kept once a feature has decoded them, where
  a paged-out message's bytes are, and when a transaction's message was received) lives
  in a side record, :class:`Extras`, made on first use. A copy of a record
  (:meth:`Message.__copy__`, one per queue when a message fans out) gets its own side
  record, since paging is per queue.
* A record is out of the cyclic collector's view from the moment it is made
  (:func:`proton_broker.collector.untrack`): it holds values only, never anything that could
  refer back to it, so no reference cycle can pass through it. A slot added here must keep
  that so (``tests/test_collector.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from proton_broker.codec.values import (
    decode_properties,
    decode_properties_field,
    decode_value,
    find_in_map,
)
from proton_broker.collector import untrack


class Header(NamedTuple):
    """The header section's fields, with AMQP's defaults for those not sent."""

    durable: bool = False
    priority: int = 4
    ttl: int | None = None  # milliseconds
    first_acquirer: bool = False
    delivery_count: int = 0  # as the producer sent it (a queue entry counts its own from 0)


class Fields(NamedTuple):
    """The properties fields routing, expiry and groups read as a message arrives (the
    rest, message-id included: :meth:`Message.properties_field`)."""

    to: str | None = None
    subject: str | None = None
    absolute_expiry_time: int | None = None  # milliseconds since the epoch
    group_id: str | None = None


DEFAULT_HEADER = Header()
_new_record = object.__new__
NO_FIELDS = Fields()


class Extras:
    """What few records need (see the module rules)."""

    __slots__ = (
        "app_properties_cache",
        "annotations_cache",
        "properties_cache",
        "page_id",
        "paged_size",
        "received",
    )

    def __init__(self) -> None:
        self.app_properties_cache: dict[Any, Any] | None = None
        self.annotations_cache: dict[Any, Any] | None = None
        # The whole properties list, decoded only when a selector names a field the record
        # does not keep (user-id, reply-to, ...): see Message.properties_field.
        self.properties_cache: list[Any] | None = None
        # Flow to disk: a paged-out message's bytes are in the store under its store id
        # (durable) or ``page_id`` (a page, dropped at restart); ``paged_size`` its size.
        self.page_id: int | None = None
        self.paged_size = 0
        # A message sent under a transaction joins its queue at commit, but its time to
        # live counts from when the broker received it (seconds since the epoch), as in
        # both Qpid brokers: set by the transaction (transactions.py), None for the others.
        self.received: float | None = None

    def copy(self) -> Extras:
        twin = Extras()
        twin.app_properties_cache = self.app_properties_cache
        twin.annotations_cache = self.annotations_cache
        twin.properties_cache = self.properties_cache
        twin.page_id = self.page_id
        twin.paged_size = self.paged_size
        twin.received = self.received
        return twin


def _extra(name: str, doc: str) -> property:
    """An attribute kept in the record's :class:`Extras` (its default while there is none)."""
    default = getattr(Extras(), name)

    def get(message: Message) -> Any:
        extras = message.extras
        return default if extras is None else getattr(extras, name)

    def put(message: Message, value: Any) -> None:
        extras = message.extras
        if extras is None:
            if value == default:
                return
            extras = message.extras = Extras()
        setattr(extras, name, value)

    return property(get, put, doc=doc)


class Message:
    """One message as stored in a queue.

    ``data`` is the full encoded message (all sections, as received). ``header_end`` is the
    offset where the header section ends (0 when the message has no header section), so a
    redelivery can re-encode just the header with a new delivery-count and forward the rest
    unchanged.
    """

    __slots__ = (
        "data",
        "header_end",
        "header",
        "fields",
        "app_properties_span",
        "annotations_span",
        "delivery_annotations_end",
        "arrival",
        "number",
        "store_id",
        "sequence",
        "on_queue",
        "in_history",
        "number_unwritten",
        "paged",
        "extras",
    )

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.header_end = 0
        self.header = DEFAULT_HEADER
        self.fields = NO_FIELDS
        # Where the application-properties and message-annotations sections sit in ``data``
        # (value start, section end); decoded only when a queue feature asks for them.
        self.app_properties_span: tuple[int, int] | None = None
        self.annotations_span: tuple[int, int] | None = None
        # Where the delivery-annotations section ends (0: none), the place a message without
        # message-annotations gets the section holding its queue sequence number.
        self.delivery_annotations_end = 0
        self.arrival = 0.0  # set by the queue it joins (seconds since the epoch)
        # The queue sequence number its queue gave it when it joined (x-opt-sequence-number,
        # stamped on every delivery); None until then.
        self.number: int | None = None
        # Its id in the store while it is persisted there (a durable message on a durable
        # queue).
        self.store_id: int | None = None
        # Sequence history: the number its key got, as it joined or before (a transaction's
        # message is numbered when it is staged, so that a bad custom number is refused);
        # delivered as x-opt-sequence, which is in ``data`` only if the producer sent it
        # or the message was written to the store (codec/encode.py).
        self.sequence: int | None = None
        self.on_queue = False  # its entry is live on the queue (history: both may hold it)
        self.in_history = False  # one of the versions its queue's history keeps
        # A durable message's number is not on disk yet: its row, which carries it, is being
        # written, or (written before it joined) its number row (see queues/numbering.py).
        # Until then browsers do not pass it, so no reader sees a number a crash could change.
        self.number_unwritten = False
        # Flow to disk: ``data`` is not in memory (b"") while ``paged`` (see Extras).
        self.paged = False
        self.extras: Extras | None = None
        untrack(self)  # see the module rules

    def __copy__(self) -> Message:
        """A record of the same message for another queue, with its own side record.
        Field by field: ``copy.copy``'s generic path for slots is several times slower,
        and a message routed to several queues is copied once for each."""
        twin = _new_record(Message)
        untrack(twin)
        twin.data = self.data
        twin.header_end = self.header_end
        twin.header = self.header
        twin.fields = self.fields
        twin.app_properties_span = self.app_properties_span
        twin.annotations_span = self.annotations_span
        twin.delivery_annotations_end = self.delivery_annotations_end
        twin.arrival = self.arrival
        twin.number = self.number
        twin.store_id = self.store_id
        twin.sequence = self.sequence
        twin.on_queue = self.on_queue
        twin.in_history = self.in_history
        twin.number_unwritten = self.number_unwritten
        twin.paged = self.paged
        extras = self.extras
        twin.extras = None if extras is None else extras.copy()
        return twin

    def __repr__(self) -> str:
        return f"<Message {len(self.data)} bytes number={self.number}>"

    def layout(self) -> Layout:
        """What the codec read from ``data`` (see :data:`Layout`): with the bytes, an
        arrival time and a number, all :func:`unpack` needs to make the record again."""
        return (
            self.header_end,
            self.header,
            self.fields,
            self.app_properties_span,
            self.annotations_span,
            self.delivery_annotations_end,
        )

    # The header's fields (see Header) and the properties fields kept (see Fields).
    @property
    def durable(self) -> bool:
        """header.durable"""
        return self.header.durable

    @property
    def priority(self) -> int:
        """header.priority (default 4)"""
        return self.header.priority

    @property
    def ttl(self) -> int | None:
        """header.ttl in milliseconds, or None"""
        return self.header.ttl

    @property
    def first_acquirer(self) -> bool:
        """header.first-acquirer"""
        return self.header.first_acquirer

    @property
    def delivery_count(self) -> int:
        """header.delivery-count, as the producer sent it"""
        return self.header.delivery_count

    @property
    def message_id(self) -> Any:
        """properties.message-id, read from the bytes (see the module rules)."""
        return self._property(0)

    @property
    def to(self) -> str | None:
        """properties.to (a string), or None"""
        return self.fields.to

    @property
    def subject(self) -> str | None:
        """properties.subject (a string), or None"""
        return self.fields.subject

    @property
    def absolute_expiry_time(self) -> int | None:
        """properties.absolute-expiry-time in milliseconds, or None"""
        return self.fields.absolute_expiry_time

    @property
    def creation_time(self) -> int | None:
        """properties.creation-time in milliseconds, or None (read from the bytes)."""
        value = self._property(9)
        return value if type(value) is int else None

    @property
    def group_id(self) -> str | None:
        """properties.group-id (a string), or None"""
        return self.fields.group_id

    # What few records need (see Extras).
    app_properties_cache = _extra("app_properties_cache", "the decoded application-properties")
    annotations_cache = _extra("annotations_cache", "the decoded message-annotations")
    properties_cache = _extra("properties_cache", "the decoded properties list")
    page_id = _extra("page_id", "where a paged-out transient message's bytes are")
    paged_size = _extra("paged_size", "a paged-out message's size")
    received = _extra("received", "when a transaction's message was received, if it has a TTL")

    @property
    def application_properties(self) -> dict[Any, Any]:
        """The application-properties map, decoded on first use."""
        cached: dict[Any, Any] | None = self.app_properties_cache
        if cached is None:
            cached = self.app_properties_cache = _decode_span(self.data, self.app_properties_span)
        return cached

    def application_property(self, key: str) -> Any:
        """One application property (None when absent), found without decoding the whole
        map: grouped, last-value and sorted queues read one key of every message."""
        extras = self.extras
        if extras is not None and extras.app_properties_cache is not None:
            return extras.app_properties_cache.get(key)
        span = self.app_properties_span
        return None if span is None else find_in_map(self.data, span[0], span[1], key)

    def message_annotation(self, key: str) -> Any:
        """One message annotation (None when absent), without decoding the whole map."""
        extras = self.extras
        if extras is not None and extras.annotations_cache is not None:
            return extras.annotations_cache.get(key)
        span = self.annotations_span
        return None if span is None else find_in_map(self.data, span[0], span[1], key)

    @property
    def message_annotations(self) -> dict[Any, Any]:
        """The message-annotations map, decoded on first use."""
        cached: dict[Any, Any] | None = self.annotations_cache
        if cached is None:
            cached = self.annotations_cache = _decode_span(self.data, self.annotations_span)
        return cached

    def properties_field(self, index: int) -> Any:
        """Field ``index`` of the properties section (0 message-id ... 12
        reply-to-group-id), None when unset. The record keeps only the fields queues use;
        the rest are read from ``data`` here, the whole list decoded once and cached, so
        that no message pays for them unless a selector asks."""
        cached: list[Any] | None = self.properties_cache
        if cached is None:
            cached = decode_properties(self.data, self._properties_at())
            if not self.paged:  # a paged message's bytes are not here: try again later
                self.properties_cache = cached
        return cached[index] if 0 <= index < len(cached) else None

    def _property(self, index: int) -> Any:
        """Field ``index`` of the properties section: from the decoded list if a selector
        had it decoded, else only that field, read from the bytes and not kept."""
        cached: list[Any] | None = self.properties_cache
        if cached is not None:
            return cached[index]
        return decode_properties_field(self.data, self._properties_at(), index)

    def _properties_at(self) -> int:
        """Where the properties section would start: after the annotations sections."""
        span = self.annotations_span
        return span[1] if span is not None else self.delivery_annotations_end or self.header_end

    @property
    def size(self) -> int:
        """Encoded size in bytes, the figure byte limits and metrics count."""
        return self.paged_size if self.paged else len(self.data)


# What the codec reads from a message's bytes, in the order Message.layout gives it: header
# end, Header, Fields, application-properties span, message-annotations span, delivery-
# annotations end. Messages of one producer mostly share one (queues/packed.py keeps it so).
Layout = tuple[int, Header, Fields, tuple[int, int] | None, tuple[int, int] | None, int]


def unpack(data: bytes, layout: Layout, arrival: float, number: int) -> Message:
    """The record of a message a queue kept packed (:mod:`proton_broker.queues.packed`):
    on its queue, numbered, nothing decoded yet, nothing paged, not stored, no history."""
    message = _new_record(Message)
    untrack(message)
    message.data = data
    (
        message.header_end,
        message.header,
        message.fields,
        message.app_properties_span,
        message.annotations_span,
        message.delivery_annotations_end,
    ) = layout
    message.arrival = arrival
    message.number = number
    message.store_id = None
    message.sequence = None
    message.on_queue = True
    message.in_history = False
    message.number_unwritten = False
    message.paged = False
    message.extras = None
    return message


def _decode_span(data: bytes, span: tuple[int, int] | None) -> dict[Any, Any]:
    if span is None:
        return {}
    value = decode_value(data, span[0], span[1])
    return value if isinstance(value, dict) else {}


def property_text(value: Any) -> str | None:
    """A property value as text (a sort key; link properties): strings as they are, binary
    as UTF-8, other values as their text. Last-value, sequence and group keys are read as
    qpidd reads them (:func:`proton_broker.queues.keys.key_text`, which calls this for the
    types where the two agree)."""
    if type(value) is str:  # the usual key, asked of every message: answered first
        return value
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)
