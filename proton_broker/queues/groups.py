"""Message groups: which consumer may acquire which available entry.

Semantics (the Qpid C++ broker's message-groups specification, and the Qpid Broker-J
documentation, Queues, 4.7.2):

* A message's group is the text of the application property named by the queue's group key
  (as qpidd makes it: :mod:`proton_broker.queues.keys`), or ``properties.group-id`` when no
  key is configured (where JMS puts ``JMSXGroupID``).
* **Shared groups** (``qpid.shared_msg_group``, the Qpid C++ behaviour;
  :class:`SharedGroups`): a group belongs to a
  consumer while that consumer holds acquired, unsettled messages of it. Once it has settled
  them all (accepted, released, rejected or modified) the group is free, and its next
  message may go to any consumer. Messages without a group id form the default group
  (``qpid.no-group`` unless configured), a group like any other.
* **Standard groups** (Broker-J's default; :class:`StandardGroups`): a group is assigned to
  the first consumer that
  takes one of its messages, for the lifetime of that consumer. Messages without a group id
  are not grouped and go to any consumer. One exception, where the documents are silent: a
  consumer that said a group's first message is undeliverable to it (modified,
  undeliverable-here) and holds nothing else of the group gives the group up, since it could
  never take that message and nobody else could either.
* Groups never block each other: a consumer gets the oldest message it may take, which may be
  behind a blocked group's messages.
* Within a group, order is arrival order, and a released message goes back to its position.

How it stays fast (no scanning of blocked groups, and little work for the rest):

* New entries join one FIFO, the *lane*, as on a plain queue. A consumer takes the lane's
  first entry when its group is free or already its own, which is what happens to nearly
  every message of a queue whose consumers keep up.
* An entry whose group another consumer holds, met at the front of the lane, is *parked*:
  moved into its group's own FIFO. So is every released or newly valid entry. Each entry is
  parked at most once per time it becomes available, so parking is O(1) amortised.
* A group with parked entries is listed, under the position of its first one, in exactly
  one min-heap: the heap of free groups, or the heap of groups owned by its consumer.
  A group's parked entries keep their order among themselves, and since a consumer always
  takes the earliest of its candidates (below), the group's order holds across the lane.
* A consumer's next entry is the earliest of three: the lane's front, the free heap's top,
  its own heap's top. Groups another consumer holds are in neither heap, so acquiring is
  O(log g) for g listed groups however many are blocked, and O(1) when nothing is parked.
* Heaps are updated lazily: relisting a group pushes a new item and leaves the old one
  stale, to be dropped when it reaches the top (or when stale items outnumber live ones).
* Only a consumer refused by a group's first entry (undeliverable-here) takes a slower
  path: it parks the whole lane, then sorts the candidate groups.
* A consumer with a selector finds its entries itself, walking the queue in arrival order
  (:mod:`~proton_broker.queues.selecting`), and asks here whether it may take each
  (:meth:`GroupDistributor.may_take`): an entry whose group another consumer holds is parked
  in its group (:meth:`GroupDistributor.set_aside`), and when a group with parked entries
  goes free, :attr:`GroupDistributor.on_freed` names its first one, so that such consumers
  look again from there. The entry it takes leaves its group's FIFO at once (O(parked entries
  of that group)), since it may come back before a stale copy would have been dropped.
* Groups with nothing to remember stay in the table for reuse (a group with one message in
  flight is idle between its settlement and its next message); when the table has doubled
  since the last sweep, or (past ``_IDLE_KEEP`` groups) as many groups have gone idle as
  half the table, the idle ones are dropped: O(1) amortised per message, and the table
  stays within twice the groups in use or ``_IDLE_KEEP``, whichever is more.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator

from proton_broker.queues.entries import AVAILABLE, Entry, FifoOrder
from proton_broker.queues.keys import key_text
from proton_broker.queues.settings import GROUPS_SHARED, QueueSettings

DEFAULT_GROUP = "qpid.no-group"
_COMPACT_MIN = 64  # rebuild a heap once it holds at least this many stale items
_LANE_COMPACT_MIN = 1024  # rebuild the lane once it holds at least this many stale entries
_IDLE_KEEP = 16384  # groups kept in the table, idle or not, before the first sweep

_heappush = heapq.heappush
_heappop = heapq.heappop


class Group(FifoOrder):
    """One group: the FIFO of its parked entries (it is one, to save an object per group),
    how many of its entries are available anywhere, and who holds it."""

    __slots__ = ("name", "owner", "acquired", "waiting", "listed_in", "item", "orphaned")

    def __init__(self, name: str | None) -> None:
        # FifoOrder's fields, set here rather than through its __init__: a group is made
        # per new group id, often once per message.
        self._tail: deque[Entry] = deque()
        self._back: list[tuple[int, Entry]] = []
        self._stale = 0
        self.name = name  # None: the ungrouped messages of a standard-groups queue
        self.owner: int | None = None
        self.acquired = 0  # entries of this group acquired and not yet settled
        self.waiting = 0  # entries of this group available, in the lane or parked
        self.listed_in: GroupHeap | None = None  # the heap its parked head is listed in
        self.item: tuple[int, Group] | None = None  # its live item there: (head position, it)
        self.orphaned = False  # its consumer left while still holding some of its messages

    def __bool__(self) -> bool:
        return True  # a group is a group, however many entries its FIFO holds

    def idle(self) -> bool:
        """Nothing to remember: no messages, no holder."""
        return not self.waiting and self.owner is None and not self.acquired

    def park(self, entry: Entry) -> None:
        """Keep an available entry here, in position order."""
        entry.parked = True  # type: ignore[misc] # a grouped queue's entries are keyed
        tail, seq = self._tail, entry.seq
        if tail and seq > tail[-1].seq or not tail and not self._back:
            tail.append(entry)  # the usual case: met at the lane's front, newest so far
        elif not tail or seq < tail[0].seq:
            _heappush(self._back, (seq, entry))  # handed out before all of the tail
        else:  # a held entry that became valid behind some of the tail: rare, O(k)
            index = next(i for i, e in enumerate(tail) if e.seq > seq)
            tail.insert(index, entry)

    def __repr__(self) -> str:
        return f"<Group {self.name!r} owner={self.owner} acquired={self.acquired}>"


class GroupHeap:
    """Groups by the position of their first available entry, earliest on top.

    Items are ``(head position, group)``; an item is live while it is its group's ``item``
    (one identity test). Two items here share a position only if they are the same group's
    (a live one and stale ones), and tuples of the very same objects compare equal without
    comparing the groups, so no tie-breaker is needed.

    Most items arrive in increasing position (a message of a group with nothing listed is
    the newest message of the queue), so those go to ``run``, a deque kept in increasing
    order, where adding and taking the top are O(1); only an item that would break that
    order (a group relisted under an older entry) goes to the min-heap ``items``. The top
    is the earlier of the two fronts. On a queue of many groups this spares a heap pop of
    O(log g) tuple comparisons per message.
    """

    __slots__ = ("items", "run", "live")

    def __init__(self) -> None:
        self.items: list[tuple[int, Group]] = []
        self.run: deque[tuple[int, Group]] = deque()
        self.live = 0

    def __len__(self) -> int:
        return self.live

    def add(self, item: tuple[int, Group]) -> None:
        """List a live item."""
        run = self.run
        if not run or item[0] > run[-1][0]:
            run.append(item)
        else:
            _heappush(self.items, item)
        self.live += 1

    def dropped(self) -> None:
        """One of this heap's items went stale."""
        self.live -= 1
        held = len(self.items) + len(self.run)
        if held - self.live >= _COMPACT_MIN and held > 2 * self.live:
            self.items = [item for item in self.items if item[1].item is item]
            heapq.heapify(self.items)
            self.run = deque(item for item in self.run if item[1].item is item)

    def top(self) -> tuple[int, Group] | None:
        """The earliest live item, (head position, group); stale ones in front are dropped."""
        items, run = self.items, self.run
        while items and items[0][1].item is not items[0]:
            _heappop(items)
        while run and run[0][1].item is not run[0]:
            run.popleft()
        if run:
            return items[0] if items and items[0][0] < run[0][0] else run[0]
        return items[0] if items else None

    def pop(self, item: tuple[int, Group]) -> None:
        """Take ``item``, the one :meth:`top` just gave, off."""
        run = self.run
        if run and run[0] is item:
            run.popleft()
        else:
            _heappop(self.items)
        self.live -= 1

    def groups(self) -> list[Group]:
        """Every group listed here, earliest head first (O(g log g): the slow path)."""
        return [item[1] for item in sorted([*self.items, *self.run]) if item[1].item is item]


class GroupDistributor:
    """Hands out a grouped queue's available entries; see the module rules. Made as one of
    its two modes, :class:`SharedGroups` or :class:`StandardGroups` (:func:`make_groups`).

    It is the grouped queue's ordering (``push``, ``requeue``, ``discard``, ``len``), plus
    ``acquire`` for a given consumer and ``done`` when an acquired entry is settled or back.
    ``push``, ``acquire`` and ``done`` run once per message and inline their common case;
    there they test :attr:`shared` (a class attribute) instead of calling a method of the
    mode, which costs a call per message.
    """

    shared = False

    def __init__(self, settings: QueueSettings, default_group: str = DEFAULT_GROUP) -> None:
        self.key = settings.group_key
        self.default_group = settings.default_group or default_group
        self.available = 0  # available entries, in the lane or parked
        self.freed = False  # a group with messages waiting went free since the caller cleared this
        self._groups: dict[str | None, Group] = {}
        self._sweep_at = _IDLE_KEEP  # sweep idle groups when the table reaches this size,
        self._sweep_after = _IDLE_KEEP  # or when this many groups have gone idle since
        self._idled = 0  # groups that went idle in done() since the last sweep (or again)
        self._lane: deque[Entry] = deque()  # new entries, in arrival order (see module rules)
        self._lane_stale = 0  # entries in the lane that are no longer there for the taking
        self._free = GroupHeap()  # groups nobody holds
        self._owned: dict[int, GroupHeap] = {}  # consumer id -> groups it holds
        self._just_assigned = False  # the last acquire gave its group an owner
        # Called with the first parked entry of a group that goes free with entries parked:
        # consumers with a selector look again from there (queues/dispatching.py).
        self.on_freed: Callable[[Entry], None] | None = None

    # ---- the ordering interface (as the queue uses FifoOrder) ---------------------------

    def __len__(self) -> int:
        return self.available

    def push(self, entry: Entry) -> None:
        message = entry.message
        if self.key is None:
            name = message.group_id
        else:
            name = message.application_property(self.key)
            if type(name) is not str:
                name = key_text(name, message, self.key)
        if not name and self.shared:  # none, or empty: the default group, as qpidd
            name = self.default_group
        group = self._groups.get(name)
        if group is None:
            group = self._new_group(name)
        entry.rank = group
        group.waiting += 1
        self.available += 1
        self._lane.append(entry)

    def requeue(self, entry: Entry) -> None:
        """A released entry, or a held one now valid: parked in its group."""
        group = self._current(entry)
        group.waiting += 1
        self.available += 1
        self._park(group, entry)

    def discard(self, entry: Entry) -> None:
        group: Group = entry.rank
        group.waiting -= 1
        self.available -= 1
        if not entry.parked:
            self._leave_lane(entry)
        elif group.peek() is entry:
            # Its head leaves (still available as far as the FIFO can tell): take it out
            # now, so that the group is relisted under its next entry, not the gone one.
            group.pop()
            self._relist(group)
        else:
            group.discard(entry)

    def victim(self) -> Entry | None:
        """The oldest available entry, whatever its group (a ring deletes it first): the
        earliest of the lane's front and the heads listed in the free heap and each
        consumer's, O(c) for c consumers holding groups."""
        best = self._lane_front()
        for heap in (self._free, *self._owned.values()):
            top = heap.top()
            if top is not None and (best is None or top[0] < best.seq):
                best = top[1].peek()
        return best

    # ---- consumers ----------------------------------------------------------------------

    def acquire(self, consumer_id: int) -> Entry | None:  # noqa: C901 - the group dispatch hot path, measured
        """Take the oldest entry ``consumer_id`` may have (from free groups, its own, or the
        ungrouped) and hold its group for it. If the caller then finds the entry expired,
        :meth:`dropped` undoes the hold."""
        if not self.available:
            return None
        lane, free = self._lane, self._free
        own = self._owned.get(consumer_id) if self._owned else None
        while True:
            if lane and lane[0].state == AVAILABLE and not lane[0].parked:
                front: Entry | None = lane[0]
            else:
                front = self._lane_front()
            if free.live or own is not None and own.live:
                listed = self._earliest_listed(own)
                if listed is not None and (front is None or listed[0][0] < front.seq):
                    return self._take_listed(consumer_id, *listed, own)
            if front is None:
                return None
            group: Group = front.rank
            owner = group.owner
            lane.popleft()
            if owner is None or owner == consumer_id:  # the lane's front is its to take
                self.available -= 1
                group.waiting -= 1
                if group.name is None:  # ungrouped (standard mode)
                    self._just_assigned = False
                    return front
                group.acquired += 1
                if owner is None:
                    self._hold(group, consumer_id)
                else:
                    self._just_assigned = False
                if group.listed_in is not None:
                    self._relist(group)  # parked entries too (rare): where the owner looks
                return front
            self._park(group, front)  # another consumer's: out of everyone else's way

    def may_take(self, consumer_id: int, entry: Entry) -> bool:
        """Whether ``consumer_id`` may take ``entry`` now: its group is free or its own (a
        consumer with a selector, which finds its entries itself)."""
        owner = entry.rank.owner
        return owner is None or owner == consumer_id

    def set_aside(self, entry: Entry) -> None:
        """An available entry a consumer with a selector matched but may not take (another
        holds its group): parked in its group, so that the group's going free brings the
        consumer back to it (see :attr:`on_freed`)."""
        if not entry.parked:
            self._leave_lane(entry)  # the lane passes over it from now on
            self._park(entry.rank, entry)

    def take(self, consumer_id: int, entry: Entry) -> None:
        """A consumer with a selector takes ``entry`` (acquired by the caller), wherever
        it waits, and holds its group, as :meth:`acquire` would. Out of its group's FIFO at
        once (O(parked entries of the group)): it may come back before a stale copy would
        have been dropped."""
        group: Group = entry.rank
        if entry.parked:
            group.remove(entry)
        else:
            self._leave_lane(entry)
        self._taken(consumer_id, group, entry)

    def dropped(self, entry: Entry) -> None:
        """The entry :meth:`acquire` just returned leaves the queue instead (it expired):
        its consumer does not hold it, and gets no group for it."""
        group: Group = entry.rank
        if group.name is not None:
            group.acquired -= 1
            if self._just_assigned:
                freed = self.freed
                self._unassign(group)
                self.freed = freed  # not a change of hands: the hold never happened
        self._relist(group)

    def done(self, entry: Entry) -> bool:
        """A held entry is no longer with its consumer (settled, or already requeued).
        Returns whether its group became free with messages parked, so that other
        consumers may now take something they could not before."""
        group: Group = entry.rank
        if group.name is None:
            return False
        group.acquired -= 1
        if group.acquired:
            return False  # its holder keeps it, listed as it was
        if group.owner is None:
            self._relist(group)
            return False
        if self.shared:
            # The per-message case, inlined: a shared group goes free (orphaned is never
            # set in shared mode, and there is no standard-mode bookkeeping to undo).
            group.owner = None
            listed = group.listed_in
            if listed is None:  # nothing parked: its entries in the lane are anyone's now
                if not group.waiting:  # none: idle
                    self._idled += 1
                    if self._idled > self._sweep_after and len(self._groups) > _IDLE_KEEP:
                        self._sweep()
                return False
            # Entries parked: move its item from its holder's heap to the free one, under
            # the same head (a listed group's item is always at its head's position).
            self.freed = True
            position = group.item[0]  # type: ignore[index]
            group.listed_in = group.item = None
            listed.dropped()
            self._list(group, position)
            self._announce_free(group)
            return True
        if group.orphaned or self._refused_by_owner(group):
            self._unassign(group)
            self._relist(group)
            return group.listed_in is self._free
        self._relist(group)
        return False

    def consumer_gone(self, consumer_id: int) -> None:
        """A consumer went away: forget its heap of owned groups once it is empty (a
        shared group it held goes free as its messages come back)."""
        heap = self._owned.get(consumer_id)
        if heap is not None and not heap.live:
            del self._owned[consumer_id]

    def groups(self) -> Iterator[Group]:
        """Every group with messages or a holder now (for management)."""
        return iter([group for group in self._groups.values() if not group.idle()])

    # ---- internals ----------------------------------------------------------------------

    def _new_group(self, name: str | None) -> Group:
        """A group for a name the table does not have; idle groups are swept out first
        once the table has doubled since the last sweep (see the module rules)."""
        if len(self._groups) >= self._sweep_at:
            self._sweep()
        group = self._groups[name] = Group(name)
        return group

    def _sweep(self) -> None:
        """Drop the idle groups. The next sweep comes once the table has doubled or half
        of it has gone idle (again), so the O(g) sweep is O(1) amortised per message."""
        groups = self._groups
        for name, group in list(groups.items()):
            if group.idle():
                del groups[name]
        self._sweep_at = max(_IDLE_KEEP, 2 * len(groups))
        self._sweep_after = max(_IDLE_KEEP, len(groups) // 2)
        self._idled = 0

    def _current(self, entry: Entry) -> Group:
        """The table's group for an entry coming back: a held entry's group may have been
        swept while it was held, and a new one made under its name since."""
        group: Group = entry.rank
        current = self._groups.get(group.name)
        if current is not group:
            if current is None:
                self._groups[group.name] = group
            else:
                entry.rank = group = current
        return group

    def _leave_lane(self, entry: Entry) -> None:
        """An entry in the lane is no longer there for the taking: dropped when it reaches
        the front, or when stale entries are half the lane."""
        self._lane_stale += 1
        lane = self._lane
        if self._lane_stale >= _LANE_COMPACT_MIN and self._lane_stale * 2 > len(lane):
            self._lane = deque(
                e for e in lane if e.state == AVAILABLE and not e.parked and e is not entry
            )
            self._lane_stale = 0

    def _lane_front(self) -> Entry | None:
        """The lane's first entry still there for the taking; stale ones in front go."""
        lane = self._lane
        while lane:
            entry = lane[0]
            if entry.state == AVAILABLE and not entry.parked:
                return entry
            lane.popleft()
            self._lane_stale -= 1
        return None

    def _earliest_listed(self, own: GroupHeap | None) -> tuple[tuple[int, Group], GroupHeap] | None:
        """The earliest item of the free heap and the consumer's own, with its heap."""
        free = self._free
        best = free.top() if free.live else None
        heap = free
        if own is not None and own.live:
            mine = own.top()
            if mine is not None and (best is None or mine[0] < best[0]):
                best, heap = mine, own
        return (best, heap) if best is not None else None

    def _take_listed(
        self, consumer_id: int, item: tuple[int, Group], heap: GroupHeap, own: GroupHeap | None
    ) -> Entry | None:
        """Take the head of the group ``item`` lists, on top of ``heap``, unless the
        consumer refused it."""
        group = item[1]
        entry = group.peek()
        if entry is None or entry.excluded and consumer_id in entry.excluded:
            return self._take_allowed(consumer_id, own)
        group.pop()  # the head (peek dropped any stale entries before it)
        heap.pop(item)
        group.listed_in = group.item = None
        return self._taken(consumer_id, group, entry)

    def _take_allowed(self, consumer_id: int, own: GroupHeap | None) -> Entry | None:
        """The slow path, for a consumer refused by a group's head (undeliverable-here):
        every entry is parked, then the earliest group whose head it may take gives it."""
        lane = self._lane
        while lane:
            entry = lane.popleft()
            if entry.state == AVAILABLE and not entry.parked:
                self._park(entry.rank, entry)
        self._lane_stale = 0
        group = self._first_allowed(consumer_id, own)
        if group is None:
            return None
        popped = group.pop()
        assert popped is not None
        return self._taken(consumer_id, group, popped)

    def _taken(self, consumer_id: int, group: Group, entry: Entry) -> Entry:
        """``entry``, just out of ``group``'s FIFO, is the consumer's."""
        entry.parked = False  # type: ignore[misc]
        self.available -= 1
        group.waiting -= 1
        self._just_assigned = False
        if group.name is not None:
            group.acquired += 1
            if group.owner is None:
                self._hold(group, consumer_id)
        self._relist(group)
        return entry

    def _hold(self, group: Group, consumer_id: int) -> None:
        group.owner = consumer_id
        self._just_assigned = True

    def _park(self, group: Group, entry: Entry) -> None:
        """Park an available entry in its group, and list the group where its holder (or
        everyone, if free) looks, under its first parked entry."""
        group.park(entry)
        listed = group.item
        if listed is None:
            self._list(group, entry.seq)
        elif entry.seq < listed[0]:
            self._relist(group)

    def _first_allowed(self, consumer_id: int, own_heap: GroupHeap | None) -> Group | None:
        """The earliest listed group whose head the consumer may take. On the way, a
        standard group of its own whose head it refused, and of which it holds nothing, is
        given up."""
        candidates = self._free.groups()
        if own_heap is not None:
            candidates = sorted(candidates + own_heap.groups(), key=_head_position)
        for group in candidates:
            head = group.peek()
            if head is None:
                continue
            if not (head.excluded and consumer_id in head.excluded):
                return group
            if group.owner == consumer_id and group.acquired == 0:
                self._unassign(group)
                self._relist(group)
        return None

    def _refused_by_owner(self, group: Group) -> bool:
        head = group.peek()
        return bool(head is not None and head.excluded and group.owner in head.excluded)

    def _unassign(self, group: Group) -> None:
        assert group.owner is not None
        group.owner, group.orphaned = None, False
        if group.listed_in is not None:  # it has entries parked, others may take now
            self.freed = True
            self._announce_free(group)

    def _announce_free(self, group: Group) -> None:
        """``group`` went free with entries parked: tell :attr:`on_freed` where."""
        head = group.peek()
        if self.on_freed is not None and head is not None:
            self.on_freed(head)

    def _relist(self, group: Group) -> None:
        """List the group under its parked head, in the free heap or its owner's; or not
        at all when nothing is parked."""
        head = group.peek()
        listed = group.listed_in
        if listed is not None:
            should_be = self._free if group.owner is None else self._owned.get(group.owner)
            item = group.item
            if (
                head is not None
                and item is not None
                and head.seq == item[0]
                and listed is should_be
            ):
                return  # listed where it should be, under the right position
            group.listed_in = group.item = None
            listed.dropped()
        if head is not None:
            self._list(group, head.seq)

    def _list(self, group: Group, position: int) -> None:
        """List an unlisted group under ``position``: in the free heap, or its owner's."""
        owner = group.owner
        if owner is None:
            heap = self._free
        else:
            owned = self._owned.get(owner)
            if owned is None:
                owned = self._owned[owner] = GroupHeap()
            heap = owned
        group.listed_in = heap
        item = group.item = (position, group)
        heap.add(item)


def _head_position(group: Group) -> int:
    head = group.peek()
    return head.seq if head is not None else -1


class SharedGroups(GroupDistributor):
    """Shared groups (``qpid.shared_msg_group``, the Qpid C++ broker): a group is its
    consumer's while that consumer holds unsettled messages of it; messages without a group
    id form the default group."""

    shared = True


class StandardGroups(GroupDistributor):
    """Standard groups (Broker-J's default): a group is its first consumer's for as long as
    that consumer lives; messages without a group id are not grouped."""

    def __init__(self, settings: QueueSettings, default_group: str = DEFAULT_GROUP) -> None:
        super().__init__(settings, default_group)
        self._assigned: dict[int, set[Group]] = {}  # consumer -> the groups it was given

    def _hold(self, group: Group, consumer_id: int) -> None:
        super()._hold(group, consumer_id)
        self._assigned.setdefault(consumer_id, set()).add(group)

    def _unassign(self, group: Group) -> None:
        assigned = self._assigned.get(group.owner)  # type: ignore[arg-type]
        if assigned is not None:
            assigned.discard(group)
        super()._unassign(group)

    def consumer_gone(self, consumer_id: int) -> None:
        """Free the groups assigned to a consumer that went away; a group whose messages it
        still holds is freed when the last of them comes back, so the group's next
        consumer cannot overtake them."""
        for group in self._assigned.pop(consumer_id, ()):
            if group.acquired:
                group.orphaned = True
                continue
            group.owner = None
            self._relist(group)
            if group.listed_in is not None:
                self._announce_free(group)
        super().consumer_gone(consumer_id)


def make_groups(settings: QueueSettings, default_group: str = DEFAULT_GROUP) -> GroupDistributor:
    """The group distributor of a grouped queue, in the mode its settings ask for."""
    mode = SharedGroups if settings.group_mode == GROUPS_SHARED else StandardGroups
    return mode(settings, default_group)
