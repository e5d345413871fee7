"""Message groups on a plain Queue: shared (Qpid C++) and standard (Broker-J) modes.

Semantics from the qpidd message-groups specification and the Broker-J book, 4.7.2,
as summarised in the docstring of proton_broker.queues.groups. No sockets: consumers are
``Taker`` objects (credit plus a list of what they got), as in test_queue.py.
"""

from __future__ import annotations

import copy
import random
import time
from typing import Any

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.entries import ACQUIRED, AVAILABLE, Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.groups import _IDLE_KEEP
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import GROUPS_SHARED, GROUPS_STANDARD, parse_settings
from tests.queues import consumers

KEY = "GROUP_KEY"
SHARED = {"qpid.group_header_key": KEY, "qpid.shared_msg_group": 1}
STANDARD = {"qpid.group_header_key": KEY}


class Taker(consumers.Taker):
    def labels(self) -> list[str]:
        return [m.message_id for m in self.messages]


def msg(
    text: str,
    group: str | None = None,
    *,
    group_id: str | None = None,
    ttl: float | None = None,
    key: str = KEY,
    hold_until: float | None = None,
) -> Message:
    """A parsed message labelled ``text`` (its message-id), in application-property group
    ``group`` and/or with properties.group-id ``group_id``."""
    properties = {} if group is None else {key: group}
    kwargs: dict[str, Any] = {"id": text, "body": text, "properties": properties}
    if group_id is not None:
        kwargs["group_id"] = group_id
    if ttl is not None:
        kwargs["ttl"] = ttl
    if hold_until is not None:  # seconds since the epoch (needs holdOnPublishEnabled)
        properties["x-qpid-not-valid-before"] = int(hold_until * 1000)
    return parse_message(proton.Message(**kwargs).encode())


def label(entry: Entry) -> str:
    return entry.message.message_id


def queue(options: dict[str, Any], **kwargs: Any) -> Queue:
    return build_queue("q", parse_settings(options), **kwargs)


def fill(q: Queue, *labels: str) -> None:
    """Enqueue messages labelled "A-1", "B-2", ...: the group is the part before the dash;
    a label without a dash has no group."""
    for text in labels:
        q.enqueue(msg(text, text.split("-")[0] if "-" in text else None))


def group_names(q: Queue) -> set[str | None]:
    assert q._groups is not None
    return {g.name for g in q._groups.groups()}


def assert_depth_consistent(q: Queue) -> None:
    live = list(q.entries())
    assert q.depth == len(live)
    assert q.bytes == sum(len(e.message.data) for e in live)


# ---- shared groups ------------------------------------------------------------------------


def test_options_select_shared_and_standard_modes() -> None:
    assert parse_settings(SHARED).group_mode == GROUPS_SHARED
    assert parse_settings(STANDARD).group_mode == GROUPS_STANDARD
    assert parse_settings({"messageGroupType": "SHARED_GROUPS"}).group_mode == GROUPS_SHARED


def test_a_shared_group_is_held_while_its_consumer_has_unsettled_messages() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2")
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1"]
    assert b.got == []  # A-2 waits: a has not settled A-1


def test_a_shared_group_stays_held_until_every_unsettled_message_is_settled() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "A-3")
    a = Taker(credit=2)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    q.settle(a.got[0])
    assert b.got == []  # a still holds A-2
    q.settle(a.got[1])
    assert b.labels() == ["A-3"]


@pytest.mark.parametrize("outcome", ["accept", "reject", "release", "modified"])
def test_a_shared_group_is_freed_by_every_kind_of_settlement(outcome: str) -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2")
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.got == []
    first = a.got[0]
    if outcome == "accept":
        q.settle(first)
    elif outcome == "reject":
        q.reject(first)
    elif outcome == "release":
        q.release(first)
    else:
        q.release(first, delivery_failed=True)
    if outcome in ("accept", "reject"):
        assert b.labels() == ["A-2"]
    else:  # back at its original position, so the next consumer gets it first
        assert b.labels() == ["A-1", "A-2"]
        assert b.got[0].delivery_count == (1 if outcome == "modified" else 0)
    assert a.labels() == ["A-1"]
    assert_depth_consistent(q)


def test_releasing_a_1_then_accepting_a_2_lets_another_consumer_process_a_1_after_a_2() -> None:
    # The "Be Advised" note of the C++ broker's documentation.
    q = queue(SHARED)
    fill(q, "A-1", "A-2")
    a = Taker(credit=2)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    a1, a2 = a.got
    q.release(a1)
    assert b.got == []  # a still holds A-2, so the group is still a's
    q.settle(a2)
    assert b.labels() == ["A-1"]
    assert q.stats.dequeued == 1 and q.depth == 1


def test_the_owner_of_a_shared_group_gets_its_released_message_back_first() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "A-3")
    a = Taker(credit=2)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    q.release(a.got[0])
    a.grant(q, 5)
    assert a.labels() == ["A-1", "A-2", "A-1", "A-3"]
    assert b.got == []


def test_groups_never_block_each_other() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "A-3", "B-1", "A-4", "B-2")
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1"]
    assert b.labels() == ["B-1", "B-2"]  # behind the blocked A messages


def test_free_groups_arriving_one_at_a_time_are_served_round_robin() -> None:
    q = queue(SHARED)
    a = Taker(credit=5)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    fill(q, "A-1", "B-1", "C-1", "D-1")
    assert sorted(a.labels() + b.labels()) == ["A-1", "B-1", "C-1", "D-1"]
    assert len(a.got) == len(b.got) == 2  # as on a plain queue, not all to one consumer


def test_credit_bounds_how_much_of_a_group_one_consumer_gets() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "A-3", "A-4")
    a = Taker(credit=2)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1", "A-2"]
    assert b.got == []
    a.grant(q, 1)
    assert a.labels() == ["A-1", "A-2", "A-3"]
    assert b.got == []


def test_ungrouped_messages_form_the_qpid_no_group_group_in_shared_mode() -> None:
    q = queue(SHARED)
    fill(q, "x1", "x2")
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["x1"]
    assert b.got == []  # same (default) group as x1
    assert "qpid.no-group" in group_names(q)


@pytest.mark.parametrize("group", ["qpid.no-group", ""])
def test_a_message_naming_the_default_group_or_none_joins_the_ungrouped_ones(group: str) -> None:
    """An empty group id too, as qpidd (the empty name is reserved for the default group);
    Broker-J makes "" a group of its own."""
    q = queue(SHARED)
    q.enqueue(msg("x1"))
    q.enqueue(msg("n1", group))
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["x1"] and b.got == []
    assert group_names(q) == {"qpid.no-group"}


def test_the_queue_option_overrides_the_default_group_name() -> None:
    q = queue({**SHARED, "qpid.default-message-group": "orphans"}, default_group="broker")
    fill(q, "x1", "x2")
    q.enqueue(msg("o1", "orphans"))
    q.enqueue(msg("b1", "broker"))
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["x1"]
    assert b.labels() == ["b1"]  # "orphans" is the ungrouped group, held by a
    assert "orphans" in group_names(q) and "qpid.no-group" not in group_names(q)


def test_the_queue_default_group_argument_names_the_default_group() -> None:
    q = queue(SHARED, default_group="broker-wide")
    fill(q, "x1")
    q.enqueue(msg("w1", "broker-wide"))
    q.enqueue(msg("n1", "qpid.no-group"))
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["x1"]
    assert b.labels() == ["n1"]
    assert "broker-wide" in group_names(q)


# ---- standard groups ----------------------------------------------------------------------


def test_a_standard_group_sticks_to_its_consumer_even_after_settling() -> None:
    q = queue(STANDARD)
    fill(q, "A-1")
    a = Taker(credit=1)
    q.subscribe(a)
    q.settle(a.got[0])
    b = Taker(credit=5)
    q.subscribe(b)
    fill(q, "A-2", "B-1")
    assert b.labels() == ["B-1"]
    a.grant(q, 5)
    assert a.labels() == ["A-1", "A-2"]


def test_ungrouped_messages_go_to_any_consumer_in_standard_mode() -> None:
    q = queue(STANDARD)
    a = Taker(credit=5)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    fill(q, "x1", "x2", "x3", "x4")
    assert sorted(a.labels() + b.labels()) == ["x1", "x2", "x3", "x4"]
    assert a.got and b.got  # not all held by one consumer as a group would be
    assert "qpid.no-group" not in group_names(q)


def test_a_released_ungrouped_message_can_be_taken_again_in_standard_mode() -> None:
    q = queue(STANDARD)
    fill(q, "x1")
    a = Taker(credit=1)
    q.subscribe(a)
    q.release(a.got[0])
    a.grant(q, 1)
    assert a.labels() == ["x1", "x1"]
    fill(q, "x2")
    a.grant(q, 1)
    assert a.labels() == ["x1", "x1", "x2"]


def test_ungrouped_messages_are_not_blocked_by_a_held_group_in_standard_mode() -> None:
    q = queue(STANDARD)
    fill(q, "A-1", "A-2", "x1")
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.labels() == ["x1"]


def test_unsubscribing_frees_a_consumers_standard_groups() -> None:
    q = queue(STANDARD)
    fill(q, "A-1", "A-2", "B-1")
    a = Taker(credit=2)
    q.subscribe(a)
    assert a.labels() == ["A-1", "A-2"]
    for entry in a.got:
        q.settle(entry)
    b = Taker(credit=5)
    q.subscribe(b)
    fill(q, "A-3")
    assert b.labels() == ["B-1"]
    q.unsubscribe(a)
    assert b.labels() == ["B-1", "A-3"]


# ---- what names the group --------------------------------------------------------------------


def test_properties_group_id_names_the_group_when_no_key_is_configured() -> None:
    q = queue({"qpid.shared_msg_group": 1})
    q.enqueue(msg("A-1", group_id="A"))
    q.enqueue(msg("A-2", group_id="A"))
    q.enqueue(msg("B-1", group_id="B"))
    q.enqueue(msg("k-1", "A"))  # the application property means nothing here
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1"]
    assert b.labels() == ["B-1", "k-1"]
    assert {"A", "B", "qpid.no-group"} <= group_names(q)


def test_jmsxgroupid_as_the_key_means_properties_group_id() -> None:
    q = queue({"qpid.group_header_key": "JMSXGroupID"})
    assert q.settings.group_key is None
    q.enqueue(msg("A-1", group_id="A"))
    q.enqueue(msg("B-1", group_id="B"))
    q.enqueue(msg("A-2", group_id="A"))
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1"]
    assert b.labels() == ["B-1"]  # A-2 belongs to a (standard mode)


def test_a_configured_key_ignores_properties_group_id() -> None:
    q = queue(SHARED)
    q.enqueue(msg("A-1", "A", group_id="Z"))
    q.enqueue(msg("B-1", "B", group_id="Z"))
    a = Taker(credit=1)
    q.subscribe(a)
    b = Taker(credit=5)
    q.subscribe(b)
    assert a.labels() == ["A-1"] and b.labels() == ["B-1"]


# ---- undeliverable-here, expiry, browsers ------------------------------------------------


def test_undeliverable_here_keeps_a_grouped_message_from_that_consumer_only() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "B-1")
    a = Taker(credit=1)
    q.subscribe(a)
    q.release(a.got[0], delivery_failed=True, undeliverable_for=a.id)
    a.grant(q, 5)
    assert a.labels() == ["A-1", "B-1"]  # not A-1 again, and not A-2 past it
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.labels() == ["A-1", "A-2"]  # the group is not wedged, and in order
    assert b.got[0].delivery_count == 1


def test_undeliverable_here_does_not_wedge_a_standard_group_for_other_consumers() -> None:
    # a was assigned group A, then said A-1 is undeliverable to it. a can never take A-1;
    # if A stays a's, nobody can, for as long as a lives: the group must go to someone else.
    q = queue(STANDARD)
    fill(q, "A-1", "A-2")
    a = Taker(credit=1)
    q.subscribe(a)
    q.release(a.got[0], undeliverable_for=a.id)
    b = Taker(credit=5)
    q.subscribe(b)
    a.grant(q, 5)
    assert a.labels() == ["A-1"]
    assert b.labels() == ["A-1", "A-2"]


def test_a_ring_limited_grouped_queue_keeps_deleting_the_oldest_messages() -> None:
    # Deleting a group's only message must not leave the group listed under it: the next
    # deletion would find no oldest message there and stop short of the limit.
    q = queue({**SHARED, "qpid.policy_type": "ring", "qpid.max_count": 3})
    fill(q, "A-1", "B-2", "C-3", "D-4", "E-5", "F-6")
    assert [label(e) for e in q.entries()] == ["D-4", "E-5", "F-6"]
    c = Taker()
    q.subscribe(c)
    c.grant(q, 10)
    assert c.labels() == ["D-4", "E-5", "F-6"]


def test_a_grouped_message_expiring_at_acquire_time_does_not_hold_its_group() -> None:
    q = queue(SHARED)
    q.enqueue(msg("A-1", "A", ttl=1), now=1.0)  # expired long ago by the wall clock
    q.enqueue(msg("B-1", "B"))
    a = Taker(credit=1)
    q.subscribe(a)
    assert a.labels() == ["B-1"]
    assert q.stats.expired == 1
    q.enqueue(msg("A-2", "A"))
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.labels() == ["A-2"]
    assert_depth_consistent(q)


def test_a_standard_group_whose_only_message_expired_is_not_kept_by_that_consumer() -> None:
    q = queue(STANDARD)
    q.enqueue(msg("A-1", "A", ttl=1), now=1.0)
    q.enqueue(msg("x1"))
    a = Taker(credit=1)
    q.subscribe(a)
    assert a.labels() == ["x1"] and q.stats.expired == 1
    b = Taker(credit=5)
    q.subscribe(b)
    q.enqueue(msg("A-2", "A"))
    assert b.labels() == ["A-2"]  # a never received anything of A


def test_purging_expired_grouped_messages_keeps_the_group_order() -> None:
    q = queue(SHARED)
    q.enqueue(msg("A-1", "A", ttl=1), now=100.0)
    q.enqueue(msg("A-2", "A"), now=100.0)
    assert q.purge_expired(now=200.0) == 1
    a = Taker(credit=5)
    q.subscribe(a)
    assert a.labels() == ["A-2"]


def test_browsers_see_every_available_message_whatever_its_group() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "B-1", "x1")
    a = Taker(credit=1)
    q.subscribe(a)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    # A-2 is in the group a consumer owns; A-1, which that consumer holds, is not shown.
    assert browser.labels() == ["A-2", "B-1", "x1"]
    fill(q, "A-3")
    assert browser.labels()[-1] == "A-3"
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.labels() == ["B-1", "x1"]  # browsing held no group
    assert q.depth == 5


def test_depth_and_bytes_follow_takes_settles_releases_and_rejects() -> None:
    q = queue(SHARED)
    fill(q, "A-1", "A-2", "B-1", "B-2", "x1")
    size = q.bytes
    a = Taker(credit=3)
    q.subscribe(a)
    assert q.depth == 5 and q.bytes == size  # acquired messages still count
    q.settle(a.got[0])
    q.reject(a.got[1])
    q.release(a.got[2])
    assert q.depth == 3
    assert q.stats.dequeued == 1 and q.stats.rejected == 1 and q.stats.released == 1
    assert_depth_consistent(q)
    b = Taker(credit=10)
    q.subscribe(b)
    for entry in b.got + a.got[3:]:
        q.settle(entry)
    assert q.depth == 0 and q.bytes == 0


# ---- memory ------------------------------------------------------------------------------


def _consume_everything(q: Queue, messages: int, groups: int) -> list[Taker]:
    """Enqueue ``messages`` over ``groups`` groups, then let 10 consumers take and settle
    them all (credit in rounds, so no consumer waits on an empty queue)."""
    templates = [msg(f"g{g}", f"g{g}") for g in range(groups)]
    dequeued = q.stats.dequeued
    for n in range(messages):
        q.enqueue(copy.copy(templates[n % groups]))
    consumers = [Taker() for _ in range(10)]
    for c in consumers:
        q.subscribe(c)
    while q.depth:
        before = q.depth
        for c in consumers:
            c.grant(q, min(500, max(1, q.depth // 10)))
        for c in consumers:
            for entry in c.got:
                q.settle(entry)
            c.got.clear()
        assert q.depth < before, "no progress"
    assert q.stats.dequeued == dequeued + messages
    return consumers


def test_a_shared_groups_queue_forgets_groups_once_their_messages_are_settled() -> None:
    q = queue(SHARED)
    _consume_everything(q, 50_000, 10_000)
    groups = q._groups
    assert groups is not None
    tracked = len(list(groups.groups()))
    assert tracked <= 10, f"{tracked} settled groups are still tracked"
    assert len(groups._free) == 0
    assert len(groups._free.items) + len(groups._free.run) < 200  # stale items bounded
    assert all(len(owned) == 0 for owned in groups._owned.values())


def test_a_group_that_went_idle_is_reused_when_its_next_message_comes() -> None:
    q = queue(SHARED)
    groups = q._groups
    assert groups is not None
    for c in _consume_everything(q, 100, 10):
        q.unsubscribe(c)
    kept = dict(groups._groups)
    assert len(kept) == 10 and not list(groups.groups())  # all idle, none reported
    _consume_everything(q, 100, 10)
    assert all(groups._groups[name] is group for name, group in kept.items())


def test_idle_groups_kept_for_reuse_stay_bounded_when_group_ids_never_repeat() -> None:
    q = queue(SHARED)
    groups = q._groups
    assert groups is not None
    _consume_everything(q, 3 * _IDLE_KEEP, 3 * _IDLE_KEEP)  # every group id seen once
    assert len(groups._groups) <= 2 * _IDLE_KEEP


def test_a_held_message_whose_group_was_forgotten_meanwhile_rejoins_the_group() -> None:
    q = queue(dict(SHARED, holdOnPublishEnabled=True))
    q.enqueue(msg("A-held", "A", hold_until=time.time() + 3600))
    passing = Taker()
    q.subscribe(passing)
    template = msg("x", "x")
    for n in range(3 * _IDLE_KEEP):  # as many groups come and go: idle ones are swept
        message = copy.copy(template)
        message.app_properties_cache = {KEY: f"g{n}"}
        q.enqueue(message)
        passing.grant(q, 1)
        q.settle(passing.got.pop())
    q.unsubscribe(passing)
    assert q._groups is not None and "A" not in q._groups._groups  # A was swept
    a, b = Taker(), Taker()
    q.subscribe(a)
    q.subscribe(b)
    fill(q, "A-1")
    a.grant(q, 1)
    assert a.labels() == ["A-1"]
    q.release_held(now=time.time() + 7200)
    b.grant(q, 1)
    assert b.labels() == []  # a holds group A, whichever object stood for it when held
    q.settle(a.got[0])
    assert b.labels() == ["A-held"]


def test_a_standard_groups_queue_forgets_groups_once_their_consumers_are_gone() -> None:
    q = queue(STANDARD)
    consumers = _consume_everything(q, 20_000, 5_000)
    for c in consumers:
        q.unsubscribe(c)
    groups = q._groups
    assert groups is not None
    tracked = len(list(groups.groups()))
    assert tracked <= 10, f"{tracked} groups of departed consumers are still tracked"
    assert len(groups._free) == 0 and not groups._owned and not groups._assigned


# ---- randomised model ----------------------------------------------------------------------


class Model:
    """Drives a grouped queue at random and checks the group rules after every step."""

    GROUPS = ["A", "B", "C", "D", "E", None]

    def __init__(self, mode: str, seed: int, ungrouped: bool = True) -> None:
        self.rng = random.Random(seed)
        self.choices = self.GROUPS if ungrouped else [g for g in self.GROUPS if g is not None]
        self.shared = mode == "shared"
        options = dict(SHARED if self.shared else STANDARD, holdOnPublishEnabled=True)
        self.q = queue(options)
        self.groups: dict[str, str | None] = {}  # label -> group (None: ungrouped)
        self.consumers: list[Taker] = []
        self.unsettled: dict[int, list[Entry]] = {}  # consumer id -> entries it holds
        self.assigned: dict[str, int] = {}  # standard mode: group -> consumer
        self.enqueued = self.settled = self.delivered = 0
        for _ in range(3):
            self.add_consumer()

    def group(self, entry: Entry) -> str | None:
        group = self.groups[label(entry)]
        return "qpid.no-group" if not group and self.shared else group

    def add_consumer(self) -> None:
        c = Taker()
        model = self

        def deliver(entry: Entry, c: Taker = c) -> None:
            Taker.deliver(c, entry)
            model.on_deliver(c, entry)

        c.deliver = deliver  # type: ignore[method-assign]
        self.consumers.append(c)
        self.unsettled[c.id] = []
        self.q.subscribe(c)

    def on_deliver(self, c: Taker, entry: Entry) -> None:
        self.delivered += 1
        group = self.group(entry)
        assert entry.state == ACQUIRED
        if group is not None:
            older = [
                e.seq
                for e in self.q.entries()
                if e.state == AVAILABLE and self.group(e) == group and e.seq < entry.seq
            ]
            assert not older, f"{entry} of {group} handed out before {older}"
            holders = {
                cid
                for cid, held in self.unsettled.items()
                if cid != c.id and any(self.group(e) == group for e in held)
            }
            if self.shared:
                assert not holders, f"{group} held by {holders} and given to {c.id}"
            else:
                assert self.assigned.setdefault(group, c.id) == c.id, (
                    f"{group} is {self.assigned[group]}'s, given to {c.id}"
                )
        self.unsettled[c.id].append(entry)

    def step(self) -> None:
        rng, q = self.rng, self.q
        action = rng.choices(
            ["enqueue", "grant", "settle", "release", "churn", "hold", "valid", "refuse"],
            weights=[6, 3, 4, 2, 1, 1, 1, 1],
        )[0]
        if action in ("enqueue", "hold"):
            group = rng.choice(self.choices)
            text = f"m{self.enqueued}"
            self.groups[text] = group  # before enqueue: it may be delivered at once
            message = msg(text, group)
            if action == "hold":  # valid only once the "valid" step says so
                message = msg(text, group, hold_until=time.time() + 3600)
            q.enqueue(message)
            self.enqueued += 1
        elif action == "valid":  # every held message becomes valid, back in its place
            q.release_held(now=time.time() + 7200)
        elif action == "refuse":  # modified, undeliverable-here (shared mode: see check)
            holding = [c for c in self.consumers if self.unsettled[c.id]]
            if not holding or not self.shared:
                return
            c = rng.choice(holding)
            held = self.unsettled[c.id]
            q.release(
                held.pop(rng.randrange(len(held))), delivery_failed=True, undeliverable_for=c.id
            )
        elif action == "grant":
            rng.choice(self.consumers).grant(q, rng.randint(1, 3))
        elif action in ("settle", "release"):
            holding = [c for c in self.consumers if self.unsettled[c.id]]
            if not holding:
                return
            held = self.unsettled[rng.choice(holding).id]
            entry = held.pop(rng.randrange(len(held)))
            if action == "release":
                q.release(entry, delivery_failed=rng.random() < 0.5)
            elif rng.random() < 0.8:
                q.settle(entry)
                self.settled += 1
            else:
                q.reject(entry)
                self.settled += 1
        else:  # a consumer detaches (the adapter releases what it held) and another attaches
            # A standard group goes free at once, or, if the consumer still holds some of
            # its messages, when the last of them is back.
            c = self.consumers.pop(rng.randrange(len(self.consumers)))
            held = self.unsettled.pop(c.id)
            self.unsettled[c.id] = held  # still held (for the checks) until released
            self.free_groups(c.id, held)
            q.unsubscribe(c)
            while held:
                entry = held.pop(0)
                self.free_groups(c.id, held)
                q.release(entry, delivery_failed=True)
            del self.unsettled[c.id]
            self.add_consumer()

    def free_groups(self, consumer_id: int, held: list[Entry]) -> None:
        """Forget the standard groups of a departing consumer that it holds nothing of."""
        still = {self.group(e) for e in held}
        for group, owner in list(self.assigned.items()):
            if owner == consumer_id and group not in still:
                del self.assigned[group]

    def check(self) -> None:
        q = self.q
        assert q.depth == self.enqueued - self.settled
        assert_depth_consistent(q)
        live = list(q.entries())
        held = [e for held in self.unsettled.values() for e in held]
        assert sorted(e.seq for e in live if e.state == ACQUIRED) == sorted(e.seq for e in held)
        groups = q._groups
        assert groups is not None  # each group knows how many of its entries are available
        available = [e for e in live if e.state == AVAILABLE]
        assert groups.available == len(available)
        for group in groups._groups.values():
            assert group.waiting == sum(e.rank is group for e in available), group
        # Nobody with credit sits idle while there is a message it may take: an ungrouped
        # one, or the first available one of a group it may have, unless it refused that.
        firsts: set[int] = set()
        for e in available:
            group = self.group(e)
            if group is None or not any(self.group(x) == group for x in available if x.seq < e.seq):
                firsts.add(e.seq)
        for c in self.consumers:
            if c.credit <= 0:
                continue
            for e in available:
                if e.seq not in firsts or e.excluded and c.id in e.excluded:
                    continue
                group = self.group(e)
                if group is None:
                    takeable = True
                elif self.shared:
                    takeable = all(
                        g == c.id or not any(self.group(x) == group for x in hs)
                        for g, hs in self.unsettled.items()
                    )
                else:
                    takeable = self.assigned.get(group, c.id) == c.id
                assert not takeable, f"{c.id} has credit {c.credit} but did not get {e}"


@pytest.mark.parametrize("mode", ["shared", "standard"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_keep_the_group_rules(mode: str, seed: int) -> None:
    model = Model(mode, seed)
    for _ in range(400):
        model.step()
        model.check()
    assert model.delivered > 50 and model.settled > 20  # the run exercised something


@pytest.mark.parametrize("mode", ["shared", "standard"])
@pytest.mark.parametrize("seed", [4, 5])
def test_random_operations_on_grouped_messages_only_keep_the_group_rules(
    mode: str, seed: int
) -> None:
    model = Model(mode, seed, ungrouped=False)
    for _ in range(400):
        model.step()
        model.check()
    assert model.delivered > 50 and model.settled > 20
