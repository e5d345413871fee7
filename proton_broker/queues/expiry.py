"""Message expiry: when a message's time is up, and dropping the ones nobody reached.

Rules this module owns:

* A message expires ``header.ttl`` after its arrival; one sent under a transaction, which
  joins its queue at commit, ``header.ttl`` after the broker received it
  (``Message.received``), as qpidd computes the expiration on receipt
  (``computeExpiration``) and Broker-J fixes the arrival time then: one whose time is up by
  the commit joins expired and is never delivered. Its ``properties.absolute-expiry-time``
  is not read: it is the producer's clock's (Qpid JMS sets it beside the ttl), and both
  Qpid brokers expire by the ttl alone (qpidd's ``amqp::Message::onAbsoluteExpiryTime``
  does nothing; Broker-J's ``MessageMetaData_1_0`` expiration is ttl plus arrival). Then
  the queue's TTL bounds apply, as Broker-J's ``minimumMessageTtl`` and
  ``maximumMessageTtl`` do: a minimum only lengthens messages that expire, a maximum also
  bounds those that do not; 0 means no bound.
* Expiry is lazy where it is free (dispatch and browsers skip an expired entry when they
  reach it) and a min-heap of expiry times lets a sweep drop the rest without scanning the
  queue: O(k log n) for k expiries. Messages with no expiry time cost nothing.
* A message a consumer holds when its time comes stays in the heap: released, it is
  available and expired, and the next sweep drops it (each sweep looks at such messages
  again, as many as consumers hold).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from proton_broker.message import Message
from proton_broker.queues.entries import ACQUIRED, AVAILABLE, Entry
from proton_broker.queues.settings import QueueSettings


def expiry_time(message: Message, arrival: float, settings: QueueSettings) -> float | None:
    """When ``message`` expires (seconds since the epoch), or None (see the module rules)."""
    expires = arrival + message.ttl / 1000.0 if message.ttl else None
    if settings.min_ttl and expires is not None:
        expires = max(expires, arrival + settings.min_ttl / 1000.0)
    if settings.max_ttl:
        bound = arrival + settings.max_ttl / 1000.0
        expires = bound if expires is None else min(expires, bound)
    return expires


def has_ttl_bounds(settings: QueueSettings) -> bool:
    """Whether every message needs an expiry time, even one without a TTL of its own."""
    return bool(settings.min_ttl or settings.max_ttl)


class Expiries:
    """The expiry times of one queue's entries, earliest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Entry]] = []

    def track(self, entry: Entry) -> None:
        """``entry`` (with an expiry time) joined the queue."""
        assert entry.expires_at is not None
        heapq.heappush(self._heap, (entry.expires_at, entry.seq, entry))

    def due(self, now: float) -> Iterator[Entry]:
        """Take out the entries whose time has passed and are still available; those a
        consumer holds stay, for when they come back."""
        heap = self._heap
        held = []
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)
            entry = item[2]
            if entry.state == AVAILABLE:
                yield entry
            elif entry.state == ACQUIRED:
                held.append(item)
        for item in held:
            heapq.heappush(heap, item)

    def clear(self) -> None:
        self._heap.clear()
