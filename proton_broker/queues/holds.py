"""Hold until valid (Broker-J ``holdOnPublishEnabled``): messages kept from consumers until
the time they carry.

Rules this module owns: a message's valid-from time is its ``x-qpid-not-valid-before``
message annotation, else the application property of that name (milliseconds since the
epoch, a number or numeric text; anything else means no hold); a message whose time has
already come when it arrives is not held. Held entries wait in a min-heap by time, so
holding and releasing cost O(log n) and nothing scans the queue. What a released entry
rejoins (its own position in the ordering, browsers that passed it) is the queue's business;
this module only says which entries are due.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from proton_broker.message import Message
from proton_broker.queues.entries import HELD, Entry

NOT_VALID_BEFORE = "x-qpid-not-valid-before"


class Holds:
    """The held entries of one queue, by the time (ms since the epoch) they become valid."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Entry]] = []

    def hold(self, entry: Entry, valid_from: float) -> bool:
        """Hold ``entry`` (already in state HELD) until ``valid_from`` (ms); True when it is
        now the first due, so the queue's wake-up time changed."""
        heapq.heappush(self._heap, (valid_from, entry.seq, entry))
        return self._heap[0][2] is entry

    def due(self, now: float) -> Iterator[Entry]:
        """Take out the entries still held whose time (``now``, seconds) has come."""
        heap = self._heap
        while heap and heap[0][0] <= now * 1000.0:
            entry = heapq.heappop(heap)[2]
            if entry.state == HELD:
                yield entry

    def next_time(self) -> float | None:
        """When the next held entry becomes valid (seconds since the epoch), if any."""
        return self._heap[0][0] / 1000.0 if self._heap else None

    def clear(self) -> None:
        self._heap.clear()


def not_valid_before(message: Message) -> float | None:
    """The time (ms since the epoch) before which ``message`` may not be delivered."""
    value = message.message_annotation(NOT_VALID_BEFORE)
    if value is None:
        value = message.application_property(NOT_VALID_BEFORE)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
