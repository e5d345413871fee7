"""A standard (FIFO) queue: acquire, release, settle, browse and expiry.

Rules this module owns:

* Entries are numbered in arrival order (``seq``) and kept in a list indexed by
  ``seq - head``; dead entries at the front are cut off in batches, so append, acquire and
  settle are O(1) amortised however long the queue grows.
* A released entry goes back to its original position: released sequence numbers wait in a
  min-heap that is served before the never-acquired tail, which always holds larger numbers.
* Consumers with credit wait in a round-robin ring; a consumer leaves the ring when its
  credit reaches zero and rejoins when the protocol adapter grants more.
* Browsers never acquire: each keeps a cursor (the next ``seq`` to look at) and sees every
  live entry, acquired or not, then new ones as they arrive.
* Expiry is lazy where it is free (an expired entry is dropped when dispatch reaches it)
  and a min-heap of expiry times lets :meth:`Queue.purge_expired` drop the rest without
  scanning the queue; messages with no TTL cost nothing.

The queue knows nothing about sockets or AMQP: consumers are objects with ``credit`` and a
``deliver(entry)`` method supplied by the protocol adapter.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from proton_broker.message import Message
from proton_broker.queues.settings import QueueSettings

AVAILABLE = 0
ACQUIRED = 1
DEAD = 2

_COMPACT_MIN = 1024  # cut dead entries off the front once at least this many


class Entry:
    """A message's place in a queue and its delivery state."""

    __slots__ = ("seq", "message", "state", "delivery_count", "expires_at", "excluded")

    def __init__(self, seq: int, message: Message, expires_at: float | None) -> None:
        self.seq = seq
        self.message = message
        self.state = AVAILABLE
        self.delivery_count = message.delivery_count
        self.expires_at = expires_at
        self.excluded: set[int] | None = None  # consumers that said undeliverable-here


class Consumer(Protocol):
    """What a queue needs of a subscriber; implemented by the protocol adapter."""

    id: int
    credit: int
    browse: bool

    def deliver(self, entry: Entry) -> None:
        """Send ``entry`` and take one credit. Called only while ``credit > 0``."""


@dataclass
class QueueStats:
    enqueued: int = 0
    dequeued: int = 0
    expired: int = 0
    rejected: int = 0
    released: int = 0
    redelivered: int = 0


class Queue:
    """One named queue. All methods run on the broker's event-loop thread."""

    def __init__(self, name: str, settings: QueueSettings | None = None) -> None:
        self.name = name
        self.settings = settings or QueueSettings()
        self.stats = QueueStats()
        self.depth = 0  # live messages (available or acquired)
        self.bytes = 0
        self._log: list[Entry] = []
        self._head = 0  # seq of _log[0]
        self._start = 0  # index in _log of the first entry that may be live
        self._next = 0  # seq of the first entry never handed to a consumer
        self._next_seq = 0
        self._released: list[int] = []  # heap of seqs put back by release
        self._expiry: list[tuple[float, int]] = []
        self._consumers: dict[int, Consumer] = {}
        self._ready: deque[Consumer] = deque()
        self._in_ready: set[int] = set()
        self._browsers: dict[int, int] = {}  # consumer id -> cursor seq
        self._skipped = False  # the last _take passed over entries the consumer refused

    # ---- producers -------------------------------------------------------------------

    def enqueue(self, message: Message, now: float | None = None) -> Entry:
        """Append ``message`` and hand it out at once if someone is waiting for it."""
        arrival = time.time() if now is None else now
        message.arrival = arrival
        expires = _expiry_time(message, arrival)
        entry = Entry(self._next_seq, message, expires)
        self._next_seq += 1
        self._log.append(entry)
        self.depth += 1
        self.bytes += len(message.data)
        self.stats.enqueued += 1
        if expires is not None:
            heapq.heappush(self._expiry, (expires, entry.seq))
        if self._ready or self._browsers:
            self.dispatch()
        return entry

    # ---- consumers -------------------------------------------------------------------

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    def subscribe(self, consumer: Consumer) -> None:
        self._consumers[consumer.id] = consumer
        if consumer.browse:
            self._browsers[consumer.id] = self._head + self._start
        self.credit_granted(consumer)

    def unsubscribe(self, consumer: Consumer) -> None:
        self._consumers.pop(consumer.id, None)
        self._browsers.pop(consumer.id, None)
        if consumer.id in self._in_ready:
            self._in_ready.discard(consumer.id)
            self._ready.remove(consumer)

    def credit_granted(self, consumer: Consumer) -> None:
        """The consumer has (more) credit: put it in line and dispatch."""
        if consumer.credit <= 0 or consumer.id not in self._consumers:
            return
        if consumer.browse:
            self._feed_browser(consumer)
            return
        if consumer.id not in self._in_ready:
            self._in_ready.add(consumer.id)
            self._ready.append(consumer)
        self.dispatch()

    def dispatch(self) -> None:
        """Hand available entries to consumers with credit, round-robin, then feed browsers."""
        ready = self._ready
        misses = 0
        while ready:
            consumer = ready[0]
            entry = self._take(consumer.id)
            if entry is None:
                # Only entries this consumer refused are left: let the others try them.
                misses += 1
                if not self._skipped or misses >= len(ready):
                    break
                ready.rotate(-1)
                continue
            misses = 0
            consumer.deliver(entry)
            if consumer.credit <= 0:
                ready.popleft()
                self._in_ready.discard(consumer.id)
            elif len(ready) > 1:
                ready.rotate(-1)
        if self._browsers:
            for cid in list(self._browsers):
                self._feed_browser(self._consumers[cid])

    def _take(self, consumer_id: int) -> Entry | None:
        """Acquire the next available entry for ``consumer_id``, oldest position first."""
        log, released = self._log, self._released
        if self._next < self._head + self._start:
            self._next = self._head + self._start  # purged entries were cut off the front
        skipped: list[int] = []
        now = 0.0
        found = None
        while found is None:
            if released:
                seq = heapq.heappop(released)
            elif self._next < self._next_seq:
                seq = self._next
                self._next += 1
            else:
                break
            index = seq - self._head
            if index < 0:
                continue
            entry = log[index]
            if entry.state != AVAILABLE:
                continue
            if entry.expires_at is not None:
                now = now or time.time()
                if entry.expires_at <= now:
                    self._remove(entry)
                    self.stats.expired += 1
                    continue
            if entry.excluded and consumer_id in entry.excluded:
                skipped.append(seq)
                continue
            found = entry
        for seq in skipped:
            heapq.heappush(released, seq)
        self._skipped = bool(skipped)
        if found is not None:
            found.state = ACQUIRED
        return found

    def _feed_browser(self, consumer: Consumer) -> None:
        cursor = max(self._browsers[consumer.id], self._head + self._start)
        log, head = self._log, self._head
        now = 0.0
        while consumer.credit > 0 and cursor < self._next_seq:
            entry = log[cursor - head]
            cursor += 1
            if entry.state == DEAD:
                continue
            if entry.expires_at is not None:
                now = now or time.time()
                if entry.expires_at <= now:
                    continue
            consumer.deliver(entry)
        self._browsers[consumer.id] = cursor

    # ---- outcomes ----------------------------------------------------------------------

    def settle(self, entry: Entry) -> None:
        """The consumer accepted the entry: it leaves the queue."""
        if entry.state == ACQUIRED:
            self._remove(entry)
            self.stats.dequeued += 1

    def reject(self, entry: Entry) -> None:
        """The consumer rejected the entry: it is discarded (no dead-letter queue yet)."""
        if entry.state == ACQUIRED:
            self._remove(entry)
            self.stats.rejected += 1

    def release(
        self,
        entry: Entry,
        delivery_failed: bool = False,
        undeliverable_for: int | None = None,
    ) -> None:
        """Put an acquired entry back at its original position.

        ``delivery_failed`` counts a delivery attempt (modified outcome, consumer gone);
        ``undeliverable_for`` keeps the entry from that consumer from now on.
        """
        if entry.state != ACQUIRED:
            return
        entry.state = AVAILABLE
        if delivery_failed:
            entry.delivery_count += 1
            self.stats.redelivered += 1
        if undeliverable_for is not None:
            if entry.excluded is None:
                entry.excluded = set()
            entry.excluded.add(undeliverable_for)
        self.stats.released += 1
        heapq.heappush(self._released, entry.seq)
        if self._ready:
            self.dispatch()

    # ---- expiry and housekeeping ---------------------------------------------------------

    def purge_expired(self, now: float | None = None) -> int:
        """Drop available entries whose time has passed; O(k log n) for k expiries."""
        now = time.time() if now is None else now
        heap, dropped = self._expiry, 0
        while heap and heap[0][0] <= now:
            _, seq = heapq.heappop(heap)
            index = seq - self._head
            if index < 0:
                continue
            entry = self._log[index]
            if entry.state == AVAILABLE:
                self._remove(entry)
                self.stats.expired += 1
                dropped += 1
        return dropped

    def _remove(self, entry: Entry) -> None:
        entry.state = DEAD
        self.depth -= 1
        self.bytes -= len(entry.message.data)
        if entry.seq == self._head + self._start:
            self._advance_start()

    def _advance_start(self) -> None:
        log, start, end = self._log, self._start, len(self._log)
        while start < end and log[start].state == DEAD:
            start += 1
        if start >= _COMPACT_MIN and start * 2 >= end:
            del log[:start]
            self._head += start
            start = 0
        self._start = start

    def entries(self) -> Iterator[Entry]:
        """Live entries in queue order (for management and tests; O(n))."""
        for entry in self._log[self._start:]:
            if entry.state != DEAD:
                yield entry

    def __repr__(self) -> str:
        return f"<Queue {self.name} depth={self.depth} consumers={len(self._consumers)}>"


def _expiry_time(message: Message, arrival: float) -> float | None:
    """When the message expires (seconds since the epoch), from ttl and absolute expiry."""
    expires = None
    if message.ttl:
        expires = arrival + message.ttl / 1000.0
    if message.absolute_expiry_time:
        absolute = message.absolute_expiry_time / 1000.0
        expires = absolute if expires is None else min(expires, absolute)
    return expires
