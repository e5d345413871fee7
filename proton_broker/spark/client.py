"""The connector's AMQP side: everything it asks of the broker, as a plain Proton client.

Rules this module owns:

* The connector is a client like any other (docs/architecture.md): it talks to the broker
  only over AMQP, so it works against a remote broker and needs nothing of the broker's
  internals. Every function opens its own connection and closes it: they run on Spark
  executors, in Python workers that come and go, and a connection must never be pickled.
* A range ``[start, end)`` of a queue is read by browsing from ``start`` (the source filter
  ``x-opt-sequence-number``) with drain: the broker sends what it has up to the credit and
  then answers the drain. A message numbered ``end`` or more, or a drain answered with
  credit left over (the end of the queue), ends the read. Browsing takes nothing off the
  queue, so a read can be repeated and gives the same rows while the messages are there.
* Earliest and next sequence numbers come from a management READ of the queue.
* Writes are unsettled transfers, many in flight, each of which must come back
  ``accepted``; anything else fails the write (Spark then retries the task).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from proton import Delivery, Message, symbol, ulong
from proton.reactor import AtMostOnce, Copy, Filter, LinkOption
from proton.utils import BlockingConnection, SyncRequestResponse

SEQUENCE_NUMBER = "x-opt-sequence-number"
MANAGEMENT = "$management"
QUEUE_TYPE = "org.apache.qpid.Queue"


class BrokerRequestError(RuntimeError):
    """The broker answered a request with an error (a missing queue, a refusal)."""


@dataclass(frozen=True)
class QueueBounds:
    """A queue's retained range: ``earliest`` is the lowest number still on the queue
    (equal to ``next`` when it is empty), ``next`` the number the next message will get;
    ``key`` the application property that keys its messages (last-value or sequence key)."""

    earliest: int
    next: int
    key: str | None = None


class NodeOptions(LinkOption):
    """Queue options for the node a link attaches to (the terminus' node properties),
    used when the attach creates the queue."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def apply(self, link: Any) -> None:
        terminus = link.target if link.is_sender else link.source
        terminus.properties.put_dict({symbol(k): v for k, v in self.options.items()})


def connect(url: str, timeout: float) -> BlockingConnection:
    return BlockingConnection(url, timeout=timeout)


def queue_bounds(url: str, queues: list[str], timeout: float = 30.0) -> dict[str, QueueBounds]:
    """Earliest and next sequence numbers of each queue, by management READ."""
    conn = connect(url, timeout)
    try:
        client = SyncRequestResponse(conn, MANAGEMENT)
        return {queue: _read_bounds(client, queue) for queue in queues}
    finally:
        conn.close()


def _read_bounds(client: SyncRequestResponse, queue: str) -> QueueBounds:
    request = Message(
        properties={"operation": "READ", "type": QUEUE_TYPE, "name": queue}, body=None
    )
    response = client.call(request)
    props = response.properties or {}
    status = int(props.get("statusCode", 0))
    if status != 200:
        why = props.get("statusDescription") or response.body
        raise BrokerRequestError(f"management READ of queue '{queue}' failed with {status}: {why}")
    attributes = response.body if isinstance(response.body, dict) else {}
    try:
        earliest = int(attributes["earliestSequenceNumber"])
        after = int(attributes["nextSequenceNumber"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BrokerRequestError(
            f"management READ of queue '{queue}' has no sequence "
            f"numbers (is the broker too old?): {attributes!r}"
        ) from exc
    key = attributes.get("lvqKey") or attributes.get("sequenceKey")
    return QueueBounds(earliest, after, str(key) if key else None)


def sequence_number(message: Message) -> int:
    annotations = message.annotations or {}
    value = annotations.get(symbol(SEQUENCE_NUMBER), annotations.get(SEQUENCE_NUMBER))
    if value is None:
        raise BrokerRequestError(
            "a browsed message carries no x-opt-sequence-number annotation (is the broker too old?)"
        )
    return int(value)


def browse_range(
    url: str, queue: str, start: int, end: int, chunk: int = 500, timeout: float = 30.0
) -> Iterator[tuple[int, Message]]:
    """Yield ``(sequence number, message)`` for the messages of ``queue`` numbered in
    ``[start, end)`` that are still on it, in order, then close the connection."""
    if end <= start:
        return
    conn = connect(url, timeout)
    try:
        receiver = conn.create_receiver(
            queue,
            credit=0,
            # sent settled: a browse acquires nothing, so there is nothing to acknowledge
            options=[Copy(), AtMostOnce(), Filter({symbol(SEQUENCE_NUMBER): ulong(start)})],
        )
        link, fetcher = receiver.link, receiver.fetcher
        link.drain_mode = True  # every flow asks the broker to answer with what it has
        while True:
            want = min(chunk, end - start)
            link.flow(want)
            conn.wait(
                lambda: link.credit == 0,
                timeout=timeout,
                msg=f"browsing queue '{queue}' from {start}",
            )
            got = 0
            while fetcher.has_message:
                message = fetcher.pop()
                got += 1
                seq = sequence_number(message)
                if seq >= end:
                    return
                start = seq + 1
                yield seq, message
            if got < want or start >= end:
                return  # the drain came back with credit left: the end of the queue
    finally:
        conn.close()


def send_all(
    url: str,
    queue: str,
    messages: Iterator[Message],
    window: int = 1000,
    timeout: float = 30.0,
    node_options: dict[str, Any] | None = None,
) -> int:
    """Send every message unsettled and wait until each is ``accepted``; at most
    ``window`` are in flight. ``node_options``: queue options, should the attach create
    the queue. Returns how many were sent."""
    conn = connect(url, timeout)
    try:
        sender = conn.create_sender(
            queue, options=NodeOptions(node_options) if node_options else None
        )
        link = sender.link
        pending: list[Delivery] = []
        sent = 0
        for message in messages:
            while len(pending) >= window or not link.credit:
                conn.wait(
                    _room(link, pending, window), timeout=timeout, msg=f"sending to '{queue}'"
                )
                pending = _check_outcomes(pending, queue)
            pending.append(link.send(message))
            sent += 1
        conn.wait(
            lambda: all(d.remote_state for d in pending),
            timeout=timeout,
            msg=f"waiting for '{queue}' to accept",
        )
        _check_outcomes(pending, queue)
        return sent
    finally:
        conn.close()


def _room(link: Any, pending: list[Delivery], window: int) -> Callable[[], bool]:
    """A wait condition: credit to send, and the window not full of unanswered sends."""
    return lambda: link.credit > 0 and (len(pending) < window or bool(pending[0].remote_state))


def _check_outcomes(pending: list[Delivery], queue: str) -> list[Delivery]:
    """Drop the deliveries the broker has answered, failing on any but ``accepted``."""
    waiting = []
    for delivery in pending:
        state = delivery.remote_state
        if not state:
            waiting.append(delivery)
            continue
        if state != Delivery.ACCEPTED:
            condition = delivery.remote.condition
            raise BrokerRequestError(
                f"queue '{queue}' did not accept a message: {state}"
                + (f" ({condition.name}: {condition.description})" if condition else "")
            )
        delivery.settle()
    return waiting
