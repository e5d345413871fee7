"""Moving and copying messages from one queue to another: Broker-J's ``moveMessages`` and
``copyMessages`` queue operations (``Queue.moveMessages``/``copyMessages``, run as one
transaction each: ``MoveMessagesTransaction``, ``CopyMessagesTransaction``).

Rules this module owns:

* **Which messages**: those at the queue positions asked for (none: any) that the JMS
  selector selects (none: all), oldest first, at most the limit, as for deleteMessages
  (:mod:`proton_broker.management_messages`). A move takes only messages nobody holds
  (available ones, and held ones not valid yet), as Broker-J's move acquires each one; a
  copy takes every message on the queue, those consumers hold too, which stay with them.
* **The destination** is another queue. When it has a size limit and an overflow policy
  (ring, reject, flow to disk, producer flow control), the operation stops before the
  first message that would take it over the limit, counting the messages already on their
  way (Broker-J's ``QueueSizeLimitRespectingTransaction``): nothing is refused or evicted
  because of a move. A destination whose policy is ``none`` enforces no limit, and takes
  every message (Broker-J's ``isUnderfull``). A message the destination refuses as it
  joins (a duplicate it has seen, a message its ``qpid.filter`` does not select) goes back
  on the source, at its end, numbered there afresh (a copy is dropped), and is not in the
  answer. Its row, if the move wrote one, names the destination: a restart finds it there.
  A moved message that joins neither stays in the store when the move wrote it (the next
  start finds it on the destination), logged; it is never deleted once its original's row
  is gone.
* **Each message lands as its producer sent it**: the same bytes, a record of its own on
  the destination with that queue's next number, a delivery count from 0, its arrival time
  kept (so a time to live goes on running). A destination with a key gives it the key's
  next number (``x-opt-sequence``), whatever number it carries: the one it had on the
  source (a stored message's bytes carry it) or its producer's, which the source checked,
  is no producer's choice for the destination (History.renumber; qpidd's ``reroute``
  routes a message as a new delivery, and its queue numbers every message it is given).
  A message the destination stores is numbered as it is written, so its row carries the
  number; one it does not, as it joins.
* **Nothing is lost or doubled**: one store transaction writes the durable messages bound
  for a durable destination and, for a move, removes those a durable source stored (those
  its history still keeps stay stored, as history). The messages join the destination once
  that is on disk, and the answer waits for them, as Broker-J answers after its
  transaction; meanwhile a move's messages stay on the source, out of consumers' reach. A
  transaction that cannot be written leaves the store as it was, and a move did not happen:
  the messages go back to their own positions on the source, as released messages do, each
  with its stored row (where a restart finds them), and the answer is an error saying so
  that lists none moved. The copies of a copy still join the destination, in memory only.
* At most :data:`MAX_TRANSFER` messages a request (Broker-J has no bound): one request
  holds the broker's loop while it selects and copies, and its store transaction holds
  every message it writes. A tool repeats the request to move more.
* The answer is the moved or copied messages' positions on the source, in order (Broker-J
  answers their message ids, and also lists the one that found the destination full: this
  broker lists only what moved).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from proton_broker.codec.sections import parse_message
from proton_broker.errors import BrokerError
from proton_broker.message import Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.overflow import Thresholds
from proton_broker.queues.ports import MessageFilter
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import NONE
from proton_broker.store.base import StoredMessage, Unit

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.moving")

MAX_TRANSFER = 10_000  # messages one moveMessages or copyMessages takes at most
Done = Callable[[list[int], BaseException | None], None]  # (positions moved, store error)


class Transfer:
    """One move or copy from ``source`` to ``destination``: select, store, join."""

    def __init__(self, broker: Broker, source: Queue, destination: Queue, move: bool) -> None:
        self.broker = broker
        self.source = source
        self.destination = destination
        self.move = move
        self.unit = Unit()
        self._records: list[Message] = []  # as each lands on the destination
        self._rows: list[int | None] = []  # each one's row on the source the unit removes
        # A move's originals, on the source until the move is written (Queue.take_for_move).
        self._originals: list[Message] = []
        self._entries: list[Entry] = []
        self._count = 0  # on their way to the destination, for its limits
        self._bytes = 0

    def run(
        self, numbers: set[int] | None, matches: MessageFilter | None, limit: int, done: Done
    ) -> None:
        """Take the messages (see the module rules), then ``done(positions, error)`` once
        they are on the destination (at once when nothing is stored)."""
        limit = MAX_TRANSFER if limit < 0 else min(limit, MAX_TRANSFER)
        positions = self.source.select_messages(
            numbers, matches, limit, self._take, self._entries if self.move else None
        )
        landing = list(zip(positions, self._records, strict=True))
        unit = self.unit
        if not (unit.enqueues or unit.dequeues):
            self._join(landing, done, None)
            return
        store = self.broker.store
        assert store is not None
        unit.done = lambda error: self._join(landing, done, error)
        store.commit(unit)

    def _take(self, message: Message) -> bool:
        """Whether ``message`` goes (its bytes in memory now): False stops the walk."""
        if not self._within_limits(message):
            return False
        landing = parse_message(bytes(message.data))  # a record of its own, as sent
        landing.arrival = message.arrival
        self._count += 1
        self._bytes += landing.size
        store = self.broker.store
        if store is not None and self.destination.keeps(landing):
            landing.store_id = store.next_id()
            # numbered in its key before it is written, so its row carries the number
            numbered = self.destination.renumber(landing)
            if numbered is not None:
                self.unit.sequences.append((self.destination.name, *numbered))
            self.unit.enqueues.append(
                StoredMessage(landing.store_id, self.destination.name, landing.data, time.time())
            )
        # removed in this transaction, not by the queue; a row its history keeps stays, and
        # the queue retires it (history only)
        stored = message.store_id is not None and self.source.persistent
        row = None
        if self.move and stored and not message.in_history:
            row = message.store_id
            self.unit.dequeues.append(row)  # type: ignore[arg-type] # stored
        if self.move:
            self._originals.append(message)
        self._records.append(landing)
        self._rows.append(row)
        return True

    def _within_limits(self, message: Message) -> bool:
        """Broker-J's rule: a destination with a limit it enforces takes no more than it has
        room for."""
        destination = self.destination
        if destination.settings.overflow_policy == NONE:
            return True
        limit = Thresholds(destination.settings.max_count, destination.settings.max_size)
        depth = destination.depth + self._count + 1
        return not limit.over(depth, destination.bytes + self._bytes + message.size)

    def _join(
        self, landing: list[tuple[int, Message]], done: Done, error: BaseException | None
    ) -> None:
        """The messages join the destination (written, or not if ``error``: then a move's
        go back in place on the source, see :meth:`_originals_go`)."""
        if self.move:
            self._originals_go(error is None)
        joined = []
        for position, message in landing:
            if error is not None:
                message.store_id = None
                if self.move:
                    continue  # the original is back in its place
            if self._lands(message, self.destination):
                joined.append(position)
            elif self.move and self._lands(message, self.source):
                continue  # back on the source
            elif self.move and message.store_id is not None:
                # Its move is written: the original's row is gone, and this row is all
                # there is of it (a restart finds it on the destination).
                log.error(
                    'a message moved from "%s" to "%s" joined neither; it stays in the store, '
                    "on its destination from the next start",
                    self.source.name,
                    self.destination.name,
                )
            else:
                self.broker.forget(message)  # a copy the destination would not take
        done(joined, error)

    def _originals_go(self, written: bool) -> None:
        """A move's originals leave the source, ``written`` (their rows went in the move's
        transaction); not written, the move did not happen: each goes back to its own
        position on the source with its row, as a restart would find it."""
        for original, row, entry in zip(self._originals, self._rows, self._entries, strict=True):
            if written and row is not None:
                original.store_id = None
            self.source.moved(entry, written)

    def _lands(self, message: Message, queue: Queue) -> bool:
        """Whether ``message`` joins ``queue`` (still the broker's, and taking it), numbered
        in its key by ``queue`` (a stored landing was, as it was written)."""
        if not self.broker.is_live(queue):
            return False
        try:
            if message.sequence is None or queue is not self.destination:
                message.sequence = None  # back on the source: the source's number
                queue.renumber(message)
            return queue.enqueue(message, now=message.arrival, admitted=True)
        except BrokerError as exc:
            log.warning('"%s" refused a message moved to it: %s', queue.name, exc.description)
            return False
