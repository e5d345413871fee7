"""Consumers with a selector (JMS message selectors) that consume, not browse.

Rules this module owns: such a consumer finds its next message by walking the queue's
order from a place of its own (:mod:`~proton_broker.queues.walking`), as the consumers of
both Qpid brokers walk their queue, so a message it does not match is looked at once, not
on every dispatch: O(1) amortised per message and consumer on a FIFO queue (O(levels) on a
priority queue, O(log n) on a sorted one). It takes the first message it matches in the
queue's order: arrival order, priority levels, or sort order. A message that becomes
available again behind a place (released, held until now, or new and sorting before it)
moves that place back to it, unless it is older than where the consumer started (its
replay period: Broker-J's replay period is a filter of arrival times, which such a message
never passes). A paged-out message is read back to be matched and stays paged. A consumer
with a replay period and no selector on a grouped queue walks here too, with
:data:`EVERYTHING` for its selector.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, Entry
from proton_broker.queues.ports import MessageFilter
from proton_broker.queues.walking import Position, Walk


class _Everything:
    """The selector of a consumer that walks for its replay period alone."""

    def matches(self, message: Message) -> bool:
        return True


EVERYTHING: MessageFilter = _Everything()


class SelectCursor:
    """Where a consumer is (a position on each track of the queue's walk), its selector,
    and where it started (it never goes back before that)."""

    __slots__ = ("place", "selector", "floor")

    def __init__(self, place: list[Position], selector: MessageFilter, floor: int) -> None:
        self.place, self.selector, self.floor = place, selector, floor


class Selecting:
    """The consuming selectors of one queue."""

    def __init__(
        self, walk: Walk, read_back: Callable[[Message], AbstractContextManager[None]]
    ) -> None:
        self._walk = walk
        self._read_back = read_back
        self.cursors: dict[int, SelectCursor] = {}

    def add(self, consumer_id: int, start: int, selector: MessageFilter) -> None:
        self.cursors[consumer_id] = SelectCursor(self._walk.start(start), selector, start)

    def remove(self, consumer_id: int) -> None:
        self.cursors.pop(consumer_id, None)

    def rewind(self, entry: Entry) -> None:
        """``entry`` is available again, or new behind a place: places past it look again
        from there."""
        back_to, seq = self._walk.back_to, entry.seq
        for cursor in self.cursors.values():
            if seq >= cursor.floor:  # older than its replay period: never its
                back_to(cursor.place, entry)

    def next_match(
        self,
        consumer_id: int,
        expired: Callable[[Entry], bool],
        allowed: Callable[[Entry], bool] | None = None,
    ) -> Entry | None:
        """The next available entry the consumer matches, its place moved past it; None
        when there is none. ``expired`` drops an entry whose time has passed and says
        so; ``allowed`` (a grouped queue's) refuses a match the consumer may not take now,
        and remembers it so that the place moves back to it once it may."""
        cursor = self.cursors[consumer_id]
        for track, position in zip(self._walk.tracks, cursor.place, strict=True):
            while (entry := track.next(position)) is not None:
                track.passed(position, entry)
                if (
                    entry.state != AVAILABLE
                    or (entry.excluded and consumer_id in entry.excluded)
                    or expired(entry)
                ):
                    continue
                if self._matches(cursor.selector, entry.message) and (
                    allowed is None or allowed(entry)
                ):
                    return entry
        return None

    def _matches(self, selector: MessageFilter, message: Message) -> bool:
        if not message.paged:
            return selector.matches(message)
        with self._read_back(message):
            return selector.matches(message)
