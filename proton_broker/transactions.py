"""Local transactions: sends and acknowledgements held back until the client discharges.

AMQP 1.0 local transactions (``amqp:txn``), as JMS transacted sessions use them, with the
protocol left to :mod:`proton_broker.amqp.coordinator`. Rules owned here:

* A message sent under a transaction is *staged*: no consumer sees it and nothing is
  written until commit. A reject-policy queue that is full refuses it when it is sent, as it
  would outside a transaction, and a staged message counts on its queue's limit until the
  transaction ends (``Queue.pending``, as Broker-J's reject policy counts uncommitted
  messages): so the messages of one transaction, or of several, cannot together take the
  queue past its limit, and neither can other producers' sends between a staged send and
  the commit, which are refused as if the staged messages were on the queue.
* A staged message's time to live counts from when it was received, not from the commit
  (qpidd and Broker-J alike): its record keeps that time (``Message.received``), and one
  whose time is up by the commit joins its queue expired and is not delivered. It joins
  its queue at commit, in the order sent, as qpidd's ``TxPublish::commit`` adds it.
* On a queue with a key (queues/history.py) a staged message is numbered in its key at
  commit, in the order sent, not when it is sent: qpidd's ``TxPublish::commit`` pushes it
  onto its queue, which numbers it then. So a key's versions keep the order of their
  numbers, whatever was sent to the key while the transaction was open. A custom number
  (``x-opt-sequence``) is checked when the message is sent, as outside a transaction, and
  again at commit: one that another send has gone past meanwhile fails the commit, which
  rolls the transaction back.
* An acknowledgement (an outcome given under a transaction) leaves the message acquired by
  its consumer until the transaction ends: commit applies the outcome, rollback applies
  nothing, and the message is again an unsettled delivery of that consumer (as the AMQP
  transactions section says; a consumer that has gone by then returns it to the queue).
* Commit is atomic, also across a crash: the staged durable messages and the removal of
  the acknowledged durable messages are one store unit, and only once it is on disk do the
  staged messages join their queues (in the order they were sent) and the outcomes apply.
  If the unit cannot be written, the transaction is rolled back and the discharge fails.
* A transaction whose controller goes away (its coordinator link or connection) is rolled
  back.
* A transaction belongs to the connection that declared it: a transfer or an outcome from
  another connection that names it is told the transaction is unknown (Broker-J's
  ``transaction:unknown-id``), so no client can add work to another's transaction.
* A commit that cannot keep everything the transaction did rolls back instead, and the
  discharge is refused (``amqp:transaction:rollback``): when a transactional send was
  refused and its producer could not act on that (it sent the transfer settled, or its
  link was detached with the error; Broker-J marks the transaction rollback-only the same
  way), wherever the refusal came from (a full queue, an unknown relay address, an
  exchange that rejects what it cannot route, the ACL), or a queue a staged message was
  sent to has been deleted since.
* Limits: staged messages are messages the broker holds in memory, so their bytes count in
  the broker's memory budget (``broker.max_memory``, queues/budget.py) from the moment they
  are staged until the transaction ends (a commit's messages then count on their queues).
  A full budget stops producers, transactional ones too, but never a coordinator: a client
  can always commit or roll back. A rollback brings the budget down at once; a commit moves
  the bytes onto their queues, whose consumers bring it down. A connection may
  have ``broker.max_transactions_per_connection`` transactions open at once; a declare
  beyond that is refused (``amqp:resource-limit-exceeded``). qpidd allows one a session;
  Broker-J has no count limit, and flows a connection's uncommitted messages to disk past
  ``connection.maxUncommittedInMemorySize`` (10 MiB).
* Each connection's transactions are counted as Broker-J counts them: the transactions it
  declared (``begins``) and those that were rolled back, however (a discharge that fails
  them, a commit that could not be kept, a controller gone), the transfers sent and the
  outcomes given under them (whatever became of the transaction), the ones open and when
  the oldest of those was declared. The counts go with the connection.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from proton_broker.errors import BrokerError, ResourceLimitExceeded, UnknownTransaction
from proton_broker.message import Message
from proton_broker.queues.budget import MemoryBudget
from proton_broker.queues.entries import Entry
from proton_broker.queues.expiry import has_ttl_bounds
from proton_broker.queues.queue import Queue


@dataclass
class Acknowledgement:
    """A consumer's outcome for one message, waiting for its transaction.

    ``apply`` gives the outcome to the queue (and settles the delivery); ``undo`` puts the
    delivery back with its consumer, or the message back on its queue if the consumer has
    gone. ``removes``: the outcome takes the message off the queue (accepted, rejected), so
    a durable message's removal is part of the commit's store unit.
    """

    queue: Queue
    entry: Entry
    removes: bool
    apply: Callable[[], None]
    undo: Callable[[], None]


class Staged(NamedTuple):
    """A message held for its queue until commit; ``size``: its bytes as it was sent, what
    it counts in its queue's pending bytes and in the memory budget."""

    queue: Queue
    message: Message
    size: int


@dataclass
class TransactionCounts:
    """What one connection's transactions did (see the module rules)."""

    begins: int = 0
    rollbacks: int = 0
    messages_in: int = 0  # transfers sent under a transaction
    messages_out: int = 0  # outcomes given under a transaction


class Transaction:
    """The work of one open transaction, in the order it was done."""

    def __init__(
        self,
        txn_id: bytes,
        controller: object,
        connection: object,
        budget: MemoryBudget,
        counts: TransactionCounts | None = None,
    ) -> None:
        self.id = txn_id
        self.controller = controller  # who may discharge it (the coordinator link)
        self.connection = connection  # whose transfers and outcomes may join it
        self.counts = TransactionCounts() if counts is None else counts  # its connection's
        self.started = time.time()
        self.refused: str | None = None  # a settled send it could not take: rollback only
        self.sends: list[Staged] = []
        self.acks: list[Acknowledgement] = []
        self.discharging = False  # a commit is being written: no more work may join
        # The broker's memory budget, where the staged bytes count (see the module rules).
        self.budget = budget
        self.staged_bytes = 0
        self.ended = False  # unstaged: its messages no longer count anywhere

    def stage(self, copies: Iterable[tuple[Queue, Message]]) -> None:
        """Hold each message for its queue until commit: all of them, or (one refused now,
        as its queue would refuse it) none. Each counts on its queue's limit from now
        until the transaction ends (see the module rules)."""
        sends = self.sends
        before = len(sends)
        received = time.time()
        try:
            for queue, message in copies:
                queue.check_admission(message)
                queue.check_number(message)  # a bad custom number refused now
                size = len(message.data)
                queue.add_pending(size)
                sends.append(Staged(queue, message, size))
                if message.header.ttl or has_ttl_bounds(queue.settings):
                    message.received = received  # its time to live counts from now
        except BrokerError:
            for staged in sends[before:]:
                staged.queue.remove_pending(staged.size)
            del sends[before:]
            raise
        self.counts.messages_in += 1
        added = sum(staged.size for staged in sends[before:])
        self.staged_bytes += added
        self.budget.add(added)

    def unstage(self) -> None:
        """The transaction has ended: its staged messages no longer count, in the memory
        budget or on their queues' limits (once, however it ended)."""
        if self.ended:
            return
        self.ended = True
        self.budget.remove(self.staged_bytes)
        self.staged_bytes = 0
        for staged in self.sends:
            staged.queue.remove_pending(staged.size)

    def acknowledge(self, ack: Acknowledgement) -> None:
        self.acks.append(ack)
        self.counts.messages_out += 1

    def cannot_commit(self, live: Callable[[Queue], bool]) -> str | None:
        """Why a commit would lose work (see the module rules), or None."""
        if self.refused is not None:
            return f"a message sent settled under it was refused: {self.refused}"
        for queue, _, _ in self.sends:
            if not live(queue):
                return f"queue '{queue.name}', which a message was sent to, has been deleted"
        return None

    def rollback(self) -> None:
        """Forget the staged sends; every acknowledged delivery is unsettled again."""
        self.counts.rollbacks += 1
        self.unstage()
        self.sends.clear()
        acks, self.acks = self.acks, []
        for ack in acks:
            ack.undo()


class Transactions:
    """The open transactions of a broker, by id."""

    def __init__(self, budget: MemoryBudget, per_connection: int) -> None:
        """``budget``: the broker's memory budget, where staged bytes count;
        ``per_connection``: broker.max_transactions_per_connection."""
        self._open: dict[bytes, Transaction] = {}
        self._ids = itertools.count(1)
        self.budget = budget
        self.per_connection = per_connection
        self._of_connection: Counter[object] = Counter()  # open transactions of each
        self._counts: dict[object, TransactionCounts] = {}  # of each connection that declared

    def declare(self, controller: object, connection: object = None) -> Transaction:
        """A new transaction of ``connection``; ResourceLimitExceeded if it has as many
        open as it may (see the module rules)."""
        if self._of_connection[connection] >= self.per_connection:
            raise ResourceLimitExceeded(
                f"this connection has {self.per_connection} transactions open, as many as "
                "it may (broker.max_transactions_per_connection)"
            )
        counts = self._counts.setdefault(connection, TransactionCounts())
        counts.begins += 1
        txn_id = f"txn:{next(self._ids)}".encode()
        txn = Transaction(txn_id, controller, connection, self.budget, counts)
        self._open[txn.id] = txn
        self._of_connection[connection] += 1
        return txn

    def get(self, txn_id: object, connection: object = None) -> Transaction:
        """The open transaction ``txn_id`` names, declared on ``connection`` when one is
        given; raises UnknownTransaction otherwise."""
        if isinstance(txn_id, memoryview):
            txn_id = bytes(txn_id)
        txn = self._open.get(txn_id) if isinstance(txn_id, bytes) else None
        if txn is None or txn.discharging:
            raise UnknownTransaction(f"no open transaction {txn_id!r}")
        if connection is not None and txn.connection != connection:
            raise UnknownTransaction(f"no open transaction {txn_id!r} on this connection")
        return txn

    def end(self, txn: Transaction) -> None:
        """``txn`` is discharged or abandoned: no longer open (its staged messages join
        their queues, or go, after this)."""
        if self._open.pop(txn.id, None) is not None:
            txn.unstage()
            self._of_connection[txn.connection] -= 1
            if not self._of_connection[txn.connection]:
                del self._of_connection[txn.connection]

    def counts_of(self, connection: object) -> TransactionCounts:
        """What ``connection``'s transactions did so far (all zero if it declared none)."""
        return self._counts.get(connection) or TransactionCounts()

    def open_of(self, connection: object) -> tuple[int, float | None]:
        """How many transactions ``connection`` has open, and when the oldest of them was
        declared (seconds since the epoch; None with none open). O(open transactions)."""
        if not self._of_connection[connection]:
            return 0, None
        started = [txn.started for txn in self._open.values() if txn.connection == connection]
        return len(started), min(started)

    def connection_closed(self, connection: object) -> None:
        """``connection`` is gone (its transactions were rolled back): its counts go."""
        self._counts.pop(connection, None)

    def controlled_by(self, controller: object) -> list[Transaction]:
        return [txn for txn in self._open.values() if txn.controller is controller]

    def __len__(self) -> int:
        return len(self._open)
