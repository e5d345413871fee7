"""A queue's size limits in action: what happens when it fills, and flow to disk.

:mod:`proton_broker.queues.overflow` decides (is a limit crossed, by which policy, where to
resume); this module acts on a queue, as Broker-J's overflow policy handlers do:

* **reject**: a message that would take the queue over its limit is refused before anything
  changes (:class:`~proton_broker.errors.ResourceLimitExceeded`). The messages sent to the
  queue under transactions still open (:attr:`Queue.pending`, :attr:`Queue.pending_bytes`:
  they join it at commit) count on top of its depth, as Broker-J's ``RejectPolicyHandler``
  counts them, for every send, transactional or not. So a transaction cannot stage more
  than the queue has room for, and a commit cannot take the queue over its limit: the room
  its messages need was theirs from the send (unless the limit was lowered meanwhile).
  A transaction that ends gives its count back, committed (its messages are on the queue
  now) or rolled back.
* **ring**: the least significant *available* entries (the ordering's victim) are deleted
  until the queue is within its limit, never a message a consumer holds, so with only
  acquired messages left the queue stays over until they are settled. The message that just
  arrived is deleted only when something more significant is available (a higher priority,
  a lower sort key): it is never the price of an acquired one.
* **flow to disk**: a message that arrives over the limit has its bytes written to the
  store and dropped from memory while it waits; a consumer that takes it reads them back,
  and a browser or selector reads them for the time it looks, leaving it paged. Set on a
  live queue (management's UPDATE), it pages out at once the waiting messages beyond its
  limit, counted from the oldest.
* **self-destruct**: the message that takes the queue over its limit joins it, and the
  queue asks the broker to delete it (``LoopHooks.self_destruct``), once.
* **producer flow control**: over its stop threshold the queue sets
  :attr:`Queue.flow_stopped` and tells its :class:`~proton_broker.queues.ports.FlowObserver`
  objects; back at its resume threshold, it tells them again.

A queue without limits has no :class:`Limits` and pays one test per enqueue and removal.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

from proton_broker.errors import ResourceLimitExceeded
from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, HELD, Entry
from proton_broker.queues.overflow import (
    FlowControl,
    FlowToDiskPolicy,
    LimitPolicy,
    RejectPolicy,
    RingPolicy,
    SelfDestructPolicy,
)
from proton_broker.queues.ports import FlowObserver, LoopHooks, Pager

if TYPE_CHECKING:
    from proton_broker.queues.queue import Queue


class Limits:
    """The limit policy and producer flow control of ``owner`` (either may be None)."""

    def __init__(
        self,
        owner: Queue,
        limit: LimitPolicy | None,
        flow: FlowControl | None,
        observers: dict[FlowObserver, None] | None = None,
    ) -> None:
        self.owner = owner
        self.limit = limit
        self.flow = flow
        # The queue's producers (its own map: they are told even if limits come later).
        self.observers: dict[FlowObserver, None] = {} if observers is None else observers

    def admit(self, message: Message) -> None:
        """A reject queue refuses what would take it over its limit, counting what open
        transactions sent to it (see the module rules)."""
        limit, owner = self.limit, self.owner
        if type(limit) is RejectPolicy:
            pending, pending_bytes = owner.pending, owner.pending_bytes  # see the module rules
            why = limit.refusal(
                owner.depth + pending,
                owner.bytes + pending_bytes,
                len(message.data),
                pending,
                pending_bytes,
            )
            if why is not None:
                owner.stats.refused += 1
                raise ResourceLimitExceeded(why)

    def joined(self, entry: Entry) -> None:
        """``entry`` joined: make room (ring), page it out (flow to disk), stop producers."""
        limit, owner = self.limit, self.owner
        depth, nbytes = owner.depth, owner.bytes
        if type(limit) is RingPolicy and limit.needs_room(depth, nbytes):
            self._make_room(limit, entry)
        elif (
            type(limit) is FlowToDiskPolicy
            and owner.hooks.pager is not None
            and limit.pages_out(depth, nbytes)
        ):
            owner.hooks.pager.page_out(entry.message, lambda: self._paged_out(entry))
        self.counted()

    def counted(self) -> None:
        """A message joined that needs no room made and is not paged (what a queue that
        packs its messages, queues/packed.py, has: neither a ring nor flow to disk): stop
        producers if it is time; a self-destruct queue over its limit is to be deleted."""
        owner = self.owner
        limit = self.limit
        if type(limit) is SelfDestructPolicy and limit.destructs(owner.depth, owner.bytes):
            destruct = owner.hooks.self_destruct
            if destruct is not None and destruct(owner):  # not while the broker recovers
                limit.destroyed(owner.depth, owner.bytes)
        flow = self.flow
        if flow is not None and flow.enqueued(owner.depth, owner.bytes):
            owner.flow_stopped = True
            for observer in list(self.observers):
                observer.flow_stopped(owner)

    def left(self) -> None:
        """An entry left: the queue may be back at its resume level."""
        owner = self.owner
        depth, nbytes = owner.depth, owner.bytes
        if self.limit is not None:
            self.limit.removed(depth, nbytes)
        flow = self.flow
        if flow is not None and flow.removed(depth, nbytes):
            owner.flow_stopped = False
            for observer in list(self.observers):
                observer.flow_resumed(owner)

    def took_over(self, stopped: bool) -> None:
        """These limits replace others on a live queue (management's UPDATE), whose
        producers were ``stopped`` or not: they apply now, as Broker-J applies a new
        overflow policy at once. A ring over its limit makes room; producer flow control
        stops the producers over its stop level, and keeps stopped ones stopped until the
        queue is down to its resume level. Flow to disk pages out what is on the queue
        beyond its limit now (:meth:`_page_out_beyond`), and what arrives over it."""
        owner, limit, flow = self.owner, self.limit, self.flow
        depth, nbytes = owner.depth, owner.bytes
        if type(limit) is RingPolicy and limit.needs_room(depth, nbytes):
            self._make_room(limit, None)
        elif type(limit) is FlowToDiskPolicy and owner.hooks.pager is not None:
            self._page_out_beyond(limit)
        elif (
            limit is not None
            and type(limit) is not SelfDestructPolicy  # it goes at the next arrival
            and limit.limit.over(depth, nbytes)
        ):
            limit.went_over(depth, nbytes)
        if flow is not None:
            if stopped and not flow.resume.reached_down_to(depth, nbytes):
                flow.over = True  # still stopped, until the queue drains
            else:
                flow.enqueued(depth, nbytes)
        now = flow is not None and flow.over
        if now != owner.flow_stopped:
            owner.flow_stopped = now
            for observer in list(self.observers):
                if now:
                    observer.flow_stopped(owner)
                else:
                    observer.flow_resumed(owner)

    def _make_room(self, ring: RingPolicy, newest: Entry | None) -> None:
        """Delete the least significant available entries until the queue is within its
        limit; ``newest`` only if something more significant is available."""
        owner = self.owner
        ring.went_over(owner.depth, owner.bytes)
        while ring.needs_room(owner.depth, owner.bytes):
            victim = owner.ring_victim()
            if victim is None or (victim is newest and owner.available_count() <= 1):
                return  # only acquired entries are left: they leave when settled
            owner.evict(victim)
            ring.dropped += 1

    def _page_out_beyond(self, limit: FlowToDiskPolicy) -> None:
        """Flow to disk set on a live queue: the messages beyond its limit, counted from the
        oldest, are paged out now, as if each had just arrived over it (Broker-J's flow to
        disk flows the queue's tail when its limits change). Those consumers hold, and
        those paged out already, count but stay as they are. O(n), once."""
        owner = self.owner
        pager = owner.hooks.pager
        assert pager is not None
        size = 0
        for count, entry in enumerate(owner.entries(), 1):
            message = entry.message
            size += message.size
            waiting = entry.state in (AVAILABLE, HELD) and not message.paged
            if waiting and limit.pages_out(count, size):
                pager.page_out(message, partial(self._paged_out, entry))

    def _paged_out(self, entry: Entry) -> None:
        """The entry's bytes are in the store: drop them from memory, unless a consumer
        has it now (the bytes stay with it) or it has left the queue."""
        message = entry.message
        if (entry.state == AVAILABLE or entry.state == HELD) and not message.paged:
            message.paged_size = len(message.data)
            message.paged = True
            message.data = b""
            self.owner.stats.paged_out += 1
            self.owner.hooks.budget.remove(message.paged_size)  # in the store now


def page_in(hooks: LoopHooks, message: Message) -> None:
    """A consumer takes a paged-out message: its bytes come back into memory for good
    (and count in the memory budget again)."""
    assert hooks.pager is not None
    message.data = hooks.pager.page_in(message)
    message.paged = False
    hooks.budget.add(len(message.data))  # over the limit: producers stop now


@contextmanager
def read_back(pager: Pager | None, message: Message) -> Iterator[None]:
    """A paged-out message's bytes, in memory only while they are needed: it stays paged,
    whoever reads it (a browser, a selector)."""
    assert pager is not None
    message.data = pager.page_in(message)
    try:
        yield
    finally:
        message.data = b""
