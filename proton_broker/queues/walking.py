"""A queue's order as browsers and consumers with a selector walk it.

A browser, or a consumer with a selector, does not take the first available entry: it
keeps a place of its own and walks on from it, looking at each entry once. This module owns
what "on" means, so that they walk in the order the queue hands entries out, as both Qpid
brokers' cursors do.

Rules this module owns:

* A queue's walk is one or more *tracks*, walked in turn: an entry on an earlier track
  comes before every entry on a later one, and a place is a position on each track.
* A FIFO queue (plain, last value, grouped) has one track, its arrival log: arrival order.
* A priority queue has a track a level, highest first, each its level's arrival log: the
  C++ broker's ``PriorityQueue::next`` keeps such a position a level for every cursor and
  looks at the levels in turn, so a browser that has seen everything is shown a new
  message of any level next, and nothing twice.
* A sorted queue has one track, its available entries in sort order; a new entry may sort
  before a place, which its owner is told of (the queue calls them back: ``SortedOrder.
  ahead``). Broker-J moves such a consumer's place back to the new entry
  (``OutOfOrderQueue.checkConsumersNotAheadOfDelivery``); its owner decides (a browser
  is shown it next, without being shown again what it saw; a consumer with a selector
  looks again from there).
* A position may also have a floor, the first queue sequence number it may see (a browser
  that starts at an ``x-opt-sequence-number``): entries numbered below it are passed.
* Reading the next entry is O(1) amortised on a log track (O(log n) once after the log is
  rebuilt), and on a sorted one O(1) while its order does not change and O(log n) once it
  has, whatever the queue's length.
"""

from __future__ import annotations

from collections.abc import Iterator

from proton_broker.queues.entries import ArrivalLog, Entry, PriorityOrder, SortedOrder


class Position:
    """A place on one track: the next number it may see (log tracks: every entry at or
    after it; sorted tracks: the floor), the list index of that entry (log tracks, valid
    for ``generation``; -1: find it again), and on sorted tracks the next sort position,
    an iterator from it and the entry it read last (valid while the order's ``changes``
    is ``generation``)."""

    __slots__ = ("seq", "index", "generation", "rank", "reader", "read")

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.index = 0
        self.generation = -1
        self.rank: tuple[object, ...] = ()  # before every (rank, seq, entry)
        self.reader: Iterator[tuple[object, int, Entry]] | None = None
        self.read: Entry | None = None


class LogTrack:
    """Entries in arrival order: an :class:`ArrivalLog`."""

    __slots__ = ("_log",)

    def __init__(self, log: ArrivalLog) -> None:
        self._log = log

    def next(self, position: Position) -> Entry | None:
        """The first entry at or after ``position`` (left there), or None."""
        log = self._log
        if position.generation != log.generation:
            position.index = log.index_of(position.seq)
            position.generation = log.generation
        index, seq = position.index, position.seq
        entry = log.at(index)
        while entry is not None and entry.seq < seq:  # a start beyond the end, reached
            index += 1
            entry = log.at(index)
        position.index = index
        return entry

    def passed(self, position: Position, entry: Entry) -> None:
        """``position`` moves past ``entry``, which :meth:`next` returned."""
        position.seq = entry.seq + 1
        position.index += 1

    def behind(self, position: Position, entry: Entry) -> bool:
        """Whether ``position`` is past ``entry``."""
        return position.seq > entry.seq

    def back_to(self, position: Position, entry: Entry) -> None:
        """``position`` moves back to ``entry`` (which it is past)."""
        position.seq = entry.seq
        position.generation = -1


class SortedTrack:
    """The available entries of a sorted queue, in its order: its ``SortedList`` of
    (rank, seq, entry). A position reads on with an iterator while the order does not
    change (O(1) an entry), and searches again (O(log n)) once it has."""

    __slots__ = ("_order",)

    def __init__(self, order: SortedOrder) -> None:
        self._order = order

    def next(self, position: Position) -> Entry | None:
        order = self._order
        if position.generation == order.changes and position.reader is not None:
            if position.read is not None:
                return position.read
            reader = position.reader
        else:
            reader = position.reader = order.items.irange(minimum=position.rank)
            position.generation = order.changes
        for _rank, seq, entry in reader:
            if seq >= position.seq:  # at or above the floor
                position.read = entry
                return entry
        position.reader = None
        return None

    def passed(self, position: Position, entry: Entry) -> None:
        # (rank, seq + 1) sorts after (rank, seq, entry) and at or before what follows it.
        position.rank = (entry.rank, entry.seq + 1)
        position.read = None

    def behind(self, position: Position, entry: Entry) -> bool:
        return position.rank > (entry.rank, entry.seq)

    def back_to(self, position: Position, entry: Entry) -> None:
        position.rank = (entry.rank, entry.seq)
        position.reader = position.read = None


Track = LogTrack | SortedTrack


class Walk:
    """A queue's tracks, in the order they are walked (see the module rules)."""

    __slots__ = ("tracks", "_levels")

    def __init__(self, order: object, log: ArrivalLog) -> None:
        """The walk of a queue whose ordering is ``order`` and arrival log ``log``."""
        self._levels = 0  # a priority queue's number of levels (tracks, highest first)
        if isinstance(order, PriorityOrder):
            self._levels = order.levels
            self.tracks: list[Track] = [LogTrack(level) for level in reversed(order.logs)]
            log.followers.extend(order.logs)
        elif isinstance(order, SortedOrder):
            self.tracks = [SortedTrack(order)]
        else:
            self.tracks = [LogTrack(log)]

    def start(self, seq: int) -> list[Position]:
        """A place on every track that sees the entries numbered ``seq`` and above."""
        return [Position(seq) for _ in self.tracks]

    def track_of(self, entry: Entry) -> int:
        """The index of the track ``entry`` is on."""
        return self._levels - 1 - entry.rank if self._levels else 0

    def behind(self, place: list[Position], entry: Entry) -> bool:
        """Whether ``place`` is past ``entry``."""
        index = self.track_of(entry)
        return self.tracks[index].behind(place[index], entry)

    def back_to(self, place: list[Position], entry: Entry) -> None:
        """``place`` moves back to ``entry``, if it is past it."""
        index = self.track_of(entry)
        track, position = self.tracks[index], place[index]
        if track.behind(position, entry):
            track.back_to(position, entry)
