"""A queue: enqueue, dispatch to consumers, and their outcomes, over parts assembled by
:mod:`proton_broker.queues.factory`.

The parts own their rules: the ordering of available entries
(:mod:`~proton_broker.queues.entries`, or :mod:`~proton_broker.queues.groups` on a grouped
queue), sequence history and last value (:mod:`~proton_broker.queues.history`), sequence
numbers and duplicates (:mod:`~proton_broker.queues.numbering`), dispatch to consumers
(:mod:`~proton_broker.queues.dispatching`), browsers (:mod:`~proton_broker.queues.browsing`),
consuming selectors (:mod:`~proton_broker.queues.selecting`), holds
(:mod:`~proton_broker.queues.holds`), expiry (:mod:`~proton_broker.queues.expiry`),
limits (:mod:`~proton_broker.queues.limits`) and the packed tail of a deep plain queue
(:mod:`~proton_broker.queues.packed`). The queue ties them together.

Rules this module owns:

* Enqueue, acquire, settle and release are O(1) amortised (O(log n) on a sorted queue),
  however long the queue grows.
* A released entry goes back to its original position in the ordering.
* qpidd's ``qpid.filter``: a queue with a JMS selector of its own takes only the messages
  it selects. Any other is not taken, as a duplicate is not (``enqueue`` answers False,
  and the message is answered accepted: qpidd's ``Queue::accept``); a message recovered
  from the store was taken once and is not asked again. ``stats.filtered`` counts them.
* A message's arrival time is the clock when it joins, to the millisecond: a message that
  joins within a millisecond of the one before shares that one's time (the same float, 24
  bytes less per queued message in a burst).
* Dispatch runs at once, or, when the server sets ``hooks.defer``, once per pass of
  its event loop, so messages that arrive together go out together.
* Last value: a new message whose key is already present is appended at the tail and the
  older entry leaves the queue. If a consumer holds the older entry (acquired, not
  settled) it stays with that consumer: accepting it consumes it as usual, and if it comes
  back (released, modified, consumer gone) it is discarded, because a newer value exists
  (Broker-J's ``ConflationQueueEntry`` does the same). So an update is neither lost nor
  delivered twice, and a browser never sees a superseded value.
* Giving up on a message (see :mod:`proton_broker.deadletters` for where it goes): a
  rejected one, one a ring evicts, one whose delivery attempts reach the maximum (counted
  by ``modified`` with delivery-failed and by a consumer that goes holding it; ``released``
  does not count), one that expires when the expiry policy routes, and every one left when
  the queue is deleted go to the queue's alternate when it has one, before they leave. A
  message that reaches the maximum without an alternate is discarded and said so.
* A message on its way elsewhere in a move the store writes (a dead letter's, management's
  moveMessages) stays on the queue, out of every consumer's reach, until the store has
  written the move (:meth:`Queue.take_for_move`, :meth:`Queue.moved`): then it leaves; if
  the store could not write it (a full disk), it goes back to its original position, as
  a released message does (one held until valid is held again, one past its time expires
  at the next sweep). A ring's victim and a deleted queue's messages leave at once.

* Figures for management, none of them a step on a message's way out: the messages
  consumers hold are counted as they are handed out and as they come back or are settled;
  what has left is what joined less what is here (so it counts every way out, as both Qpid
  brokers count dequeues); the oldest message is the arrival log's first live entry.

The queue knows nothing about sockets or AMQP: consumers are objects with ``credit`` and a
``deliver(entry)`` method supplied by the protocol adapter (:mod:`~proton_broker.queues.ports`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proton_broker.codec.sections import merge_annotations
from proton_broker.message import Message
from proton_broker.queues.browsing import Browsers
from proton_broker.queues.dispatching import Dispatcher
from proton_broker.queues.entries import (
    ACQUIRED,
    AVAILABLE,
    DEAD,
    GONE,
    HELD,
    ArrivalLog,
    Entry,
    SortedOrder,
)
from proton_broker.queues.expiry import Expiries, expiry_time, has_ttl_bounds
from proton_broker.queues.filters import default_replay_seconds
from proton_broker.queues.holds import RELEASE_BATCH, Holds, held_until
from proton_broker.queues.limits import Limits, read_back
from proton_broker.queues.numbering import Numbering
from proton_broker.queues.overflow import (
    FlowToDiskPolicy,
    RingPolicy,
    make_flow_control,
    make_limit,
)

if TYPE_CHECKING:
    from proton_broker.queues.factory import QueueParts
    from proton_broker.queues.history import History
from proton_broker.queues.ports import FlowObserver, Journal, LoopHooks, MessageFilter
from proton_broker.queues.selecting import Selecting
from proton_broker.queues.settings import (
    EXPIRE_TO_ALTERNATE,
    LIMIT_SETTINGS,
    QueueSettings,
    check_live_change,
)
from proton_broker.queues.walking import Walk
from proton_broker.selector import parse_selector


@dataclass
class QueueStats:
    """The queue's cumulative counters (management's ``resetStatistics`` sets them back to
    zero, as Broker-J's does; the queue's depth is not among them)."""

    enqueued: int = 0
    enqueued_bytes: int = 0
    dequeued: int = 0  # consumed: accepted by a consumer
    expired: int = 0
    expired_bytes: int = 0
    rejected: int = 0
    released: int = 0
    redelivered: int = 0
    replaced: int = 0
    evicted: int = 0  # deleted by a ring to make room
    paged_out: int = 0  # bytes dropped from memory, kept in the store (flow to disk)
    refused: int = 0  # refused by a reject policy
    duplicates: int = 0  # dropped by duplicate detection (answered accepted)
    filtered: int = 0  # not matching qpidd's qpid.filter: not taken (answered accepted)
    dead_lettered: int = 0  # sent to the queue's alternate
    exhausted: int = 0  # reached the maximum delivery attempts
    discarded: int = 0  # given up on with nowhere to go (no alternate at the maximum, no route)
    grown_bytes: int = 0  # what consumers' annotations added to messages they gave back

    def reset(self) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)


# Why a message left for the alternate (the x-opt-dead-letter-reason it carries there).
REJECTED, EXPIRED, EVICTED = "rejected", "expired", "ring-overflow"
EXHAUSTED, DELETED = "maximum-delivery-attempts", "queue-deleted"
# Live messages a slice of a purge or a deletion looks at, one slice a pass of the broker's
# loop (Queue.in_slices), as management's deleteMessages and moveMessages go.
SLICE = 10_000


class Queue:
    """One named queue. All methods run on the broker's event-loop thread."""

    def __init__(
        self,
        name: str,
        parts: QueueParts,
        options: Mapping[str, Any] | None = None,
        hooks: LoopHooks | None = None,
    ) -> None:
        """Use :func:`proton_broker.queues.factory.build_queue`: it assembles ``parts``."""
        self.name = name
        self.settings = parts.settings
        self.options = dict(options or {})  # as declared, for the attach echo and management
        # Made on demand (an attach, the gateway): the idle sweep may delete it (lifetime.py).
        self.auto_created = False
        # A subscription queue (settings.subscription) that is not kept is deleted as its
        # last link goes (exchanges/subscriptions.py); one recovered from the store is kept.
        self.subscription_kept = True
        self.stats = QueueStats()
        self.depth = 0  # live messages (available or acquired)
        self.bytes = 0
        # Messages sent to it under transactions still open, and their bytes: they join at
        # commit, and a reject policy counts them meanwhile (queues/limits.py).
        self.pending = 0
        self.pending_bytes = 0
        self._reset_at = (0, 0)  # depth and bytes when the statistics were last reset
        self._last_arrival = 0.0  # the arrival time the last message got (see the rules)
        self._lvq = parts.history is not None and parts.history.indexes  # a last-value queue
        self._log = ArrivalLog(eager=self._lvq)  # see ArrivalLog
        self._groups = parts.groups
        self._order = parts.order
        self._entry = parts.entry  # the entry kind (entries.py: only the slots it uses)
        # A deep plain queue keeps its newest messages packed (queues/packed.py); the log
        # and the ordering read on into the packed tail when they run out.
        self._packed = parts.packed
        if parts.packed is not None:
            parts.packed.joined = self._unpacked
            self._log.packed = parts.packed
        self.history = parts.history  # per-key numbers, on a queue with a key (history.py)
        # Limits (see the module rules): both None on a queue without, which then costs one
        # test of ``_limited`` per enqueue and per removal.
        self._flow_watchers: dict[FlowObserver, None] = {}  # producers, told of flow control
        self.limits = (
            Limits(self, parts.limit, parts.flow, self._flow_watchers)  # queues/limits.py
            if parts.limit is not None or parts.flow is not None
            else None
        )
        self._limited = self.limits is not None
        self.flow_stopped = False  # producer flow control: producers must hold off
        # Queue sequence numbers and duplicate detection (queues/numbering.py); Entry.seq is
        # the number, so the arrival log is ordered by it.
        self.numbers = Numbering(self, self.settings, self._numbers_written)
        # qpidd's qpid.filter: what a message must match to join (see enqueue)
        text = self.settings.queue_filter
        self._filter = parse_selector(text) if text is not None else None
        # Whether enqueue screens messages at all: one test for both, most queues do neither.
        self._screens = self.numbers.dedupe is not None or self._filter is not None
        self._expiry = Expiries()  # queues/expiry.py
        # The last packed message a sweep found due (queues/packed.py): the sweep unpacks
        # the tail through it, a slice at a time.
        self._expire_through = -1
        # The queue's order as browsers and consumers with a selector walk it.
        walk = Walk(self._order, self._log)  # queues/walking.py
        self._browsers = Browsers(  # queues/browsing.py
            walk,
            self._read_back,
            self.history.superseded if self._lvq else None,  # type: ignore[union-attr]
        )
        # Its dicts, read on the hot paths to see whether anyone browses (the truth test of
        # a dict costs no call).
        self._browse_cursors = self._browsers.cursors
        self._browse_replays = self._browsers.replays
        if self.history is not None:
            self.history.dropped = self._version_dropped
            self._browsers.history_watchers = self.history.watchers  # while anyone replays
        # Consuming consumers with a selector walk the queue from places of their own.
        self._picky = Selecting(walk, self._read_back)  # queues/selecting.py
        self._picky_cursors = self._picky.cursors  # read when entries come back, as above
        if isinstance(self._order, SortedOrder):  # a new entry may sort before their places
            self._order.ahead = self._sorted_ahead
        # Hold until valid and delivery delay: held entries by the time (ms) they may go.
        self._hold = self.settings.hold_on_publish
        self._held = Holds(self._wake_at)
        self.hooks = hooks or LoopHooks()  # how the event loop drives it (see ports.py)
        self._budget = self.hooks.budget  # the broker's memory budget (queues/budget.py)
        # Set by make_durable on a durable queue (with a store): where its changes are
        # written; its durable messages are accepted only once written.
        self.journal: Journal | None = None
        if self.history is not None:
            self.history.join(self.hooks.history_budget)
        self.persistent = False
        # Which messages the store keeps as they join (see keeps): every one, the durable
        # ones, or none; none until make_durable, then as the settings say.
        self.keeps_all = self.keeps_durable = False
        self._assemble_dispatch()
        # Whether messages need an expiry time even without a TTL of their own.
        self._ttl_bounds = has_ttl_bounds(self.settings)
        # Dead-lettering, set by the broker: the queue or exchange messages go to when the
        # queue gives up on them (None: discarded), and the most deliveries a message gets
        # (0: no maximum).
        self.alternate: str | None = None
        self.max_delivery_attempts = 0
        # Entries on their way elsewhere in a move the store writes (see the module rules):
        # whether a consumer's group holds each.
        self._moving: dict[Entry, bool] = {}

    def _assemble_dispatch(self) -> None:
        """Consumers come, get credit and go through the dispatcher (queues/dispatching.py):
        the queue hands its parts to it and exposes its methods as its own."""
        dispatcher = self._dispatcher = Dispatcher(
            self._order,
            self._groups,
            self._browsers,
            self._picky,
            self.numbers,
            self._log,
            self.history,
            default_replay_seconds(self.settings.default_filters),
            self.hooks,
            self._drop_if_expired,
            self._expired,
            self.settings.max_live_consumers,
            self._undelivered,
        )
        dispatcher.wake = self._wake
        self._consumers = dispatcher.consumers
        self._ready = dispatcher.ready  # read per message: is anyone waiting?
        self.subscribe = dispatcher.subscribe
        self.credit_granted = dispatcher.credit_granted
        self.credit_withdrawn = dispatcher.credit_withdrawn
        self.unsubscribe = dispatcher.remove
        self.dispatch = dispatcher.dispatch

    @property
    def kind(self) -> str:
        return self.settings.kind

    @property
    def browse_only(self) -> bool:
        """Every consumer browses (Broker-J ``ensureNondestructiveConsumers``)."""
        return self.settings.ensure_nondestructive

    # ---- producers -------------------------------------------------------------------

    def enqueue(  # noqa: C901 - a hot queue path, measured
        self,
        message: Message,
        now: float | None = None,
        admitted: bool = False,
        number: int | None = None,
        writing: bool = False,
    ) -> bool:
        """Append ``message`` with the queue's next sequence number and hand it out at once
        if someone is waiting for it. False: a duplicate, dropped (see Numbering.seen), or
        a message qpidd's ``qpid.filter`` does not select, not taken.

        With limits: raises :class:`ResourceLimitExceeded` (reject policy) before anything
        changes, unless the message was ``admitted`` earlier (a committed transaction's
        message: see :meth:`check_admission`); a ring may delete older entries, or this one
        (see the module rules). ``number``: recovery only, the number the message had
        (greater than every number on the queue); it is not checked for duplicates.
        ``writing``: a durable message (it has its ``store_id``) that the caller writes to
        the store now that it has joined, with the number it got here, and reports
        written through ``numbers.stored`` (see queues/numbering.py)."""
        numbers = self.numbers
        id_key = None
        if self._screens:  # duplicate detection, qpidd's qpid.filter: one test for both
            # The message-id is read from the bytes once, for every duplicate-detection step
            # (a recovered message's too: the window is rebuilt from them).
            id_key = numbers.window_key(message) if numbers.dedupe is not None else None
            if number is None:  # recovered ones were taken once: not asked again
                if id_key is not None and numbers.seen(id_key, now):
                    self.stats.duplicates += 1
                    return False
                screen = self._filter
                if screen is not None and not screen.matches(message):
                    self.stats.filtered += 1  # not for this queue
                    return False
        limited = self._limited
        if limited and not admitted:
            self.limits.admit(message)  # type: ignore[union-attr] # limited: there are limits
        # Whether the producer sent annotations (a delivery time can only be among them).
        annotated = message.annotations_span is not None
        seq = numbers.next if number is None else number
        key = self.history.numbered(message) if self.history is not None else None
        if now is None:
            arrival = time.time()
            last = self._last_arrival
            if 0.0 <= arrival - last < 0.001:  # see the module rules
                arrival = last
            else:
                self._last_arrival = arrival
        else:
            arrival = now
        if id_key is not None:  # it can no longer be refused
            numbers.remember(id_key, arrival, self.persistent and message.store_id is not None)
        message.arrival = arrival
        received = expires = None
        if self._ttl_bounds or message.header.ttl:
            # A transaction's message counts its time from its receipt (see Extras.received;
            # read without the property's call, on the path of every message with a TTL).
            extras = message.extras
            received = None if extras is None else extras.received
            expires = expiry_time(message, arrival if received is None else received, self.settings)
        # Hold until valid, delivery time: when it may go (ms), if later than now.
        until = held_until(message, arrival, self._hold) if self._hold or annotated else None
        numbers.next = seq + 1
        if seq >= numbers.watermark:
            numbers.reserve()
        self.depth += 1
        size = len(message.data)
        self.bytes += size
        budget = self._budget
        budget.used += size
        if budget.used > budget.limit:
            budget.went_over()
        stats = self.stats
        stats.enqueued += 1
        stats.enqueued_bytes += size
        packed = self._packed
        # Behind packed messages a message must pack (or unpack them); otherwise only on a
        # deep queue with no consumer waiting, which would take it at once (queues/packed.py).
        if packed is not None and (packed.size or (self.depth > packed.after and not self._ready)):
            if (
                until is None
                and number is None
                and message.store_id is None
                and not message.paged
                and received is None  # the record keeps when it was received
            ):  # nothing but available (see queues/packed.py)
                packed.pack(message, seq, arrival, expires)
                if limited:
                    self.limits.counted()  # type: ignore[union-attr] # limited: there are limits
                if self._ready or self._browse_cursors or self._browse_replays:
                    self._wake()
                return True
            packed.unpack_all()  # it may not be packed: what arrived before goes first
        entry = self._entry(seq, message, expires)
        if key is not None:
            history: History = self.history  # type: ignore[assignment] # keyed: a history
            if self._lvq:
                # Its entry stands for its key's latest version, and the entry that stood
                # for the one before is superseded (see history.py). The entry keeps its
                # key's text for the history (as it leaves, or is asked whether it was
                # superseded): the text of the entry it replaces, most often the history's
                # own, not a copy for every value.
                older = history.arrived(key, message, seq, entry)
                entry.key = key if older is None else older.key  # type: ignore[misc]
                if older is not None:
                    self._supersede(older)
            else:
                history.arrived(key, message, seq)
        message.on_queue = True
        message.number = seq
        if self.persistent and message.store_id is not None and number is None:
            numbers.joined(message, id_key, writing)
        self._log.append(entry)
        self._order.push(entry)
        if expires is not None:
            self._expiry.track(entry)
        if limited:
            self.limits.joined(entry)  # type: ignore[union-attr]
        if until is not None and self._held.hold(entry, until):
            self._order.discard(entry)  # back in at its own position by release_held()
            return True
        if self._ready or self._browse_cursors or self._browse_replays:
            self._wake()
        return True

    def _sorted_ahead(self, entry: Entry) -> None:
        """A new entry on a sorted queue: browsers and consumers with a selector past its
        place in the order see it next (queues/walking.py)."""
        if self._browse_cursors:
            self._browsers.valid_again(entry)
        if self._picky_cursors:
            self._picky.rewind(entry)

    def _unpacked(self, messages: list[Message], expiries: list[float | None] | None) -> None:
        """Records made again from the packed tail join the log and the ordering, after
        everything there (see queues/packed.py); ``expiries``: their expiry times, if any
        has one."""
        make = self._entry
        if expiries is None:
            entries = [make(message.number, message, None) for message in messages]  # type: ignore[arg-type] # numbered
        else:
            entries = [
                make(message.number, message, expires)  # type: ignore[arg-type] # numbered
                for message, expires in zip(messages, expiries, strict=True)
            ]
            for entry in entries:
                if entry.expires_at is not None:
                    self._expiry.track(entry)
        self._log.extend(entries)
        self._order.extend(entries)  # type: ignore[union-attr] # a packing queue's ordering

    # ---- queue sequence numbers and duplicate detection ------------------------------

    @property
    def next_sequence_number(self) -> int:
        """The end of what readers may read now (x-opt-sequence-number); O(1)."""
        return self.numbers.readable_end

    @property
    def earliest_sequence_number(self) -> int:
        """The lowest number still on the queue; the next number when it is empty.
        O(1) amortised (the log skips its dead head once)."""
        first = self._log.first_live()
        return self.numbers.next if first is None else first.seq

    def make_durable(self, journal: Journal) -> None:
        """The broker keeps this queue in its store: messages leaving, numbers and seen ids
        are written to ``journal``, and durable messages are accepted once written."""
        self.journal = journal
        self.persistent = True
        self.keeps_all, self.keeps_durable = self.settings.kept
        self.numbers.keep(journal)
        if self.history is not None:  # only a store keeps what a history forgets
            self.history.forgot = self._key_forgotten
            self.history.make_durable(self._keys_reserved)

    def keeps(self, message: Message) -> bool:
        """Whether the store keeps ``message`` as it joins this queue (Broker-J's
        messageDurability: the durable ones, every one, or none; none on a queue that is
        not durable). The caller writes it, and answers its producer once written."""
        return self.keeps_all or (message.header.durable and self.keeps_durable)

    def _numbers_written(self) -> None:
        if self._browse_cursors:
            self._wake()  # browsers waiting at a number being written may go on

    def number(self, message: Message) -> tuple[str, int] | None:
        """Give ``message`` the next number of its key now, before it joins (the broker
        does this for a message it writes to the store first): see History.number. None on
        a queue without sequence numbers."""
        return None if self.history is None else self.history.number(message)

    def renumber(self, message: Message) -> tuple[str, int] | None:
        """Give ``message``, a copy the broker moves or dead-letters here from another
        queue, its key's next number now, whatever ``x-opt-sequence`` it carries: see
        History.renumber. None on a queue without sequence numbers, or without its key."""
        return None if self.history is None else self.history.renumber(message)

    def check_number(self, message: Message) -> None:
        """InvalidField if ``message`` carries a custom number (``x-opt-sequence``) its key
        would refuse now (a transaction's send, numbered when it commits)."""
        if self.history is not None:
            self.history.check(message)

    def _version_dropped(self, message: Message) -> None:
        """The history let a version go: its stored bytes may go too, if the queue is done
        with them."""
        if not message.on_queue and message.store_id is not None and self.journal is not None:
            self.journal.removed(self, message.store_id)
            message.store_id = None

    def _key_forgotten(self, key: str, floor: int) -> None:
        """The history forgot ``key``: a durable queue's store lets go of its number."""
        if self.journal is not None:
            self.journal.forgot(self, key, floor)

    def _keys_reserved(self, upto: int) -> None:
        """The history reserves key numbers up to ``upto`` (see History.make_durable)."""
        if self.journal is not None:
            self.journal.reserve_keys(self, upto)

    def recover_version(self, message: Message) -> None:
        """At start-up: a stored version that had left the queue but was kept in history.
        On a last-value queue a value recovered before it, still on the queue, is older:
        it is superseded, as it would have been had it arrived first."""
        if self.history is not None:
            older = self.history.recover(message)
            if older is not None:
                self._supersede(older)

    # ---- hold until valid (Broker-J holdOnPublishEnabled) ----------------------------------

    def release_held(self, now: float | None = None, most: int | None = RELEASE_BATCH) -> int:
        """Make the held entries whose time has come available, in their normal positions,
        ``most`` at most (None: all; the loop is asked to wake the queue at once for the
        rest, queues/holds.py); returns how many. Browsers already past one get it next."""
        now = time.time() if now is None else now
        released = 0
        for entry in self._held.due(now, most):
            if self._superseded(entry):
                self._remove(entry)
                self.stats.replaced += 1
                continue
            if entry.expires_at is not None and entry.expires_at <= now:
                self._expire(entry)
                continue
            self._dispatcher.made_available(entry)
            if self._browse_cursors:
                self._browsers.valid_again(entry)
            released += 1
        if released and (self._ready or self._browse_cursors):
            self._wake()
        return released

    # ---- limits ------------------------------------------------------------------------

    @property
    def flow_controlled(self) -> bool:
        """Whether this queue ever stops its producers (producer flow control)."""
        return self.limits is not None and self.limits.flow is not None

    def watch_flow(self, observer: FlowObserver) -> None:
        """Have ``observer`` told when producers must stop and may resume (also once flow
        control is added to a live queue: see :meth:`update_settings`)."""
        self._flow_watchers[observer] = None

    def unwatch_flow(self, observer: FlowObserver) -> None:
        self._flow_watchers.pop(observer, None)

    def check_admission(self, message: Message) -> None:
        """Raise :class:`ResourceLimitExceeded` if ``message`` would be refused now (a
        transaction checks when the message is sent and enqueues it ``admitted`` at commit,
        so a committed transaction never loses a message to a queue that filled meanwhile)."""
        if self.limits is not None:
            self.limits.admit(message)

    def add_pending(self, size: int) -> None:
        """A message of ``size`` bytes was sent to this queue under a transaction, which
        has checked its admission: until the transaction ends it counts as if it were here,
        so no other send can take its room and the commit, which enqueues it ``admitted``,
        keeps the queue within its limit (Broker-J's reject policy). O(1)."""
        self.pending += 1
        self.pending_bytes += size

    def remove_pending(self, size: int) -> None:
        """The transaction that sent a message of ``size`` bytes here has ended."""
        self.pending -= 1
        self.pending_bytes -= size

    def ring_victim(self) -> Entry | None:
        """The least significant available entry (a ring's next deletion)."""
        return self._order.victim()

    def available_count(self) -> int:
        return len(self._order)

    def withdraw(self, message: Message) -> bool:
        """Take ``message`` back off the queue as if it had never been sent, if it is still
        there and available (it joined moments ago for a transfer now refused); False if
        not (a consumer has it, or it is gone). Its stored row, if any, is removed too."""
        if message.number_unwritten:
            self.numbers.stored(message)  # it will not be written: readers go on
        number = message.number
        if not message.on_queue or number is None:
            return False
        log = self._log
        entry = log.at(log.index_of(number))
        if entry is None or entry.message is not message or entry.state != AVAILABLE:
            return False
        self._remove(entry)
        self.numbers.withdrawn(message)
        return True

    def evict(self, entry: Entry) -> None:
        """A ring deletes an available entry to make room (to the alternate, if any)."""
        self.stats.evicted += 1
        self._dead_letter(entry, EVICTED)  # at once: a ring's victim makes room now
        self._remove(entry)

    def _read_back(self, message: Message) -> AbstractContextManager[None]:
        return read_back(self.hooks.pager, message)

    def _wake(self) -> None:
        """Entries may be available to someone: dispatch now, or when the server says."""
        defer = self.hooks.defer
        if defer is None:
            self.dispatch()
        else:
            defer(self)

    def _wake_at(self, when: float) -> None:
        """Have the loop release held entries at ``when`` (seconds since the epoch)."""
        if self.hooks.wake_at is not None:
            self.hooks.wake_at(when, self)

    def _supersede(self, older: Entry) -> None:
        """A newer value arrived for ``older``'s key (see the module rules): an available
        entry goes now; one out with a consumer, or held, goes when it comes back (see
        :meth:`_superseded`), and a dead one is gone already."""
        if older.state == AVAILABLE:
            self._remove(older)
            self.stats.replaced += 1

    def _superseded(self, entry: Entry) -> bool:
        """Whether a newer value for ``entry``'s key has arrived (a last-value queue's: see
        the module rules)."""
        return self._lvq and self.history.superseded(entry)  # type: ignore[union-attr]

    # ---- consumers -------------------------------------------------------------------

    @property
    def consumer_count(self) -> int:
        """Consumers attached, those in standby included (Broker-J's ``consumerCount``)."""
        return len(self._consumers) + len(self._dispatcher.standby)

    @property
    def removed(self) -> int:
        """Messages that have left since the statistics were reset, whatever took them:
        consumed, expired, rejected, replaced, purged... (what qpidd and Broker-J count as
        dequeued). O(1): every message that joins is counted, so what left is what joined
        less what is here, with no step on a message's way out."""
        return self.stats.enqueued + self._reset_at[0] - self.depth

    @property
    def removed_bytes(self) -> int:
        """The bytes of :attr:`removed`'s messages (as they were when they left)."""
        stats = self.stats
        return stats.enqueued_bytes + stats.grown_bytes + self._reset_at[1] - self.bytes

    def reset_statistics(self) -> None:
        """Management's resetStatistics: the counters start again from zero; the depth, and
        what is on the queue, stay."""
        self.stats.reset()
        self._reset_at = (self.depth, self.bytes)

    @property
    def unacknowledged(self) -> int:
        """Messages consumers hold: handed out and not yet settled or given back. O(1)."""
        return self._dispatcher.acquired

    def consumers_with_credit(self) -> int:
        """Consumers (browsers included) that can take a message now. O(consumers)."""
        return sum(1 for consumer in self._consumers.values() if consumer.credit > 0)

    def oldest_arrival(self) -> float | None:
        """When the oldest message on the queue arrived (seconds since the epoch), or None
        when it is empty. O(1) amortised."""
        entry = self._log.first_live()
        return None if entry is None else entry.message.arrival

    def _drop_if_expired(self, entry: Entry) -> bool:
        """An entry just acquired (or, for a consumer with a selector, about to be) whose
        time has passed leaves the queue instead."""
        if entry.expires_at is None or entry.expires_at > time.time():
            return False
        self._expire(entry)
        return True

    def _expired(self, entry: Entry) -> None:
        """An acquired entry whose time had passed left its group before it joined anyone's."""
        if self._expiring(entry):
            self._forget(entry)

    def _expire(self, entry: Entry) -> None:
        """``entry``'s time has passed: it leaves."""
        if self._expiring(entry):
            self._remove(entry)

    def _expiring(self, entry: Entry) -> bool:
        """Counted, and sent to the alternate first if the expiry policy says so; False
        when its move waits for the store (it stays, see the module rules)."""
        self.stats.expired += 1
        self.stats.expired_bytes += entry.message.size
        if self.settings.expiry_policy == EXPIRE_TO_ALTERNATE:
            return self._dead_letter(entry, EXPIRED)
        return True

    # ---- outcomes ----------------------------------------------------------------------

    def settle(self, entry: Entry) -> None:
        """The consumer accepted the entry: it leaves the queue."""
        if entry.state == ACQUIRED:
            self._dispatcher.acquired -= 1
            self._remove(entry)
            self.stats.dequeued += 1

    def reject(self, entry: Entry, detail: str | None = None) -> None:
        """The consumer rejected the entry (``detail``: the description of its error): it
        goes to the alternate, or is discarded (qpidd)."""
        if entry.state == ACQUIRED:
            self._dispatcher.acquired -= 1
            self.stats.rejected += 1
            if self._dead_letter(entry, REJECTED, detail, held=True):
                self._remove(entry)

    def release(
        self,
        entry: Entry,
        delivery_failed: bool = False,
        undeliverable_for: int | None = None,
        annotations: bytes | None = None,
    ) -> None:
        """Put an acquired entry back at its original position.

        ``delivery_failed`` counts a delivery attempt (modified outcome, consumer gone);
        ``undeliverable_for`` keeps the entry from that consumer from now on;
        ``annotations`` (a modified outcome's message-annotations, an encoded map) are
        merged into the message's own first, as qpidd does: in memory only, so a durable
        message's stored bytes keep the annotations it arrived with.
        """
        if entry.state != ACQUIRED:
            return
        self._dispatcher.acquired -= 1  # whatever happens below, it leaves its consumer
        if self._superseded(entry):  # a newer value for its key is on the queue
            self._remove(entry)
            self.stats.replaced += 1
            return
        if annotations is not None:
            self._merge_annotations(entry.message, annotations)
        if delivery_failed and self._exhausted(entry):
            return
        if undeliverable_for is not None:
            if entry.excluded is None:
                entry.excluded = set()
            entry.excluded.add(undeliverable_for)
        self.stats.released += 1
        self._available_again(entry)
        if self._groups is not None:  # after the requeue, so the group is not forgotten
            self._groups.done(entry)
        if self._ready:
            self._wake()

    def _exhausted(self, entry: Entry) -> bool:
        """A failed delivery attempt counted: True if it was the last the queue allows (the
        entry goes to the alternate, or is discarded)."""
        entry.delivery_count += 1
        most = self.max_delivery_attempts
        if most and entry.delivery_count >= most:
            self.stats.exhausted += 1
            detail = f"{entry.delivery_count} delivery attempts"
            if self._dead_letter(entry, EXHAUSTED, detail, held=True):
                self._remove(entry)
            return True
        self.stats.redelivered += 1
        return False

    def _undelivered(self, entry: Entry) -> None:
        """An acquired entry whose delivery raised before anything was sent (the
        dispatcher's backstop, queues/dispatching.py): back at its original position as it
        was, its delivery count unchanged and no release counted."""
        if self._superseded(entry):  # a newer value for its key is on the queue
            self._remove(entry)
            self.stats.replaced += 1
            return
        self._available_again(entry)
        if self._groups is not None:  # after the requeue, so the group is not forgotten
            self._groups.done(entry)

    def _available_again(self, entry: Entry) -> None:
        """An acquired entry back at its original position; one whose time passed while
        it was held is tracked for expiry again (queues/expiry.py)."""
        self._dispatcher.made_available(entry)
        if entry.expires_at is not None:
            self._expiry.returned(entry)

    def _merge_annotations(self, message: Message, annotations: bytes) -> None:
        """A consumer's annotations into a message it gives back; the queue's byte counts
        follow its new size. A message whose bytes are paged out (flow to disk) keeps its
        own: its page is not written again."""
        if message.paged:
            return
        grown = merge_annotations(message, annotations)
        self.bytes += grown
        self.stats.grown_bytes += grown
        self._budget.used += grown

    # ---- expiry and housekeeping ---------------------------------------------------------

    def purge_expired(self, now: float | None = None, most: int | None = None) -> int:
        """Drop available entries whose time has passed, looking at ``most`` at most (None:
        all; see queues/expiry.py for the slices): how many were dropped. O(k log n) for
        k expiries; :meth:`expiry_due` says whether more are due."""
        dropped = 0
        now = time.time() if now is None else now
        packed = self._packed
        if packed is not None and packed.size:
            last = packed.due_through(now, most)
            if last is not None and last > self._expire_through:
                self._expire_through = last
            count = self._expire_through - packed.first + 1
            if count > 0:  # packed ones whose time has come become entries first
                packed.unpack(count if most is None else min(count, most))
        for entry in self._expiry.due(now, most):
            self._expire(entry)
            dropped += 1
        return dropped

    def expiry_due(self, now: float) -> bool:
        """Whether :meth:`purge_expired` has work left at ``now``. O(1)."""
        packed = self._packed
        if packed is None or not packed.size:
            return self._expiry.any_due(now)
        return (
            self._expire_through >= packed.first
            or packed.any_due(now)
            or (self._expiry.any_due(now))
        )

    def _dead_letter(
        self, entry: Entry, reason: str, detail: str | None = None, held: bool = False
    ) -> bool:
        """Hand ``entry``'s message to the alternate before it leaves (see the module
        rules); the broker is also told of one that reached the maximum delivery attempts
        without an alternate, so that the discard is logged. True: the caller removes the
        entry now; False: its move waits for the store, and the entry stays, taken for it
        (``held``: a consumer's group holds it), until :meth:`moved`. A ring's victim and
        a deleted queue's messages never wait."""
        sink = self.hooks.dead_letters
        if sink is None or (self.alternate is None and reason != EXHAUSTED):
            return True
        message = entry.message
        waits = reason not in (EVICTED, DELETED)

        def written(done: bool) -> None:
            if done:
                self.stats.dead_lettered += 1
            self.moved(entry, done)

        # flow to disk: a paged-out message's bytes are read back for the copy
        with self._read_back(message) if message.paged else nullcontext():
            moved = sink.dead_letter(self, message, reason, detail, written if waits else None)
        if moved is None:  # written later: counted then
            self.take_for_move(entry, held)
            return False
        if moved:
            self.stats.dead_lettered += 1
        else:
            self.stats.discarded += 1
        return True

    def take_for_move(self, entry: Entry, held: bool = False) -> None:
        """``entry`` is on its way elsewhere in a move the store writes (see the module
        rules): out of every consumer's reach (and the hold and expiry sweeps'), still on
        the queue, until :meth:`moved`. ``held``: acquired by a consumer whose group holds
        it until then."""
        if entry.state == AVAILABLE:
            self._order.discard(entry)
        entry.state = ACQUIRED
        self._moving[entry] = held

    def moved(self, entry: Entry, written: bool) -> None:
        """The move :meth:`take_for_move` waited for: ``written``, the entry leaves (the
        caller has cleared its message's ``store_id`` where the move's transaction removed
        its row); not written, it goes back to its original position as the store still
        has it (see the module rules). Nothing if the queue let it go meanwhile (deleted)."""
        held = self._moving.pop(entry, None)
        if held is None or entry.state != ACQUIRED:
            return
        if written:
            self._leave_move(entry, held)
            return
        if self._superseded(entry):  # a newer value for its key is on the queue
            self._leave_move(entry, held)
            self.stats.replaced += 1
            return
        now = time.time()
        until = held_until(entry.message, entry.arrival, self._hold)
        if until is not None and until > now * 1000.0:
            entry.state = AVAILABLE
            self._held.hold(entry, until)  # valid later: held again, out of the ordering
        else:
            self._dispatcher.made_available(entry)
        if entry.expires_at is not None:  # the sweep may have let it go: it tries again
            self._expiry.returned(entry, popped=True)
        if held and self._groups is not None:
            self._groups.done(entry)
        if self._ready or self._browse_cursors:
            self._wake()

    def _leave_move(self, entry: Entry, held: bool) -> None:
        """An entry taken for a move leaves: a consumer's group lets it go if it held it."""
        if held:
            self._remove(entry)
        else:
            self._forget(entry)

    def _remove(self, entry: Entry) -> None:
        """``entry`` leaves the queue, from wherever it is."""
        freed = False
        if entry.state == AVAILABLE:
            self._order.discard(entry)
        elif entry.state == ACQUIRED and self._groups is not None:
            freed = self._groups.done(entry)
        self._forget(entry)
        if freed and self._ready:
            self._wake()  # its group is free now and has messages others may take

    def _forget(self, entry: Entry) -> None:
        """The accounting of an entry leaving the queue."""
        entry.state = DEAD
        message = entry.message
        message.on_queue = False
        journal = self.journal
        if message.store_id is not None and journal is not None:
            if message.in_history:
                journal.retired(self, message.store_id)  # the history still needs its bytes
            else:
                journal.removed(self, message.store_id)
        self.depth -= 1
        self.bytes -= message.size
        budget = self._budget
        budget.used -= len(message.data)  # nothing while paged out
        if budget.full and budget.used <= budget.resume:
            budget.came_back()
        # Only a record with a side record can have a page (and the slot is quicker to read).
        has_page = message.extras is not None and message.page_id is not None
        if has_page and self.hooks.pager is not None:
            if message.paged and message.in_history:  # the history still needs its bytes
                message.data = self.hooks.pager.page_in(message)
                message.paged = False
            self.hooks.pager.discard(message)
        self._log.removed()
        if self._limited:
            self.limits.left()  # type: ignore[union-attr]
        if message.in_history:  # a kept version: the history alone holds it from now on
            self.history.left(entry)  # type: ignore[union-attr] # kept: a history
        entry.message = GONE  # its bytes go now, unless something else still holds them

    def clear(self) -> int:
        """Remove every message, whatever its state (the queue is being deleted: its
        consumers are gone and nothing may come back), each to the alternate if the queue
        has one, and its history leaves the broker's history budget; O(n), all at once (the
        broker deletes in slices: :meth:`begin_clear`, :meth:`clear_slice`,
        :meth:`end_clear`). Returns how many."""
        self.begin_clear()
        dropped, _ = self.clear_slice(0, sys.maxsize)
        self.end_clear()
        return dropped

    def begin_clear(self) -> None:
        """Before the first slice of a clear: the history leaves the broker's budget (what
        its messages leave behind counts no more, and what it held beyond the queue is let
        go with it), and nothing is held for later or swept for expiry any more, so that
        no timer touches the queue between slices."""
        if self.history is not None:
            self.history.leave()
        self._held.clear()
        self._expiry.clear()

    def clear_slice(self, start: int, examine: int) -> tuple[int, int | None]:
        """One slice of a clear: at most ``examine`` live messages from queue position
        ``start`` on leave, in arrival order (so their dead letters reach the alternate in
        order). How many left, and the position the next slice starts from (None: none is
        left)."""
        dropped = 0
        for entry in self._walk(start):
            if examine <= 0:
                return dropped, entry.seq
            examine -= 1
            held = self._moving.pop(entry, None)
            if held is None:  # not on its way elsewhere already
                self._dead_letter(entry, DELETED)
                self._remove(entry)
            else:
                self._leave_move(entry, held)
            dropped += 1
        return dropped, None

    def end_clear(self) -> None:
        """After the last slice of a clear: no consumer holds anything."""
        self._dispatcher.acquired = 0

    def purge(self) -> int:
        """Remove every available message (qpidd's purge, Broker-J's clearQueue): messages
        consumers hold stay with them, held ones (not valid yet) stay held, and nothing goes
        to the alternate. O(n), all at once (the broker purges in slices:
        :meth:`purge_slice`). Returns how many."""
        return self.purge_slice(0, sys.maxsize)[0]

    def purge_slice(self, start: int, examine: int) -> tuple[int, int | None]:
        """One slice of :meth:`purge`: from queue position ``start`` on, looking at no more
        than ``examine`` live messages (a packed one counts as it is unpacked). How many
        were removed, and the position the next slice starts from (None: the end)."""
        purged = 0
        for entry in self._walk(start):
            if examine <= 0:
                return purged, entry.seq
            examine -= 1
            if entry.state == AVAILABLE:
                self._remove(entry)
                purged += 1
        return purged, None

    def in_slices(
        self, step: Callable[[int], int | None], done: Callable[[], None], start: int = 0
    ) -> None:
        """Run ``step(start)``, then ``step`` again from the position each returns, one a
        pass of the broker's loop (``hooks.later``), and ``done()`` once one returns None:
        how management's deleteMessages, a purge and a deletion walk a deep queue without
        holding every client (at once without a loop)."""
        following = step(start)
        while following is not None and self.hooks.soon is None:
            following = step(following)
        if following is None:
            done()
            return
        resume: int = following
        self.hooks.later(lambda: self.in_slices(step, done, resume))

    def peek(self, count: int) -> list[tuple[int, int, bytes]]:
        """The first ``count`` messages on the queue, in arrival order, as (number, state,
        bytes), without taking them: what a console shows. Reads no further than that
        (O(count), beyond entries that have left and not yet been compacted)."""
        return [(entry.seq, entry.state, data) for entry, data in self.listed(0, count)]

    def listed(self, first: int, count: int) -> list[tuple[Entry, bytes]]:
        """Up to ``count`` live entries from the ``first`` (0: the oldest) in arrival order,
        each with its bytes (read back if paged out), taking none: what management's
        getMessageInfo shows. It jumps to ``first`` (O(1) while no tombstone lies behind
        the oldest entry, O(first) otherwise, as Broker-J's), then O(count); a packed
        message is read where it is and stays packed: a read changes nothing."""
        found: list[tuple[Entry, bytes]] = []
        log = self._log
        index = log.live_index(first)
        while len(found) < count and (entry := log.peek(index)) is not None:
            index += 1
            if entry.state != DEAD:
                found.append((entry, self._bytes_of(entry.message)))
        return found

    def delete_messages(
        self, numbers: set[int] | None, matches: MessageFilter | None, limit: int
    ) -> list[int]:
        """Remove the messages at the queue positions ``numbers`` (None: any) that
        ``matches`` selects (None: all), oldest first, at most ``limit`` of them (-1: no
        bound), as management's deleteMessages asks; their positions, in that order. Only
        messages nobody holds go: available ones, and held ones not valid yet. Messages
        consumers hold stay with them, as a purge leaves them, and nothing goes to the
        alternate. All at once: management deletes in slices (:meth:`delete_slice`)."""
        return self.delete_slice(numbers, matches, limit, 0, sys.maxsize)[0]

    def delete_slice(
        self,
        numbers: set[int] | None,
        matches: MessageFilter | None,
        limit: int,
        start: int,
        examine: int,
    ) -> tuple[list[int], int | None]:
        """One slice of :meth:`delete_messages`: from queue position ``start`` on, looking
        at no more than ``examine`` messages (those named in ``numbers``, each found in
        O(log n); otherwise every live one on the way; a packed one counts as it is
        unpacked). The positions removed, and the position the next slice starts from
        (None: nothing is left to look at, or ``limit`` were removed)."""
        if numbers is not None:
            return self._delete_numbered(
                sorted(n for n in numbers if n >= start), matches, limit, examine
            )
        selected: list[int] = []
        for entry in self._walk(start):
            if limit == 0:
                return selected, None
            if examine <= 0:
                return selected, entry.seq
            examine -= 1
            if self._deletes(entry, matches):
                selected.append(entry.seq)
                limit -= 1
        return selected, None

    def _delete_numbered(
        self, numbers: list[int], matches: MessageFilter | None, limit: int, examine: int
    ) -> tuple[list[int], int | None]:
        """:meth:`delete_slice` with the positions named (ascending)."""
        selected: list[int] = []
        log, packed = self._log, self._packed
        for number in numbers:
            if limit == 0:
                return selected, None
            if examine <= 0:
                return selected, number
            if packed is not None and packed.size and number >= packed.first:
                behind = number - packed.first + 1  # unpacked on the way to it
                if behind > examine:
                    packed.unpack(examine)
                    return selected, number
                examine -= behind
            examine -= 1
            entry = log.at(log.index_of(number))
            if entry is None or entry.seq != number:
                continue
            if self._deletes(entry, matches):
                selected.append(number)
                limit -= 1
        return selected, None

    def _deletes(self, entry: Entry, matches: MessageFilter | None) -> bool:
        """Remove ``entry`` if nobody holds it and ``matches`` (None: any) selects it."""
        if entry.state not in (AVAILABLE, HELD):
            return False
        message = entry.message
        with self._read_back(message) if message.paged else nullcontext():
            if matches is not None and not matches.matches(message):
                return False
        self._remove(entry)
        return True

    def select_messages(
        self,
        numbers: set[int] | None,
        matches: MessageFilter | None,
        limit: int,
        act: Callable[[Message], bool] | None = None,
        taken: list[Entry] | None = None,
    ) -> list[int]:
        """The messages at the queue positions ``numbers`` (None: any) that ``matches``
        selects (None: all), oldest first, at most ``limit``, for management's moveMessages
        and copyMessages: ``act`` (if any) is given each one first, its bytes in memory (a
        paged one's read back), and answers False to stop before it. With ``taken`` (a
        move) only messages nobody holds are selected, as :meth:`delete_messages` selects
        them, and each is taken for the move (:meth:`take_for_move`) and added to
        ``taken``, and the caller says :meth:`moved`; without it (a copy) every live
        message may be selected, those consumers hold too, and each stays. Their
        positions, in order."""
        selected: list[int] = []
        wanted = None if numbers is None else set(numbers)
        states = (AVAILABLE, HELD) if taken is not None else (AVAILABLE, HELD, ACQUIRED)
        for entry in self._walk():
            if limit == 0 or wanted == set():
                break
            if entry.state not in states or (wanted is not None and entry.seq not in wanted):
                continue
            message = entry.message
            with self._read_back(message) if message.paged else nullcontext():
                if matches is not None and not matches.matches(message):
                    continue
                if act is not None and not act(message):
                    break
            if wanted is not None:
                wanted.discard(entry.seq)
            selected.append(entry.seq)
            if taken is not None:
                self.take_for_move(entry)
                taken.append(entry)
            limit -= 1
        return selected

    def _walk(self, start: int = 0) -> Iterator[Entry]:
        """The live entries from queue position ``start`` (0: the oldest), read as they
        are reached (packed ones unpacked on the way, none before it is needed). The
        caller may remove the entry it was given: a compaction of the log meanwhile is
        followed."""
        log = self._log
        index = log.index_of(start) if start else 0
        while (entry := log.at(index)) is not None:
            generation = log.generation
            if entry.state != DEAD:
                yield entry
            if log.generation != generation:  # compacted: find the next one again
                index = log.index_of(entry.seq + 1)
            else:
                index += 1

    def numbered(self, number: int) -> tuple[Entry, bytes] | None:
        """The live entry at queue position ``number`` (its ``x-opt-sequence-number``) with
        its bytes, or None. O(log n)."""
        log = self._log
        entry = log.at(log.index_of(number))
        if entry is None or entry.seq != number or entry.state == DEAD:
            return None
        return entry, self._bytes_of(entry.message)

    def _bytes_of(self, message: Message) -> bytes:
        if not message.paged:
            return message.data
        with self._read_back(message):
            return message.data

    def update_settings(self, settings: QueueSettings) -> None:
        """Take new settings that differ only where a live queue can follow at once (see
        ``LIVE_SETTINGS`` in settings.py): they apply to consumers that attach and messages
        that arrive from now on, and new limits apply at once (:meth:`_change_limits`)."""
        check_live_change(self.settings, settings)
        limits_changed = settings.resume_percent != self.settings.resume_percent or any(
            getattr(settings, name) != getattr(self.settings, name) for name in LIMIT_SETTINGS
        )
        self.settings = settings
        if self.persistent:
            self.keeps_all, self.keeps_durable = settings.kept
        self._ttl_bounds = has_ttl_bounds(settings)
        self._dispatcher.default_replay = default_replay_seconds(settings.default_filters)
        if limits_changed:
            self._change_limits(settings)

    def _change_limits(self, settings: QueueSettings) -> None:
        """New limits, overflow policy or flow thresholds on a live queue: they apply now
        (see :meth:`Limits.took_over`). A queue that packs its newest messages
        (queues/packed.py) unpacks them and packs no more once it has a ring or flow to
        disk, which pack nothing: O(n) once."""
        limit = make_limit(self.name, settings)
        flow = make_flow_control(self.name, settings)
        packed = self._packed
        if packed is not None and type(limit) in (RingPolicy, FlowToDiskPolicy):
            packed.unpack_all()
            packed.after = sys.maxsize
        if limit is None and flow is None:
            self.limits = None
        else:
            self.limits = Limits(self, limit, flow, self._flow_watchers)
        self._limited = self.limits is not None
        if self.limits is not None:
            self.limits.took_over(self.flow_stopped)
        elif self.flow_stopped:
            self.flow_stopped = False
            for observer in list(self._flow_watchers):
                observer.flow_resumed(self)

    def entries(self) -> Iterator[Entry]:
        """Live entries in arrival order (for management and tests; O(n))."""
        return iter(self._log)

    def __repr__(self) -> str:
        return (
            f"<Queue {self.name} {self.kind} depth={self.depth} consumers={len(self._consumers)}>"
        )
