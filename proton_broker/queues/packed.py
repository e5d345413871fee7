"""The newest messages of a deep plain queue, packed: its bytes, what the codec read from
them, and its arrival time, in columns, with no record and no entry.

A queued message as a record (:class:`~proton_broker.message.Message`) and an entry
(:class:`~proton_broker.queues.entries.Entry`) costs about 470 bytes of memory on top of
nothing; packed, it costs its bytes and about 30 more. Messages far from the head of a queue
are the ones nobody looks at until the queue drains to them, so a plain queue keeps those
packed and makes their records again (:meth:`PackedTail.unpack`) as they come near the head,
or as soon as anything wants to see them.

Rules owned here:

* Only the *tail* of a queue is packed: every packed message arrived after every entry the
  queue holds, and a queue packs an arriving message only while it already has a packed
  tail, or holds at least ``queue.pack_after`` messages and no consumer is waiting for one
  (one that is would take it at once: packing it would only cost time). So arrival order
  is kept: the tail is unpacked at its head, oldest first, into the queue's arrival log and
  ordering, exactly where the entries would have been.
* A packed message is available and nothing else: not acquired, not held (no delivery
  time), not written to the store (the store's bookkeeping follows the record), not paged,
  not a transaction's message whose time to live counts from its receipt (the record keeps
  that time), numbered and nothing more. A message that is any of these is never packed, and one
  arriving behind a packed tail has the whole tail unpacked first. So each message is
  packed at most once and unpacked at most once: O(1) amortised.
* A packed message may expire (Qpid JMS producers often give every message a time to
  live): its expiry time is kept aside, by number, and in a min-heap, so that the queue's
  expiry sweep unpacks the tail up to the last message whose time has come
  (:meth:`PackedTail.due_through`) and expires it as an entry. Messages without one cost
  nothing for it; one with costs about 200 bytes more (``bench/memory.py`` scenario
  ``ttl``). The heap keeps the times of messages unpacked since, until they come due or
  outnumber the packed ones (then it is rebuilt: O(1) amortised), so it stays within twice
  what is packed.
* Packed messages are numbered one after another (the queue's numbers have no gaps), so the
  tail keeps only the first number.
* What the codec read (:data:`~proton_broker.message.Layout`) is one tuple shared by every
  message that has the same one; messages of one producer mostly do. At most
  :data:`_LAYOUT_CACHE` are remembered; when full the memory starts again, so layouts
  nobody sends any more do not stay for ever.
* Which queues pack is the queue factory's choice (:mod:`~proton_broker.queues.factory`):
  plain FIFO queues without a key, groups, a ring or flow to disk, whose entries are only
  ever in arrival order.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Callable

from proton_broker.message import Layout, Message, unpack

PACK_AFTER = 10_000  # queue.pack_after's default: the depth from which a queue packs
UNPACK_BATCH = 256  # records made at a time once the unpacked entries run out
_TRIM_MIN = 4096  # unpacked rows kept before the columns are cut down (see _trim)
_LAYOUT_CACHE = 4096
_LAYOUTS: dict[Layout, Layout] = {}


def shared_layout(message: Message) -> Layout:
    """``message``'s layout, the one tuple every message with the same one shares."""
    layout = message.layout()
    shared = _LAYOUTS.get(layout)
    if shared is None:
        if len(_LAYOUTS) >= _LAYOUT_CACHE:
            _LAYOUTS.clear()
        shared = _LAYOUTS[layout] = layout
    return shared


class PackedTail:
    """One queue's packed tail (see the module rules)."""

    __slots__ = (
        "after",
        "size",
        "first",
        "_data",
        "_layouts",
        "_arrivals",
        "_head",
        "_expiries",
        "_due",
        "joined",
    )

    def __init__(self, after: int) -> None:
        self.after = after  # pack once the queue holds this many messages (at least 1)
        self.size = 0  # packed messages (an attribute: the queue reads it per message)
        self.first = 0  # the number of the oldest packed message
        self._data: list[bytes | None] = []  # None once unpacked, until _trim
        self._layouts: list[Layout | None] = []
        self._arrivals = array("d")
        self._head = 0  # index of the oldest packed message in the columns
        self._expiries: dict[int, float] = {}  # number -> expiry time, for those with one
        self._due: list[tuple[float, int]] = []  # (expiry time, number), a min-heap
        # Set by the queue: takes unpacked records (oldest first), with their expiry times
        # (None: none has one), into its log and ordering.
        self.joined: Callable[[list[Message], list[float | None] | None], None] = _nowhere

    def __len__(self) -> int:
        return self.size

    def pack(self, message: Message, number: int, arrival: float, expires: float | None) -> None:
        """Keep ``message`` (numbered ``number``, one after the last packed; expiring at
        ``expires``, seconds since the epoch, if not None) packed; its record may go."""
        if not self.size:
            self.first = number
        self.size += 1
        self._data.append(message.data)
        self._layouts.append(shared_layout(message))
        self._arrivals.append(arrival)
        if expires is not None:
            self._expiries[number] = expires
            heapq.heappush(self._due, (expires, number))

    def unpack(self, count: int = UNPACK_BATCH) -> bool:
        """Make records of the oldest ``count`` packed messages (all there are, if fewer)
        and hand them to the queue; False when there were none."""
        head = self._head
        count = min(count, self.size)
        if count <= 0:
            return False
        self.size -= count
        end = head + count
        data, layouts = self._data, self._layouts
        number = self.first
        rows = zip(data[head:end], layouts[head:end], self._arrivals[head:end], strict=True)
        records = [
            unpack(row_data, layout, arrival, number + offset)  # type: ignore[arg-type] # packed rows are set
            for offset, (row_data, layout, arrival) in enumerate(rows)
        ]
        data[head:end] = [None] * count  # the records hold them now
        layouts[head:end] = [None] * count
        expiries = self._expiries
        expiring = None
        if expiries:
            expiring = [expiries.pop(n, None) for n in range(number, number + count)]
            if len(self._due) > 2 * len(expiries) + _TRIM_MIN:  # mostly unpacked ones
                self._due = [(when, n) for n, when in expiries.items()]
                heapq.heapify(self._due)
        self.first = number + count
        self._head = end
        self._trim()
        self.joined(records, expiring)
        return True

    def peek(self, offset: int) -> tuple[Message, float | None] | None:
        """A record of the packed message ``offset`` after the oldest, with its expiry time,
        made for a reader and left packed (None past the last): what management shows of
        a message it reads, as a read must not change what the queue keeps. O(1)."""
        if not 0 <= offset < self.size:
            return None
        row, number = self._head + offset, self.first + offset
        data, layout = self._data[row], self._layouts[row]
        assert data is not None and layout is not None  # a packed row is set
        return unpack(data, layout, self._arrivals[row], number), self._expiries.get(number)

    def unpack_all(self) -> None:
        self.unpack(len(self))

    def due_through(self, now: float, most: int | None = None) -> int | None:
        """The greatest number among the packed messages whose expiry time is ``now`` or
        earlier (the queue unpacks through it), or None, looking at ``most`` of them at
        most (None: all; the queue's expiry sweep goes in slices, queues/expiry.py), each
        once; O(k log n) for k of them."""
        due, first, last = self._due, self.first, None
        left = len(due) if most is None else most
        while left > 0 and due and due[0][0] <= now:
            left -= 1
            number = heapq.heappop(due)[1]
            if number >= first and (last is None or number > last):
                last = number  # below first: unpacked already, the queue expires it
        return last

    def any_due(self, now: float) -> bool:
        """Whether a packed (or since unpacked) message's expiry time is ``now`` or
        earlier. O(1)."""
        return bool(self._due) and self._due[0][0] <= now

    def first_since(self, arrival: float) -> int | None:
        """The number of the first packed message that arrived at or after ``arrival``
        (arrival times grow with numbers), or None."""
        index = bisect_left(self._arrivals, arrival, self._head)
        return self.first + index - self._head if index < len(self._arrivals) else None

    def _trim(self) -> None:
        """Drop unpacked rows once they are most of the columns: O(1) amortised."""
        head = self._head
        if head == len(self._data):
            self._data, self._layouts, self._arrivals, self._head = [], [], array("d"), 0
            self._due = []  # what is left in it was unpacked
        elif head >= _TRIM_MIN and head * 2 >= len(self._data):
            del self._data[:head], self._layouts[:head], self._arrivals[:head]
            self._head = 0


def _nowhere(records: list[Message], expiries: list[float | None] | None) -> None:
    raise RuntimeError("a packed tail with no queue")
