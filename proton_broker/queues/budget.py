"""The broker's memory budget: the bytes of queued messages it holds in memory, in all
queues together.

Rules this module owns: every message's bytes count from the moment it joins a queue until
it leaves (a message paged out to the store by a flow-to-disk queue stops counting until it
is read back). When the count goes over ``limit`` the budget is *full*: the broker stops
every producer, as a queue's producer flow control does (credit withdrawn, then none granted:
RabbitMQ's memory alarm works the same way), rather than let its memory grow without bound.
Nothing is refused or dropped: messages already in flight still arrive, and every consumer
keeps consuming. When the count falls to ``resume`` (90% of the limit) producers get credit
again. ``observers`` are told of both changes (the protocol adapter).

Counting is O(1) per message; the state changes only when a threshold is crossed.
"""

from __future__ import annotations

from collections.abc import Callable

RESUME_PERCENT = 90


class MemoryBudget:
    """The bytes of queued messages in memory, against a limit shared by every queue."""

    __slots__ = ("limit", "resume", "used", "full", "observers")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.resume = limit * RESUME_PERCENT // 100
        self.used = 0
        self.full = False
        # Called with True when the budget fills, False when producers may go on.
        self.observers: list[Callable[[bool], object]] = []

    def went_over(self) -> None:
        """Called by a queue once ``used`` exceeds ``limit``."""
        if not self.full:
            self.full = True
            for observer in list(self.observers):
                observer(True)

    def came_back(self) -> None:
        """Called by a queue once ``used`` is at or below ``resume``."""
        if self.full:
            self.full = False
            for observer in list(self.observers):
                observer(False)
