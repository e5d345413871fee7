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
* A message is never expired under the consumer that holds it. One a consumer holds when
  its time comes leaves the heap for a set of its own; released (or given back), it is
  tracked again (:meth:`Expiries.returned`), available and expired, and the next sweep, or
  the next consumer to reach it, drops it. So a sweep looks at each such message once, not
  on every sweep for as long as it is held (10^5 held cost 80 ms a second before).
* A sweep is done in slices of :data:`SWEEP_BATCH` entries a loop turn, as qpidd's
  ``Queue::purgeExpired`` removes at most ``maxPurgeBatch`` (1000) a call "to control the
  impact on other threads": the broker asks for the rest at once (on the loop's next
  turn, after its sockets), while more are due, so 10^6 messages expiring together no
  longer stop every connection for seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from proton_broker.message import Message
from proton_broker.queues.entries import ACQUIRED, AVAILABLE, Entry
from proton_broker.queues.settings import QueueSettings

SWEEP_BATCH = 1000  # entries a slice of the expiry sweep looks at, as qpidd's maxPurgeBatch
_PRUNE_MIN = 1024  # held entries kept aside before the settled ones among them are let go


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
        # Entries whose time passed while a consumer held them: out of the heap until they
        # come back (see the module rules); settled ones are let go as the set grows.
        self._held: set[Entry] = set()
        self._kept = 0  # the set's size after it was last pruned

    def track(self, entry: Entry) -> None:
        """``entry`` (with an expiry time) joined the queue."""
        assert entry.expires_at is not None
        heapq.heappush(self._heap, (entry.expires_at, entry.seq, entry))

    def returned(self, entry: Entry, popped: bool = False) -> None:
        """``entry`` is available again (a consumer released it): if its time passed while
        it was held (``popped``: the caller knows the sweep let it go), it is tracked
        again, for the next sweep. O(1)."""
        if popped or (self._held and entry in self._held):
            self._held.discard(entry)
            self.track(entry)

    def due(self, now: float, most: int | None = None) -> Iterator[Entry]:
        """Take out the entries whose time has passed and are still available, looking at
        ``most`` at most (None: all); those a consumer holds are kept aside for when they
        come back (:meth:`returned`)."""
        heap, held = self._heap, self._held
        left = len(heap) if most is None else most
        while left > 0 and heap and heap[0][0] <= now:
            left -= 1
            entry = heapq.heappop(heap)[2]
            if entry.state == AVAILABLE:
                yield entry
            elif entry.state == ACQUIRED:
                held.add(entry)
        if len(held) >= 2 * self._kept + _PRUNE_MIN:  # O(1) amortised
            self._held = {entry for entry in held if entry.state == ACQUIRED}
            self._kept = len(self._held)

    def any_due(self, now: float) -> bool:
        """Whether an entry's time has passed (a sweep has work left). O(1)."""
        return bool(self._heap) and self._heap[0][0] <= now

    def clear(self) -> None:
        self._heap.clear()
        self._held.clear()
        self._kept = 0
