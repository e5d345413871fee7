"""What a queue needs from outside, as protocols: the parts of the broker a queue calls
without knowing what they are.

The protocol adapter supplies consumers (:class:`Consumer`) and flow observers
(:class:`FlowObserver`); the selector language supplies :class:`MessageFilter`; the broker
supplies the store's side, :class:`Journal` (what a durable queue writes) and :class:`Pager`
(flow to disk); the server's loop drives every queue through one :class:`LoopHooks`. A queue
never imports any of them: they are handed in, so queues are tested with plain objects and
no socket or file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from proton_broker.message import Message
from proton_broker.queues.budget import DEFAULT_HISTORY_BUDGET, HistoryBudget, MemoryBudget

DEFAULT_BUDGET = 1 << 30  # bytes; the broker sets broker.max_memory

if TYPE_CHECKING:
    from proton_broker.queues.entries import Entry
    from proton_broker.queues.queue import Queue


class Consumer(Protocol):
    """What a queue needs of a subscriber; implemented by the protocol adapter."""

    id: int
    credit: int
    browse: bool

    def deliver(self, entry: Entry) -> None:
        """Send ``entry`` and take one credit. Called only while ``credit > 0``."""

    def failed(self, entry: Entry | None, error: Exception) -> None:
        """``deliver(entry)`` raised ``error`` (``entry`` None: a browser failed elsewhere
        in its feed). The queue has taken back what it acquired and let go of this
        consumer (queues/dispatching.py): nothing of ``entry`` may stay with it, and the
        adapter ends it."""


class MessageFilter(Protocol):
    """What a consumer's selector is to a queue: a test of each message (the selector
    language lives in :mod:`proton_broker.selector`; queues only call this)."""

    def matches(self, message: Message) -> bool:
        """Whether the consumer wants this message."""


class FlowObserver(Protocol):
    """Told when a queue's producer flow control stops and resumes its producers (the
    protocol adapter withdraws and restores credit, and holds settlements meanwhile)."""

    def flow_stopped(self, queue: Queue) -> None:
        """``queue`` went over its flow stop threshold."""

    def flow_resumed(self, queue: Queue) -> None:
        """``queue`` is back at its resume threshold."""


class Journal(Protocol):
    """Where a durable queue's changes are written (the store, through the broker): its
    messages leaving, its sequence numbers and its duplicate-detection window. Every call
    is a write that completes in the background."""

    def removed(self, queue: Queue, store_id: int) -> None:
        """A stored message left ``queue`` (consumed, expired, replaced, evicted, purged)."""

    def retired(self, queue: Queue, store_id: int) -> None:
        """A stored message left ``queue`` but its sequence history still keeps it."""

    def numbered(
        self, queue: Queue, message: Message, done: Callable[[BaseException | None], None]
    ) -> None:
        """A stored message joined ``queue`` with ``message.number``; ``done`` once the
        number is on disk."""

    def reserve(self, queue: Queue, upto: int) -> None:
        """No number below ``upto`` may be given out again after a restart."""

    def seen(self, queue: Queue, key: str, when: float) -> None:
        """A stored message with message-id ``key`` joined ``queue`` at ``when``."""

    def unseen(self, queue: Queue, key: str) -> None:
        """``key`` left ``queue``'s duplicate-detection window."""

    def forgot(self, queue: Queue, key: str, floor: int) -> None:
        """``queue``'s sequence history forgot ``key``; no number up to ``floor`` is given
        out again."""

    def reserve_keys(self, queue: Queue, upto: int) -> None:
        """``queue``'s sequence history gives out key numbers to versions the store does
        not keep (see Queue.keeps): after a restart no key's number up to
        ``upto`` is given out again."""


class Pager(Protocol):
    """Where a flow-to-disk queue keeps the bytes of messages paged out (the store)."""

    def page_out(self, message: Message, done: Callable[[], None]) -> None:
        """Write ``message``'s bytes; ``done`` runs once they can be read back."""

    def page_in(self, message: Message) -> bytes:
        """The bytes of a paged-out message."""

    def discard(self, message: Message) -> None:
        """A paged-out message left its queue: its page may go."""


class DeadLetterSink(Protocol):
    """Where the messages a queue gives up on go (the broker's dead-lettering,
    :mod:`proton_broker.deadletters`): the queue only says which message and why."""

    def dead_letter(
        self,
        queue: Queue,
        message: Message,
        reason: str,
        detail: str | None,
        written: Callable[[bool], None] | None = None,
    ) -> bool | None:
        """``message`` (its bytes in memory) is leaving ``queue`` for ``reason`` and the
        queue has an alternate: send it there. The sink takes over the removal of a stored
        message (it clears ``message.store_id`` when it does, so the move is one store
        transaction). False: it went nowhere (no route), and it is discarded. With
        ``written``, a move that removes the message's row may wait for the store: None,
        and ``written(True)`` once it is on disk (``store_id`` cleared), ``written(False)``
        if it could not be (the message keeps its row, and stays on ``queue``)."""


@dataclass
class LoopHooks:
    """How the broker's event loop drives its queues: one object shared by every queue of a
    broker, filled in as the loop and the store come up (None until then: tests drive a
    queue by hand).

    ``defer(queue)`` dispatches a queue later in the loop's pass, so messages that arrive
    together go out together; ``wake_at(when, queue)`` runs ``queue.release_held()`` at
    ``when`` (seconds since the epoch); ``pager`` keeps the bytes of paged-out messages;
    ``budget`` counts the bytes of queued messages in memory against the broker's limit,
    ``history_budget`` what sequence histories hold beyond their queues against another;
    ``dead_letters`` takes the messages a queue gives up on."""

    defer: Callable[[Queue], object] | None = None
    wake_at: Callable[[float, Queue], object] | None = None
    pager: Pager | None = None
    # The broker-wide memory budget (queues/budget.py); the broker sets its limit.
    budget: MemoryBudget = field(default_factory=lambda: MemoryBudget(DEFAULT_BUDGET))
    # What the sequence histories hold beyond their queues, against broker.max_history_memory
    # (queues/budget.py); each queue with a key joins it.
    history_budget: HistoryBudget = field(
        default_factory=lambda: HistoryBudget(DEFAULT_HISTORY_BUDGET)
    )
    # Dead-lettering (the broker's): where messages go that a queue with an alternate
    # gives up on; None: discarded.
    dead_letters: DeadLetterSink | None = None
    # Run a callable on the loop after the current operation (see later); None: at once.
    soon: Callable[[Callable[[], None]], object] | None = None
    # Delete a self-destruct queue gone over its limit (queues/limits.py; the broker's, which
    # does it after the current operation): whether it will (not for messages recovered
    # from the store, as qpidd recovers them without the check); None: nothing happens.
    self_destruct: Callable[[Queue], bool] | None = None

    def later(self, call: Callable[[], None]) -> None:
        """Run ``call`` after the current queue operation (``soon``), or at once without a
        loop: what must not happen inside the operation that asked for it (dead letters
        joining their new queues, a self-destruct queue's deletion)."""
        if self.soon is None:
            call()
        else:
            self.soon(call)
