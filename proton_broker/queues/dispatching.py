"""Dispatch: a queue's consumers, where each starts, which of them is served next, and which
entry each may acquire (the part qpid-cpp calls the queue's ``MessageDistributor``).

Rules this module owns:

* A consumer starts at the queue's head, or where its attach filters say: a replay period
  (Broker-J's ``x-qpid-replay-period``, or the queue's default filter), an
  ``x-opt-sequence-number`` (browsers only) or an ``x-opt-sequence`` replay of the kept
  versions (browsers only, on a queue with sequence numbers).
* Consumers with credit wait in a round-robin ring; a consumer leaves the ring when its
  credit reaches zero, by what it took or because its client took the credit back (a
  drain that completed, a flow that lowered it: ``credit_withdrawn``), and rejoins when
  the protocol adapter grants more. A consumer is never handed an entry without credit
  for it, as neither Qpid broker acquires a message for a link without credit. Browsers are fed
  after the ring's turn (see :mod:`~proton_broker.queues.browsing`).
* On an ordered queue a consumer acquires the first available entry in the queue's order
  that it may have: not one it said was undeliverable to it (``undeliverable-here``), not
  one older than its replay period. Entries it passes over stay where they are, for the
  others; an entry whose time has passed leaves the queue instead of being acquired.
* A consuming consumer with a selector takes the first entry it matches in the queue's order
  (:mod:`~proton_broker.queues.selecting`). On a grouped queue (:mod:`~proton_broker.queues.groups`)
  it takes the first entry in arrival order that it matches and whose group is free or its
  own, as qpidd's consumers apply their filter and then ask the group manager: it may take a
  later message of a group whose first one it does not match, and then holds the group.
  A match whose group another consumer holds is set aside in its group, and the consumer's
  place moves back to it when the group goes free. A consumer with a replay period on a
  grouped queue takes the same path, matching everything from its start: Broker-J's
  replay period is a filter of arrival times, as a selector is of properties.
* A round ends when nobody in the ring can take anything; the ring's turn order is kept, so
  the next message goes to the consumer whose turn it was.
* Standby (Broker-J's ``maximumLiveConsumers``): with a bound N, the first N consumers to
  attach, browsers included, are live; those after them wait in standby, in the order they
  attached, taking nothing and fed nothing, until a live one goes and the first of them
  takes its place. A standby consumer's start (its replay period, its ``x-opt-sequence``
  replay) is where it would have started as it attached, as Broker-J sets a consumer's
  place as it is added. It counts among the queue's consumers.
* Dispatch is re-entrant: a call made while it runs (a pre-settled delivery settling, which
  frees a group) only asks the running loop to go round once more.
* A backstop where an entry is handed out: a consumer whose ``deliver`` raises (a bug, or a
  message the broker stored but cannot send) is out of the queue at once, as if it had
  gone, and told (``Consumer.failed``: the adapter detaches its link with
  ``amqp:internal-error`` and logs the error once). The entry goes back to its own place,
  available, its delivery count as it was: nothing was sent. A browser's failure takes
  only the browser away. So a message every delivery of which raises (a poison message)
  costs each consumer that reaches it its link, once, and a dispatch at most one failure
  per consumer: the broker never retries it by itself. It stays on the queue, in its
  place, until it expires or an operator removes it (management's ``deleteMessages``, by
  the id the log and the detach name).

Acquiring is O(1) amortised on a FIFO queue (O(log n) on a priority or sorted queue, O(log
g) on a grouped one), however long the queue and however many consumers wait.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from proton_broker.errors import InvalidField
from proton_broker.queues.browsing import Browsers
from proton_broker.queues.entries import ACQUIRED, AVAILABLE, ArrivalLog, Entry, Ordering
from proton_broker.queues.groups import GroupDistributor
from proton_broker.queues.history import SEQUENCE, History
from proton_broker.queues.limits import page_in
from proton_broker.queues.numbering import Numbering
from proton_broker.queues.ports import Consumer, LoopHooks, MessageFilter
from proton_broker.queues.selecting import EVERYTHING, Selecting


class Dispatcher:
    """The consumers of one queue and the hand-out of its available entries to them.

    ``expire(entry)`` removes an acquired entry whose time has passed and says whether it
    did; ``forget_expired(entry)`` does the accounting of an expired entry that left a
    group before it joined anyone's; ``wake()`` asks for a dispatch (now, or later in the
    loop's pass); ``give_back(entry)`` puts back an acquired entry that was never sent
    (the backstop: see the module rules)."""

    def __init__(
        self,
        order: Ordering | GroupDistributor,
        groups: GroupDistributor | None,
        browsers: Browsers,
        picky: Selecting,
        numbers: Numbering,
        log: ArrivalLog,
        history: History | None,
        default_replay: float | None,
        hooks: LoopHooks,
        expire: Callable[[Entry], bool],
        forget_expired: Callable[[Entry], None],
        max_live: int = 0,
        give_back: Callable[[Entry], None] | None = None,
    ) -> None:
        self.consumers: dict[int, Consumer] = {}  # the live ones
        # Standby (see the module rules): consumer id -> how it joins once live, in order.
        self.max_live = max_live  # 0: every consumer is live
        self.standby: dict[int, Callable[[], None]] = {}
        # Entries handed to consumers and not yet settled or given back (the queue counts
        # them down as they are).
        self.acquired = 0
        self.ready: deque[Consumer] = deque()  # the ring: consumers with credit
        self._in_ready: set[int] = set()
        # Consumers with a replay period: consumer id -> the first position they may take.
        self.floors: dict[int, int] = {}
        self._order = order
        self._groups = groups
        if groups is not None:
            groups.on_freed = self._group_freed
        self._browsers = browsers
        self._browse_cursors = browsers.cursors  # read per round: is anyone browsing?
        self._browse_replays = browsers.replays
        self._picky = picky
        self._picky_cursors = picky.cursors  # read per take, as above
        self._numbers = numbers
        self._log = log
        self._history = history
        # The queue's default replay period (seconds; None: none), for consumers that ask
        # for none; the queue updates it with its settings.
        self.default_replay = default_replay
        self._hooks = hooks
        self._expire = expire
        self._forget_expired = forget_expired
        self._give_back = give_back or self.made_available
        browsers.failed = self._failed
        self.wake: Callable[[], None] = self.dispatch  # set by the queue (see Queue._wake)
        self._dispatching = False  # dispatch() is running (see there)
        self._again = False
        self._skipped = False  # the last take passed over entries the consumer refused
        # How a consumer's next entry is found, chosen once: dispatch calls it per message.
        self._take: Callable[[int], Entry | None] = (
            self._take_grouped if groups is not None else self._take_ordered
        )

    def subscribe(
        self,
        consumer: Consumer,
        replay_period: float | None = None,
        sequence: tuple[int | str, str | None] | None = None,
        from_number: int | None = None,
        selector: MessageFilter | None = None,
    ) -> None:
        """Add a consumer. With a replay period (seconds; the queue's default filter when
        None) it gets only what arrived in that period, then every new message. With a
        ``sequence`` (start, key or None), a browser gets the kept versions from that start
        (of that key, or all), then every new message (of that key). With ``from_number``
        (x-opt-sequence-number), a browser gets the messages on the queue whose number is
        at least that, in number order, then new ones; its start is found in O(log n).
        With a ``selector``, a consumer or browser gets only the messages it matches."""
        grouped = self._groups is not None
        if sequence is not None:
            self._subscribe_replay(consumer, *sequence, selector)
            return
        if from_number is not None:
            if not consumer.browse:
                raise InvalidField(
                    "an x-opt-sequence-number filter browses: it needs a browser "
                    "(distribution mode copy)",
                    "x-opt-sequence-number",
                )
            start = from_number
        else:
            period = self.default_replay if replay_period is None else replay_period
            start = 0 if period is None else self._replay_start(period)

        def join() -> None:
            self.consumers[consumer.id] = consumer
            if consumer.browse:
                self._browsers.add(consumer.id, start, selector)
            elif selector is not None:
                self._picky.add(consumer.id, start, selector)
            elif start and grouped:  # walks as a selector does (see the module rules)
                self._picky.add(consumer.id, start, EVERYTHING)
            elif start:
                self.floors[consumer.id] = start
            self.credit_granted(consumer)

        self._admit(consumer, join)

    def _subscribe_replay(
        self, consumer: Consumer, start: int | str, key: str | None, selector: MessageFilter | None
    ) -> None:
        if self._history is None:
            raise InvalidField(
                f"a {SEQUENCE} filter needs a queue with sequence numbers (a "
                "last-value key or sequenceKey)",
                SEQUENCE,
            )
        if not consumer.browse:
            raise InvalidField(
                f"a {SEQUENCE} filter replays copies: browse (distribution mode copy)", SEQUENCE
            )
        replay = deque(Entry(v.seq, v.message, None) for v in self._history.replay(start, key))

        def join() -> None:
            self.consumers[consumer.id] = consumer
            self._browsers.add_replay(consumer.id, key, replay, selector)
            self.credit_granted(consumer)

        self._admit(consumer, join)

    def _admit(self, consumer: Consumer, join: Callable[[], None]) -> None:
        """``consumer`` joins now, or waits in standby while the live ones are at the
        bound (see the module rules)."""
        if self.max_live and len(self.consumers) >= self.max_live:
            self.standby[consumer.id] = join
        else:
            join()

    def _replay_start(self, period: float) -> int:
        """The first position a consumer with this replay period may see (Broker-J's
        ArrivalTimeFilter: arrival >= now - period; 0 means only new messages)."""
        if period <= 0:
            return self._numbers.next
        first = self._log.first_since(time.time() - period)
        return self._numbers.next if first is None else first

    def remove(self, consumer: Consumer) -> None:
        """``consumer`` is gone (its unsettled entries are released by the adapter); the
        first consumer in standby takes a live one's place."""
        if self.standby.pop(consumer.id, None) is not None:
            return  # it never took anything
        self._leave(consumer)
        if self.standby and len(self.consumers) < self.max_live:
            first = next(iter(self.standby))
            self.standby.pop(first)()

    def _leave(self, consumer: Consumer) -> None:
        """A live consumer's place in the ring, its cursors and its groups go with it."""
        self.consumers.pop(consumer.id, None)
        self._browsers.remove(consumer.id)
        self.floors.pop(consumer.id, None)
        self._picky.remove(consumer.id)
        self.credit_withdrawn(consumer)
        if self._groups is not None:
            self._groups.consumer_gone(consumer.id)
            if self.ready:
                self.wake()

    def credit_granted(self, consumer: Consumer) -> None:
        """The consumer has (more) credit: put it in line and dispatch."""
        if consumer.credit <= 0 or consumer.id not in self.consumers:
            return
        if consumer.browse:
            self._browsers.feed(consumer)
            return
        if consumer.id not in self._in_ready:
            self._in_ready.add(consumer.id)
            self.ready.append(consumer)
        self.dispatch()

    def credit_withdrawn(self, consumer: Consumer) -> None:
        """The consumer has no credit left though it took nothing (a drain completed, or
        its client lowered its credit): out of line, so that nothing is acquired for it
        until it grants more, and the others get what arrives. O(the ring)."""
        if consumer.id in self._in_ready:
            self._in_ready.discard(consumer.id)
            self.ready.remove(consumer)

    def dispatch(self) -> None:
        """Hand available entries to consumers with credit, round-robin, then feed browsers
        (re-entrant: see the module rules)."""
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._round()
        finally:
            self._dispatching = False

    def _round(self) -> None:
        ready = self.ready
        misses = 0
        while ready:
            consumer = ready[0]
            entry = self._take(consumer.id)
            if entry is None:
                # Only entries this consumer refused are left: let the others try them.
                misses += 1
                if self._groups is not None and self._groups.freed:
                    self._groups.freed = False
                    misses = 0  # a group changed hands: everyone may try again
                if not self._skipped or misses >= len(ready):
                    ready.rotate(misses - 1)  # undo this fruitless round: keep the turn order
                    break
                ready.rotate(-1)
                continue
            misses = 0
            self.acquired += 1
            try:
                if entry.message.paged:
                    page_in(self._hooks, entry.message)
                consumer.deliver(entry)
            except Exception as exc:  # the backstop (see the module rules)
                self._failed(consumer, entry, exc)
                continue
            if consumer.credit <= 0:
                ready.popleft()
                self._in_ready.discard(consumer.id)
            elif len(ready) > 1:
                ready.rotate(-1)
        if self._browse_cursors or self._browse_replays:
            self._browsers.feed_all(self.consumers)

    def _failed(self, consumer: Consumer, entry: Entry | None, error: Exception) -> None:
        """``consumer.deliver(entry)`` raised ``error`` (the backstop: see the module
        rules): an entry it acquired goes back to its place, the consumer leaves the queue
        (out of the ring, its groups free) and is told, to be detached."""
        if entry is not None and not consumer.browse and entry.state == ACQUIRED:
            self.acquired -= 1  # not if the failure came after a pre-settled one settled
            self._give_back(entry)
        self.remove(consumer)
        consumer.failed(entry, error)

    def _take_ordered(self, consumer_id: int) -> Entry | None:
        """Acquire the next available entry for ``consumer_id`` in the queue's order."""
        if self._picky_cursors and consumer_id in self._picky_cursors:
            return self._take_selected(consumer_id)
        order: Ordering = self._order  # type: ignore[assignment] # grouped queues take elsewhere
        entry = order.pop()
        if (
            entry is not None
            and entry.expires_at is None
            and entry.excluded is None
            and not self.floors
        ):
            entry.state = ACQUIRED  # the common case: nothing to check
            self._skipped = False
            return entry
        refused: list[Entry] = []
        found = None
        floor = self.floors.get(consumer_id, 0)
        while entry is not None:
            entry.state = ACQUIRED  # out of the ordering; put back below if not taken
            if entry.expires_at is not None and self._expire(entry):
                pass
            elif (entry.excluded and consumer_id in entry.excluded) or entry.seq < floor:
                refused.append(entry)
            else:
                found = entry
                break
            entry = order.pop()
        for entry in refused:
            entry.state = AVAILABLE
            order.requeue(entry)
        self._skipped = bool(refused)
        return found

    def _take_selected(self, consumer_id: int) -> Entry | None:
        """Acquire the next available entry a consumer with a selector matches (see
        :mod:`proton_broker.queues.selecting` for its order)."""
        found = self._picky.next_match(consumer_id, self._expire)
        if found is not None:
            found.state = ACQUIRED  # first, so that a compaction the discard sets off drops it
            self._order.discard(found)  # out of the ordering, as if popped
        self._skipped = found is None and len(self._order) > 0  # others may want the rest
        return found

    def _take_grouped(self, consumer_id: int) -> Entry | None:
        """Acquire the next entry ``consumer_id`` may have on a grouped queue."""
        groups = self._groups
        assert groups is not None
        if not groups.available:  # the usual end of a dispatch round: spare the call
            self._skipped = False
            return None
        if self._picky_cursors and consumer_id in self._picky_cursors:
            return self._take_grouped_selected(consumer_id, groups)
        while True:
            entry = groups.acquire(consumer_id)
            if entry is None:
                # Other consumers may hold other groups: let them try, if anything is left.
                self._skipped = groups.available > 0
                return None
            entry.state = ACQUIRED
            if entry.expires_at is not None and entry.expires_at <= time.time():
                groups.dropped(entry)  # it never joined this consumer's groups
                self._forget_expired(entry)
                continue
            return entry

    def _take_grouped_selected(self, consumer_id: int, groups: GroupDistributor) -> Entry | None:
        """Acquire the next entry a consumer with a selector matches on a grouped queue, of
        a group that is free or its own, as qpidd's consumers filter and then ask the
        groups (see the module rules)."""

        def allowed(entry: Entry) -> bool:
            if groups.may_take(consumer_id, entry):
                return True
            groups.set_aside(entry)  # its group's going free moves the place back here
            return False

        found = self._picky.next_match(consumer_id, self._expire, allowed)
        if found is None:
            self._skipped = groups.available > 0  # others may want the rest
            return None
        found.state = ACQUIRED
        groups.take(consumer_id, found)
        self._skipped = False
        return found

    def _group_freed(self, head: Entry) -> None:
        """A group went free with ``head`` its first waiting entry: consumers with a
        selector that passed it look again from there."""
        if self._picky_cursors:
            self._picky.rewind(head)

    def made_available(self, entry: Entry) -> None:
        """``entry`` is available again (released, or held until now): back at its own
        position, where consumers with a selector look again."""
        entry.state = AVAILABLE
        self._order.requeue(entry)
        if self._picky_cursors:
            self._picky.rewind(entry)
