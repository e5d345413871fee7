"""Link endpoints: producers (links the broker receives on) and consumers (links it sends on).

This is the broker's hot path. Transfers, dispositions and credit are handled here straight
from Proton's C engine through cffi (``cproton_ffi.lib``), without building Python
``Event``/``Delivery`` wrappers: that per-event wrapping is what makes a plain reactor
broker slow (see docs/performance.md). Everything here runs on the event-loop
thread, one call per engine event, and the engine objects (links, deliveries) are used only
while the owning state object holds a reference to the link's Python wrapper, so their
memory cannot be reused underneath us.

Rules owned here:
* a producer is granted ``window`` credits and topped up when it falls below half;
* a transfer is accepted only after the message is on its queue; a malformed transfer
  detaches the link with ``amqp:decode-error`` and is not stored;
* a message the broker refuses (a full reject queue, an unknown relay address) is settled
  ``rejected`` with the error, unless the producer's source lists outcomes without
  ``amqp:rejected:list``: that producer cannot be told "rejected", so its link is detached
  with the error instead (as Broker-J does) and the transfer is left unsettled. A source
  with no outcomes list (as Proton Python senders attach) gets ``rejected``, which such
  clients understand, where Broker-J would detach them too;
* producer flow control (the queue's :class:`~proton_broker.queues.queue.FlowObserver`):
  when the queue stops its producers, each producer link attached to it is sent
  ``flow(link-credit=0, drain=true)``, as Broker-J does. Proton cannot lower a receiver's
  credit, but a negative grant (``pn_link_flow(link, -credit)``) brings the next flow frame
  to zero; the drain flag is cleared again before credit is restored. Messages that arrive
  while the queue is stopped (in flight, or through the anonymous relay, whose credit serves
  every queue) are stored, and their settlement is withheld until the queue resumes (the
  C++ broker's shape). Nothing is refused or lost. The broker's memory budget
  (queues/budget.py) withdraws every producer's credit the same way;
* a producer may not ignore its credit: Proton counts a receiver's credit down past zero
  without refusing anything, so while credit is withdrawn (or was never granted) each
  transfer is checked (:meth:`ProducerLink._without_credit`: a method swapped in only
  then, so the plain path pays nothing). The transfers in flight when credit was
  withdrawn (the credit the link had then) are taken; one more detaches the link with
  ``amqp:link:transfer-limit-exceeded`` (AMQP 1.0 2.8.15) and is not stored, nor what
  follows it;
* the frames of messages still arriving (Proton holds them until the last) are counted,
  all links together, so that unfinished messages on many links cannot grow the broker
  without bound (each is bounded by ``broker.max_message_size`` alone): they may hold up
  to ``broker.max_memory`` besides the queued messages. A frame that takes them past it is
  refused, ``amqp:resource-limit-exceeded`` naming the key, and its link detached. They
  are kept apart from the budget's count of queued messages on purpose: a full budget
  withdraws credit, and a Proton client then sends no more frames of a message it has
  begun, so counting them there could hold every producer stopped for good (neither Qpid
  broker bounds them together);
* a consumer never receives more than its credit; a drain is answered as soon as the
  queue has nothing more the consumer may take, never while its connection's backlog holds
  it (amqp/output.py): a drain answered with credit left means "nothing more now";
* deliveries, browsed (``copy``) ones too, are sent unsettled unless the receiver asked for
  ``snd-settle-mode = settled``, as qpidd (``Outgoing.cpp``) on a queue and Broker-J
  (``ConsumerTarget_1_0``) everywhere (qpidd pre-settles on its exclusive subscription
  queues unless ``unsettled`` is asked for: a listed difference); whatever outcome a
  browser gives settles the delivery and changes nothing on the queue (nothing removed,
  released or counted as redelivered);
* a consumer's unsettled deliveries go back to the queue when its link goes away;
* a producer whose queue or exchange was deleted stays attached until its next transfer,
  which is left unsettled while the link is detached with ``amqp:resource-deleted``
  (qpidd's ``IncomingToQueue::handle``); a transfer under a transaction that the broker
  refuses is answered inside its transactional state (transactions.py has the rest).
"""

from __future__ import annotations

import copy
import itertools
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from cproton_ffi import ffi, lib
from proton import Data, Delivery, Described, Link

from proton_broker.amqp import engine
from proton_broker.amqp.conditions import (
    DECODE_ERROR,
    RESOURCE_DELETED,
    RESOURCE_LIMIT_EXCEEDED,
    allows_rejected,
    close_link,
    condition_for,
    refuse_beyond_credit,
    refuse_oversized,
    reject,
)
from proton_broker.amqp.coordinator import (
    TRANSACTIONAL_STATE,
    accepted_in,
    known_transaction,
    rejected_in,
    transaction_of,
    transactional_outcome,
)
from proton_broker.amqp.engine import ABORTED, PARTIAL
from proton_broker.amqp.output import CHECK_EVERY, Backlog, OutputGate
from proton_broker.amqp.terminus import capabilities_of
from proton_broker.codec.encode import (
    KEYED_SECTION_PREFIX,
    NUMBER_PAIR,
    NUMBER_SECTION_PREFIX,
    encode_header,
    keyed_section,
    number_section,
    with_sequence_number,
    with_stamped_number,
)
from proton_broker.codec.sections import parse_message
from proton_broker.codec.values import DecodeError
from proton_broker.errors import (
    BrokerError,
    MalformedMessage,
    NotFound,
    ResourceLimitExceeded,
    UnknownDestination,
)
from proton_broker.exchanges.exchange import ExchangeAddress, routing_key
from proton_broker.message import Header, Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.queue import Queue
from proton_broker.security.basic import ANONYMOUS
from proton_broker.transactions import Acknowledgement, Transaction, Transactions

DISCARD_UNROUTABLE = "DISCARD_UNROUTABLE"

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.amqp")

PN_ACCEPTED = lib.PN_ACCEPTED
PN_REJECTED = lib.PN_REJECTED
PN_RELEASED = lib.PN_RELEASED
PN_MODIFIED = lib.PN_MODIFIED

# The engine functions the hot path calls, bound once (a module global is cheaper to reach
# than an attribute of the cffi ``lib``).
_pending = lib.pn_delivery_pending
_new_delivery = lib.pn_delivery
_settled = engine.settled
_update = lib.pn_delivery_update
_settle = engine.settle
_remote_state = engine.remote_state
_link_credit = lib.pn_link_credit
_link_flow = lib.pn_link_flow
# A transfer's steps (engine.py), compiled where they were built.
_transfer_size, _take, _accept, _send_with = (
    engine.transfer_size,
    engine.take,
    engine.accept,
    engine.send_with,
)
Tally = engine.Tally
_number_section = number_section
_keyed_section = keyed_section
_TERMINAL = frozenset((PN_ACCEPTED, PN_REJECTED, PN_RELEASED, PN_MODIFIED))
_U64 = struct.Struct(">Q")

_ids = itertools.count(1)


def _staged(dlv: Any, txn: Transaction, copies: Iterable[tuple[Message, Queue]]) -> None:
    """Stage every copy in ``txn``, or none: a refusal takes back the copies staged before
    it (and is answered by ProducerLink._refuse)."""
    txn.stage((queue, message) for message, queue in copies)


def _header_now(entry: Entry, sent: Header) -> bytes | None:
    """The header a delivery of ``entry`` carries, where it is not the one its producer
    sent (None: that one): the entry's own delivery count (as qpidd sends it), a time to
    live less the time the message has spent here (as both Qpid brokers send it), and
    ``first-acquirer`` true only if the producer said so and no delivery of it has failed
    here (a count above 0: qpidd sends false once a message was acquired before). A
    transaction's message has been here since it was received, not since its commit."""
    ttl = sent.ttl
    count = entry.delivery_count
    if ttl is None and count == sent.delivery_count and not (count and sent.first_acquirer):
        return None
    if ttl is not None:
        extras = entry.message.extras  # Extras.received: a transaction's message
        since = entry.arrival if extras is None or extras.received is None else extras.received
        ttl = max(0, ttl - int((time.time() - since) * 1000))
    first = sent.first_acquirer and count == 0
    return encode_header(sent.durable, sent.priority, ttl, first, count)


def _rejection(dlv: Any) -> str | None:
    """The description of the error a consumer's ``rejected`` outcome carries, if any."""
    condition = lib.pn_disposition_condition(lib.pn_delivery_remote(dlv))
    if condition == ffi.NULL or not lib.pn_condition_is_set(condition):
        return None
    name = lib.pn_condition_get_name(condition)
    description = lib.pn_condition_get_description(condition)
    return _error_text(
        *(None if text == ffi.NULL else ffi.string(text) for text in (name, description))
    )


def _rejection_in(fields: list[Any]) -> str | None:
    """The same for a ``rejected`` outcome given under a transaction, whose fields Proton
    leaves undecoded: its ``error``, an ``amqp:error:list`` (condition, description, info)."""
    error = fields[0] if fields else None
    if not isinstance(error, Described) or not isinstance(error.value, list):
        return None
    condition, description = (list(error.value) + [None, None])[:2]
    return _error_text(condition, description)


def _error_text(condition: object, description: object) -> str | None:
    """``condition: description`` (either alone if the other is missing), as a rejected
    message's ``x-opt-dead-letter-description`` gives it (deadletters.py)."""
    parts = [
        text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        for text in (condition, description)
        if text is not None
    ]
    return ": ".join(parts) or None


def _encoded(data: Data) -> bytes | None:
    """What ``data`` holds (a modified outcome's message-annotations), encoded; None if
    nothing (Proton hands an empty one when the outcome has none)."""
    return data.encode() or None


class ProducerLink:
    """A link on which a client sends messages to a queue (or, anonymous, to any address)."""

    def __init__(
        self,
        link: Link,
        broker: Broker,
        queue: Queue | None,
        window: int,
        user: str = ANONYMOUS,
        exchange: ExchangeAddress | None = None,
    ) -> None:
        self.link = link
        self.impl = link._impl
        self.broker = broker
        self.queue = queue  # None: an exchange, or the anonymous relay (by each 'to')
        self.exchange = exchange  # the exchange (and default subject) this link sends to
        self.origin = link.connection._impl  # its connection (subscribers' no-local filter)
        self._locals = broker.no_local  # queues some connections may not send to (no-local)
        # Broker-J's DISCARD_UNROUTABLE target capability: drop unroutable messages silently
        # even on an exchange that rejects them.
        self.discards_unroutable = DISCARD_UNROUTABLE in capabilities_of(link.remote_target)
        self.window = window
        self.closed = False
        self._used = 0  # transfers since the last credit top-up
        self._counted = 0  # transfers before the last top-up (see received)
        self.may_reject = allows_rejected(link)
        # Transfers waiting for their own or an earlier durable message's write.
        self._pending: deque[_Pending] = deque()
        self.stopped = False  # our queue's flow control has withdrawn our credit
        self._held: dict[Queue, list[Delivery]] = {}  # settlements withheld, by queue
        self.user = user  # who sends: the relay asks the ACL per message (security/access.py)
        self._may_send = broker.access.send if broker.access.enabled else None
        self.max_size = broker.config.broker.max_message_size  # advertised on the attach
        link.max_message_size = self.max_size
        self._budget = broker.loop_hooks.budget  # full: no credit (see memory_full)
        # While our credit is withdrawn: how many transfers may still come (those in flight
        # then, see _without_credit); None while we grant credit.
        self._allowance: int | None = None
        self._unfinished = 0  # bytes of the message arriving in frames, counted in the budget

    def start(self) -> None:
        queue = self.queue
        if queue is not None:
            queue.watch_flow(self)  # flow control may come later (management's UPDATE)
            if queue.flow_stopped:
                self.stopped = True  # no credit until the queue resumes
        if self.stopped or self._budget.full:
            self._no_credit(0)  # none granted: none may come
        else:
            _link_flow(self.impl, self.window)

    def on_delivery(self, dlv: Any) -> None:  # noqa: C901 - the transfer hot path, measured
        """A transfer arrived (or progressed): store complete messages and settle them."""
        size = _transfer_size(dlv)
        if size < 0:
            if size == PARTIAL:  # wait for the last frame; Proton buffers the partial message
                pending = _pending(dlv)
                if pending > self.max_size:  # ...up to the largest we accept
                    self._refuse_oversized(dlv)
                else:
                    self._arriving(dlv, pending)
            elif size == ABORTED:
                self._arrived()
                _settle(dlv)
            return
        if size > self.max_size:
            self._refuse_oversized(dlv)
            return
        try:
            message = parse_message(_take(self.impl, size))
        except DecodeError as exc:
            self._refuse_malformed(dlv, str(exc))
            return
        try:
            queue = self.queue
            if queue is None:  # an exchange, or the relay: a queue or an exchange
                queue = self.exchange or self._relay_target(message)
            if isinstance(queue, ExchangeAddress):
                self._route(dlv, message, queue)
            elif self._locals and self.broker.is_local(queue, self.origin):
                log.debug("dropped a local message for '%s' (no-local)", queue.name)
                self._dropped(dlv)  # as qpidd's Queue::accept drops it
            elif _remote_state(dlv) == TRANSACTIONAL_STATE:
                txn = transaction_of(self.broker.transactions, dlv)[0]
                _staged(dlv, txn, ((message, queue),))
                accepted_in(Delivery.wrap(dlv), txn)
            # queue.keeps(message), inlined: every message asks, and the plain one is
            # answered by two attribute reads
            elif (
                self._pending or queue.keeps_all or (message.header.durable and queue.keeps_durable)
            ):
                self._in_order(dlv, [(message, queue)], single=True)
            else:
                queue.enqueue(message)
                self._accepted(dlv, queue)
        except UnknownDestination as exc:
            self._unroutable(dlv, exc)
        except BrokerError as exc:
            self._refuse(dlv, exc)
        # Credit in batches: top the window up once half of it has been used.
        self._used += 1
        if self._used >= self.window >> 1:
            self._top_up()

    def _unroutable(self, dlv: Any, exc: UnknownDestination) -> None:
        """A relayed message whose ``to`` names nothing: refused, unless the sender's
        target asked for ``DISCARD_UNROUTABLE``: then accepted and dropped, as Broker-J's
        ``AnonymousRelayDestination`` does (qpidd drops every such message)."""
        if not self.discards_unroutable:
            self._refuse(dlv, exc)
            return
        log.debug("dropped on link '%s' (DISCARD_UNROUTABLE): %s", self.link.name, exc)
        self._dropped(dlv)

    def _dropped(self, dlv: Any) -> None:
        """A message no queue takes, accepted and dropped (an unroutable one on an
        exchange, or DISCARD_UNROUTABLE): ``accepted``, inside its transactional state if it
        was sent under a transaction (where nothing is staged for it)."""
        if _remote_state(dlv) == TRANSACTIONAL_STATE:
            accepted_in(Delivery.wrap(dlv), transaction_of(self.broker.transactions, dlv)[0])
        else:
            self._accepted(dlv, None)

    def _relay_target(self, message: Message) -> Queue | ExchangeAddress:
        """Where a message on the anonymous relay goes (a queue is checked against the ACL
        here, an exchange in _route)."""
        target = self.broker.relay_target(message.to)
        if self._may_send is not None and isinstance(target, Queue):
            self._may_send(self.user, target.name, target.settings)
        return target

    def _route(self, dlv: Any, message: Message, address: ExchangeAddress) -> None:
        """Send ``message`` through an exchange: a copy to each queue it routes to, all of
        them or none (every queue is asked first, as Broker-J does); accepted once every
        copy is on its queue (durable copies: written). One that reaches no queue is
        accepted and dropped, counted by the exchange (qpidd)."""
        exchange = address.exchange
        if exchange.deleted:  # only a link attached to it can hold a deleted exchange
            self._detach_gone(f"exchange '{exchange.name}' was deleted")
            return
        key = routing_key(message, exchange.name, address.subject)
        if self._may_send is not None:
            self.broker.access.publish(self.user, exchange.name, key)
        queues = self.broker.route(exchange, key, message)
        if not queues and exchange.rejects_unroutable and not self.discards_unroutable:
            raise NotFound(f"Unknown destination '{key}'")  # Broker-J's words
        queues = self.broker.without_local(queues, self.origin)
        if not queues:  # unroutable, or routed only to queues keeping it out (no-local)
            self._dropped(dlv)
            return
        copies = [(message if i == 0 else copy.copy(message), q) for i, q in enumerate(queues)]
        if _remote_state(dlv) == TRANSACTIONAL_STATE:
            txn = transaction_of(self.broker.transactions, dlv)[0]
            _staged(dlv, txn, copies)
            accepted_in(Delivery.wrap(dlv), txn)
            return
        for each, queue in copies:
            queue.check_admission(each)
        if self._pending or any(q.keeps(each) for each, q in copies):
            self._in_order(dlv, copies, single=False)
            return
        for each, queue in copies:
            queue.enqueue(each, admitted=True)
        self._accepted(dlv, _stopped(queues))

    @property
    def received(self) -> int:
        """Transfers taken on this link so far (counted per credit top-up, not per
        message, so that the count costs the hot path nothing)."""
        return self._counted + self._used

    def _top_up(self) -> None:
        """Half the window is used: grant credit back up to the window (unless flow
        control has stopped us, or we are gone)."""
        self._counted += self._used
        self._used = 0
        top_up = self.window - _link_credit(self.impl)
        if top_up > 0 and not self.stopped and not self.closed and not self._budget.full:
            _link_flow(self.impl, top_up)
            if self._allowance is not None:
                self._credit_back()

    def _accepted(self, dlv: Any, queue: Queue | None) -> None:
        """The message is on ``queue``: settle it accepted (or hold that, flow control)."""
        if queue is not None and queue.flow_stopped and not _settled(dlv):
            self._hold(dlv, queue)
            return
        _accept(dlv)

    # ---- durable messages: accepted only once on disk, in the order sent ----------------

    def _in_order(self, dlv: Any, copies: list[tuple[Message, Queue]], single: bool) -> None:
        """Put the transfer's copies on their queues now, as qpidd does, and write the
        durable ones, each with the number its queue gave it; settle the transfer once
        those writes are done and every transfer before it on this link is settled (a
        message behind a durable one waits for its answer, stored or not). ``copies``: one
        message for its queue (``single``: admitted as it joins, and refusals name the
        queue), or the copies an exchange routed (admitted already)."""
        joined = self._join(copies, single)
        item = _Pending(dlv, joined, copies[0][1] if single else None, self._drain_pending)
        self._pending.append(item)
        item.waiting = 1  # held until every write has started: a store may finish at once
        for each, target in joined:
            if each.store_id is not None:
                item.waiting += 1
                self.broker.persist(each, target, item)  # the item is the write's completion
        item(None)

    def _join(
        self, copies: list[tuple[Message, Queue]], single: bool
    ) -> list[tuple[Message, Queue]]:
        """Each copy joins its queue (a durable one for a durable queue with the id it is
        written under); the copies that joined (a duplicate does not: it is accepted and
        dropped). A refusal takes back the copies that joined before it, and is raised."""
        joined: list[tuple[Message, Queue]] = []
        for each, target in copies:
            writing = target.keeps(each)
            each.store_id = self.broker.store_id() if writing else None
            try:
                if target.enqueue(each, admitted=not single, writing=writing):
                    joined.append((each, target))
                    continue
            except BrokerError:
                each.store_id = None
                for message, queue in joined:
                    message.store_id = None  # not written yet: nothing to remove
                    self.broker.withdraw(message, queue)
                raise
            each.store_id = None  # a duplicate
        return joined

    def _drain_pending(self) -> None:
        """Settle the transfers at the head whose writes are done, in order."""
        pending = self._pending
        while pending and not pending[0].waiting:
            item = pending.popleft()
            for each, target in item.copies:
                self.broker.write_done(each, target, item.error)
            if item.error is not None:
                self._not_stored(item)
            elif item.queue is not None:
                self._settle_one(item, item.queue)
            elif not self.closed:
                live = [queue for _, queue in item.copies if self.broker.is_live(queue)]
                self._accepted(item.dlv, _stopped(live))

    def _settle_one(self, item: _Pending, queue: Queue) -> None:
        if not self.broker.is_live(queue):  # deleted while this was written
            self._settle_refused(item.dlv, NotFound(f"queue '{queue.name}' was deleted"))
        elif not self.closed:
            self._accepted(item.dlv, queue)

    def _not_stored(self, item: _Pending) -> None:
        """The write failed: the transfer is refused (its copies were taken back from
        their queues, Broker.write_done, unless a consumer has one already: it goes on, not
        stored, and the producer may send it again, at least once)."""
        name = f"'{item.queue.name}'" if item.queue is not None else "its queues"
        self._settle_refused(
            item.dlv, ResourceLimitExceeded(f"message not stored on {name}: {item.error}")
        )

    def _settle_refused(self, dlv: Any, exc: BrokerError) -> None:
        if not self.closed:
            self._refuse(dlv, exc)

    def _refuse(self, dlv: Any, exc: BrokerError) -> None:
        """The broker did not take the message: say ``rejected``, or, if the producer's
        source does not allow that outcome, detach (see the module rules). A transfer sent
        under a transaction is answered ``rejected`` inside its transactional state, and
        leaves the transaction able only to roll back when the producer cannot act on the
        answer: it sent the transfer settled, or its link is detached (Broker-J's
        ``setRollbackOnly``, transactions.py)."""
        txn = known_transaction(self.broker.transactions, dlv)
        if self.may_reject:
            if txn is None:
                reject(Delivery.wrap(dlv), exc)  # e.g. an unknown 'to', a full queue
                return
            if _settled(dlv):
                txn.refused = exc.description
            rejected_in(Delivery.wrap(dlv), txn, exc)
            return
        if txn is not None:
            txn.refused = exc.description
        name, description, info = condition_for(exc)
        log.info(
            "detaching producer '%s' (its source lists no rejected outcome): %s %s",
            self.link.name,
            name,
            description,
        )
        self._stop_storing()
        close_link(self.link, name, description, info)

    def _arriving(self, dlv: Any, pending: int) -> None:
        """A message arriving in frames has ``pending`` bytes so far: they count with the
        other unfinished ones; a frame that takes them past the limit is refused (see the
        module rules)."""
        budget = self._budget
        budget.unfinished += pending - self._unfinished
        self._unfinished = pending
        if "on_delivery" not in self.__dict__:  # its last frame is seen by _completing
            self.on_delivery = self._completing  # type: ignore[method-assign]
        if budget.unfinished > budget.limit:
            description = (
                f"a message arriving in frames ({pending} bytes so far) would take the "
                f"unfinished messages of every producer past broker.max_memory "
                f"({budget.limit} bytes)"
            )
            log.warning("detaching producer '%s': %s", self.link.name, description)
            reject(Delivery.wrap(dlv), ResourceLimitExceeded(description))
            self._stop_storing()
            close_link(self.link, RESOURCE_LIMIT_EXCEEDED, description)

    def _completing(self, dlv: Any) -> None:
        """``on_delivery`` while a message arrives in frames, so that the plain path pays
        nothing for them: its last frame (or its abort) ends its count (:meth:`_arrived`),
        then it is handled as any transfer. While credit is withdrawn
        :meth:`_without_credit` stands in for this, and does the same."""
        if _transfer_size(dlv) != PARTIAL:
            self._arrived()
        ProducerLink.on_delivery(self, dlv)

    def _arrived(self) -> None:
        """The message that was arriving in frames is complete, aborted or refused: its
        frames stop counting (a complete one counts as it joins its queue)."""
        self._budget.unfinished -= self._unfinished
        self._unfinished = 0
        if self.__dict__.get("on_delivery") == self._completing:
            del self.on_delivery

    def _stop_storing(self) -> None:
        """We are detaching this link: transfers that come after, which the client sent
        before it saw our detach, are read and dropped, neither stored nor settled (the
        client was told the link is gone, and may send them again elsewhere). So qpidd
        ignores the deliveries of a link it closed; Broker-J ends the session."""
        if self._unfinished:
            self._arrived()
        self.closed = True
        self.on_delivery = self._discard  # type: ignore[method-assign]

    def _discard(self, dlv: Any) -> None:
        """A transfer after we detached: read (so the session window moves on), not stored,
        not settled."""
        size = _transfer_size(dlv)
        if size >= 0 or size == ABORTED:
            self._skip(dlv)

    def _skip(self, dlv: Any) -> None:
        """Read a complete transfer's bytes without keeping them."""
        _take(self.impl, _pending(dlv))

    # ---- our queue was deleted --------------------------------------------------------------

    def target_deleted(self) -> None:
        """Our queue was deleted: the link stays attached until the producer's next complete
        transfer, which detaches it with ``amqp:resource-deleted`` naming the queue and is
        left unsettled (qpidd's ``IncomingToQueue::handle``; Broker-J detaches at once). So a
        program that keeps one sender per reply address (Proton's ``server`` examples) is not
        told about a client that went away unless it sends there again. Settlements held for
        the queue's flow control are given (those messages were stored, then went with the
        queue) and credit is restored, so that next transfer can come."""
        queue = self.queue
        assert queue is not None
        self.flow_resumed(queue)
        queue.unwatch_flow(self)
        self.on_delivery = self._detach_deleted  # type: ignore[method-assign]

    def _detach_deleted(self, dlv: Any) -> None:
        size = _transfer_size(dlv)
        if size == ABORTED:
            _settle(dlv)
        if size < 0:
            return
        _take(self.impl, size)
        assert self.queue is not None
        self._detach_gone(f"queue '{self.queue.name}' was deleted")

    def _detach_gone(self, description: str) -> None:
        """The node this link sends to was deleted: detach with ``amqp:resource-deleted``,
        the transfer that found it gone left unsettled (see target_deleted)."""
        log.info("detaching producer '%s': %s", self.link.name, description)
        self._stop_storing()
        close_link(self.link, RESOURCE_DELETED, description)

    def _hold(self, dlv: Any, queue: Queue) -> None:
        """Withhold the settlement of a message stored on a flow-stopped queue."""
        held = self._held.get(queue)
        if held is None:
            held = self._held[queue] = []
            if queue is not self.queue:
                queue.watch_flow(self)  # the anonymous relay: watch while we hold
        held.append(Delivery.wrap(dlv))  # the wrapper keeps the delivery alive

    # ---- producer flow control: the queue's FlowObserver ----------------------------------

    def flow_stopped(self, queue: Queue) -> None:
        """Withdraw our credit: ``flow(link-credit=0, drain=true)``, as Broker-J sends."""
        if queue is not self.queue or self.closed or self.stopped:
            return
        self.stopped = True
        self._withdraw_credit()

    def _withdraw_credit(self) -> None:
        impl = self.impl
        credit = _link_credit(impl)
        lib.pn_link_set_drain(impl, True)
        if credit >= 0:  # below zero: withdrawn already, and transfers came in flight
            _link_flow(impl, -credit)  # Proton only adds: a negative grant zeroes it
        self._no_credit(credit)

    # ---- a producer that ignores its credit ------------------------------------------------

    def _no_credit(self, in_flight: int) -> None:
        """Our credit is withdrawn, or was never granted: from now on, each transfer is
        checked against it (see the module rules). ``in_flight``: the credit the link had,
        the transfers that may still come (a second withdrawal keeps the first's count)."""
        if self._allowance is None:
            self._allowance = max(0, in_flight)
            self.on_delivery = self._without_credit  # type: ignore[method-assign]

    def _credit_back(self) -> None:
        """Credit is granted again: transfers are taken without the check (unless the link
        has gone another way since: detached, or its queue deleted)."""
        self._allowance = None
        if self.__dict__.get("on_delivery") == self._without_credit:
            del self.on_delivery
            if self._unfinished:  # a message still arriving in frames (see _arriving)
                self.on_delivery = self._completing  # type: ignore[method-assign]

    def _without_credit(self, dlv: Any) -> None:
        """A transfer while our credit is withdrawn: taken as any other while it is one of
        those in flight when it was; one more is over the credit the client was given."""
        allowance = self._allowance or 0
        if _link_credit(self.impl) > -allowance:  # Proton counts each taken one down
            if self._unfinished and _transfer_size(dlv) != PARTIAL:
                self._arrived()  # the last frame of a message that came in many
            ProducerLink.on_delivery(self, dlv)
            return
        self._exceeded(dlv, allowance)

    def _exceeded(self, dlv: Any, allowance: int) -> None:
        """A transfer beyond the link's credit: the link is detached with
        ``amqp:link:transfer-limit-exceeded``; the transfer is read and dropped, unsettled,
        as are those after it (_stop_storing)."""
        if self._budget.full:
            why = self._budget.why_full()
        else:
            name = self.queue.name if self.queue is not None else "?"
            why = f"queue '{name}' stops its producers (flow control)"
        self._stop_storing()
        refuse_beyond_credit(self.link, why, allowance)
        self._discard(dlv)

    def memory_full(self, full: bool) -> None:
        """The broker's memory budget filled (withdraw our credit, as for a queue's flow
        control) or has room again (credit back, unless our queue still stops us)."""
        if self.closed or self.stopped:
            return  # the queue's flow control holds our credit back already
        if full:
            self._withdraw_credit()
        else:
            lib.pn_link_set_drain(self.impl, False)
            self._top_up()

    def flow_resumed(self, queue: Queue) -> None:
        """Settle what was held for ``queue`` (accepted: it is stored) and restore credit."""
        for delivery in self._held.pop(queue, ()):
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
        if queue is not self.queue:
            queue.unwatch_flow(self)
            return
        if self.closed or not self.stopped:
            return
        self.stopped = False
        lib.pn_link_set_drain(self.impl, False)
        self._top_up()

    def _refuse_oversized(self, dlv: Any) -> None:
        self._stop_storing()
        refuse_oversized(self.link, Delivery.wrap(dlv), self.max_size)

    def _refuse_malformed(self, dlv: Any, why: str) -> None:
        description = f"malformed message: {why}"
        log.warning("QUE-1006 %s on link '%s': %s", DECODE_ERROR, self.link.name, description)
        reject(Delivery.wrap(dlv), MalformedMessage(description))
        self._stop_storing()
        close_link(self.link, DECODE_ERROR, description)

    def detach(self) -> None:
        if self._unfinished:
            self._arrived()
        self.closed = True
        for queue in [*self._held, self.queue]:
            if queue is not None:
                queue.unwatch_flow(self)
        self._held.clear()


class _Pending:
    """A transfer waiting for the store (see ProducerLink._in_order): the copies that
    joined their queues (one, or those an exchange routed), each with its queue, and the
    queue a single message was sent to. Calling it is the completion of one of its writes:
    the last one lets ``then`` (the link's drain) settle it."""

    __slots__ = ("dlv", "copies", "queue", "waiting", "error", "then")

    def __init__(
        self,
        dlv: Any,
        copies: list[tuple[Message, Queue]],
        queue: Queue | None,
        then: Callable[[], None],
    ) -> None:
        self.dlv = dlv
        self.copies = copies
        self.queue = queue  # a single message's queue (refusals name it); None: routed
        self.waiting = 0  # writes not finished yet
        self.error: BaseException | None = None
        self.then = then

    def __call__(self, error: BaseException | None) -> None:
        self.waiting -= 1
        if error is not None:
            self.error = error
        if not self.waiting:
            self.then()  # only then can it be at the head with nothing left to wait for


def _stopped(queues: list[Queue]) -> Queue | None:
    """A flow-stopped queue among ``queues`` (the settlement is held for it), or None."""
    return next((queue for queue in queues if queue.flow_stopped), None)


class ConsumerLink:
    """A link on which the broker sends a queue's messages to a client.

    Implements the queue's ``Consumer`` protocol: ``credit`` mirrors the engine's link
    credit, and ``deliver`` sends one entry.
    """

    # Slots: deliver reads and writes several of these for every message.
    __slots__ = (
        "id",
        "max_message_size",
        "transactions",
        "in_txn",
        "link",
        "impl",
        "queue",
        "_stamp",
        "browse",
        "presettled",
        "credit",
        "unsettled",
        "_sent",
        "_tag_bytes",
        "_tag",
        "_tag_cdata",
        "_tag_value",
        "closed",
        "output",
        "backlog",
        "held",
        "_tally",
        "on_fault",
        "__weakref__",
    )

    def __init__(
        self,
        link: Link,
        queue: Queue,
        browse: bool,
        transactions: Transactions | None = None,
        max_message_size: int = 0,
        output: OutputGate | None = None,
        backlog: Backlog | None = None,
    ) -> None:
        self.id = next(_ids)
        # No message grows past this by the annotations of a modified outcome (0: no limit).
        self.max_message_size = max_message_size
        # What its connection may hold for a client that does not read (amqp/output.py):
        # held, the queue sees it with no credit; looked at every CHECK_EVERY bytes sent.
        self.output = output
        self.backlog = backlog
        self.held = False
        self._tally = Tally(CHECK_EVERY)  # the bytes it sent (see amqp/engine.py)
        self.transactions = transactions
        self.in_txn: dict[Any, Entry] = {}  # acknowledged under a transaction not ended yet
        self.link = link
        self.impl = link._impl
        self.queue = queue
        # qpidd's qpid.queue_msg_sequence: the annotation each delivery also carries
        self._stamp = queue.settings.sequence_annotation
        self.browse = browse
        self.presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        self.credit = 0
        self.unsettled: dict[Any, Entry] = {}
        self._sent = 0
        self._tag_bytes = bytearray(8)
        self._tag = ffi.new("pn_delivery_tag_t *")
        self._tag.start = self._tag_cdata = ffi.from_buffer(self._tag_bytes)
        self._tag.size = 8
        self._tag_value = self._tag[0]  # a view of the struct: passed by value, Proton copies
        self.closed = False
        # Told when a delivery raised (see failed): the server detaches the link.
        self.on_fault: Callable[[ConsumerLink, Entry | None, Exception], None] | None = None

    @property
    def sent(self) -> int:
        """Deliveries sent on this link so far (browsed ones included)."""
        return self._sent

    def deliver(self, entry: Entry) -> None:
        message = entry.message
        # x-opt-sequence-number: every delivery carries it (a queue numbers every message
        # that joins it, so a delivered message always has one)
        number: int = message.number  # type: ignore[assignment]
        header_sent = message.header
        stamp = self._stamp
        count = entry.delivery_count
        if (
            stamp is None
            and message.annotations_span is None
            and count == header_sent.delivery_count
            and header_sent.ttl is None
            and not (count and header_sent.first_acquirer)  # see _header_now
        ):
            # The usual message: the section goes in after the header and any
            # delivery-annotations (with_sequence_number, inlined: this runs per delivery),
            # with its key's number first on a queue with a key.
            data = message.data
            at = message.delivery_annotations_end or message.header_end
            sequence = message.sequence
            section = (
                _number_section(NUMBER_SECTION_PREFIX, number)
                if sequence is None
                else _keyed_section(KEYED_SECTION_PREFIX, sequence, NUMBER_PAIR, number)
            )
        else:
            header = _header_now(entry, header_sent)
            data = (
                with_sequence_number(message, number, header)
                if stamp is None
                else with_stamped_number(message, number, stamp, header)  # qpidd's, asked for
            )
            at, section = len(data), b""
        impl = self.impl
        # Delivery tags: an 8-byte counter written into one reused buffer (Proton copies it).
        self._sent += 1
        _U64.pack_into(self._tag_bytes, 0, self._sent)
        dlv = _new_delivery(impl, self._tag_value)
        # the section goes in as the bytes go out; the bytes count in the tally
        due = _send_with(impl, data, at, section, self._tally)
        self.credit -= 1
        if self.presettled:
            _settle(dlv)
            if not self.browse:
                self.queue.settle(entry)  # at-most-once: sent settled counts as consumed
        else:
            self.unsettled[dlv] = entry  # a browsed one too: the client settles it
        if due:
            self._check_output()

    def failed(self, entry: Entry | None, error: Exception) -> None:
        """Delivering ``entry`` raised ``error`` (the queue's backstop,
        queues/dispatching.py: the queue has it back and has let go of this consumer). A
        delivery made for it before the error is dropped, so that the detach does not give
        back what the queue may have handed to another consumer by then; the server
        detaches the link (``on_fault``)."""
        for dlv, held in list(self.unsettled.items()):
            if held is entry:
                del self.unsettled[dlv]
                _settle(dlv)
        if self.on_fault is not None:
            self.on_fault(self, entry, error)

    def _check_output(self) -> None:
        """Hold this consumer if its connection's backlog is over the bound
        (amqp/output.py): its credit, as the queue sees it, is none until the gate lets it
        go."""
        tally = self._tally
        sent = tally.handed - (tally.due - CHECK_EVERY)  # since the last look
        tally.due = tally.handed + CHECK_EVERY
        output, backlog = self.output, self.backlog
        if output is not None and backlog is not None and output.sent(backlog, sent, self):
            self.held = True
            self.credit = 0

    def let_go(self) -> None:
        """Its connection's backlog is down again (amqp/output.py): served with the credit
        its client gave it, and a drain it was asked for meanwhile answered if that leaves
        it with nothing more to take."""
        self.held = False
        self._serve()

    def on_flow(self) -> None:
        """The client changed our credit (or asked us to drain)."""
        if self.held:  # served, and a drain answered, once let go (amqp/output.py)
            return
        self._serve()

    def _serve(self) -> None:
        """Take up the client's credit, send what the queue has for it, and answer a drain
        only if credit is left over though the backlog did not hold it: then the queue had
        nothing more it may take (qpidd's ``pn_link_drained`` when its dispatch finds no
        message). Held, it is not out of messages: let_go comes back here."""
        impl = self.impl
        self.credit = lib.pn_link_credit(impl)
        if self.credit > 0:
            self.queue.credit_granted(self)
            if self.held:  # by what it just sent: the drain waits for let_go
                return
        if lib.pn_link_get_drain(impl):
            lib.pn_link_drained(impl)
            self.credit = 0
        if self.credit <= 0:  # drained, or lowered by the client: nothing more is taken
            self.queue.credit_withdrawn(self)

    def on_delivery(self, dlv: Any) -> None:
        """The client updated a delivery: apply its outcome to the queue entry."""
        entry = self.unsettled.get(dlv)
        if entry is None:
            return
        state = _remote_state(dlv)
        if self.browse:
            self._browsed_settled(dlv, state)
            return
        if state == PN_ACCEPTED:
            self.queue.settle(entry)
        elif state == PN_RELEASED:
            self._give_outcome(entry, state)
        elif state == PN_REJECTED:
            self._give_outcome(entry, state, detail=_rejection(dlv))
        elif state == PN_MODIFIED:
            remote = lib.pn_delivery_remote(dlv)
            self._give_outcome(
                entry,
                state,
                bool(lib.pn_disposition_is_failed(remote)),
                bool(lib.pn_disposition_is_undeliverable(remote)),
                _encoded(Data(lib.pn_disposition_annotations(remote))),
            )
        elif state == TRANSACTIONAL_STATE:
            self._acknowledged_in_txn(dlv, entry)
            return
        elif _settled(dlv):
            self.queue.settle(entry)  # settled with no outcome: treated as accepted, as Qpid does
        else:
            return  # a non-terminal state (received): keep waiting
        del self.unsettled[dlv]
        _settle(dlv)

    def _browsed_settled(self, dlv: Any, state: int) -> None:
        """A browser gave an outcome (or settled): settle our side; the queue is not
        touched, since a browser never acquired the message (qpidd and Broker-J alike)."""
        if state in _TERMINAL or state == TRANSACTIONAL_STATE or _settled(dlv):
            del self.unsettled[dlv]
            _settle(dlv)

    # ---- transactional acknowledgements ----------------------------------------------------

    def _acknowledged_in_txn(self, dlv: Any, entry: Entry) -> None:
        """An outcome given under a transaction: it applies when the transaction commits
        (see :mod:`proton_broker.transactions`); until then the entry stays acquired."""
        assert self.transactions is not None
        try:
            txn, outcome = transaction_of(self.transactions, dlv)
            if outcome is None:  # a state with no outcome in it (Qpid JMS always gives one)
                if not _settled(dlv):
                    return  # none yet: the delivery waits for one, as in both Qpid brokers
                kind, fields = PN_ACCEPTED, []  # settled with none: accepted, as qpidd takes it
            else:
                kind, fields = transactional_outcome(outcome)
        except BrokerError as exc:
            name, description, info = condition_for(exc)
            log.info("detaching consumer '%s': %s %s", self.link.name, name, description)
            close_link(self.link, name, description, info)
            return
        del self.unsettled[dlv]
        self.in_txn[dlv] = entry
        txn.acknowledge(
            Acknowledgement(
                self.queue,
                entry,
                # a rejection that dead-letters moves the message itself (deadletters.py)
                removes=kind == PN_ACCEPTED
                or (kind == PN_REJECTED and self.queue.alternate is None),
                apply=lambda: self._apply_txn_outcome(dlv, entry, kind, fields),
                undo=lambda: self._undo_txn_outcome(dlv, entry),
            )
        )

    def _give_outcome(
        self,
        entry: Entry,
        kind: int,
        failed: bool = False,
        here: bool = False,
        annotations: bytes | None = None,
        detail: str | None = None,
    ) -> None:
        """Apply a terminal outcome to the entry (modified: ``failed`` delivery-failed,
        ``here`` undeliverable-here, ``annotations`` its message-annotations, encoded;
        rejected: ``detail`` the consumer's error, for the dead letter's description)."""
        queue = self.queue
        most = self.max_message_size
        if annotations is not None and most and entry.message.size + len(annotations) > most:
            log.warning(
                "consumer '%s' gave message annotations that would make a message larger "
                "than broker.max_message_size (%d bytes): not merged",
                self.link.name,
                most,
            )
            annotations = None
        if kind == PN_ACCEPTED:
            queue.settle(entry)
        elif kind == PN_REJECTED:
            queue.reject(entry, detail)
        elif kind == PN_RELEASED:
            queue.release(entry)
        else:
            queue.release(
                entry,
                delivery_failed=failed,
                undeliverable_for=self.id if here else None,
                annotations=annotations,
            )

    def _apply_txn_outcome(self, dlv: Any, entry: Entry, kind: int, fields: list[Any]) -> None:
        """The outcome an acknowledgement gave under a transaction, applied at commit as
        the same outcome given outside one is (on_delivery)."""
        if kind == PN_REJECTED:  # rejected carries [error]
            self._give_outcome(entry, kind, detail=_rejection_in(fields))
        else:  # modified carries [delivery-failed, undeliverable-here, message-annotations]
            annotations = None
            if len(fields) > 2 and fields[2]:
                data = Data()
                data.put_object(fields[2])
                annotations = _encoded(data)
            self._give_outcome(
                entry,
                kind,
                bool(fields[0]) if fields else False,
                bool(fields[1]) if len(fields) > 1 else False,
                annotations,
            )
        if self.in_txn.pop(dlv, None) is not None and not self.closed:
            _update(dlv, kind)
            _settle(dlv)

    def _undo_txn_outcome(self, dlv: Any, entry: Entry) -> None:
        """Rolled back: the delivery is unsettled with us again; if the client has settled
        it already, or our link is gone, the message goes back to the queue."""
        if self.in_txn.pop(dlv, None) is None:
            return
        if self.closed or _settled(dlv):
            self.queue.release(entry, delivery_failed=True)
            if not self.closed:
                _settle(dlv)
            return
        self.unsettled[dlv] = entry

    def detach(self) -> None:
        """Return unsettled messages to the queue (in order, delivery count +1); those
        acknowledged under an open transaction stay acquired until it ends."""
        if self.closed:
            return
        self.closed = True
        self.queue.unsubscribe(self)
        if self.browse:
            self.unsettled.clear()  # browsed messages were never taken from the queue
            return
        entries = sorted(self.unsettled.values(), key=lambda e: e.seq)
        self.unsettled.clear()
        for entry in entries:
            self.queue.release(entry, delivery_failed=True)
