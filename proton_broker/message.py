"""The broker's own message record.

Queues never see Proton objects: they hold this record, which keeps the message exactly as
the producer encoded it (``data``) and only the few fields that queue semantics need,
extracted once on arrival by :mod:`proton_broker.codec.sections`. Forwarding ``data`` unchanged
keeps every AMQP type intact (clients read back exactly the types they sent) and avoids a
decode/encode per message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proton_broker.codec.values import decode_properties, decode_value, find_in_map


@dataclass(slots=True)
class Message:
    """One message as stored in a queue.

    ``data`` is the full encoded message (all sections, as received). ``header_end`` is the
    offset where the header section ends (0 when the message has no header section), so a
    redelivery can re-encode just the header with a new delivery-count and forward the rest
    unchanged.
    """

    data: bytes
    header_end: int = 0
    durable: bool = False
    priority: int = 4
    ttl: int | None = None  # milliseconds, from header.ttl
    first_acquirer: bool = False
    delivery_count: int = 0  # from header.delivery-count, incremented by the broker
    message_id: Any = None
    to: str | None = None
    subject: str | None = None
    group_id: str | None = None
    absolute_expiry_time: int | None = None  # milliseconds since the epoch
    creation_time: int | None = None
    # Where the application-properties and message-annotations sections sit in ``data``
    # (value start, section end); decoded only when a queue feature asks for them.
    app_properties_span: tuple[int, int] | None = None
    annotations_span: tuple[int, int] | None = None
    # Where the delivery-annotations section ends (0: none), the place a message without
    # message-annotations gets the section holding its queue sequence number.
    delivery_annotations_end: int = 0
    # Set by the broker on arrival:
    expires_at: float | None = None  # seconds since the epoch (time.time() scale)
    arrival: float = 0.0
    # Decoded sections, cached on first use (None until then: most messages never need them).
    app_properties_cache: dict[Any, Any] | None = None
    annotations_cache: dict[Any, Any] | None = None
    # The whole properties list, decoded only when a selector names a field the record does
    # not keep (correlation-id, user-id, reply-to, group-sequence): see properties_field.
    properties_cache: list[Any] | None = None
    # Its id in the store while it is persisted there (a durable message on a durable queue).
    store_id: int | None = None
    # Flow to disk: ``data`` is not in memory (b"") while ``paged``; its bytes are in the
    # store under ``store_id`` (durable) or ``page_id`` (a page, dropped at restart).
    paged: bool = False
    page_id: int | None = None
    paged_size: int = 0
    # Sequence history: the number its queue gave it before it joined (a durable message is
    # numbered before it is written, so that the stored bytes carry the number).
    sequence: int | None = None
    # The queue sequence number its queue gave it when it joined (x-opt-sequence-number,
    # stamped on every delivery); None until then.
    number: int | None = None
    # A durable message's number is written after it joined (see queues/numbering.py):
    # until then browsers do not pass it, so no reader sees a number a crash could change.
    number_unwritten: bool = False
    in_history: bool = False  # one of the versions its queue's history keeps
    on_queue: bool = False  # its entry is live on the queue (history: both may hold it)

    @property
    def application_properties(self) -> dict[Any, Any]:
        """The application-properties map, decoded on first use."""
        cached = self.app_properties_cache
        if cached is None:
            cached = self.app_properties_cache = _decode_span(self.data, self.app_properties_span)
        return cached

    def application_property(self, key: str) -> Any:
        """One application property (None when absent), found without decoding the whole
        map: grouped, last-value and sorted queues read one key of every message."""
        return _lookup(self.app_properties_cache, self.data, self.app_properties_span, key)

    def message_annotation(self, key: str) -> Any:
        """One message annotation (None when absent), without decoding the whole map."""
        return _lookup(self.annotations_cache, self.data, self.annotations_span, key)

    @property
    def message_annotations(self) -> dict[Any, Any]:
        """The message-annotations map, decoded on first use."""
        cached = self.annotations_cache
        if cached is None:
            cached = self.annotations_cache = _decode_span(self.data, self.annotations_span)
        return cached

    def properties_field(self, index: int) -> Any:
        """Field ``index`` of the properties section (0 message-id ... 12
        reply-to-group-id), None when unset. The record keeps only the fields queues use;
        the rest are read from ``data`` here, the whole list decoded once and cached, so
        that no message pays for them unless a selector asks."""
        cached = self.properties_cache
        if cached is None:
            span = self.annotations_span
            at = span[1] if span is not None else self.delivery_annotations_end or self.header_end
            cached = decode_properties(self.data, at)
            if not self.paged:  # a paged message's bytes are not here: try again later
                self.properties_cache = cached
        return cached[index] if 0 <= index < len(cached) else None

    @property
    def size(self) -> int:
        """Encoded size in bytes, the figure byte limits and metrics count."""
        return self.paged_size if self.paged else len(self.data)


def _lookup(
    cached: dict[Any, Any] | None, data: bytes, span: tuple[int, int] | None, key: str
) -> Any:
    if cached is not None:
        return cached.get(key)
    if span is None:
        return None
    return find_in_map(data, span[0], span[1], key)


def _decode_span(data: bytes, span: tuple[int, int] | None) -> dict[Any, Any]:
    if span is None:
        return {}
    value = decode_value(data, span[0], span[1])
    return value if isinstance(value, dict) else {}


def property_text(value: Any) -> str | None:
    """A property value as the text queues compare (LVQ keys, group ids, sort keys):
    strings as they are, binary as UTF-8, other values as their text."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)
