"""The store interface: what the broker persists, and the promise it rests on.

The store sees queue names, message ids and opaque message bytes, never AMQP frames and
never queue internals. Writes are grouped into *units* (the operations one event committed
together: a durable transfer, a settlement, a transaction); a unit is atomic, and its
completion callback runs once it is on disk, on the broker's event-loop thread (the
backend is given a ``post`` function that gets it there). The broker answers ``accepted``
to a producer only from that callback.

Ids are given out by the store, in increasing order, so ordering messages by id recovers
the order in which they were enqueued, per queue.

Queue sequence numbers (x-opt-sequence-number) are kept with the messages: a message
that joined its queue before it was written (a producer's durable message) carries its
number in its own row; one written before it joined (a transaction's, a dead letter's)
gets a number row, a unit later, deleted with the message, and that row wins over the
message's own at recovery. Per queue a reservation mark is kept below which no number may
be given out again. Key sequence numbers (x-opt-sequence) are kept per queue and key, the
greatest given out with a stored version; and per queue a floor, the highest number its
history forgot or reserved for versions it does not store, above which every key goes on
after a restart. Duplicate detection keeps, per queue, the message-ids of stored messages
with the time they were seen, until the queue's window lets them go.
"""

from __future__ import annotations

import abc
import bisect
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Completion = Callable[[BaseException | None], None]
Post = Callable[[Callable[[], None]], None]


class StoreError(Exception):
    """The store could not do what was asked (disk full, I/O error, corrupt file)."""


class StoredMessage(NamedTuple):
    """A message as the store keeps it. A named tuple, not a frozen dataclass: one is made
    for every durable message, and a frozen dataclass takes three times as long to make
    (0.64 against 0.21 us, its fields set through ``object.__setattr__``)."""

    id: int
    queue: str
    data: bytes
    arrival: float  # seconds since the epoch, when the broker first enqueued it
    # Its queue sequence number, when it had one before it was written (a durable message
    # joins its queue as it is written); None: written first, numbered later (its number
    # row, a unit later, which replaces this one at recovery if both are there).
    number: int | None = None


@dataclass
class Recovered:
    """What :meth:`Store.open` found: durable queues and their messages, in order.

    ``messages`` is read once, by id, as the broker takes them: a store on disk reads each
    message's row as it is taken (and may raise :class:`StoreError` then: a row that fails
    its checksum), so that the whole store is never in memory at once. A message its queue
    pages out (flow to disk) keeps only its record, and its bytes stay where they are.
    Everything else is read at :meth:`Store.open`, and knows its messages by id only."""

    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> options
    messages: Iterable[StoredMessage] = field(default_factory=list)  # by id, read once
    # queue -> key -> the last sequence number given out (sequence history)
    sequences: dict[str, dict[str, int]] = field(default_factory=dict)
    retired: set[int] = field(default_factory=set)  # ids of messages kept as history only
    # message id -> queue number (its number row, else the number in its own row)
    numbers: dict[int, int] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)  # queue -> numbers reserved below
    # queue -> (message-id key, when seen), oldest first (duplicate detection)
    seen: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    # durable exchanges: name -> (type, arguments as declared)
    exchanges: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # bindings to durable queues: (exchange, queue, binding key, arguments)
    bindings: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    # queue -> the highest sequence number its history forgot (numbers start above it)
    floors: dict[str, int] = field(default_factory=dict)
    # queue -> the highest queue number among its messages' (``numbers``): new numbers
    # are given out above it, before the messages that have them are read
    highest: dict[str, int] = field(default_factory=dict)


@dataclass
class Unit:
    """Operations committed together, atomically."""

    enqueues: list[StoredMessage] = field(default_factory=list)
    dequeues: list[int] = field(default_factory=list)
    pages: list[tuple[int, bytes]] = field(default_factory=list)  # flow to disk: (id, bytes)
    unpages: list[int] = field(default_factory=list)
    sequences: list[tuple[str, str, int]] = field(default_factory=list)  # (queue, key, seq)
    # Keys a history forgot: (queue, key, the highest number it has forgotten): the key's
    # number row goes if its number is not above that (a later number of the key is).
    forgets: list[tuple[str, str, int]] = field(default_factory=list)
    # Key numbers given out to versions the store does not keep (queue, up to here): after
    # a restart every key's numbers go on above it, as above a forgotten key's.
    floors: list[tuple[str, int]] = field(default_factory=list)
    retires: list[int] = field(default_factory=list)  # messages now kept as history only
    numbers: list[tuple[int, int]] = field(default_factory=list)  # (message id, number)
    marks: list[tuple[str, int]] = field(default_factory=list)  # (queue, reserved below)
    seen: list[tuple[str, str, float]] = field(default_factory=list)  # (queue, key, when)
    unseen: list[tuple[str, str]] = field(default_factory=list)  # (queue, key)
    done: Completion | None = None
    dones: list[Completion] = field(default_factory=list)  # more completions (shared units)
    # Its removals stand alone (consumers' acknowledgements, messages that left their
    # queues): a failed commit keeps them for a later one, as nothing else depends on them.
    # False: they go with the unit's other writes (a transaction's commit, a dead letter's
    # or a management move), all or nothing, and its caller keeps the messages stored.
    acknowledgements: bool = False


COMMIT_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Upper bounds (seconds) of the commit-duration buckets: an fsync on an SSD is well under
a millisecond, on a spinning disk or a loaded VM tens of milliseconds."""


@dataclass(frozen=True)
class CommitTimes:
    """A copy of :class:`CommitClock`'s figures, safe to read on any thread."""

    count: int = 0  # transactions committed (each holds a group of units)
    failures: int = 0  # transactions rolled back because the write failed
    seconds: float = 0.0  # their durations added up
    buckets: tuple[int, ...] = (0,) * len(COMMIT_BOUNDS)  # per bound, not cumulative
    removals_waiting: int = 0  # acknowledged messages a failed commit could not remove yet


class CommitClock:
    """How long the store's commits take, as plain numbers (the metrics module turns them
    into a histogram; the store knows nothing of Prometheus). Written once per commit by
    the writer thread, read by whoever asks for a :meth:`snapshot`: one small lock per
    group commit, nothing per message."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._failures = 0
        self._waiting_removals = 0  # removals a failed commit held back, not yet written
        self._seconds = 0.0
        self._buckets = [0] * len(COMMIT_BOUNDS)

    def record(self, seconds: float) -> None:
        index = bisect.bisect_left(COMMIT_BOUNDS, seconds)
        with self._lock:
            self._count += 1
            self._seconds += seconds
            if index < len(COMMIT_BOUNDS):
                self._buckets[index] += 1

    def failed(self) -> None:
        with self._lock:
            self._failures += 1

    def waiting_removals(self, count: int) -> None:
        """``count`` removals (acknowledged messages) wait for a commit that succeeds."""
        with self._lock:
            self._waiting_removals = count

    def snapshot(self) -> CommitTimes:
        with self._lock:
            return CommitTimes(
                self._count,
                self._failures,
                self._seconds,
                tuple(self._buckets),
                self._waiting_removals,
            )


class Store(abc.ABC):
    """A backend: memory (nothing survives) or SQLite (the embedded default)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.batching = False  # buffer units until flush() (the server flushes each pass)
        self.outbox: list[Unit] = []  # units buffered while batching
        self.commits = CommitClock()  # durations of the commits that reach the disk

    def next_id(self) -> int:
        """A new message id, greater than every id given out or recovered before."""
        return next(self._ids)

    def _ids_after(self, last: int) -> None:
        self._ids = itertools.count(last + 1)

    @abc.abstractmethod
    def open(self) -> Recovered:
        """Start the store and return what it holds."""

    @abc.abstractmethod
    def save_queue(self, name: str, options: Mapping[str, Any]) -> None:
        """Record a durable queue's definition (synchronously: declarations are rare)."""

    @abc.abstractmethod
    def delete_queue(self, name: str, moved: Sequence[StoredMessage] = ()) -> None:
        """Forget a durable queue and every message on it, and write ``moved`` (its
        messages' copies on other queues: dead-lettering) in the same transaction, so a
        crash leaves them either on the queue or moved, never both or neither
        (synchronously)."""

    @abc.abstractmethod
    def save_exchange(self, name: str, kind: str, arguments: Mapping[str, Any]) -> None:
        """Record a durable exchange (synchronously)."""

    @abc.abstractmethod
    def delete_exchange(self, name: str) -> None:
        """Forget a durable exchange and its bindings (synchronously)."""

    @abc.abstractmethod
    def save_binding(
        self, exchange: str, queue: str, key: str, arguments: Mapping[str, Any]
    ) -> None:
        """Record a binding (its arguments replace those of the same three; synchronously).
        :meth:`delete_queue` forgets the queue's bindings with it."""

    @abc.abstractmethod
    def delete_binding(self, exchange: str, queue: str, key: str) -> None:
        """Forget one binding (synchronously)."""

    @abc.abstractmethod
    def commit(self, unit: Unit) -> None:
        """Write ``unit``; its ``done`` runs on the loop thread once it is durable (or
        with the error if it could not be written: then none of it was)."""

    @property
    def location(self) -> str | None:
        """Where the store keeps its data (None: in memory only), for the operational log."""
        return None

    @property
    def pages(self) -> bool:
        """Whether this store can hold paged-out message bytes (flow to disk)."""
        return False

    def read(self, message_id: int, page: bool) -> bytes:
        """The bytes of a stored message (``page``: of a page), read now, on the loop thread."""
        raise StoreError("this store keeps no message bytes to read back")

    def after_writes(self, done: Completion) -> None:
        """``done(error)`` once everything handed to the store so far (writes, removals)
        is on disk, or could not be written (``error``): an operator's purge is answered
        then, as Broker-J answers once its store transaction is committed."""
        self.commit(Unit(done=done))

    def flush(self) -> None:  # noqa: B027 - a no-op unless the backend buffers units
        """Hand buffered units to the writer (a backend that buffers: see SqliteStore)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Finish pending writes and release the store."""

    # conveniences for the common one-operation units

    def enqueue(self, message: StoredMessage, done: Completion | None = None) -> None:
        self.commit(Unit(enqueues=[message], done=done))

    def dequeue(self, message_id: int) -> None:
        self.commit(Unit(dequeues=[message_id], acknowledgements=True))

    def retire(self, message_id: int) -> None:
        """The message left its queue, but its queue's history keeps it: recover it as a
        past version, not as a message (a later dequeue removes it)."""
        self.commit(Unit(retires=[message_id]))

    def sequence(self, queue: str, key: str, seq: int) -> None:
        """``seq`` was given out for ``key`` on ``queue`` (with the message that has it)."""
        self.commit(Unit(sequences=[(queue, key, seq)]))

    def number(self, message_id: int, number: int, done: Completion | None = None) -> None:
        """The stored message ``message_id`` has the queue sequence number ``number``;
        ``done`` once that is on disk."""
        self.commit(Unit(numbers=[(message_id, number)], done=done))

    def forget(self, queue: str, key: str, floor: int) -> None:
        """``queue``'s history forgot ``key``: its number row goes, and no number up to
        ``floor`` is given out again for any key."""
        self.commit(Unit(forgets=[(queue, key, floor)]))

    def mark(self, queue: str, upto: int) -> None:
        """No queue sequence number below ``upto`` may be given out on ``queue`` again."""
        self.commit(Unit(marks=[(queue, upto)]))

    def floor(self, queue: str, upto: int) -> None:
        """No key sequence number up to ``upto`` may be given out on ``queue`` again (it
        may have been given to a version the store does not keep)."""
        self.commit(Unit(floors=[(queue, upto)]))

    def seen(self, queue: str, key: str, when: float) -> None:
        """Duplicate detection: ``queue`` saw a stored message with id ``key`` at ``when``."""
        self.commit(Unit(seen=[(queue, key, when)]))

    def unseen(self, queue: str, key: str) -> None:
        """Duplicate detection: ``queue``'s window no longer holds ``key``."""
        self.commit(Unit(unseen=[(queue, key)]))
