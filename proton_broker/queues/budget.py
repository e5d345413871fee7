"""The broker's memory budget: the bytes of queued messages it holds in memory, in all
queues together.

Rules this module owns: every message's bytes count from the moment it joins a queue until
it leaves (a message paged out to the store by a flow-to-disk queue stops counting until it
is read back), and a message staged in a transaction's from when it is sent until the
transaction ends (transactions.py). When the count goes over ``limit`` the budget is
*full*: the broker stops every producer, as a queue's producer flow control does (credit
withdrawn, then none granted: RabbitMQ's memory alarm works the same way), rather than let
its memory grow without bound.
Nothing is refused or dropped: messages already in flight still arrive, and every consumer
keeps consuming. When the count falls to ``resume`` (90% of the limit) producers get credit
again. ``observers`` are told of both changes (the protocol adapter).

Counting is O(1) per message; the state changes only when a threshold is crossed.

The sequence histories have a budget of their own (:class:`HistoryBudget`): what a history
keeps after it has left its queue (a consumed or replaced version) is not a queued message,
and stopping producers would not bring it down, as consumers do not take it. When it goes
over its limit the histories *forget* (queues/history.py says what), the one holding the
most first, until it is at 90%. A history may hold versions it cannot let go of yet (older
versions still on its queue come before them); when the one holding the most can give
nothing, every other history that holds anything is asked in turn, the largest first, so
the budget is not left over its limit while another history could give. When none can
give enough, the histories are asked again only once another sixteenth of the limit has
come in, or the total has fallen below where it stood (``stuck_at``): a history that cannot
give is walked whole each time it is asked, and asking on every version that leaves a queue
would cost O(its keys) a message. So the total may stay over the limit by what cannot go
yet, plus a sixteenth at most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

RESUME_PERCENT = 90
DEFAULT_HISTORY_BUDGET = 1 << 30  # bytes; the broker sets broker.max_history_memory


class MemoryBudget:
    """The bytes of queued messages in memory, against a limit shared by every queue."""

    __slots__ = ("limit", "resume", "used", "full", "observers", "unfinished")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.resume = limit * RESUME_PERCENT // 100
        self.used = 0
        # Bytes of messages still arriving in frames, all links together: bounded by
        # ``limit`` too, apart from ``used`` (the protocol adapter keeps it: amqp/links.py).
        self.unfinished = 0
        self.full = False
        # Called with True when the budget fills, False when producers may go on.
        self.observers: list[Callable[[bool], object]] = []

    def add(self, size: int) -> None:
        """``size`` more bytes in memory (a queue's enqueue writes this out: it runs for
        every message)."""
        self.used += size
        if self.used > self.limit:
            self.went_over()

    def remove(self, size: int) -> None:
        """``size`` bytes fewer in memory (a queue's removal writes this out)."""
        self.used -= size
        if self.full and self.used <= self.resume:
            self.came_back()

    def why_full(self) -> str:
        """What a client whose credit the full budget withdrew is told."""
        return (
            f"the broker's memory budget is full ({self.used} bytes queued, "
            f"broker.max_memory {self.limit})"
        )

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


class Forgetting(Protocol):
    """What :class:`HistoryBudget` needs of a sequence history (queues/history.py)."""

    held: int  # what it counts in the budget now

    def forget(self, needed: int) -> int:
        """Let go of at least ``needed`` of ``held`` if it can; how much it let go."""


class HistoryBudget:
    """What every sequence history holds beyond its queue (consumed and replaced versions:
    their bytes and their records), against one limit for the broker."""

    __slots__ = ("limit", "resume", "used", "histories", "forgotten", "stuck_at")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.resume = limit * RESUME_PERCENT // 100
        self.used = 0
        self.histories: list[Forgetting] = []  # of every queue with a key
        self.forgotten = 0  # keys forgotten, all histories together (a metric)
        self.stuck_at: int | None = None  # ``used`` when none could give enough (see above)

    def went_over(self) -> None:
        """Called by a history once ``used`` exceeds ``limit``: the histories holding the
        most forget until ``used`` is back at ``resume``. Each round picks the largest in
        O(histories), and frees a tenth of the limit or all the largest can give (what a
        history's forgetting costs is its own: queues/history.py). When the largest can
        give nothing, the others are asked, largest first (O(histories log histories),
        only then). When none can give enough, they are asked again once another sixteenth
        of the limit has come in (or less is used than then)."""
        stuck_at = self.stuck_at
        if stuck_at is not None and stuck_at <= self.used < stuck_at + self.limit // 16:
            return
        self.stuck_at = None
        while self.used > self.resume:
            largest = max(self.histories, key=_held, default=None)
            if largest is None:
                return
            if not largest.forget(self.used - self.resume):
                self._ask_the_others(largest)
                if self.used > self.resume:  # what is left cannot go yet
                    self.stuck_at = self.used
                return

    def _ask_the_others(self, stuck: Forgetting) -> None:
        """``stuck``, the history holding the most, could give nothing: each other history
        that holds anything forgets, the largest first, until ``used`` is back at
        ``resume`` or none can give more."""
        others = sorted((h for h in self.histories if h is not stuck and h.held), key=_held)
        while others and self.used > self.resume:
            history = others[-1]
            if not history.forget(self.used - self.resume):
                others.pop()


def _held(history: Forgetting) -> int:
    return history.held
