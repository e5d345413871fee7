"""Dead-lettering: where the messages a queue gives up on go.

A queue decides *when* it gives up on a message (see :mod:`proton_broker.queues.queue`: a
consumer rejected it, a ring evicted it, its delivery attempts reached the maximum, it
expired under ``expiryPolicy: ROUTE_TO_ALTERNATE``, or the queue is being deleted); this
module decides *where* it goes and how it gets there.

Rules this module owns:

* **The alternate** of a queue is a queue or an exchange (qpidd's ``alternate-exchange``
  names an exchange, Broker-J's ``alternateBinding`` either). It must exist when the queue
  is declared (``amqp:not-found`` otherwise), and nothing used as an alternate can be
  deleted while it is (``amqp:precondition-failed``, naming who uses it), as in both Qpid
  brokers. Broker-J's ``x-qpid-dlq-enabled`` (or the broker's ``queue.dead_letter_queues``
  for every queue made on demand) makes ``<queue>_DLQ`` (suffix
  ``queue.dead_letter_suffix``), durable when its queue is, and uses it.
* **Through an exchange**, the routing key is the message's subject, else ``""`` (qpidd's
  routing key of an AMQP 1.0 message; Broker-J's without its ``routing-key`` property).
  Every queue the exchange routes to gets a copy; a queue that refuses it (full, reject
  policy) is skipped, logged.
* **The copy** keeps every byte of the message but two: its message annotations gain
  ``x-opt-dead-letter-reason`` (``rejected``, ``ring-overflow``,
  ``maximum-delivery-attempts``, ``expired``, ``queue-deleted``), ``x-opt-dead-letter-queue``
  (where it was), ``x-opt-dead-letter-time`` (a timestamp), ``x-opt-dead-letter-count``
  (how often it has been dead-lettered) and, when the consumer's rejection said why,
  ``x-opt-dead-letter-description``, and its number in its key (``x-opt-sequence``) from a
  queue with a key, as a delivery from there would have carried it (an alternate with a
  key replaces it with the key's next number of its own, as it would number any message:
  History.renumber, after qpidd's ``reroute``, which routes a message as a new delivery,
  numbered by the queue that takes it; a stored copy is numbered as it is written, so its
  row carries the number); and its header loses
  its time to live (the broker expires by the time to live alone), so a dead letter does
  not expire where it lands. A relative ``x-opt-delivery-delay`` it carries becomes 0: it
  has waited once, and would otherwise wait again where it lands (an absolute
  ``x-opt-delivery-time`` has passed anyway).
* **Nothing is lost or doubled.** A durable message moving to a durable queue is written
  there and removed from where it was in one store transaction; it joins its new queue
  once that is on disk (a durable message always does). When a whole queue is deleted, the
  copies are written in the transaction that deletes the queue. Copies join their queues
  after the queue operation that gave the message up (never inside it). Until a stored
  original's move is written it stays on its queue, out of consumers' reach. A move the
  store cannot write (a full disk) did not happen: the copies are dropped and the original
  goes back to its own position on its queue, as a released message does, with its row, as
  the store still has it, so the broker shows what a restart would find, and a later
  rejection, expiry or delivery attempt moves it again. A ring's victim is not put back (it
  would push out the next one, whose move fails in turn): it leaves at once, stays in the
  store only, and its queue has it again at the next start. The first move that fails is
  logged as an error; those that fail after it are not, until one is written again, which
  is logged too (one episode of a full disk, two lines). qpidd and Broker-J stop serving
  when their store fails, so neither says. A copy its queue refuses as it joins (after
  the checks above, and numbered afresh, nothing in it is left to refuse: this is a
  safeguard) is logged as an error, never dropped silently: a stored one stays in the
  store, on that queue from the next start; one that is not stored is counted discarded.
* **No route**: a message with nowhere to go (the maximum reached and no alternate, or an
  alternate that routes it nowhere) is discarded, logged (Broker-J's CHN-1009 and
  CHN-1010) and counted. A message dead-lettered more than :data:`MAX_DEAD_LETTERS` times
  (alternates that lead back to each other) is discarded the same way, as is one whose
  move would be the :data:`MAX_NESTING`-th inside another (full rings evicting into each
  other).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proton_broker.codec.encode import (
    KEY_SEQUENCE,
    encode_header,
    encode_symbol,
    encode_timestamp,
    encode_value,
    with_annotations,
)
from proton_broker.codec.sections import parse_message
from proton_broker.errors import BrokerError, IntegrityViolation, NotFound
from proton_broker.message import Message
from proton_broker.queues.holds import DELIVERY_DELAY, delivery_delay
from proton_broker.queues.queue import Queue
from proton_broker.store.base import StoredMessage, Unit

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.deadletters")

REASON = "x-opt-dead-letter-reason"
SOURCE = "x-opt-dead-letter-queue"
TIME = "x-opt-dead-letter-time"
COUNT = "x-opt-dead-letter-count"
DESCRIPTION = "x-opt-dead-letter-description"
MAX_DEAD_LETTERS = 16  # times one message may be dead-lettered (loops of alternates)
MAX_NESTING = 8  # dead letters that make room (a full ring) for dead letters, one in another


@dataclass
class _Deletion:
    """The copies a queue's deletion makes: written with the deletion, then they join."""

    stored: list[StoredMessage] = field(default_factory=list)
    joins: list[Callable[[], None]] = field(default_factory=list)


class DeadLetters:
    """The broker's dead-lettering (the queues' :class:`~proton_broker.queues.ports.
    DeadLetterSink`), and the index of what is used as an alternate."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._users: dict[str, set[str]] = {}  # alternate name -> "queue 'x'" / "exchange 'y'"
        self._deletion: _Deletion | None = None
        self._nesting = 0  # dead letters being moved, one inside another
        self.discarded = 0  # messages that had nowhere to go
        self._failing = False  # the last move the store wrote failed (see the module rules)

    # ---- the alternates in use ------------------------------------------------------------

    def check_exists(self, alternate: str, user: str) -> None:
        """NotFound unless ``alternate`` names a queue or an exchange (``user``: who names
        it, for the description)."""
        if alternate not in self.broker.queues and alternate not in self.broker.exchanges:
            raise NotFound(f"alternate '{alternate}' of {user} is neither a queue nor an exchange")

    def use(self, alternate: str | None, user: str) -> None:
        if alternate is not None:
            self._users.setdefault(alternate, set()).add(user)

    def unuse(self, alternate: str | None, user: str) -> None:
        users = self._users.get(alternate) if alternate is not None else None
        if users is not None:
            users.discard(user)
            if not users:
                del self._users[alternate]  # type: ignore[arg-type] # not None: found

    def check_unused(self, name: str, what: str) -> None:
        """PreconditionFailed if ``name`` is someone's alternate (both Qpid brokers refuse
        to delete an alternate in use)."""
        users = self._users.get(name)
        if users:
            raise IntegrityViolation(
                f"cannot delete {what} '{name}': it is the alternate of " + ", ".join(sorted(users))
            )

    # ---- moving messages ------------------------------------------------------------------

    @contextmanager
    def deleting(self) -> Iterator[_Deletion]:
        """While a queue is deleted: its messages' copies wait for the deletion's own store
        transaction (see the module rules)."""
        self._deletion = deletion = _Deletion()
        try:
            yield deletion
        finally:
            self._deletion = None

    def dead_letter(
        self,
        queue: Queue,
        message: Message,
        reason: str,
        detail: str | None,
        written: Callable[[bool], None] | None = None,
    ) -> bool | None:
        """Send ``message`` (leaving ``queue`` for ``reason``) to the queue's alternate;
        False if it went nowhere (then it is discarded, and said so); None if, given
        ``written``, the original waits on its queue for the move's write (see
        :class:`~proton_broker.queues.ports.DeadLetterSink`)."""
        try:
            count = int(message.message_annotation(COUNT) or 0) + 1
        except (BrokerError, TypeError, ValueError):
            count = 1
        if queue.alternate is None:
            return self._discard(queue, message, reason, "no alternate")
        if count > MAX_DEAD_LETTERS or self._nesting >= MAX_NESTING:
            return self._discard(queue, message, reason, "its alternates lead back to each other")
        self._nesting += 1
        try:
            return self._send(queue, message, reason, detail, count, written)
        finally:
            self._nesting -= 1

    def _send(
        self,
        queue: Queue,
        message: Message,
        reason: str,
        detail: str | None,
        count: int,
        written: Callable[[bool], None] | None,
    ) -> bool | None:
        dead = self._copy(queue, message, reason, detail, count)
        targets = self._targets(queue, dead)
        if not targets:
            return self._discard(queue, message, reason, f"'{queue.alternate}' routes it nowhere")
        copies = [(dead if i == 0 else copy.copy(dead), target) for i, target in enumerate(targets)]
        waits = self._move(queue, message, copies, written)
        log.info(
            'CHN-1011 : Message moved to dead letter queue : "%s" -> "%s" (%s)',
            queue.name,
            queue.alternate,
            reason,
        )
        return None if waits else True

    def _discard(self, queue: Queue, message: Message, reason: str, why: str) -> bool:
        self.discarded += 1
        code = "CHN-1009" if queue.alternate is None else "CHN-1010"
        log.warning(
            '%s : Discarded message from queue "%s" (%s): %s',
            code,
            queue.name,
            reason,
            why,
        )
        return False

    def _copy(
        self, queue: Queue, message: Message, reason: str, detail: str | None, count: int
    ) -> Message:
        """The message as it goes to the alternate (see the module rules)."""
        annotations = {
            REASON: encode_symbol(reason),
            SOURCE: encode_value(queue.name),
            TIME: encode_timestamp(int(time.time() * 1000)),
            COUNT: encode_value(count),
        }
        if detail:
            annotations[DESCRIPTION] = encode_value(detail)
        if message.annotations_span is not None and delivery_delay(message) is not None:
            annotations[DELIVERY_DELAY] = encode_value(0)  # waited once (see the rules)
        sequence = message.sequence  # its number in its key, not in its bytes unless stored
        if sequence is not None and message.message_annotation(KEY_SEQUENCE) is None:
            annotations[KEY_SEQUENCE] = encode_value(sequence)  # as a delivery would add it
        header = None
        if message.ttl is not None:
            header = encode_header(
                message.durable,
                message.priority,
                None,
                message.first_acquirer,
                message.delivery_count,
            )
        return parse_message(with_annotations(message, annotations, header))

    def _targets(self, queue: Queue, message: Message) -> list[Queue]:
        """The queues the alternate gives ``message``, each of which admits it now."""
        name = queue.alternate
        assert name is not None
        key = message.subject or ""
        found = self.broker.alternate_queues(name, key, message, follow=True)
        admitted = []
        for each in found:
            try:
                each.check_admission(message)
            except BrokerError as exc:
                log.warning(
                    'CHN-1010 : queue "%s" refused a dead letter from "%s": %s',
                    each.name,
                    queue.name,
                    exc.description,
                )
                continue
            admitted.append(each)
        return admitted

    def _move(
        self,
        queue: Queue,
        message: Message,
        copies: list[tuple[Message, Queue]],
        written: Callable[[bool], None] | None,
    ) -> bool:
        """Store what must be stored, in one transaction with the removal, then join;
        whether the original waits for that (see :meth:`_commit_move`)."""
        stored = self._stored_copies(copies)

        def join() -> None:
            for each, target in copies:
                if not self._lands(queue, each, target):
                    self.broker.forget(each)

        deletion = self._deletion
        if deletion is not None:
            message.store_id = None  # the queue's rows go in the same transaction
            deletion.stored += stored
            deletion.joins.append(join)
        elif not stored:
            # It joins after the queue operation that gave it up: a full ring that evicts
            # into a queue whose ring evicts back must not re-enter it.
            self.broker.loop_hooks.later(join)
        else:
            return self._commit_move(queue, message, stored, copies, join, written)
        return False

    def _lands(self, queue: Queue, each: Message, target: Queue) -> bool:
        """Whether the copy ``each`` of a message from ``queue`` joins ``target``, numbered
        in its key by ``target`` (a stored copy was, as it was written). A refusal is
        logged: a copy that is not stored is lost then, and is counted as discarded; a
        stored one stays in the store, on ``target`` from the next start (its original's
        row may be gone already)."""
        if not self.broker.is_live(target):
            return False  # deleted meanwhile: what it held went with it
        try:
            if each.sequence is None:
                target.renumber(each)
            if target.enqueue(each, admitted=True):
                return True
        except BrokerError as exc:
            stored = each.store_id is not None
            if not stored:
                self.discarded += 1
            log.error(
                'CHN-1010 : queue "%s" refused a dead letter from "%s": %s; %s',
                target.name,
                queue.name,
                exc.description,
                "it stays in the store, on that queue from the next start"
                if stored
                else "it is discarded",
            )
            return stored  # a stored one is not forgotten: its row is all there is of it
        return False

    def _stored_copies(self, copies: list[tuple[Message, Queue]]) -> list[StoredMessage]:
        """The rows of the durable copies bound for durable queues (ids given now), each
        numbered in its key by its queue first, so its row carries the number (the key's
        number row goes with the pass's other writes, as a producer's does)."""
        store = self.broker.store
        if store is None:
            return []
        rows = []
        for each, target in copies:
            if target.keeps(each):
                each.store_id = store.next_id()
                numbered = target.renumber(each)
                if numbered is not None:
                    store.sequence(target.name, *numbered)
                rows.append(StoredMessage(each.store_id, target.name, each.data, time.time()))
        return rows

    def _commit_move(
        self,
        queue: Queue,
        message: Message,
        stored: list[StoredMessage],
        copies: list[tuple[Message, Queue]],
        join: Callable[[], None],
        then: Callable[[bool], None] | None,
    ) -> bool:
        """One store transaction: the copies in, the original out; then they join. The
        original waits on its queue for it, given ``then`` (told whether it was written);
        without, it left already (a ring's victim). If it cannot be written the original
        stays where the store has it (see the module rules). Whether it waits."""
        store = self.broker.store
        assert store is not None
        unit = Unit(enqueues=stored)
        removed: int | None = None  # the original's row, which the unit removes
        if message.store_id is not None and queue.persistent:
            if message.in_history:  # its history keeps the bytes: see Queue._forget
                unit.retires.append(message.store_id)
            else:
                removed = message.store_id
                unit.dequeues.append(removed)
                if then is None:  # it leaves its queue now, without its row
                    message.store_id = None
        waits = removed is not None and then is not None
        told = then if waits else None

        def written(error: BaseException | None) -> None:
            if error is not None:
                self._not_stored(queue, error, copies, removed is None, join, told)
                return
            self._stored_again()
            if told is not None:
                message.store_id = None  # its row went in this transaction
            join()
            if told is not None:
                told(True)

        unit.done = written
        store.commit(unit)
        return waits

    def _not_stored(
        self,
        queue: Queue,
        error: BaseException,
        copies: list[tuple[Message, Queue]],
        unstored: bool,
        join: Callable[[], None],
        then: Callable[[bool], None] | None,
    ) -> None:
        """A move the store could not write did not happen (see the module rules): the
        copies of an ``unstored`` original join unstored; a stored one waiting on its
        queue (``then``) goes back in place with its row; a ring's victim stays in the
        store only. Logged once an episode."""
        for each, _ in copies:
            each.store_id = None
        if unstored:
            join()
        elif then is not None:
            then(False)
        if self._failing:
            log.debug("dead letters from '%s' could not be stored: %s", queue.name, error)
            return
        self._failing = True
        log.error(
            "dead letters from '%s' could not be stored (%s): each message stays where it "
            "was, a ring's victim in the store only, until the next start; moves that fail "
            "after this one are not logged until one is stored again",
            queue.name,
            error,
        )

    def _stored_again(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("dead letters are being stored again")
