"""Message groups: which consumer may acquire which available entry.

Semantics (shared/seeds/qpid-cpp-message-groups.xml and qpid-broker-j-queues.txt 4.7.2):

* A message's group is the text of the application property named by the queue's group key,
  or ``properties.group-id`` when no key is configured (where JMS puts ``JMSXGroupID``).
* **Shared groups** (``qpid.shared_msg_group``, the Qpid C++ behaviour): a group belongs to a
  consumer while that consumer holds acquired, unsettled messages of it. Once it has settled
  them all (accepted, released, rejected or modified) the group is free, and its next
  message may go to any consumer. Messages without a group id form the default group
  (``qpid.no-group`` unless configured), a group like any other.
* **Standard groups** (Broker-J's default): a group is assigned to the first consumer that
  takes one of its messages, for the lifetime of that consumer. Messages without a group id
  are not grouped and go to any consumer. One exception, where the documents are silent: a
  consumer that said a group's first message is undeliverable to it (modified,
  undeliverable-here) and holds nothing else of the group gives the group up, since it could
  never take that message and nobody else could either.
* Groups never block each other: a consumer gets the oldest message it may take, which may be
  behind a blocked group's messages.
* Within a group, order is arrival order, and a released message goes back to its position.

How it stays fast (no scanning of blocked groups): each group keeps its own FIFO of
available entries. A group with available entries is listed, under the position of its
first one, in exactly one min-heap: the heap of free groups, or the heap of groups owned by
its consumer. A consumer's next entry is the head of whichever of the two heaps' tops comes
first, so acquiring is O(log g) for g groups with available messages, however many groups
are blocked. Heaps are updated lazily: relisting a group pushes a new item and leaves the
old one stale, to be dropped when it reaches the top (or when stale items outnumber live
ones). Only a consumer refused by a group's head (undeliverable-here) takes a slower path
that sorts the candidate groups.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from proton_broker.message import property_text
from proton_broker.queues.entries import AVAILABLE, Entry, FifoOrder
from proton_broker.queues.settings import GROUPS_SHARED, QueueSettings

DEFAULT_GROUP = "qpid.no-group"
_COMPACT_MIN = 64  # rebuild a heap once it holds at least this many stale items
_IDLE_KEEP = 16384  # idle groups kept for reuse, at most (about 1 KB each)

_heappush = heapq.heappush
_heappop = heapq.heappop


class Group(FifoOrder):
    """One group: the FIFO of its available entries (it is one, to save an object and an
    indirection per message), and who holds it.

    The distributor's per-message paths reach into the FIFO's ``_tail`` and ``_back``
    where a method call would cost more than the work (see :meth:`GroupDistributor.acquire`).
    """

    __slots__ = ("name", "owner", "acquired", "listed_in", "item", "orphaned", "spare")

    def __init__(self, name: str | None) -> None:
        # FifoOrder's fields, set here rather than through its __init__: a group is made
        # per new group id, often once per message.
        self._tail: deque[Entry] = deque()
        self._back: list[tuple[int, Entry]] = []
        self._stale = 0
        self.name = name  # None: the ungrouped messages of a standard-groups queue
        self.owner: int | None = None
        self.acquired = 0  # entries of this group acquired and not yet settled
        self.listed_in: GroupHeap | None = None  # the heap its head is listed in
        self.item: tuple[int, Group] | None = None  # its live item there: (head position, it)
        self.orphaned = False  # its consumer left while still holding some of its messages
        self.spare = False  # idle, kept for reuse and counted in GroupDistributor._idle

    def __bool__(self) -> bool:
        return True  # a group is a group, however many entries its FIFO holds

    def idle(self) -> bool:
        """Nothing to remember: no messages, no holder."""
        return self.listed_in is None and self.owner is None and not self.acquired \
            and not len(self)

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
    """Hands out a grouped queue's available entries; see the module rules.

    It is the grouped queue's ordering (``push``, ``requeue``, ``discard``, ``len``), plus
    ``acquire`` for a given consumer and ``done`` when an acquired entry is settled or back.

    ``push``, ``acquire`` and ``done`` run once per message: they inline the common cases of
    the helpers below (listing, relisting, going idle), which the other paths call.
    """

    def __init__(self, settings: QueueSettings, default_group: str = DEFAULT_GROUP) -> None:
        self.shared = settings.group_mode == GROUPS_SHARED
        self.key = settings.group_key
        self.default_group = settings.default_group or default_group
        self.available = 0  # entries in the groups' FIFOs
        self.freed = False  # a group with messages waiting went free since the caller cleared this
        self._groups: dict[str | None, Group] = {}
        self._free = GroupHeap()  # groups nobody holds
        self._owned: dict[int, GroupHeap] = {}  # consumer id -> groups it holds
        self._assigned: dict[int, set[Group]] = {}  # standard mode: consumer -> its groups
        self._idle = 0  # groups in the table with nothing to remember (see _went_idle)
        self._just_assigned = False  # the last acquire gave its group an owner

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
                name = property_text(name)
        if name is None and self.shared:
            name = self.default_group
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = Group(name)
        entry.rank = group
        group._tail.append(entry)
        self.available += 1
        if group.listed_in is None:  # it had no head: this entry is its head now
            if group.owner is None:  # _list, inlined for the common case of a free group
                if group.spare:  # busy again
                    group.spare = False
                    self._idle -= 1
                heap = self._free
                group.listed_in = heap
                item = group.item = (entry.seq, group)
                run = heap.run  # GroupHeap.add, inlined
                if not run or item[0] > run[-1][0]:
                    run.append(item)
                else:
                    _heappush(heap.items, item)
                heap.live += 1
            else:
                self._list(group, entry.seq)

    def requeue(self, entry: Entry) -> None:
        group: Group = entry.rank
        group.requeue(entry)
        self.available += 1
        self._relist(group)

    def discard(self, entry: Entry) -> None:
        group: Group = entry.rank
        if group.peek() is entry:
            # Its head leaves (still available as far as the FIFO can tell): take it out
            # now, so that the group is relisted under its next entry, not the gone one.
            group.pop()
        else:
            group.discard(entry)
        self.available -= 1
        self._relist(group)

    def victim(self) -> Entry | None:
        """The oldest available entry, whatever its group (a ring deletes it first): the
        earliest head among the free groups' heap and each consumer's, O(c) for c
        consumers holding groups."""
        best: tuple[int, Group] | None = None
        for heap in (self._free, *self._owned.values()):
            top = heap.top()
            if top is not None and (best is None or top[0] < best[0]):
                best = top
        return best[1].peek() if best is not None else None

    # ---- consumers ----------------------------------------------------------------------

    def acquire(self, consumer_id: int) -> Entry | None:
        """Take the oldest entry ``consumer_id`` may have (from free groups, its own, or the
        ungrouped) and hold its group for it. If the caller then finds the entry expired,
        :meth:`dropped` undoes the hold."""
        if not self.available:
            return None
        heap = self._free
        items, run = heap.items, heap.run
        if items or not run or run[0][1].item is not run[0]:
            item = heap.top()
        else:
            item = run[0]  # GroupHeap.top, inlined for its common case
        own_heap = self._owned.get(consumer_id)
        if own_heap is not None and own_heap.live:
            mine = own_heap.top()
            if mine is not None and (item is None or mine[0] < item[0]):
                item, heap = mine, own_heap
        if item is None:
            return None
        group = item[1]
        tail = group._tail
        if not group._back and tail and tail[0].state == AVAILABLE:
            entry: Entry | None = tail[0]  # the head, without a call to peek
        else:
            entry = group.peek()
        if entry is not None and not (entry.excluded and consumer_id in entry.excluded):
            # Take the head out of the FIFO (peek dropped any stale entries before it) and
            # the group's item, on top of its heap, off the heap.
            if group._back:
                _heappop(group._back)
            else:
                tail.popleft()
            run = heap.run  # GroupHeap.pop, inlined
            if run and run[0] is item:
                run.popleft()
            else:
                _heappop(heap.items)
            heap.live -= 1
            group.listed_in = group.item = None
        else:
            found = self._first_allowed(consumer_id, own_heap)
            if found is None:
                return None
            group = found
            entry = group.pop()
            assert entry is not None
        self.available -= 1
        self._just_assigned = False
        if group.name is not None:
            group.acquired += 1
            if group.owner is None:
                group.owner = consumer_id
                self._just_assigned = True
                if not self.shared:
                    self._assigned.setdefault(consumer_id, set()).add(group)
        if group.listed_in is not None:
            self._relist(group)  # the slow path left it listed
        elif group._tail or group._back:  # it has more: list it under the next one
            tail = group._tail
            if not group._back and tail[0].state == AVAILABLE:
                head: Entry | None = tail[0]  # without a call to peek, as above
            else:
                head = group.peek()
            if head is not None:
                self._list(group, head.seq)
        elif group.owner is None and not group.acquired and not group.spare:
            self._went_idle(group)  # an ungrouped entry of a standard queue, the last one
        return entry

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
        Returns whether its group became free with messages waiting, so that other
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
            if group.listed_in is None:
                # Nothing waiting (a listed group is one with available entries): it is
                # idle now, kept for reuse (see _went_idle).
                if not group.spare:
                    group.spare = True
                    self._idle += 1
                    if self._idle > _IDLE_KEEP:
                        self._sweep()
                return False
            # Messages wait: move its item from its holder's heap to the free one, under
            # the same head (a listed group's item is always at its head's position).
            self.freed = True
            listed = group.listed_in
            position = group.item[0]  # type: ignore[index]
            group.listed_in = group.item = None
            listed.dropped()
            self._list(group, position)
            return True
        if group.orphaned or self._refused_by_owner(group):
            self._unassign(group)
            self._relist(group)
            return group.listed_in is self._free
        self._relist(group)
        return False

    def consumer_gone(self, consumer_id: int) -> None:
        """Standard mode frees the groups assigned to a consumer that went away; a group
        whose messages it still holds is freed when the last of them comes back, so the
        group's next consumer cannot overtake them."""
        for group in self._assigned.pop(consumer_id, ()):
            if group.acquired:
                group.orphaned = True
                continue
            group.owner = None
            self._relist(group)
        heap = self._owned.get(consumer_id)
        if heap is not None and not heap.live:
            del self._owned[consumer_id]

    def groups(self) -> Iterator[Group]:
        """Every group with messages or a holder now (for management)."""
        return iter([group for group in self._groups.values() if not group.idle()])

    # ---- internals ----------------------------------------------------------------------

    def _went_idle(self, group: Group) -> None:
        """A group has nothing left to remember (no messages, no holder).

        It stays in the table for reuse rather than being dropped at once: groups in use go
        idle and busy again all the time (a group with one message in flight is idle between
        its settlement and its next message), and making a new one each time is a good part
        of a grouped message's cost. Once more than ``_IDLE_KEEP`` groups (or half the
        table) are idle, the idle ones are dropped: O(1) per message amortised, and at most
        that many idle groups kept.
        """
        group.spare = True
        self._idle += 1
        if self._idle > _IDLE_KEEP:
            self._sweep()

    def _sweep(self) -> None:
        """Drop the idle groups, if they are more than half the table (see _went_idle)."""
        if self._idle > len(self._groups) >> 1:
            groups = self._groups
            for name, group in list(groups.items()):
                if group.idle():
                    del groups[name]
            self._idle = 0

    def _first_allowed(self, consumer_id: int, own_heap: GroupHeap | None) -> Group | None:
        """The slow path, for a consumer refused by a group's head (undeliverable-here):
        the earliest group whose head it may take. On the way, a standard group of its own
        whose head it refused, and of which it holds nothing, is given up."""
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
        owner = group.owner
        assert owner is not None
        if not self.shared:
            assigned = self._assigned.get(owner)
            if assigned is not None:
                assigned.discard(group)
        group.owner, group.orphaned = None, False
        if group.listed_in is not None:  # it has messages waiting, others may take now
            self.freed = True

    def _relist(self, group: Group) -> None:
        """List the group under its head position, in the free heap or its owner's."""
        head = group.peek()
        listed = group.listed_in
        if listed is not None:
            if head is not None and head.seq == group.item[0] and listed is (  # type: ignore[index]
                    self._free if group.owner is None else self._owned.get(group.owner)):
                return  # listed where it should be, under the right position
            group.listed_in = group.item = None
            listed.dropped()
        if head is not None:
            self._list(group, head.seq)
        elif group.owner is None and not group.acquired and not group.spare:
            self._went_idle(group)

    def _list(self, group: Group, position: int) -> None:
        """List an unlisted group under ``position``: in the free heap, or its owner's."""
        owner = group.owner
        if owner is None:
            heap = self._free
        else:
            heap = self._owned.get(owner)
            if heap is None:
                heap = self._owned[owner] = GroupHeap()
        if group.spare:  # busy again
            group.spare = False
            self._idle -= 1
        group.listed_in = heap
        item = group.item = (position, group)
        heap.add(item)


def _head_position(group: Group) -> int:
    head = group.peek()
    return head.seq if head is not None else -1
