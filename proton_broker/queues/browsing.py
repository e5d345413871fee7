"""Browsers: consumers that see messages without taking them (source distribution-mode
``copy``), and replaying browsers of a queue's sequence history.

Rules this module owns:

* A browser never acquires. It keeps a cursor in arrival order (a position in the queue's
  :class:`~proton_broker.queues.entries.ArrivalLog`) and is shown each entry that is
  available as the cursor passes it, then new ones as they arrive. An entry a consumer
  holds (acquired, not settled) is passed over, and not shown later if it is released: the
  cursor only goes forward (the C++ broker's ``QueueCursor`` shows a browser available
  messages only, and Broker-J's browsers skip entries that are not available and do not
  see requeues). Browsers are fed after the consumers' turn (queues/dispatching.py), so a
  message a consumer with credit takes as it arrives is not shown to them. On every queue
  type browsers see arrival order (both Qpid brokers browse a priority or sorted queue in
  its own order instead: a documented difference); on an LVQ that is the current value of
  each key, then each update, never a superseded value.
* A browser passes neither a held entry (it comes when it becomes valid, even if the cursor
  is past it) nor one whose number is still being written (it waits there: see
  :mod:`proton_broker.queues.numbering`); expired entries are skipped.
* Feeding a browser costs O(1) per entry it is shown, whatever the queue's length; a cursor
  survives the log's compaction by finding its position again (O(log n)).
* A replaying browser (``x-opt-sequence`` filter) is first sent the kept versions from its
  start (of one key, or of all), then every new version as it is recorded.
* A browser with a selector is shown only what the selector matches; a paged-out message is
  read back for it and stays paged.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager

from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, DEAD, ArrivalLog, Entry
from proton_broker.queues.ports import Consumer, MessageFilter


class Cursor:
    """Where a browser is: the next number it may see, that entry's index in the log (valid
    for ``generation``), valid entries behind it still to show, and its selector."""

    __slots__ = ("seq", "index", "generation", "late", "selector")

    def __init__(
        self, seq: int, index: int, generation: int, selector: MessageFilter | None
    ) -> None:
        self.seq, self.index, self.generation = seq, index, generation
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
        log: ArrivalLog,
        read_back: Callable[[Message], AbstractContextManager[None]],
        superseded: Callable[[Entry], bool] | None = None,
    ) -> None:
        self._log = log
        self._read_back = read_back
        # A last-value queue's: whether an entry's key has a newer value (it is not shown).
        self._superseded = superseded
        self.cursors: dict[int, Cursor] = {}
        self.replays: dict[int, Replay] = {}
        # The history's watchers (a queue with a key): this browser set is one of them only
        # while someone replays, so a message costs no call when nobody does.
        self.history_watchers: list[Callable[[str, int, Message], object]] | None = None

    def add(self, consumer_id: int, start: int, selector: MessageFilter | None) -> None:
        """A browser that starts at number ``start`` (0: the beginning)."""
        log = self._log
        self.cursors[consumer_id] = Cursor(start, log.index_of(start), log.generation, selector)

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
        """A held entry became valid: browsers already past it get it next."""
        for cursor in self.cursors.values():
            if cursor.seq > entry.seq:
                cursor.late.append(entry)

    def feed(self, consumer: Consumer) -> None:
        """Send ``consumer`` (a browser) what it has not seen yet, as its credit allows."""
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
        self._walk(consumer, cursor)

    def _walk(self, consumer: Consumer, cursor: Cursor) -> None:
        """Show the browser the log from its cursor on (see the module rules)."""
        log, selector, superseded = self._log, cursor.selector, self._superseded
        seq, index = cursor.seq, cursor.index
        if cursor.generation != log.generation:
            index = log.index_of(seq)
        now = 0.0
        while consumer.credit > 0:
            entry = log.at(index)
            if entry is None:
                break
            if entry.message.number_unwritten and entry.state != DEAD:
                break  # its number is not on disk yet: wait for it
            index += 1
            if entry.seq < seq:
                continue  # before a start that was beyond the end (a future number)
            seq = entry.seq + 1
            if entry.state != AVAILABLE:  # a consumer holds it, or it is gone or held
                continue  # a held entry comes through ``late`` once it is valid
            if superseded is not None and superseded(entry):
                continue  # a newer value for its key is on the queue
            if entry.expires_at is not None:
                now = now or time.time()
                if entry.expires_at <= now:
                    continue
            self._show(consumer, entry, selector)
        cursor.seq, cursor.index, cursor.generation = seq, index, log.generation

    def feed_all(self, consumers: dict[int, Consumer]) -> None:
        for cid in list(self.cursors):
            self.feed(consumers[cid])
        for cid in list(self.replays):
            self.feed(consumers[cid])

    def _show(self, consumer: Consumer, entry: Entry, selector: MessageFilter | None) -> None:
        """Send a copy if the selector (if any) matches it."""
        message = entry.message
        if message.paged:
            with self._read_back(message):
                if selector is None or selector.matches(message):
                    consumer.deliver(entry)
        elif selector is None or selector.matches(message):
            consumer.deliver(entry)
