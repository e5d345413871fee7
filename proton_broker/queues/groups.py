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
  are not grouped and go to any consumer.
* Groups never block each other: a consumer gets the oldest message it may take, which may be
  behind a blocked group's messages.
* Within a group, order is arrival order, and a released message goes back to its position.

How it stays fast (no scanning of blocked groups): each group keeps its own FIFO of
available entries. A group with available entries is indexed by the position of its first
one in exactly one sorted list: the list of free groups, or the list of groups owned by its
consumer. A consumer's next entry is the first of the heads of those two lists (merged
lazily), so acquiring is O(log g) for g groups with available messages, however many groups
are blocked.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from sortedcontainers import SortedList

from proton_broker.message import property_text
from proton_broker.queues.entries import Entry, FifoOrder
from proton_broker.queues.settings import GROUPS_SHARED, QueueSettings

DEFAULT_GROUP = "qpid.no-group"


class Group:
    """One group's available entries and who holds it."""

    __slots__ = ("name", "fifo", "owner", "acquired", "indexed_in", "indexed_at", "orphaned")

    def __init__(self, name: str | None) -> None:
        self.name = name  # None: the ungrouped messages of a standard-groups queue
        self.fifo = FifoOrder()
        self.owner: int | None = None
        self.acquired = 0  # entries of this group acquired and not yet settled
        self.indexed_in: SortedList | None = None  # where the group's head is listed
        self.indexed_at = -1  # the position it is listed under
        self.orphaned = False  # its consumer left while still holding some of its messages

    def __repr__(self) -> str:
        return f"<Group {self.name!r} owner={self.owner} acquired={self.acquired}>"


class GroupDistributor:
    """Hands out a grouped queue's available entries; see the module rules."""

    def __init__(self, settings: QueueSettings, default_group: str = DEFAULT_GROUP) -> None:
        self.shared = settings.group_mode == GROUPS_SHARED
        self.key = settings.group_key
        self.default_group = settings.default_group or default_group
        self._groups: dict[str | None, Group] = {}
        self._free = SortedList(key=_position)  # (head position, group): nobody holds them
        self._owned: dict[int, SortedList] = {}  # consumer id -> (head position, group)
        self._assigned: dict[int, set[Group]] = {}  # standard mode: consumer -> its groups

    # ---- the ordering interface (as the queue uses FifoOrder) ---------------------------

    def __len__(self) -> int:
        return sum(len(g.fifo) for g in self._groups.values())

    def push(self, entry: Entry) -> None:
        group = self._group_for(entry)
        entry.rank = group
        group.fifo.push(entry)
        self._index(group)

    def requeue(self, entry: Entry) -> None:
        group: Group = entry.rank
        group.fifo.requeue(entry)
        self._index(group)

    def discard(self, entry: Entry) -> None:
        group: Group = entry.rank
        group.fifo.discard(entry)
        self._index(group)

    # ---- consumers ----------------------------------------------------------------------

    def acquire(self, consumer_id: int) -> Entry | None:
        """The oldest entry ``consumer_id`` may take now (free groups, its own, ungrouped)."""
        own = self._owned.get(consumer_id, ())
        for _, group in heapq.merge(self._free, own, key=_position):
            entry = group.fifo.peek()
            if entry is None or (entry.excluded and consumer_id in entry.excluded):
                continue  # this consumer may not take the group's head: try the next group
            group.fifo.pop()
            self._held_by(group, consumer_id)
            return entry
        return None

    def done(self, entry: Entry) -> None:
        """An acquired entry is no longer with its consumer (settled or released)."""
        group: Group = entry.rank
        if group.name is None:
            return
        group.acquired -= 1
        if group.acquired == 0 and (self.shared or group.orphaned):
            group.owner, group.orphaned = None, False
        self._index(group)

    def consumer_gone(self, consumer_id: int) -> None:
        """Standard mode frees the groups assigned to a consumer that went away; a group
        whose messages it still holds is freed when the last of them comes back, so the
        group's next consumer cannot overtake them."""
        for group in self._assigned.pop(consumer_id, ()):
            if group.acquired:
                group.orphaned = True
                continue
            group.owner = None
            self._index(group)
        if consumer_id in self._owned and not self._owned[consumer_id]:
            del self._owned[consumer_id]

    def groups(self) -> Iterator[Group]:
        """Every group the queue tracks now (for management)."""
        return iter(list(self._groups.values()))

    # ---- internals ----------------------------------------------------------------------

    def _group_for(self, entry: Entry) -> Group:
        message = entry.message
        if self.key is None:
            name = message.group_id
        else:
            name = property_text(message.application_properties.get(self.key))
        if name is None and self.shared:
            name = self.default_group
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = Group(name)
        return group

    def _held_by(self, group: Group, consumer_id: int) -> None:
        if group.name is not None:
            group.acquired += 1
            if group.owner is None:
                group.owner = consumer_id
                if not self.shared:
                    self._assigned.setdefault(consumer_id, set()).add(group)
        self._index(group)

    def _index(self, group: Group) -> None:
        """List the group under its head position, in the free list or its owner's."""
        head = group.fifo.peek()
        if head is None:
            target, at = None, -1
        elif group.owner is None:
            target, at = self._free, head.seq
        else:
            target, at = self._owned.get(group.owner), head.seq
            if target is None:
                target = self._owned[group.owner] = SortedList(key=_position)
        if target is not group.indexed_in or at != group.indexed_at:
            if group.indexed_in is not None:
                group.indexed_in.remove((group.indexed_at, group))
            if target is not None:
                target.add((at, group))
            group.indexed_in, group.indexed_at = target, at
        if target is None and group.owner is None and group.acquired == 0 \
                and self._groups.get(group.name) is group:
            del self._groups[group.name]  # nothing left to remember about it


def _position(item: tuple[int, Group]) -> int:
    return item[0]
