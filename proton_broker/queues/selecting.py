"""Consumers with a selector (JMS message selectors) that consume, not browse.

Rules this module owns: such a consumer finds its next message by walking the arrival log
from a cursor of its own, as Broker-J's consumers walk the queue, so a message it does not
match is looked at once, not on every dispatch: O(1) amortised per message and consumer.
It takes messages in arrival order, also on a priority or sorted queue. A message that
becomes available again behind a cursor (released, or held until now) moves that cursor
back to it. A paged-out message is read back to be matched and stays paged.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, ArrivalLog, Entry
from proton_broker.queues.ports import MessageFilter


class SelectCursor:
    """The next number a consumer may look at, its index in the log (valid for
    ``generation``; -1: find it again), and the consumer's selector."""

    __slots__ = ("seq", "index", "generation", "selector")

    def __init__(self, seq: int, index: int, generation: int, selector: MessageFilter) -> None:
        self.seq, self.index, self.generation, self.selector = seq, index, generation, selector


class Selecting:
    """The consuming selectors of one queue."""

    def __init__(
        self, log: ArrivalLog, read_back: Callable[[Message], AbstractContextManager[None]]
    ) -> None:
        self._log = log
        self._read_back = read_back
        self.cursors: dict[int, SelectCursor] = {}

    def add(self, consumer_id: int, start: int, selector: MessageFilter) -> None:
        log = self._log
        self.cursors[consumer_id] = SelectCursor(
            start, log.index_of(start), log.generation, selector
        )

    def remove(self, consumer_id: int) -> None:
        self.cursors.pop(consumer_id, None)

    def rewind(self, seq: int) -> None:
        """The entry at ``seq`` is available again: cursors past it look again from there."""
        for cursor in self.cursors.values():
            if cursor.seq > seq:
                cursor.seq, cursor.generation = seq, -1

    def next_match(
        self, consumer_id: int, expired: Callable[[Entry], bool], end: int
    ) -> Entry | None:
        """The next available entry the consumer matches, its cursor moved past it; None
        (the cursor at ``end``, the queue's next number) when there is none. ``expired``
        drops an entry whose time has passed and says so."""
        cursor = self.cursors[consumer_id]
        log = self._log
        index = cursor.index if cursor.generation == log.generation else log.index_of(cursor.seq)
        while True:
            entry = log.at(index)
            if entry is None:
                break
            index += 1
            if (
                entry.state != AVAILABLE
                or entry.seq < cursor.seq
                or (entry.excluded and consumer_id in entry.excluded)
            ):
                continue
            generation = log.generation
            if expired(entry):
                if log.generation != generation:  # the log was compacted meanwhile
                    index = log.index_of(entry.seq + 1)
                continue
            if self._matches(cursor.selector, entry.message):
                cursor.seq, cursor.index, cursor.generation = entry.seq + 1, index, log.generation
                return entry
        cursor.seq, cursor.index, cursor.generation = end, index, log.generation
        return None

    def _matches(self, selector: MessageFilter, message: Message) -> bool:
        if not message.paged:
            return selector.matches(message)
        with self._read_back(message):
            return selector.matches(message)
