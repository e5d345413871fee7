"""The priority queue: level mapping, order across and within levels, release, browsing."""

from __future__ import annotations

import proton
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.entries import PriorityOrder, priority_level
from proton_broker.queues.factory import build_queue, make_ordering
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import QueueSettings, parse_settings
from proton_broker.selector import parse_selector
from tests.queues import consumers


class Taker(consumers.Taker):
    def names(self) -> list[str]:
        return self.property_values("name")


def msg(name: str, priority: int | None = None, ttl: float | None = None) -> Message:
    """A message encoded by Proton and parsed as the broker parses it."""
    kwargs = {} if priority is None else {"priority": priority}
    if ttl is not None:
        kwargs["ttl"] = ttl
    return parse_message(proton.Message(body=name, properties={"name": name}, **kwargs).encode())


def priority_queue(levels: int = 10) -> Queue:
    return build_queue("p", parse_settings({"qpid.priorities": levels}))


def drain(q: Queue, credit: int = 1000) -> Taker:
    t = Taker(credit=credit)
    q.subscribe(t)
    return t


def test_higher_priority_messages_are_delivered_first() -> None:
    q = priority_queue()
    for name, prio in [("low", 1), ("high", 9), ("mid", 5), ("zero", 0)]:
        q.enqueue(msg(name, prio))
    assert drain(q).names() == ["high", "mid", "low", "zero"]


def test_messages_of_one_priority_are_delivered_in_arrival_order() -> None:
    q = priority_queue()
    for i in range(5):
        q.enqueue(msg(f"a{i}", 7))
        q.enqueue(msg(f"b{i}", 3))
    assert drain(q).names() == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]


def test_a_message_without_a_priority_counts_as_priority_4() -> None:
    message = msg("none")
    assert message.priority == 4
    q = priority_queue()
    q.enqueue(msg("three", 3))
    q.enqueue(msg("none"))
    q.enqueue(msg("five", 5))
    q.enqueue(msg("four", 4))
    assert drain(q).names() == ["five", "none", "four", "three"]


# Expected levels for priorities 0..9, worked out by hand from the Qpid rule:
# first = 5 - ceil(levels / 2); priority <= first -> 0; else min(priority - first, levels - 1)
LEVEL_TABLE = {
    10: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],  # first = 0
    5: [0, 0, 0, 1, 2, 3, 4, 4, 4, 4],  # first = 2
    2: [0, 0, 0, 0, 0, 1, 1, 1, 1, 1],  # first = 4
    1: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # first = 4, capped at level 0
    3: [0, 0, 0, 0, 1, 2, 2, 2, 2, 2],  # first = 3
}


@pytest.mark.parametrize("levels", sorted(LEVEL_TABLE))
def test_priorities_map_to_levels_by_the_qpid_rule(levels: int) -> None:
    assert [priority_level(p, levels) for p in range(10)] == LEVEL_TABLE[levels]


def test_priorities_above_9_fall_into_the_top_level() -> None:
    assert priority_level(200, 10) == 9
    assert priority_level(255, 2) == 1


def test_with_two_levels_priorities_above_4_share_the_top_level_in_arrival_order() -> None:
    q = priority_queue(2)
    for name, prio in [("p5", 5), ("p0", 0), ("p9", 9), ("p4", 4), ("p6", 6)]:
        q.enqueue(msg(name, prio))
    assert drain(q).names() == ["p5", "p9", "p6", "p0", "p4"]


def test_with_five_levels_priorities_7_to_9_share_a_level() -> None:
    q = priority_queue(5)
    for name, prio in [("p9", 9), ("p1", 1), ("p7", 7), ("p3", 3), ("p8", 8), ("p6", 6)]:
        q.enqueue(msg(name, prio))
    assert drain(q).names() == ["p9", "p7", "p8", "p6", "p3", "p1"]


def test_a_single_level_queue_is_fifo() -> None:
    q = priority_queue(1)
    for name, prio in [("a", 9), ("b", 0), ("c", 5)]:
        q.enqueue(msg(name, prio))
    assert drain(q).names() == ["a", "b", "c"]


def test_a_released_message_goes_back_to_its_place_within_its_level() -> None:
    q = priority_queue()
    for name, prio in [("h1", 8), ("h2", 8), ("h3", 8), ("l1", 2)]:
        q.enqueue(msg(name, prio))
    t = drain(q, credit=2)
    assert t.names() == ["h1", "h2"]
    q.release(t.got[1])
    q.release(t.got[0])
    q.enqueue(msg("h4", 8))
    t.credit = 10
    q.credit_granted(t)
    assert t.names()[2:] == ["h1", "h2", "h3", "h4", "l1"]


def test_a_released_low_message_waits_behind_higher_ones_that_arrived_later() -> None:
    q = priority_queue()
    q.enqueue(msg("low", 1))
    t = drain(q, credit=1)
    q.enqueue(msg("high", 9))
    q.release(t.got[0])
    t.credit = 10
    q.credit_granted(t)
    assert t.names() == ["low", "high", "low"]
    assert q.stats.released == 1


def test_expired_messages_are_skipped() -> None:
    q = priority_queue()
    q.enqueue(msg("old-high", 9, ttl=0.001), now=1.0)  # long expired by the wall clock
    q.enqueue(msg("mid", 5))
    q.enqueue(msg("old-low", 1, ttl=0.001), now=1.0)
    t = drain(q)
    assert t.names() == ["mid"]
    assert q.stats.expired == 2 and q.depth == 1


def test_the_expiry_sweep_removes_messages_from_their_level() -> None:
    q = priority_queue()
    q.enqueue(msg("short", 9, ttl=1.0), now=100.0)
    q.enqueue(msg("long", 9), now=100.0)
    assert q.purge_expired(now=102.0) == 1
    assert drain(q).names() == ["long"]
    assert q.depth == 1 and q.bytes == len(next(q.entries()).message.data)


def test_browsers_see_the_highest_level_first_and_take_nothing() -> None:
    q = priority_queue()
    for name, prio in [("a", 1), ("b", 9), ("c", 5)]:
        q.enqueue(msg(name, prio))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert browser.names() == ["b", "c", "a"]
    q.enqueue(msg("d", 9))
    assert browser.names() == ["b", "c", "a", "d"]
    assert drain(q).names() == ["b", "d", "c", "a"]


def test_a_browser_is_shown_a_new_higher_message_before_the_lower_ones_it_has_not_seen() -> None:
    q = priority_queue()
    for name, prio in [("low1", 1), ("low2", 1), ("mid", 5)]:
        q.enqueue(msg(name, prio))
    browser = Taker(credit=2, browse=True)
    q.subscribe(browser)
    assert browser.names() == ["mid", "low1"]
    q.enqueue(msg("high", 9))
    q.enqueue(msg("mid2", 5))
    browser.grant(q, 10)
    assert browser.names() == ["mid", "low1", "high", "mid2", "low2"]  # nothing twice


def test_a_browser_passes_what_consumers_hold_and_keeps_its_place_per_level() -> None:
    q = priority_queue()
    for name, prio in [("a9", 9), ("b5", 5), ("c9", 9), ("d1", 1)]:
        q.enqueue(msg(name, prio))
    taken = drain(q, credit=1)  # takes a9
    assert taken.names() == ["a9"]
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert browser.names() == ["c9", "b5", "d1"]
    q.release(taken.got[0])  # back on the queue: a browser does not see requeues
    q.enqueue(msg("e5", 5))
    assert browser.names() == ["c9", "b5", "d1", "e5"]


def test_a_consumer_with_a_selector_takes_the_highest_level_it_matches_first() -> None:
    q = priority_queue()
    for name, prio in [("a", 1), ("b", 9), ("c", 5), ("d", 9)]:
        q.enqueue(msg(name, prio))
    picky = Taker(credit=10)
    q.subscribe(picky, selector=parse_selector("name <> 'b'"))
    assert picky.names() == ["d", "c", "a"]


def test_depth_and_bytes_follow_enqueue_and_settle() -> None:
    q = priority_queue()
    messages = [msg(f"m{i}", i % 10) for i in range(20)]
    for m in messages:
        q.enqueue(m)
    assert q.depth == 20 and q.bytes == sum(len(m.data) for m in messages)
    t = drain(q, credit=20)
    for entry in t.got:
        q.settle(entry)
    assert q.depth == 0 and q.bytes == 0 and q.stats.dequeued == 20


def test_the_queue_kind_is_priority() -> None:
    assert priority_queue().kind == "priority"
    assert build_queue("q", QueueSettings(priorities=3))._order.levels == 3


def test_the_levels_kept_for_browsers_let_go_of_consumed_messages_with_the_queue_log() -> None:
    q = priority_queue()
    for round_ in range(20):
        for i in range(1000):
            q.enqueue(msg(f"m{round_}-{i}", i % 10))
        taker = drain(q, credit=1000)
        for entry in taker.got:
            q.settle(entry)
    levels = q._order.logs  # type: ignore[attr-defined]
    assert len(q._log) < 5000 and sum(len(log) for log in levels) <= len(q._log)


def test_a_browser_keeps_its_place_on_every_level_when_the_logs_are_rebuilt() -> None:
    q = priority_queue()
    for i in range(4000):
        q.enqueue(msg(f"m{i}", 9 if i % 2 else 1))
    browser = Taker(credit=1500, browse=True)
    q.subscribe(browser)  # sees 1500 of the 2000 at level 9
    taker = drain(q, credit=3000)  # takes every level-9 message and 1000 at level 1
    for entry in taker.got:
        q.settle(entry)  # the logs are rebuilt meanwhile
    browser.grant(q, 5000)
    expected = [f"m{i}" for i in range(1, 3000, 2)] + [f"m{i}" for i in range(2000, 4000, 2)]
    assert browser.names() == expected


# ---- fair share (qpidd's qpid.fairshare) ----------------------------------------------------


def fair_order(priorities: list[int], shares: dict[int, int], levels: int) -> list[int]:
    """The order qpidd's own test expects (``ha_tests.py``'s ``fairshare`` generator): by
    level, highest first, a level's run cut at its share, what is cut served in a later
    round the same way. Returns indexes into ``priorities``."""
    waiting = sorted(
        range(len(priorities)), key=lambda i: priority_level(priorities[i], levels), reverse=True
    )
    order: list[int] = []
    while waiting:
        postponed, count, last = [], 0, None
        for i in waiting:
            level = priority_level(priorities[i], levels)
            count = count + 1 if level == last else 1
            last = level
            share = shares.get(level, 0)
            (postponed if share and count > share else order).append(i)
        waiting = postponed
    return order


def fairshare_queue(levels: int, options: dict[str, int]) -> Queue:
    return build_queue("p", parse_settings({"qpid.priorities": levels, **options}))


def test_fair_share_hands_out_what_qpidds_own_test_expects() -> None:
    """qpidd's test_priority_fairshare: 8 levels, the default share 5, and shares for
    levels 7 to 1, as qpid.fairshare and qpid.fairshare-N."""
    priorities = [4, 5, 3, 7, 8, 8, 2, 8, 2, 8, 8, 16, 6, 6, 6, 6, 6, 6, 8, 3, 5, 8, 3, 5]
    priorities += [5, 3, 3, 8, 8, 3, 7, 3, 7, 7, 7, 8, 8, 8, 2, 3]
    shares = {7: 0, 6: 4, 5: 3, 4: 2, 3: 2, 2: 2, 1: 2}
    options = {"qpid.fairshare": 5, **{f"qpid.fairshare-{k}": v for k, v in shares.items()}}
    q = fairshare_queue(8, options)
    for i, priority in enumerate(priorities):
        q.enqueue(msg(str(i), min(priority, 255)))
    taken = [int(name) for name in drain(q, credit=1000).names()]
    assert taken == fair_order(priorities, shares, 8)


def test_a_level_that_used_its_share_lets_the_next_lower_one_have_a_turn() -> None:
    q = fairshare_queue(2, {"x-qpid-fairshare": 2})
    for i in range(5):
        q.enqueue(msg(f"high{i}", 9))
        q.enqueue(msg(f"low{i}", 0))
    assert drain(q).names() == [
        *("high0", "high1", "low0", "low1", "high2", "high3", "low2", "low3", "high4", "low4")
    ]


def test_fair_shares_need_priorities_and_a_level_the_queue_has() -> None:
    with pytest.raises(InvalidField, match="enabled for priorities"):
        parse_settings({"qpid.fairshare": 3})
    with pytest.raises(InvalidField, match="qpid.fairshare-4"):
        parse_settings({"qpid.priorities": 3, "qpid.fairshare-4": 1})
    with pytest.raises(InvalidField, match="qpid.fairshare-x"):
        parse_settings({"qpid.priorities": 3, "qpid.fairshare-x": 1})
    no_share = parse_settings({"qpid.priorities": 3, "qpid.fairshare": 0})
    assert type(make_ordering(no_share)) is PriorityOrder  # 0 is no bound: the plain ordering


@settings(max_examples=60, deadline=None)
@given(
    levels=st.integers(1, 5),
    priorities=st.lists(st.integers(0, 9), max_size=30),
    shares=st.lists(st.integers(0, 4), min_size=5, max_size=5),
)
def test_fair_share_agrees_with_qpidds_model_of_it(
    levels: int, priorities: list[int], shares: list[int]
) -> None:
    """Whatever the levels, messages and shares, a queue drained one message at a time
    hands them out in the order qpidd's test model says."""
    given_shares = {level: shares[level] for level in range(levels)}
    q = fairshare_queue(levels, {f"qpid.fairshare-{k}": v for k, v in given_shares.items()})
    for i, priority in enumerate(priorities):
        q.enqueue(msg(str(i), priority))
    taken = [int(name) for name in drain(q, credit=1000).names()]
    assert taken == fair_order(priorities, given_shares, levels)
