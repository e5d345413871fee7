"""Browsers: consumers that see messages without taking them (source distribution-mode
``copy``), and replaying browsers of a queue's sequence history.

Rules this module owns:

* A browser never acquires. It keeps a place in the queue's order (a walk:
  :mod:`~proton_broker.queues.walking`) and is shown each entry that is available as it
  gets to it, then new ones as they arrive: arrival order on a FIFO queue, on a priority
  queue the highest level first (a new message of a higher level is shown next), on a
  sorted queue the sort order (a new message that sorts before its place is shown next).
  Both Qpid brokers' browsers walk the queue's own order this way. An entry a consumer holds
  (acquired, not settled) is passed over, and not shown later if it is released: the place
  only goes forward (the C++ broker's ``QueueCursor`` shows a browser available messages
  only, and Broker-J's browsers skip entries that are not available and do not see
  requeues). Browsers are fed after the consumers' turn (queues/dispatching.py), so a
  message a consumer with credit takes as it arrives is not shown to them. On an LVQ a
  browser sees the current value of each key, then each update, never a superseded value.
* A browser is shown nothing twice: an entry that becomes available behind its place (one
  held until now, or a new one sorting before it) waits in its ``late`` line and is shown
  next, and the place stays where it is.
* A browser passes neither a held entry (it comes when it becomes valid, even if the place
  is past it) nor one whose number is still being written (it waits there: see
  :mod:`proton_broker.queues.numbering`); expired entries are skipped.
* Feeding a browser costs O(1) per entry it is shown on a FIFO queue (O(levels) on a
  priority queue, O(log n) on a sorted one), whatever the queue's length.
* A replaying browser (``x-opt-sequence`` filter) is first sent the kept versions from its
  start (of one key, or of all), then every new version as it is recorded.
* A browser with a selector is shown only what the selector matches; a paged-out message is
  read back for it and stays paged.
* A browser whose delivery raises is reported to ``failed`` (the dispatcher's backstop, see
  :mod:`~proton_broker.queues.dispatching`) and fed nothing more; the other browsers are
  fed as usual.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager

from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, DEAD, Entry
from proton_broker.queues.ports import Consumer, MessageFilter
from proton_broker.queues.walking import Position, Track, Walk


class Cursor:
    """Where a browser is (a position on each track of the queue's walk), valid entries
    behind it still to show, and its selector."""

    __slots__ = ("place", "late", "selector")

    def __init__(self, place: list[Position], selector: MessageFilter | None) -> None:
        self.place = place
        self.late: deque[Entry] = deque()
        self.selector = selector


class Replay:
    """A replaying browser: the key it follows (None: all) and the versions still to send."""

    __slots__ = ("key", "pending", "selector")

    def __init__(
        self, key: str | None, pending: deque[Entry], selector: MessageFilter | None
    ) -> None:
        self.key, self.pending, self.selector = key, pending, selector


class Browsers:
    """The browsers of one queue. ``read_back(message)`` gives a paged-out message's bytes
    for the time of a ``with`` block."""

    def __init__(
        self,
        walk: Walk,
        read_back: Callable[[Message], AbstractContextManager[None]],
        superseded: Callable[[Entry], bool] | None = None,
    ) -> None:
        self._walk = walk
        self._read_back = read_back
        # A last-value queue's: whether an entry's key has a newer value (it is not shown).
        self._superseded = superseded
        self.cursors: dict[int, Cursor] = {}
        self.replays: dict[int, Replay] = {}
        # The history's watchers (a queue with a key): this browser set is one of them only
        # while someone replays, so a message costs no call when nobody does.
        self.history_watchers: list[Callable[[str, int, Message], object]] | None = None
        # Told of a browser whose delivery raised, with the entry it was being shown (None
        # if it failed elsewhere) and the error; the dispatcher sets it. None: raised.
        self.failed: Callable[[Consumer, Entry | None, Exception], None] | None = None
        self._showing: Entry | None = None  # the entry being shown, for ``failed``

    def add(self, consumer_id: int, start: int, selector: MessageFilter | None) -> None:
        """A browser that starts at number ``start`` (0: the beginning)."""
        self.cursors[consumer_id] = Cursor(self._walk.start(start), selector)

    def add_replay(
        self,
        consumer_id: int,
        key: str | None,
        versions: deque[Entry],
        selector: MessageFilter | None,
    ) -> None:
        self.replays[consumer_id] = Replay(key, versions, selector)
        watchers = self.history_watchers
        if watchers is not None and self.version_recorded not in watchers:
            watchers.append(self.version_recorded)

    def remove(self, consumer_id: int) -> None:
        self.cursors.pop(consumer_id, None)
        if self.replays.pop(consumer_id, None) is not None and not self.replays:
            watchers = self.history_watchers
            if watchers is not None and self.version_recorded in watchers:
                watchers.remove(self.version_recorded)

    def version_recorded(self, key: str, seq: int, message: Message) -> None:
        """A new version of ``key``: replaying browsers that follow it get it next."""
        for replay in self.replays.values():
            if replay.key is None or replay.key == key:
                replay.pending.append(Entry(seq, message, None))

    def valid_again(self, entry: Entry) -> None:
        """``entry`` became available behind where browsers may be (held until now, or new
        and sorting before them): those past it get it next."""
        behind = self._walk.behind
        for cursor in self.cursors.values():
            if behind(cursor.place, entry):
                cursor.late.append(entry)

    def feed(self, consumer: Consumer) -> None:
        """Send ``consumer`` (a browser) what it has not seen yet, as its credit allows; one
        that fails goes to ``failed`` (see the module rules)."""
        self._showing = None
        try:
            self._feed(consumer)
        except Exception as exc:  # the dispatcher's backstop
            if self.failed is None:
                raise
            self.failed(consumer, self._showing, exc)

    def _feed(self, consumer: Consumer) -> None:
        replay = self.replays.get(consumer.id)
        if replay is not None:
            pending = replay.pending
            while pending and consumer.credit > 0:
                self._show(consumer, pending.popleft(), replay.selector)
            return
        cursor = self.cursors[consumer.id]
        late, superseded = cursor.late, self._superseded
        while late and consumer.credit > 0:
            valid = late.popleft()
            if valid.state != AVAILABLE:  # gone, held again, or a consumer took it first
                continue
            if superseded is None or not superseded(valid):
                self._show(consumer, valid, cursor.selector)
        for track, position in zip(self._walk.tracks, cursor.place, strict=True):
            if not self._walk_track(consumer, cursor, track, position):
                return  # no credit left, or waiting for a number being written

    def _walk_track(
        self, consumer: Consumer, cursor: Cursor, track: Track, position: Position
    ) -> bool:
        """Show the browser ``track`` from ``position`` on (see the module rules); True
        when it got to the track's end."""
        selector, superseded = cursor.selector, self._superseded
        now = 0.0
        while consumer.credit > 0:
            entry = track.next(position)
            if entry is None:
                return True
            if entry.message.number_unwritten and entry.state != DEAD:
                return False  # its number is not on disk yet: wait for it
            track.passed(position, entry)
            if entry.state != AVAILABLE:  # a consumer holds it, or it is gone or held
                continue  # a held entry comes through ``late`` once it is valid
            if superseded is not None and superseded(entry):
                continue  # a newer value for its key is on the queue
            if entry.expires_at is not None:
                now = now or time.time()
                if entry.expires_at <= now:
                    continue
            self._show(consumer, entry, selector)
        return False

    def feed_all(self, consumers: dict[int, Consumer]) -> None:
        for cid in list(self.cursors):
            if cid in self.cursors:  # not one that failed meanwhile
                self.feed(consumers[cid])
        for cid in list(self.replays):
            if cid in self.replays:
                self.feed(consumers[cid])

    def _show(self, consumer: Consumer, entry: Entry, selector: MessageFilter | None) -> None:
        """Send a copy if the selector (if any) matches it."""
        self._showing = entry
        message = entry.message
        if message.paged:
            with self._read_back(message):
                if selector is None or selector.matches(message):
                    consumer.deliver(entry)
        elif selector is None or selector.matches(message):
            consumer.deliver(entry)
