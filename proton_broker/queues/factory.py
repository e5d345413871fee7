"""Assembling a queue from its settings, as qpid-cpp's ``QueueFactory`` does: the settings
choose the parts, the parts are made here, and the queue gets them in one
:class:`QueueParts` at construction. A queue never decides its own type.

The assembly table (first match wins for the ordering, as in Broker-J's queue factory:
priorities, then sort key, then last-value key):

=================================================  ==========================================
settings                                           part
=================================================  ==========================================
``priorities`` (``x-qpid-priorities``)             :class:`~.entries.PriorityOrder` ordering
``priorities`` and a share (``qpid.fairshare``)    :class:`~.entries.FairshareOrder` ordering
``sort_key`` (``qpid.queue_sort_key``)             :class:`~.entries.SortedOrder` ordering
otherwise                                          :class:`~.entries.FifoOrder` ordering
a group header key (``qpid.group_header_key``)     a group distributor in place of the
                                                   ordering: :class:`~.groups.StandardGroups`,
                                                   or :class:`~.groups.SharedGroups` with
                                                   ``qpid.shared_msg_group``
``lvq_key`` (``qpid.last_value_queue_key``)        :class:`~.history.History` (per-key numbers),
                                                   also the index of each key's newest entry
``sequenceKey``                                    :class:`~.history.History` (per-key numbers)
``max_count``/``max_size`` and a policy            ring, reject or flow-to-disk policy
                                                   (:func:`~.overflow.make_limit`)
flow stop/resume thresholds                        producer flow control
                                                   (:func:`~.overflow.make_flow_control`)
duplicate detection count/seconds                  the duplicate window, in
                                                   :class:`~.numbering.Numbering`
``holdOnPublishEnabled``                           :class:`~.holds.Holds`
a FIFO ordering, no key, neither a ring nor flow   a :class:`~.packed.PackedTail` for the
to disk (broker-wide ``queue.pack_after`` > 0)     newest messages of a deep queue
=================================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proton_broker.queues.entries import (
    Entry,
    FairshareOrder,
    FifoOrder,
    GroupedEntry,
    KeyedEntry,
    Ordering,
    PackingFifoOrder,
    PriorityOrder,
    RankedEntry,
    SortedOrder,
)
from proton_broker.queues.groups import DEFAULT_GROUP, GroupDistributor, make_groups
from proton_broker.queues.history import History
from proton_broker.queues.overflow import (
    FlowControl,
    FlowToDiskPolicy,
    LimitPolicy,
    RingPolicy,
    make_flow_control,
    make_limit,
)
from proton_broker.queues.packed import PACK_AFTER, PackedTail
from proton_broker.queues.ports import LoopHooks
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import QueueSettings

# Versions of each key a last-value queue keeps for replay when neither the queue nor the
# broker-wide ``queue.max_key_updates`` says: enough for a client that reconnects from its
# last sequence (the long poll without data loss) to see every update, unless it is more
# than this many updates of a key behind; bounded, so a key updated for ever does not grow
# the store for ever. A queue with ``sequenceKey`` keeps every version unless told.
LVQ_HISTORY = 100


@dataclass(frozen=True, slots=True)
class QueueParts:
    """Everything a queue is assembled from (see the module's table)."""

    settings: QueueSettings
    order: Ordering | GroupDistributor  # the groups, on a grouped queue
    groups: GroupDistributor | None
    history: History | None
    limit: LimitPolicy | None
    flow: FlowControl | None
    entry: type[Entry]  # the entry kind: only what the queue's features use (entries.py)
    packed: PackedTail | None  # where a deep queue packs its newest messages (packed.py)


def make_ordering(settings: QueueSettings) -> Ordering:
    if settings.priorities is not None:
        shares = fairshares(settings)
        if shares is not None:
            return FairshareOrder(settings.priorities, shares)
        return PriorityOrder(settings.priorities)
    if settings.sort_key is not None:
        return SortedOrder(settings.sort_key)
    return FifoOrder()


def fairshares(settings: QueueSettings) -> list[int] | None:
    """Each priority level's share (qpidd's ``qpid.fairshare`` for every level, then
    ``qpid.fairshare-N`` for level N), or None when no level has one."""
    levels = settings.priorities or 0
    shares = [settings.fairshare or 0] * levels
    for level, share in (settings.fairshare_levels or {}).items():
        shares[level] = share
    return shares if any(shares) else None


def parts_for(
    name: str,
    settings: QueueSettings,
    default_group: str = DEFAULT_GROUP,
    max_key_updates: int | None = None,
    pack_after: int = PACK_AFTER,
) -> QueueParts:
    """The parts ``settings`` ask for; ``default_group``, ``max_key_updates`` and
    ``pack_after`` are the broker-wide defaults (a queue's own settings win)."""
    groups = make_groups(settings, default_group) if settings.grouped else None
    keep = settings.max_key_updates
    if keep is None:
        keep = max_key_updates
    if keep is None and settings.lvq_key:
        keep = LVQ_HISTORY  # bounded on a last-value queue (see above)
    key_property = settings.lvq_key or settings.sequence_key
    history = History(keep, key_property, indexes=bool(settings.lvq_key)) if key_property else None
    limit = make_limit(name, settings)
    packed = PackedTail(pack_after) if _packs(settings, limit, pack_after) else None
    if groups is not None:
        order: Ordering | GroupDistributor = groups
    else:
        order = make_ordering(settings) if packed is None else PackingFifoOrder(packed)
    return QueueParts(
        settings=settings,
        order=order,
        groups=groups,
        history=history,
        limit=limit,
        flow=make_flow_control(name, settings),
        entry=entry_kind(settings),
        packed=packed,
    )


def _packs(settings: QueueSettings, limit: object, pack_after: int) -> bool:
    """Whether a queue packs its newest messages (see the table): one whose entries are
    only ever in arrival order and never need making room for or paging."""
    return (
        pack_after > 0
        and settings.priorities is None
        and settings.sort_key is None
        and not settings.grouped
        and not (settings.lvq_key or settings.sequence_key)
        and type(limit) not in (RingPolicy, FlowToDiskPolicy)
    )


def entry_kind(settings: QueueSettings) -> type[Entry]:
    """The entry class a queue with ``settings`` needs (see entries.Entry)."""
    ranked = settings.priorities is not None or settings.sort_key is not None
    keyed = settings.lvq_key  # only a last-value queue's entries keep their key
    if settings.grouped or (keyed and ranked):
        return GroupedEntry
    if keyed:
        return KeyedEntry
    return RankedEntry if ranked else Entry


def build_queue(
    name: str,
    settings: QueueSettings | None = None,
    options: Mapping[str, Any] | None = None,
    default_group: str = DEFAULT_GROUP,
    max_key_updates: int | None = None,
    hooks: LoopHooks | None = None,
    pack_after: int = PACK_AFTER,
) -> Queue:
    """A new queue ``name`` assembled from ``settings`` (the defaults: a plain FIFO queue);
    ``options`` are kept as declared, for the attach echo and management; ``hooks``: the
    broker's, shared by all its queues (a queue of its own by default)."""
    settings = settings or QueueSettings()
    parts = parts_for(name, settings, default_group, max_key_updates, pack_after)
    return Queue(name, parts, options, hooks)
