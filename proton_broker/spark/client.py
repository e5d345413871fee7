"""The connector's AMQP side: everything it asks of the broker, as a lean AMQP client.

Rules this module owns:

* The connector is a client like any other (docs/architecture.md): it talks to the broker
  only over AMQP (:mod:`proton_broker.spark.connection`, Proton's engine on a socket), so it
  works against a remote broker and needs nothing of the broker's internals. Every function
  opens its own connection and closes it: they run on Spark executors, in Python workers
  that come and go, and a connection must never be pickled.
* A range ``[start, end)`` of a queue is read by browsing from ``start`` (the source filter
  ``x-opt-sequence-number``, messages sent settled) with drain: the broker sends what it
  has up to the credit and answers the drain when it runs out. Credit is a large window
  (``window``), topped up as messages arrive, never more than the numbers left in the
  range. A message numbered ``end`` or more, or a drain the broker answered by giving up
  credit (the end of the queue), ends the read: browsers see the queue in number order, so
  nothing of the range comes after it. That does not hold on a priority or sorted queue
  (browsed in its own order), which the source refuses (:mod:`proton_broker.spark.offsets`).
  Browsing takes nothing off the queue, so a read can be repeated and gives the same
  messages while they are there. Messages come out as their bytes, as the broker sent
  them: decoding is the caller's (no ``proton.Message``).
* Earliest and next sequence numbers come from a management READ of the queue, with what
  decides the order browsers see it in: its ``priorities`` (levels) and ``sortKey``.
* Writes are unsettled transfers, up to ``window`` in flight, each of which must come back
  ``accepted``; anything else (another outcome, a link or connection the broker closes,
  the timeout) fails the write, and Spark retries the task. A timeout while the link has
  no credit says that the broker gives none (a full, flow-stopped queue), not merely that
  it did not answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cproton_ffi import ffi, lib

from proton_broker.codec.values import (
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    decode_value,
    find_in_map,
    section_code,
    skip_section_value,
)
from proton_broker.spark import encoding
from proton_broker.spark.connection import (
    AmqpConnection,
    BrokerRequestError,
    ClientTimeout,
)
from proton_broker.spark.options import TlsFiles

__all__ = [
    "BrokerRequestError",
    "ClientTimeout",
    "QueueBounds",
    "TlsFiles",
    "browse_range",
    "queue_bounds",
    "send_all",
    "sequence_number",
]

SEQUENCE_NUMBER = "x-opt-sequence-number"
MANAGEMENT = "$management"
QUEUE_TYPE = "org.apache.qpid.Queue"
BROWSE_WINDOW = 10_000  # credit a browser keeps open
SEND_WINDOW = 1000  # unsettled transfers a sender keeps in flight

_ACCEPTED = lib.PN_ACCEPTED


@dataclass(frozen=True)
class QueueBounds:
    """A queue's retained range: ``earliest`` is the lowest number still on the queue
    (equal to ``next`` when it is empty), ``next`` the number the next message will get;
    ``key`` the application property that keys its messages (last-value or sequence key);
    ``priorities`` (levels) and ``sort_key`` what orders a priority or sorted queue, whose
    browsers do not see it in sequence-number order."""

    earliest: int
    next: int
    key: str | None = None
    priorities: int | None = None
    sort_key: str | None = None


# ---- management ----------------------------------------------------------------------------


def queue_bounds(
    url: str, queues: list[str], timeout: float = 30.0, tls: TlsFiles | None = None
) -> dict[str, QueueBounds]:
    """Earliest and next sequence numbers of each queue, by management READ."""
    conn = AmqpConnection(url, timeout, tls)
    try:
        replies = conn.receiver(None, dynamic=True)
        reply_to = replies.remote_source.address
        requests = conn.sender(MANAGEMENT)
        replies.flow(len(queues))
        out = {}
        for n, queue in enumerate(queues):
            request = _read_request(queue, reply_to, n)
            _send(conn, requests, [request], 1, f"asking for queue '{queue}'")
            out[queue] = _bounds(queue, _receive_one(conn, replies, f"reading queue '{queue}'"))
        return out
    finally:
        conn.close()


def _read_request(queue: str, reply_to: str | None, n: int) -> bytes:
    fields = [encoding.NULL] * 6
    fields[encoding.MESSAGE_ID] = encoding.identifier(n)
    fields[encoding.REPLY_TO] = encoding.string(reply_to or "")
    fields[encoding.CORRELATION_ID] = encoding.identifier(n)
    return encoding.message(
        fields, {"operation": "READ", "type": QUEUE_TYPE, "name": queue}, content=None
    )


def _bounds(queue: str, reply: bytes) -> QueueBounds:
    sections = _sections(reply)
    props = _decoded(reply, sections.get(APPLICATION_PROPERTIES)) or {}
    attributes = _decoded(reply, sections.get(AMQP_VALUE))
    status = int(props.get("statusCode", 0))
    if status != 200:
        why = props.get("statusDescription") or attributes
        raise BrokerRequestError(f"management READ of queue '{queue}' failed with {status}: {why}")
    if not isinstance(attributes, dict):
        attributes = {}
    try:
        earliest = int(attributes["earliestSequenceNumber"])
        after = int(attributes["nextSequenceNumber"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BrokerRequestError(
            f"management READ of queue '{queue}' has no sequence "
            f"numbers (is the broker too old?): {attributes!r}"
        ) from exc
    key = attributes.get("lvqKey") or attributes.get("sequenceKey")
    levels = attributes.get("priorities")
    sort_key = attributes.get("sortKey")
    return QueueBounds(
        earliest,
        after,
        str(key) if key else None,
        int(levels) if isinstance(levels, int) else None,
        str(sort_key) if sort_key else None,
    )


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    """Where each section's value is: code -> (start, end)."""
    found, pos, end = {}, 0, len(data)
    while pos < end:
        code, at = section_code(data, pos, end)
        pos = skip_section_value(data, at)
        found[code] = (at, pos)
    return found


def _decoded(data: bytes, span: tuple[int, int] | None) -> Any:
    return None if span is None else decode_value(data, span[0], span[1])


# ---- browsing ------------------------------------------------------------------------------


def sequence_number(data: bytes) -> int:
    """The ``x-opt-sequence-number`` message annotation of a browsed message's bytes."""
    pos, end = 0, len(data)
    while pos < end:
        code, at = section_code(data, pos, end)
        if code >= PROPERTIES:
            break  # annotations come before the properties and the body
        pos = skip_section_value(data, at)
        if code == MESSAGE_ANNOTATIONS and data[at] != 0x40:
            value = find_in_map(data, at, pos, SEQUENCE_NUMBER)
            if isinstance(value, int):
                return value
    raise BrokerRequestError(
        "a browsed message carries no x-opt-sequence-number annotation (is the broker too old?)"
    )


def browse_range(
    url: str,
    queue: str,
    start: int,
    end: int,
    window: int = BROWSE_WINDOW,
    timeout: float = 30.0,
    tls: TlsFiles | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(sequence number, message bytes)`` for the messages of ``queue`` numbered in
    ``[start, end)`` that are still on it, in order, then close the connection."""
    if end <= start:
        return
    conn = AmqpConnection(url, timeout, tls)
    try:
        link = conn.receiver(
            queue,
            browse=True,
            settled=True,
            filters={SEQUENCE_NUMBER: _ulong(start)},
        )
        yield from _browse(conn, link._impl, queue, start, end, window)
    finally:
        conn.close()


def _ulong(number: int) -> Any:
    from proton import ulong

    return ulong(number)


class _Drained:
    """A wait condition: a whole delivery to read, or the broker answered a drain."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl
        self.drained = False

    def __call__(self) -> bool:
        impl = self.impl
        if lib.pn_link_drained(impl) > 0:
            self.drained = True
        dlv = lib.pn_link_current(impl)
        return self.drained or (dlv != ffi.NULL and not lib.pn_delivery_partial(dlv))


def _browse(
    conn: AmqpConnection, impl: Any, queue: str, start: int, end: int, window: int
) -> Iterator[tuple[int, bytes]]:
    lib.pn_link_set_drain(impl, True)  # every flow asks the broker to answer at its end
    lib.pn_link_flow(impl, min(window, end - start))
    ready = _Drained(impl)
    current, partial, pending = (
        lib.pn_link_current,
        lib.pn_delivery_partial,
        lib.pn_delivery_pending,
    )
    recv, advance, settle, unpack = (
        lib.pn_link_recv,
        lib.pn_link_advance,
        lib.pn_delivery_settle,
        ffi.unpack,
    )
    size = 64 * 1024
    buf = ffi.new("char[]", size)
    what = f"browsing queue '{queue}' from {start}"
    after = start  # every number below this has been read
    while True:
        conn.wait(ready, what)
        dlv = current(impl)
        while dlv != ffi.NULL and not partial(dlv):
            n = pending(dlv)
            if n > size:
                size = n * 2
                buf = ffi.new("char[]", size)
            recv(impl, buf, n)
            advance(impl)
            settle(dlv)
            data = unpack(buf, n)
            seq = sequence_number(data)
            if seq >= end:
                return
            after = seq + 1
            yield seq, data
            dlv = current(impl)
        if after >= end or (ready.drained and dlv == ffi.NULL):
            return  # the range is read, or the broker had no more: the end of the queue
        _top_up(impl, window, end - after)
        what = f"browsing queue '{queue}' from {after}"


def _top_up(impl: Any, window: int, numbers_left: int) -> None:
    """Keep the credit near ``window`` (once half is used), never above the numbers left."""
    credit = lib.pn_link_credit(impl)
    target = min(window, numbers_left)
    if credit <= target // 2 and target > credit:
        lib.pn_link_flow(impl, target - credit)


# ---- sending -------------------------------------------------------------------------------


def send_all(
    url: str,
    queue: str,
    messages: Iterable[Any],
    window: int = SEND_WINDOW,
    timeout: float = 30.0,
    node_options: dict[str, Any] | None = None,
    tls: TlsFiles | None = None,
) -> int:
    """Send every message (its encoded bytes, or anything with ``encode()`` such as a
    ``proton.Message``) unsettled and wait until each is ``accepted``; at most ``window``
    are in flight. ``node_options``: queue options, should the attach create the queue.
    Returns how many were sent."""
    conn = AmqpConnection(url, timeout, tls)
    try:
        link = conn.sender(queue, node_options)
        return _send(conn, link, messages, window, f"sending to '{queue}'", queue)
    finally:
        conn.close()


class _Outcomes:
    """Unsettled transfers in the order they were sent; the answered ones at the front are
    checked (``accepted`` or an error) and settled."""

    def __init__(self, impl: Any, queue: str) -> None:
        self.impl = impl
        self.queue = queue
        self.waiting: deque[Any] = deque()

    def collect(self) -> None:
        waiting, remote_state = self.waiting, lib.pn_delivery_remote_state
        while waiting:
            state = remote_state(waiting[0])
            if state == 0:
                return
            dlv = waiting.popleft()
            if state != _ACCEPTED:
                raise BrokerRequestError(_not_accepted(self.queue, dlv, state))
            lib.pn_delivery_settle(dlv)

    def room(self, window: int) -> bool:
        """A wait condition: credit to send, and fewer than ``window`` unanswered."""
        self.collect()
        return len(self.waiting) < window and lib.pn_link_credit(self.impl) > 0

    def answered(self) -> bool:
        self.collect()
        return not self.waiting


def _send(
    conn: AmqpConnection,
    link: Any,
    messages: Iterable[Any],
    window: int,
    what: str,
    queue: str = MANAGEMENT,
) -> int:
    impl = link._impl
    outcomes = _Outcomes(impl, queue)
    tag = ffi.new("pn_delivery_tag_t *")
    tag_bytes = bytearray(8)
    keep = ffi.from_buffer(tag_bytes)
    tag.start, tag.size = keep, 8
    delivery, send, advance, credit = (
        lib.pn_delivery,
        lib.pn_link_send,
        lib.pn_link_advance,
        lib.pn_link_credit,
    )
    waiting = outcomes.waiting

    def room() -> bool:  # a wait condition
        return outcomes.room(window)

    sent = 0
    for item in messages:
        data = item if type(item) is bytes else bytes(item.encode())
        if len(waiting) >= window or credit(impl) <= 0:
            conn.flush()
            conn.read()
            if not room():
                _wait_for_broker(conn, impl, room, what, queue)
        sent += 1
        tag_bytes[:] = sent.to_bytes(8, "big")
        waiting.append(delivery(impl, tag[0]))
        send(impl, data, len(data))
        advance(impl)
    _wait_for_broker(conn, impl, outcomes.answered, f"waiting for '{queue}' to accept", queue)
    return sent


def _wait_for_broker(
    conn: AmqpConnection, impl: Any, ready: Callable[[], bool], what: str, queue: str
) -> None:
    """:meth:`AmqpConnection.wait`; a timeout while the broker withholds credit says so: a
    flow-stopped queue takes the link's credit away (and holds the answers to what it
    stored meanwhile) until it has room again, so no answer came because none may."""
    try:
        conn.wait(ready, what)
    except ClientTimeout as exc:
        if lib.pn_link_credit(impl) > 0:
            raise
        raise ClientTimeout(
            f"the broker gives no credit on '{queue}' (the queue may be full and "
            f"flow-stopped): {exc}"
        ) from None


def _not_accepted(queue: str, dlv: Any, state: int) -> str:
    names = {
        lib.PN_REJECTED: "rejected",
        lib.PN_RELEASED: "released",
        lib.PN_MODIFIED: "modified",
    }
    text = f"queue '{queue}' did not accept a message: {names.get(state, state)}"
    condition = lib.pn_disposition_condition(lib.pn_delivery_remote(dlv))
    if condition != ffi.NULL and lib.pn_condition_is_set(condition):
        name = ffi.string(lib.pn_condition_get_name(condition)).decode("utf-8", "replace")
        raw = lib.pn_condition_get_description(condition)
        description = ffi.string(raw).decode("utf-8", "replace") if raw != ffi.NULL else ""
        text += f" ({name}: {description})"
    return text


def _receive_one(conn: AmqpConnection, link: Any, what: str) -> bytes:
    """The next whole message on a receiving link, accepted and settled."""
    impl = link._impl

    def ready() -> bool:
        dlv = lib.pn_link_current(impl)
        return dlv != ffi.NULL and not lib.pn_delivery_partial(dlv)

    conn.wait(ready, what)
    dlv = lib.pn_link_current(impl)
    size = lib.pn_delivery_pending(dlv)
    buf = ffi.new("char[]", max(size, 1))
    lib.pn_link_recv(impl, buf, size)
    lib.pn_link_advance(impl)
    lib.pn_delivery_update(dlv, _ACCEPTED)
    lib.pn_delivery_settle(dlv)
    return bytes(ffi.unpack(buf, size))
