"""Queue entries and the orderings that decide which available entry is handed out next.

A queue keeps every live entry twice: once in its :class:`ArrivalLog` (arrival order, for
expiry, management and the walks of browsers and selectors on a FIFO queue) and, while the
entry is *available*, in an ordering (FIFO, priority levels or sort key). An ordering knows
nothing about consumers or outcomes; it only answers "which available entry comes first" in
O(1) or O(log n).

Rules owned here:

* An entry is in its ordering exactly while it is available: :meth:`push` on arrival,
  :meth:`requeue` when released (back at its original position, ahead of anything that
  arrived later), out again when :meth:`pop` hands it out.
* Removing an available entry (expiry, replacement, eviction) calls :meth:`discard`. The
  FIFO-based orderings drop it lazily when it reaches the front, and rebuild themselves once
  a quarter of what they hold is stale, so removal is O(1) amortised and memory stays
  within a third more than the live entries even when nobody consumes.
* Priority: ``levels`` levels; a message's priority (0-9, default 4) maps onto a level the
  way both Qpid brokers do it (AMQP 0-10 rule "priority-level-implementation"): priorities at
  or below ``5 - ceil(levels / 2)`` share the lowest level, each priority above that gets the
  next level, and the rest share the highest. Higher levels first; FIFO within a level.
* Fair share (qpidd's ``qpid.fairshare``, on a priority queue): each level hands out at
  most its share of messages in a row before the next lower level has a turn
  (:class:`FairshareOrder`), so low priorities are not starved.
* Sorted: ascending by the text of the sort-key application property ("alphanumeric");
  messages without the property come first; arrival order breaks ties.
* An entry is out of the cyclic collector's view from the moment it is made, as a message
  record is (:mod:`proton_broker.collector`): it holds numbers, its record, its key and
  its rank (a priority level or a sort key's value), never anything that refers back to
  it, so a queue holding millions of entries costs the collector nothing. Except a
  :class:`GroupedEntry`, whose rank is its group, which keeps entries: it stays in view.
  A slot added here must keep that so (``tests/test_collector.py``).
* An entry that leaves its queue lets go of its message (:data:`GONE` takes its place), so
  the message's bytes are freed as soon as nothing else holds them (a delivery being
  settled, a history version), not when the arrival log next drops its dead entries.
* An entry counts its own delivery attempts from 0 (what its deliveries carry as
  ``header.delivery-count``, and what ``maximumDeliveryAttempts`` reads), whatever count the
  producer's header held: both Qpid brokers count their own, so a message a client sends on
  again (a bridge, a shovel, Proton's ``send`` of a received message) is not taken for one
  delivered before.
* :meth:`victim` is the *least significant* available entry, the one a ring queue deletes
  first: of the entries the ordering would hand out last (the lowest priority level, the
  highest sort key; on a FIFO every entry ranks the same) the oldest. Broker-J calls it
  ``getLeastSignificantOldestEntry``. O(1) amortised (O(levels) on a priority queue,
  O(log n) on a sorted queue), like everything here.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any, Protocol

from sortedcontainers import SortedList

from proton_broker.collector import untrack
from proton_broker.message import Message, property_text
from proton_broker.queues.packed import UNPACK_BATCH, PackedTail

AVAILABLE = 0
ACQUIRED = 1
DEAD = 2
HELD = 3  # on the queue but not valid yet (hold until valid): not in the ordering

_COMPACT_MIN = 1024  # rebuild a structure once it holds at least this many stale entries


def too_stale(stale: int, held: int) -> bool:
    """Whether a structure holding ``held`` entries, ``stale`` of them no longer wanted,
    should be rebuilt: a quarter stale, and at least _COMPACT_MIN (see ArrivalLog)."""
    return stale >= _COMPACT_MIN and stale * 4 > held


# What a dead entry holds in place of its message (see the module rules): no bytes, no
# store id, nothing to wait for. Never changed.
GONE = Message(b"")


class Entry:
    """A message's place in a queue and its delivery state.

    This is a plain queue's entry; queues that rank, key or group their entries use
    :class:`RankedEntry`, :class:`KeyedEntry` or :class:`GroupedEntry` (chosen by the queue
    factory), so that the millions of entries of a plain queue carry no slot they never
    use. The class defaults below are what those attributes read as on an entry without
    them."""

    __slots__ = ("seq", "message", "arrival", "state", "delivery_count", "expires_at", "excluded")

    rank: Any = None  # the ordering's sort position (priority level, sort key, group)
    key: str | None = None  # the message's key, on a last-value queue (see KeyedEntry)
    parked: bool = False  # grouped queues: waiting in its group (see queues/groups.py)

    def __init__(self, seq: int, message: Message, expires_at: float | None) -> None:
        self.seq = seq
        self.message = message
        self.arrival = message.arrival  # kept when the message goes (see GONE)
        self.state = AVAILABLE
        self.delivery_count = 0  # the broker's own count (see the module rules)
        self.expires_at = expires_at
        self.excluded: set[int] | None = None  # consumers that said undeliverable-here
        untrack(self)  # see the module rules (a GroupedEntry does not come this way)

    def __repr__(self) -> str:
        return f"<Entry {self.seq} state={self.state}>"


class RankedEntry(Entry):
    """An entry on a priority or sorted queue, which keeps its place in the ordering."""

    __slots__ = ("rank",)

    def __init__(self, seq: int, message: Message, expires_at: float | None) -> None:
        Entry.__init__(self, seq, message, expires_at)
        self.rank = None


class KeyedEntry(Entry):
    """An entry on a last-value queue with no other ordering. It keeps its key's text for
    the history, which looks its key up as it leaves and when asked whether it was
    superseded; a queue that only numbers its keys' messages needs no such slot."""

    # Whether a newer value for its key has arrived is the history's to say (the entry of
    # a key's latest value stands in it: History.superseded), not a slot: with one more,
    # an entry is a size class larger, 16 bytes a key of a last-value queue.
    __slots__ = ("key",)

    def __init__(self, seq: int, message: Message, expires_at: float | None) -> None:
        # Entry's fields, written out: calling Entry.__init__ makes this a seventh slower
        # (about 25 ns), and every last-value message makes one.
        self.seq = seq
        self.message = message
        self.arrival = message.arrival
        self.state = AVAILABLE
        self.delivery_count = 0  # the broker's own count (see the module rules)
        self.expires_at = expires_at
        self.excluded = None
        self.key = None
        if type(self) is KeyedEntry:  # a GroupedEntry stays in view (see the module rules)
            untrack(self)


class GroupedEntry(KeyedEntry):
    """An entry on a grouped queue, or on a last-value queue with a priority or sort order:
    every slot an entry may use."""

    __slots__ = ("rank", "parked")

    def __init__(self, seq: int, message: Message, expires_at: float | None) -> None:
        KeyedEntry.__init__(self, seq, message, expires_at)
        self.rank = None
        self.parked = False


class Ordering(Protocol):
    """Which available entry is handed out next."""

    def push(self, entry: Entry) -> None:
        """A new entry arrived and is available."""

    def requeue(self, entry: Entry) -> None:
        """A released entry is available again, at its original position."""

    def pop(self) -> Entry | None:
        """Remove and return the first available entry (None when there is none)."""

    def discard(self, entry: Entry) -> None:
        """An available entry left the queue (expired, replaced, evicted)."""

    def victim(self) -> Entry | None:
        """The least significant available entry, left in place (see the module rules)."""

    def __len__(self) -> int:
        """How many available entries (an upper bound while stale ones wait)."""


class FifoOrder:
    """Arrival order; released entries go back ahead of everything that arrived later.

    Entries never handed out wait in a deque (``_tail``), in arrival order; entries that
    come back (released, or valid after being held) in a min-heap by position (``_back``).
    The next entry is the earlier of the two heads: an entry that comes back is not always
    older than every entry in the tail (a consumer with a selector takes entries out of
    arrival order, and a held one becomes valid behind older ones), and comparing the heads
    costs nothing while nothing has come back."""

    __slots__ = ("_tail", "_back", "_stale")

    # A packing queue's tail (PackingFifoOrder has it as a slot; a class attribute here, so
    # that the groups, a FIFO each, carry no slot for it).
    packed: PackedTail | None = None

    def __init__(self) -> None:
        self._tail: deque[Entry] = deque()  # never handed out, in arrival order
        self._back: list[tuple[int, Entry]] = []  # released: a min-heap by position
        self._stale = 0  # entries in the structures that are no longer available

    def __len__(self) -> int:
        return len(self._tail) + len(self._back) - self._stale

    def push(self, entry: Entry) -> None:
        self._tail.append(entry)

    def requeue(self, entry: Entry) -> None:
        heapq.heappush(self._back, (entry.seq, entry))

    def pop(self) -> Entry | None:
        back, tail = self._back, self._tail
        while True:
            if back and (not tail or back[0][0] < tail[0].seq):
                entry = heapq.heappop(back)[1]
            elif tail:
                entry = tail.popleft()
            elif (packed := self.packed) is not None and packed.size and packed.unpack():
                continue  # the packed tail's head joined _tail (see PackingFifoOrder)
            else:
                return None
            if entry.state == AVAILABLE:
                return entry
            self._stale -= 1

    def peek(self) -> Entry | None:
        """The entry :meth:`pop` would return, left in place (stale ones are dropped)."""
        back, tail = self._back, self._tail
        while back and back[0][1].state != AVAILABLE:
            heapq.heappop(back)
            self._stale -= 1
        while tail and tail[0].state != AVAILABLE:
            tail.popleft()
            self._stale -= 1
        if back and (not tail or back[0][0] < tail[0].seq):
            return back[0][1]
        if not tail and (packed := self.packed) is not None and packed.size and packed.unpack():
            return self.peek()
        return tail[0] if tail else None

    def victim(self) -> Entry | None:
        """The oldest available entry: the front of :meth:`pop`."""
        return self.peek()

    def remove(self, entry: Entry) -> None:
        """Take an available ``entry`` out now, wherever it is (O(n)): one a consumer with
        a selector took from a group's FIFO, which may come back while a stale copy could
        still sit here."""
        try:
            self._tail.remove(entry)
        except ValueError:
            self._back.remove((entry.seq, entry))
            heapq.heapify(self._back)

    def discard(self, entry: Entry) -> None:
        self._stale += 1
        if too_stale(self._stale, len(self._tail) + len(self._back)):
            self._tail = deque(e for e in self._tail if e.state == AVAILABLE)
            self._back = [item for item in self._back if item[1].state == AVAILABLE]
            heapq.heapify(self._back)
            self._stale = 0


class PackingFifoOrder(FifoOrder):
    """Arrival order on a queue with a packed tail (:mod:`~proton_broker.queues.packed`):
    the packed messages come after every entry here, so once these run out (FifoOrder's
    pop and peek) the tail's head is unpacked into it. A subclass, so that groups (a FIFO
    each) carry no slot for it."""

    __slots__ = ("packed",)

    def __init__(self, packed: PackedTail) -> None:
        FifoOrder.__init__(self)
        self.packed: PackedTail = packed

    def __len__(self) -> int:
        return FifoOrder.__len__(self) + self.packed.size

    def extend(self, entries: list[Entry]) -> None:
        """Entries unpacked from the tail, oldest first: as many pushes."""
        self._tail.extend(entries)


def priority_level(priority: int, levels: int) -> int:
    """The level (0 = lowest) a message priority falls into; see the module rules."""
    first = 5 - min(5, math.ceil(levels / 2))
    if priority <= first:
        return 0
    return min(priority - first, levels - 1)


class PriorityOrder:
    """One FIFO per priority level; the highest non-empty level is served first.

    It also keeps each level's live entries in arrival order (``logs``, an
    :class:`ArrivalLog` a level, rebuilt when the queue's log is): what browsers and
    consumers with a selector walk, level by level (:mod:`~proton_broker.queues.walking`),
    as the C++ broker's ``PriorityQueue`` keeps a position a level for each cursor."""

    __slots__ = ("levels", "_fifos", "logs")

    def __init__(self, levels: int) -> None:
        self.levels = levels
        self._fifos = [FifoOrder() for _ in range(levels)]  # index = level
        self.logs = [ArrivalLog() for _ in range(levels)]  # index = level

    def __len__(self) -> int:
        return sum(len(f) for f in self._fifos)

    def push(self, entry: Entry) -> None:
        rank = entry.rank = priority_level(entry.message.priority, self.levels)
        self._fifos[rank].push(entry)
        self.logs[rank].append(entry)

    def requeue(self, entry: Entry) -> None:
        self._fifos[entry.rank].requeue(entry)

    def pop(self) -> Entry | None:
        for fifo in reversed(self._fifos):
            entry = fifo.pop()
            if entry is not None:
                return entry
        return None

    def discard(self, entry: Entry) -> None:
        self._fifos[entry.rank].discard(entry)

    def victim(self) -> Entry | None:
        """The oldest entry of the lowest non-empty level."""
        for fifo in self._fifos:
            entry = fifo.peek()
            if entry is not None:
                return entry
        return None


class FairshareOrder(PriorityOrder):
    """A priority ordering with qpidd's fair share (``Fairshare``): a level with a share of
    N hands out at most N messages in a row, then the next lower level has a turn (the
    lowest hands over to the highest); a share of 0 is no bound. The turn passes on too
    when the level in turn has nothing, and the count starts again at the level that
    hands out. What the ordering hands out is counted, so an entry put back (expired on
    its way, or refused by a consumer) counted too, as in qpidd, whose count is its
    cursor's."""

    __slots__ = ("shares", "_level", "_count")

    def __init__(self, levels: int, shares: list[int]) -> None:
        super().__init__(levels)
        self.shares = shares  # index = level
        self._level = levels - 1  # the level in turn: the highest first
        self._count = 0  # what it has handed out in this turn

    def pop(self) -> Entry | None:
        fifos, level = self._fifos, self._level
        share = self.shares[level]
        if share:
            self._count += 1
            if self._count > share:
                level = self._pass(level)
        start = level
        while True:
            entry = fifos[level].pop()
            if entry is not None:
                self._level = level
                return entry
            level = self._pass(level)
            if level == start:
                self._level = level
                return None

    def _pass(self, level: int) -> int:
        """The turn goes to the next lower level (the highest after the lowest), which has
        handed out one by the time it is asked (qpidd's ``nextLevel``)."""
        self._count = 1
        return level - 1 if level else self.levels - 1


class SortedOrder:
    """Ascending by the sort key's text; entries without the key first.

    Browsers and consumers with a selector walk ``items`` (its available entries, in its
    order: :mod:`~proton_broker.queues.walking`); a new entry may sort before where one of
    them is, so ``ahead`` (set by the queue) is told of each new entry. ``changes`` counts
    the changes to ``items``: a walk that saw none since it last read may read on where it
    was, without searching again."""

    __slots__ = ("key", "_sorted", "ahead", "changes")

    def __init__(self, key: str) -> None:
        self.key = key
        self._sorted: SortedList = SortedList()  # of (rank, seq, entry)
        self.ahead: Callable[[Entry], None] | None = None
        self.changes = 0

    @property
    def items(self) -> SortedList:
        """The available entries as (rank, seq, entry), in the order they are handed out."""
        return self._sorted

    def __len__(self) -> int:
        return len(self._sorted)

    def push(self, entry: Entry) -> None:
        value = property_text(entry.message.application_property(self.key))
        entry.rank = (0, "") if value is None else (1, value)
        self._sorted.add((entry.rank, entry.seq, entry))
        self.changes += 1
        if self.ahead is not None:
            self.ahead(entry)

    def requeue(self, entry: Entry) -> None:
        self._sorted.add((entry.rank, entry.seq, entry))
        self.changes += 1

    def pop(self) -> Entry | None:
        if not self._sorted:
            return None
        self.changes += 1
        entry: Entry = self._sorted.pop(0)[2]
        return entry

    def discard(self, entry: Entry) -> None:
        self._sorted.remove((entry.rank, entry.seq, entry))
        self.changes += 1

    def victim(self) -> Entry | None:
        """The oldest of the entries with the highest key (handed out last)."""
        items = self._sorted
        if not items:
            return None
        # (rank,) sorts before every (rank, seq, entry): the first item with that rank.
        entry: Entry = items[items.bisect_left((items[-1][0],))][2]
        return entry


_arrival = attrgetter("arrival")
_seq = attrgetter("seq")


class ArrivalLog:
    """Every live entry in arrival order: what browsers of a FIFO queue walk and management
    lists (a priority queue keeps one a level beside it, its ``followers``).

    Removed entries stay as tombstones until they outnumber the live ones, or, on a
    last-value queue (``eager``), until they are a quarter of the list; then the list is
    rebuilt (O(1) amortised per removal) and ``generation`` changes, which tells cursors
    holding a list index to find their place again by position (O(log n)). A quarter on a
    last-value queue: its replaced entries die in the middle of the log, and a million keys
    under churn would otherwise keep up to a million tombstones; a half elsewhere, where
    entries mostly die at the head as consumers take them, and rebuilding the rest more
    often would cost a drain about 5%.

    On a queue with a packed tail (:mod:`~proton_broker.queues.packed`) the packed messages
    follow the last entry here, at the indexes after it: reading one unpacks it (and those
    before it), so readers see one log.
    """

    __slots__ = ("_entries", "_dead", "generation", "_head", "_ratio", "packed", "followers")

    def __init__(self, eager: bool = False) -> None:
        self._ratio = 4 if eager else 2  # rebuild when dead * ratio > held
        self._entries: list[Entry] = []
        self._dead = 0
        self.generation = 0
        self._head = 0  # every entry before this index is dead (see first_live)
        self.packed: PackedTail | None = None
        # Logs of some of the same entries (a priority queue's levels), told of no removal:
        # they are rebuilt with this one, so together they never hold more.
        self.followers: list[ArrivalLog] = []

    def __len__(self) -> int:
        """Entries held, tombstones included (what memory the log takes)."""
        return len(self._entries)

    def append(self, entry: Entry) -> None:
        self._entries.append(entry)

    def extend(self, entries: list[Entry]) -> None:
        self._entries.extend(entries)

    def removed(self) -> None:
        """One entry in the log became dead."""
        self._dead += 1
        entries = self._entries
        if self._dead >= _COMPACT_MIN and self._dead * self._ratio > len(entries):
            self.compact()
            for follower in self.followers:
                follower.compact()

    def compact(self) -> None:
        """Drop the dead entries; cursors holding an index find their place again."""
        self._entries = [e for e in self._entries if e.state != DEAD]
        self._dead = 0
        self._head = 0
        self.generation += 1

    def first_live(self) -> Entry | None:
        """The oldest live entry (the lowest position), or None. O(1) amortised: the dead
        entries in front are stepped over once and remembered."""
        entries, head = self._entries, self._head
        while head < len(entries) and entries[head].state == DEAD:
            head += 1
        self._head = head
        if head < len(entries):
            return entries[head]
        return self.first_live() if self.packed is not None and self.packed.unpack() else None

    def first_since(self, arrival: float) -> int | None:
        """The position (seq) of the first entry that arrived at or after ``arrival``
        (O(log n): arrival times grow with positions), or None when there is none."""
        entries = self._entries
        index = bisect_left(entries, arrival, key=_arrival)
        if index < len(entries):
            return entries[index].seq
        return None if self.packed is None else self.packed.first_since(arrival)

    def index_of(self, seq: int) -> int:
        """The list index of the first entry at or after position ``seq`` (a packed one's
        once it is unpacked: nothing else joins before it)."""
        packed = self.packed
        if packed is not None and len(packed) and seq >= packed.first:
            return len(self._entries) + seq - packed.first
        return bisect_left(self._entries, seq, key=_seq)

    def live_index(self, position: int) -> int:
        """The index of the live entry at ``position`` (0: the oldest live one), an index
        past the held entries when it is packed; unpacks nothing. O(1) while every
        tombstone lies ahead of the oldest live entry (a queue consumed from its head),
        O(position) otherwise (the tombstones on the way are stepped over)."""
        entries, head = self._entries, self._head
        while head < len(entries) and entries[head].state == DEAD:
            head += 1
        self._head = head
        if self._dead <= head:  # no tombstone after the oldest live entry
            return head + position
        index = head
        while index < len(entries):
            if entries[index].state != DEAD:
                if not position:
                    return index
                position -= 1
            index += 1
        return index + position

    def peek(self, index: int) -> Entry | None:
        """The entry at ``index`` as :meth:`at` reads it, but a packed one stays packed:
        a stand-in entry is made for the reader (not the queue's: it is on no list)."""
        entries = self._entries
        if index < len(entries):
            return entries[index]
        packed = self.packed
        offset = index - len(entries)
        found = None if packed is None else packed.peek(offset)
        if found is None:
            return None
        message, expires = found
        return Entry(packed.first + offset, message, expires)  # type: ignore[union-attr] # found: packed

    def at(self, index: int) -> Entry | None:
        entries = self._entries
        if index < len(entries):
            return entries[index]
        packed = self.packed
        if packed is not None and packed.unpack(max(index + 1 - len(entries), UNPACK_BATCH)):
            return entries[index] if index < len(entries) else None  # appended to, not rebuilt
        return None

    def __iter__(self) -> Iterator[Entry]:
        """Live entries, oldest first (O(n): management and tests)."""
        if self.packed is not None:
            self.packed.unpack_all()
        return (e for e in list(self._entries) if e.state != DEAD)
