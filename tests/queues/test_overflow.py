"""Overflow policies on the queue alone: ring, reject, producer flow control and their log.

The queue decides; these tests look at what is left on it, what it refuses, what it tells
its flow observers, and what it logs (logger ``proton_broker.queues``).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import proton
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from proton_broker.broker import StorePager
from proton_broker.codec.sections import parse_message
from proton_broker.errors import ResourceLimitExceeded
from proton_broker.message import Header, Message
from proton_broker.queues.entries import AVAILABLE, Entry, priority_level
from proton_broker.queues.factory import build_queue
from proton_broker.queues.overflow import make_flow_control
from proton_broker.queues.packed import PACK_AFTER
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import parse_selector
from proton_broker.store.base import Unit
from proton_broker.store.sqlite import SqliteStore
from tests.queues.consumers import Taker, check_figures


def queue(**options: Any) -> Queue:
    return build_queue("q", parse_settings(options))


def keyed(key: str) -> Message:
    """A message whose application property 'k' (sort key, last-value key) is ``key``."""
    return parse_message(proton.Message(body=key, properties={"k": key}).encode())


def msg(n: int, size: int = 0, priority: int = 4) -> Message:
    """A message whose data reads ``n``, padded to ``size`` bytes when given."""
    data = b"%d" % n
    message = Message(data=data.ljust(size, b"."))
    message.header = Header(priority=priority)
    return message


def bodies(q: Queue) -> list[int]:
    return [int(e.message.data.rstrip(b".")) for e in q.entries()]


class Observer:
    """A flow observer as the protocol adapter would register it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def flow_stopped(self, queue: Queue) -> None:
        self.events.append("stopped")

    def flow_resumed(self, queue: Queue) -> None:
        self.events.append("resumed")


def take(q: Queue, count: int) -> Taker:
    taker = Taker(credit=count)
    q.subscribe(taker)
    return taker


def settle_all(q: Queue, taker: Taker) -> None:
    for entry in taker.got:
        q.settle(entry)


# ---- none ----------------------------------------------------------------------------------


def test_a_queue_without_a_policy_ignores_its_limits() -> None:
    q = queue(**{"maximumQueueDepthMessages": 2})  # Broker-J's name: its default, none
    for i in range(5):
        q.enqueue(msg(i))
    assert q.depth == 5


def settle_store(store: SqliteStore, posted: list[Callable[[], None]]) -> None:
    """Wait until everything written to ``store`` so far is committed, then run the
    completions it posted (as the loop thread would): they come in order, the marker's
    last."""
    marker: list[bool] = []
    store.commit(Unit(done=lambda error: marker.append(True)))
    deadline = time.monotonic() + 10
    while not marker:
        if time.monotonic() > deadline:
            raise TimeoutError("store did not complete")
        while posted:
            posted.pop(0)()
        time.sleep(0.001)


@pytest.fixture
def pager(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real SQLite store to page into; its completions run when ``settle`` is called."""
    posted: list[Callable[[], None]] = []
    store = SqliteStore(tmp_path, posted.append)
    store.open()
    made = StorePager(store)
    made.settle = lambda: settle_store(store, posted)  # type: ignore[attr-defined]
    yield made
    store.close()


def paging_queue(pager: StorePager) -> Queue:
    q = queue(overflowPolicy="flow_to_disk", maximumQueueDepthMessages=2)
    q.hooks.pager = pager
    for i in range(5):
        q.enqueue(msg(i, size=1000))
    pager.settle()  # type: ignore[attr-defined]
    return q


def test_flow_to_disk_pages_out_what_arrives_over_the_limit(pager: StorePager) -> None:
    q = paging_queue(pager)
    assert [e.message.paged for e in q.entries()] == [False, False, True, True, True]
    assert [len(e.message.data) for e in q.entries()] == [1000, 1000, 0, 0, 0]
    assert q.depth == 5 and q.bytes == 5000 and q.stats.paged_out == 3


def test_a_consumer_gets_paged_out_messages_back_whole_and_in_order(pager: StorePager) -> None:
    q = paging_queue(pager)
    consumer = take(q, 10)
    assert [int(e.message.data.rstrip(b".")) for e in consumer.got] == [0, 1, 2, 3, 4]
    settle_all(q, consumer)
    pager.settle()  # type: ignore[attr-defined]
    assert q.depth == 0 and q.bytes == 0
    assert pager.store._db.execute("SELECT count(*) FROM pages").fetchone()[0] == 0  # type: ignore[attr-defined]


def test_a_message_read_back_over_the_memory_budget_stops_producers_at_once(
    pager: StorePager,
) -> None:
    """A paged-out message a consumer takes counts in the broker's memory budget again as
    it is read back: if that takes the budget over its limit, producers are told then, not
    when the next message arrives."""
    q = paging_queue(pager)
    budget = q.hooks.budget
    told: list[bool] = []
    budget.observers.append(told.append)
    budget.limit, budget.resume = budget.used + 500, budget.used
    take(q, 3)  # the third was paged out: reading its 1,000 bytes back goes over
    assert budget.full and told == [True]


def test_a_browser_reads_paged_out_messages_and_they_stay_paged(pager: StorePager) -> None:
    q = paging_queue(pager)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert len(browser.got) == 5
    assert [e.message.paged for e in q.entries()] == [False, False, True, True, True]


# ---- ring ----------------------------------------------------------------------------------


def test_a_ring_queue_deletes_the_oldest_messages_beyond_its_count() -> None:
    q = queue(**{"qpid.policy_type": "ring", "qpid.max_count": 3})
    for i in range(7):
        q.enqueue(msg(i))
    assert bodies(q) == [4, 5, 6]
    assert q.stats.evicted == 4
    assert q.depth == 3


def test_a_ring_queue_deletes_as_many_old_messages_as_a_big_one_needs() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthBytes=100)
    for i in range(5):
        q.enqueue(msg(i, size=20))
    q.enqueue(msg(5, size=50))
    assert bodies(q) == [3, 4, 5]
    assert q.bytes == 90


def test_a_message_bigger_than_the_ring_stays_alone_over_the_limit() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthBytes=100)
    q.enqueue(msg(0, size=40))
    q.enqueue(msg(1, size=40))
    q.enqueue(msg(2, size=150))
    assert bodies(q) == [2] and q.bytes == 150
    q.enqueue(msg(3, size=10))
    assert bodies(q) == [3]


def test_a_ring_queue_respects_both_limits_whichever_is_reached_first() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=4, maximumQueueDepthBytes=50)
    for i in range(4):
        q.enqueue(msg(i, size=10))
    q.enqueue(msg(4, size=30))
    assert bodies(q) == [2, 3, 4]
    q.enqueue(msg(5, size=1))
    q.enqueue(msg(6, size=1))
    assert bodies(q) == [3, 4, 5, 6]


def test_a_ring_queue_never_deletes_acquired_messages() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=3)
    for i in range(3):
        q.enqueue(msg(i))
    taker = take(q, 2)
    q.enqueue(msg(3))
    q.enqueue(msg(4))
    assert [int(e.message.data) for e in taker.got] == [0, 1]
    assert bodies(q) == [0, 1, 4]  # 2 and 3 went; the held 0 and 1 stay


def test_a_ring_queue_with_only_acquired_messages_keeps_the_new_one_over_the_limit() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2)
    q.enqueue(msg(0))
    q.enqueue(msg(1))
    taker = take(q, 2)
    q.enqueue(msg(2))
    assert bodies(q) == [0, 1, 2] and q.depth == 3
    q.enqueue(msg(3))  # the newest available one is the only candidate: 2 goes
    assert bodies(q) == [0, 1, 3]
    settle_all(q, taker)
    assert bodies(q) == [3]


def test_a_released_message_is_the_oldest_again_and_goes_first() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=3)
    for i in range(3):
        q.enqueue(msg(i))
    taker = take(q, 1)
    q.release(taker.got[0])
    q.enqueue(msg(3))
    assert bodies(q) == [1, 2, 3]


def test_a_ring_deletes_the_oldest_even_behind_a_message_a_selector_took_and_released() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=3)
    picky = Taker()
    q.subscribe(picky, selector=parse_selector("JMSPriority > 4"))
    q.enqueue(msg(0, priority=1))
    q.enqueue(msg(1, priority=9))
    picky.grant(q, 1)  # takes 1, out of arrival order
    q.release(picky.got[0])
    q.enqueue(msg(2))
    q.enqueue(msg(3))  # over: the oldest goes, not the one that came back
    assert bodies(q) == [1, 2, 3]


def test_a_priority_ring_deletes_the_oldest_of_the_lowest_priority_first() -> None:
    q = queue(**{"qpid.policy_type": "ring", "qpid.max_count": 4, "qpid.priorities": 10})
    q.enqueue(msg(0, priority=5))
    q.enqueue(msg(1, priority=1))
    q.enqueue(msg(2, priority=9))
    q.enqueue(msg(3, priority=1))
    q.enqueue(msg(4, priority=5))  # over: the oldest priority-1 message goes
    assert bodies(q) == [0, 2, 3, 4]
    q.enqueue(msg(5, priority=7))
    assert bodies(q) == [0, 2, 4, 5]
    q.enqueue(msg(6, priority=9))  # no priority 1 left: the oldest priority 5
    assert bodies(q) == [2, 4, 5, 6]


def test_a_priority_ring_drops_a_new_message_less_important_than_all_others() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2, priorities=10)
    q.enqueue(msg(0, priority=9))
    q.enqueue(msg(1, priority=8))
    q.enqueue(msg(2, priority=0))
    assert bodies(q) == [0, 1]
    assert q.stats.evicted == 1 and q.stats.enqueued == 3


def test_a_priority_ring_a_release_took_over_its_limit_fits_again_at_the_next_arrival() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2, priorities=10)
    taker = take(q, 2)
    q.enqueue(msg(0, priority=9))
    q.enqueue(msg(1, priority=9))  # both taken
    q.enqueue(msg(2, priority=8))  # over, but the only one available: it stays
    q.release(taker.got[0])  # 0 is back: over its limit with two available
    assert bodies(q) == [0, 1, 2]
    q.enqueue(msg(3, priority=0))  # the least significant goes, then 2, and the ring fits
    assert bodies(q) == [0, 1] and q.stats.evicted == 2


def test_a_priority_ring_shares_levels_as_the_priority_mapping_does() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2, priorities=2)
    q.enqueue(msg(0, priority=3))  # low level (0-4)
    q.enqueue(msg(1, priority=0))  # low level, newer
    q.enqueue(msg(2, priority=9))  # high level: the oldest low one goes
    assert bodies(q) == [1, 2]


def test_a_consumer_of_a_priority_ring_gets_the_survivors_by_priority() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=3, priorities=10)
    for i, priority in enumerate([1, 9, 4, 1, 6]):
        q.enqueue(msg(i, priority=priority))
    taker = take(q, 10)
    assert [int(e.message.data) for e in taker.got] == [1, 4, 2]


def test_a_sorted_ring_deletes_the_highest_key_first() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2, sortKey="k")
    for key in ["b", "a", "c", "a"]:
        q.enqueue(keyed(key))
    keys = [e.message.application_property("k") for e in q.entries()]
    assert keys == ["a", "a"]


def test_a_grouped_ring_deletes_the_oldest_available_message_of_any_group() -> None:
    q = queue(
        overflowPolicy="ring",
        maximumQueueDepthMessages=3,
        **{"qpid.group_header_key": "g", "qpid.shared_msg_group": 1},
    )
    for i in range(3):
        q.enqueue(Message(data=b"%d" % i))
    taker = take(q, 1)  # holds 0 (and the default group)
    q.enqueue(Message(data=b"3"))
    assert [e.message.data for e in q.entries()] == [b"0", b"2", b"3"]
    assert taker.got[0].message.data == b"0"


def test_a_last_value_ring_forgets_the_key_of_a_deleted_value() -> None:
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=2, lvqKey="k")
    for key in ["a", "b", "c", "a"]:
        q.enqueue(keyed(key))
    keys = [e.message.application_property("k") for e in q.entries()]
    assert keys == ["c", "a"]


# ---- reject ------------------------------------------------------------------------------


def test_a_reject_queue_refuses_the_message_beyond_its_count() -> None:
    q = queue(**{"qpid.policy_type": "reject", "qpid.max_count": 2})
    q.enqueue(msg(0))
    q.enqueue(msg(1))
    with pytest.raises(ResourceLimitExceeded) as caught:
        q.enqueue(msg(2))
    assert caught.value.description == "Maximum depth exceeded on 'q': 2 messages (limit 2)"
    assert bodies(q) == [0, 1] and q.stats.refused == 1 and q.stats.enqueued == 2


def test_a_reject_queue_refuses_a_message_that_would_exceed_its_bytes() -> None:
    q = queue(overflowPolicy="REJECT", maximumQueueDepthBytes=100)
    q.enqueue(msg(0, size=60))
    q.enqueue(msg(1, size=40))  # exactly at the limit: accepted
    with pytest.raises(ResourceLimitExceeded) as caught:
        q.enqueue(msg(2, size=1))
    assert "'q'" in caught.value.description and "limit 100 bytes" in caught.value.description
    assert "100 bytes plus 1 bytes" in caught.value.description


def test_a_reject_queue_accepts_again_once_a_message_is_consumed() -> None:
    q = queue(overflowPolicy="reject", maximumQueueDepthMessages=1)
    q.enqueue(msg(0))
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(1))
    taker = take(q, 1)
    assert q.depth == 1  # acquired messages still count
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(1))
    settle_all(q, taker)
    q.enqueue(msg(2))
    assert bodies(q) == [2]


def test_a_zero_limit_under_a_broker_j_name_refuses_everything() -> None:
    q = queue(overflowPolicy="reject", maximumQueueDepthMessages=0)
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(0))


def test_a_zero_limit_under_a_qpid_cpp_name_is_no_limit() -> None:
    q = queue(**{"qpid.policy_type": "reject", "qpid.max_count": 0})
    for i in range(3):
        q.enqueue(msg(i))
    assert q.depth == 3


def test_a_negative_limit_is_no_limit() -> None:
    q = queue(overflowPolicy="reject", maximumQueueDepthMessages=-1)
    for i in range(3):
        q.enqueue(msg(i))
    assert q.depth == 3


# ---- producer flow control -----------------------------------------------------------------


def test_flow_control_stops_producers_when_the_queue_goes_over_its_limit() -> None:
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=5)
    observer = Observer()
    q.watch_flow(observer)
    for i in range(5):
        q.enqueue(msg(i))
    assert not q.flow_stopped and observer.events == []
    q.enqueue(msg(5))  # over: the message is stored all the same
    assert q.flow_stopped and observer.events == ["stopped"]
    q.enqueue(msg(6))
    assert observer.events == ["stopped"] and q.depth == 7


def test_flow_control_resumes_producers_at_eighty_percent_by_default() -> None:
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=10)
    observer = Observer()
    q.watch_flow(observer)
    for i in range(11):
        q.enqueue(msg(i))
    taker = take(q, 11)
    for entry in taker.got[:2]:
        q.settle(entry)
    assert q.depth == 9 and q.flow_stopped
    q.settle(taker.got[2])
    assert q.depth == 8 and not q.flow_stopped
    assert observer.events == ["stopped", "resumed"]


def test_the_resume_percentage_is_read_from_queue_flow_resume_limit() -> None:
    q = queue(
        overflowPolicy="producer_flow_control", maximumQueueDepthBytes=1000, queueFlowResumeLimit=50
    )
    for i in range(11):
        q.enqueue(msg(i, size=100))
    assert q.flow_stopped
    taker = take(q, 11)
    for entry in taker.got[:5]:
        q.settle(entry)
    assert q.bytes == 600 and q.flow_stopped
    q.settle(taker.got[5])
    assert q.bytes == 500 and not q.flow_stopped


def test_the_resume_percentage_may_come_from_broker_js_context_variable() -> None:
    """Broker-J's ``queue.queueFlowResumeLimit`` in the queue's context; the queue's own
    option comes first."""
    context = {"queue.queueFlowResumeLimit": "45.5"}
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=10, context=context)
    for i in range(11):
        q.enqueue(msg(i))
    taker = take(q, 11)
    for entry in taker.got[:5]:
        q.settle(entry)
    assert q.depth == 6 and q.flow_stopped  # ceil(45.5% of 10) is 5: resumes at 5
    assert queue_resumed_at(60, context, 6)  # the queue's own option: at 6
    q.settle(taker.got[5])
    assert q.depth == 5 and not q.flow_stopped


def queue_resumed_at(percent: int, context: dict[str, str], remaining: int) -> bool:
    """Whether a flow-controlled queue of limit 10 with ``queueFlowResumeLimit`` ``percent``
    (and ``context``) has resumed its producers with ``remaining`` messages left."""
    q = queue(
        overflowPolicy="producer_flow_control",
        maximumQueueDepthMessages=10,
        queueFlowResumeLimit=percent,
        context=context,
    )
    for i in range(11):
        q.enqueue(msg(i))
    taker = take(q, 11)
    for entry in taker.got[: 11 - remaining]:
        q.settle(entry)
    return not q.flow_stopped


def test_qpid_cpp_flow_stop_and_resume_counts_work_without_a_policy() -> None:
    q = queue(**{"qpid.flow_stop_count": 4, "qpid.flow_resume_count": 2})
    for i in range(5):
        q.enqueue(msg(i))
    assert q.flow_stopped
    taker = take(q, 5)
    for entry in taker.got[:2]:
        q.settle(entry)
    assert q.depth == 3 and q.flow_stopped
    q.settle(taker.got[2])
    assert q.depth == 2 and q.flow_stopped  # qpid-cpp resumes below the resume count
    q.settle(taker.got[3])
    assert q.depth == 1 and not q.flow_stopped


def test_qpid_cpp_flow_stop_size_stops_on_bytes() -> None:
    q = queue(**{"qpid.flow_stop_size": 100, "qpid.flow_resume_size": 50})
    q.enqueue(msg(0, size=60))
    q.enqueue(msg(1, size=40))
    assert not q.flow_stopped
    q.enqueue(msg(2, size=1))
    assert q.flow_stopped


def test_flow_control_resumes_only_when_every_measure_is_back() -> None:
    q = queue(
        overflowPolicy="producer_flow_control",
        maximumQueueDepthMessages=10,
        maximumQueueDepthBytes=1000,
    )
    q.enqueue(msg(0, size=1001))
    for i in range(1, 10):
        q.enqueue(msg(i, size=1))
    assert q.flow_stopped
    taker = take(q, 1)
    q.settle(taker.got[0])  # bytes fine now, count 9 > 8
    assert q.flow_stopped
    taker.grant(q, 1)
    q.settle(taker.got[1])
    assert not q.flow_stopped


def test_a_reject_queue_can_also_stop_producers_below_its_limit() -> None:
    q = queue(**{"qpid.policy_type": "reject", "qpid.max_count": 5, "qpid.flow_stop_count": 3})
    for i in range(4):
        q.enqueue(msg(i))
    assert q.flow_stopped
    q.enqueue(msg(4))
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(5))


def test_a_producer_that_stops_watching_is_not_told_any_more() -> None:
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=1)
    observer = Observer()
    q.watch_flow(observer)
    q.unwatch_flow(observer)
    q.enqueue(msg(0))
    q.enqueue(msg(1))
    assert q.flow_stopped and observer.events == []


def test_only_queues_with_flow_control_say_so() -> None:
    assert queue(
        overflowPolicy="producer_flow_control", maximumQueueDepthMessages=1
    ).flow_controlled
    assert queue(**{"qpid.flow_stop_size": 10}).flow_controlled
    assert not queue(overflowPolicy="reject", maximumQueueDepthMessages=1).flow_controlled
    assert not queue(overflowPolicy="producer_flow_control").flow_controlled
    assert not build_queue("plain").flow_controlled


# ---- limits changed on a live queue (management's UPDATE) ------------------------------------


def changed(q: Queue, **options: Any) -> None:
    """Give ``q`` new settings, as management's UPDATE does."""
    q.update_settings(parse_settings(options))


def test_a_raised_reject_limit_lets_more_in_at_once() -> None:
    q = queue(overflowPolicy="reject", maximumQueueDepthMessages=2)
    q.enqueue(msg(0))
    q.enqueue(msg(1))
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(2))
    changed(q, overflowPolicy="reject", maximumQueueDepthMessages=3)
    q.enqueue(msg(2))
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg(3))
    changed(q)  # no limit at all
    q.enqueue(msg(3))
    assert bodies(q) == [0, 1, 2, 3] and q.limits is None


def test_a_self_destruct_queue_takes_the_message_over_its_limit_then_asks_to_go_once() -> None:
    """qpidd's SelfDestructQueue: nothing is refused; the queue asks the broker to delete
    it (LoopHooks.self_destruct) when a message takes it over, and only the first time,
    whether it packs its messages or not."""
    for pack_after in (PACK_AFTER, 1):  # the usual queue, and one packing at once
        asked: list[Queue] = []
        settings = parse_settings({"qpid.policy_type": "self-destruct", "qpid.max_count": 3})
        q = build_queue("q", settings, pack_after=pack_after)
        q.hooks.self_destruct = lambda queue, asked=asked: asked.append(queue) or True
        for n in range(3):
            q.enqueue(msg(n))
        assert asked == []
        q.enqueue(msg(3))
        q.enqueue(msg(4))
        assert asked == [q] and bodies(q) == [0, 1, 2, 3, 4]


def test_a_self_destruct_queue_the_broker_spares_while_it_recovers_asks_again_later() -> None:
    """The broker declines while it starts (messages recovered from the store do not
    count, as in qpidd): the next arrival over the limit asks again."""
    answers = [False, True, True]
    asked: list[int] = []
    q = build_queue("q", parse_settings({"qpid.policy_type": "self-destruct", "qpid.max_count": 1}))
    q.hooks.self_destruct = lambda queue: asked.append(queue.depth) or answers.pop(0)
    for n in range(4):
        q.enqueue(msg(n))
    assert asked == [2, 3]  # declined at 2, taken on at 3, not asked at 4


def test_a_queue_made_a_ring_makes_room_at_once_even_one_that_packs() -> None:
    q = build_queue("q", pack_after=2)  # its newest messages packed (queues/packed.py)
    for n in range(5):
        q.enqueue(msg(n))
    changed(q, overflowPolicy="ring", maximumQueueDepthMessages=3)
    assert bodies(q) == [2, 3, 4] and q.stats.evicted == 2
    q.enqueue(msg(5))
    assert bodies(q) == [3, 4, 5]
    assert take(q, 5).bodies() == [b"3", b"4", b"5"]


def test_flow_to_disk_set_later_pages_out_what_is_beyond_the_limit_at_once(
    pager: StorePager,
) -> None:
    """As Broker-J's flow to disk flows the tail when the limits change: what is already on
    the queue beyond the new limit leaves memory, not only what arrives from now on."""
    q = build_queue("q")
    q.hooks.pager = pager
    for n in range(5):
        q.enqueue(msg(n, size=1000))
    held = take(q, 1)  # the oldest, out with a consumer: it counts, and stays in memory
    changed(q, overflowPolicy="flow_to_disk", maximumQueueDepthMessages=2)
    pager.settle()  # type: ignore[attr-defined]
    assert [e.message.paged for e in q.entries()] == [False, False, True, True, True]
    assert q.stats.paged_out == 3 and q.depth == 5 and q.bytes == 5000
    assert [int(e.message.data.rstrip(b".")) for e in held.got] == [0]
    consumer = take(q, 10)
    assert [int(e.message.data.rstrip(b".")) for e in consumer.got] == [1, 2, 3, 4]


def test_flow_control_added_later_stops_producers_already_there_and_goes_with_it() -> None:
    q = build_queue("q")
    observer = Observer()
    q.watch_flow(observer)  # a producer attached while the queue had no flow control
    for n in range(3):
        q.enqueue(msg(n))
    changed(q, overflowPolicy="producer_flow_control", maximumQueueDepthMessages=2)
    assert q.flow_stopped and observer.events == ["stopped"]
    changed(q, overflowPolicy="producer_flow_control", maximumQueueDepthMessages=10)
    assert not q.flow_stopped and observer.events == ["stopped", "resumed"]
    changed(q, overflowPolicy="producer_flow_control", maximumQueueDepthMessages=2)
    changed(q)
    assert not q.flow_stopped and observer.events[-1] == "resumed"


def test_stopped_producers_stay_stopped_until_the_new_resume_level() -> None:
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=4)
    observer = Observer()
    q.watch_flow(observer)
    for n in range(5):
        q.enqueue(msg(n))
    assert q.flow_stopped
    # A stop level the queue is no longer over, whose resume level (80% of 5: 4) it is not
    # down to yet.
    changed(q, overflowPolicy="producer_flow_control", maximumQueueDepthMessages=5)
    assert q.flow_stopped and observer.events == ["stopped"]
    taker = take(q, 1)
    q.settle(taker.got[0])
    assert not q.flow_stopped and observer.events == ["stopped", "resumed"]


# ---- operational log -----------------------------------------------------------------------


def codes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().split(" :")[0]
        for r in caplog.records
        if r.name == "proton_broker.queues" and r.getMessage().startswith("QUE-")
    ]


def test_flow_control_logs_que_1003_and_que_1004_once_per_transition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "proton_broker.queues")
    q = queue(overflowPolicy="producer_flow_control", maximumQueueDepthMessages=2)
    for i in range(6):
        q.enqueue(msg(i, size=10))
    taker = take(q, 6)
    settle_all(q, taker)
    for i in range(4):
        q.enqueue(msg(i, size=10))
    assert codes(caplog) == ["QUE-1003", "QUE-1004", "QUE-1003"]
    first = caplog.records[0].getMessage()
    assert first == (
        "QUE-1003 : Maximum depth exceeded on 'q' : current 3 messages, 30 bytes"
        " : limit 2 messages : producers stopped (producer flow control)"
    )
    assert (
        caplog.records[1]
        .getMessage()
        .startswith(
            "QUE-1004 : Maximum depth no longer exceeded on 'q' : current 2 messages, 20 bytes"
            " : resume at 2 messages"
        )
    )


def test_a_reject_queue_logs_the_first_refusal_and_when_it_has_room_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "proton_broker.queues")
    q = queue(overflowPolicy="reject", maximumQueueDepthMessages=5)
    for i in range(5):
        q.enqueue(msg(i))
    for i in range(3):
        with pytest.raises(ResourceLimitExceeded):
            q.enqueue(msg(i))
    taker = take(q, 5)
    settle_all(q, taker)
    assert codes(caplog) == ["QUE-1003", "QUE-1004"]
    assert "rejecting new messages" in caplog.records[0].getMessage()


def test_a_ring_logs_once_while_it_keeps_deleting(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "proton_broker.queues")
    q = queue(overflowPolicy="ring", maximumQueueDepthMessages=5)
    for i in range(50):
        q.enqueue(msg(i))
    assert codes(caplog) == ["QUE-1003"]
    taker = take(q, 5)
    settle_all(q, taker)
    assert codes(caplog) == ["QUE-1003", "QUE-1004"]


def test_a_queue_without_limits_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "proton_broker.queues")
    q = build_queue("plain")
    for i in range(10):
        q.enqueue(msg(i))
    assert codes(caplog) == []


def test_flow_stop_thresholds_on_a_ring_queue_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "proton_broker.queues"):
        q = queue(**{"qpid.policy_type": "ring", "qpid.max_count": 3, "qpid.flow_stop_count": 2})
    for i in range(5):
        q.enqueue(msg(i))
    assert not q.flow_stopped and bodies(q) == [2, 3, 4]
    assert "ignored on a ring queue" in caplog.text


@pytest.mark.parametrize(
    ("options", "resume"),
    [
        ({"maximumQueueDepthMessages": 5}, 4),
        ({"maximumQueueDepthMessages": 7}, 6),  # 5.6 rounded up, as Broker-J
        ({"maximumQueueDepthMessages": 2}, 2),
        ({"maximumQueueDepthMessages": 10, "queueFlowResumeLimit": 55}, 6),
        ({"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 6}, 5),  # qpidd: below 6
    ],
)
def test_producers_resume_at_broker_js_resume_limit_rounded_up(
    options: dict[str, Any], resume: int
) -> None:
    flow = make_flow_control(
        "q", parse_settings({"overflowPolicy": "producer_flow_control", **options})
    )
    assert flow is not None and flow.resume.count == resume


# ---- against the rules, at random ----------------------------------------------------------


class OverflowModel(RuleBasedStateMachine):
    """Random sends (sizes, priorities), takes (by a consumer and by one with a selector),
    accepts and releases on a queue with a message and/or byte limit and a ring, reject or
    flow-to-disk policy, against the rules
    of queues/overflow.py and queues/limits.py: nothing is lost (each message is consumed,
    refused, deleted by the ring, or still on the queue, its bytes whole), a reject queue
    refuses exactly what would take it over, a ring deletes the least significant available
    messages and stays within its limits while it has any to delete, and the memory budget
    counts what is in memory."""

    @initialize(
        policy=st.sampled_from(["ring", "reject", "flow_to_disk"]),
        count=st.none() | st.integers(1, 5),
        size=st.none() | st.integers(150, 900),
        priorities=st.booleans(),
    )
    def start(self, policy: str, count: int | None, size: int | None, priorities: bool) -> None:
        if count is None and size is None:
            count = 3
        options: dict[str, Any] = {"overflowPolicy": policy}
        if count is not None:
            options["maximumQueueDepthMessages"] = count
        if size is not None:
            options["maximumQueueDepthBytes"] = size
        if priorities:
            options["x-qpid-priorities"] = 10
        self.policy, self.count, self.size = policy, count, size
        self.levels = 10 if priorities else 1
        self.q = queue(**options)
        self.store: SqliteStore | None = None
        if policy == "flow_to_disk":
            self.directory = tempfile.TemporaryDirectory()
            self.posted: list[Callable[[], None]] = []
            self.store = SqliteStore(Path(self.directory.name), self.posted.append)
            self.store.open()
            self.q.hooks.pager = StorePager(self.store)
        # A consumer, and one with a selector, which takes messages out of arrival order.
        self.takers = [Taker(), Taker()]
        self.q.subscribe(self.takers[0])
        self.q.subscribe(self.takers[1], selector=parse_selector("JMSPriority > 4"))
        self.sent: dict[int, bytes] = {}  # every message sent and kept: its bytes
        self.priority: dict[int, int] = {}
        self.here: set[int] = set()  # on the queue (available or taken)
        self.held: list[Entry] = []  # taken, not yet settled
        self.seen = [0, 0]  # deliveries checked, by consumer

    def teardown(self) -> None:
        if self.store is not None:
            settle_store(self.store, self.posted)
            self.store.close()
            self.directory.cleanup()

    def significance(self, n: int) -> tuple[int, int]:
        """What a ring deletes first is least: the lowest priority level, then the oldest."""
        return (priority_level(self.priority[n], self.levels), n)

    def check_deliveries(self) -> None:
        for which, taker in enumerate(self.takers):
            seen = self.seen[which]
            for entry, message in zip(taker.got[seen:], taker.messages[seen:], strict=True):
                n = int(message.data.rstrip(b"."))
                assert n in self.here and message.data == self.sent[n]  # whole, if paged too
                assert which == 0 or self.priority[n] > 4
                self.held.append(entry)
            self.seen[which] = len(taker.got)

    @rule(size=st.sampled_from([0, 50, 200]), priority=st.integers(0, 9))
    def send(self, size: int, priority: int) -> None:
        n = len(self.sent) + 1
        message = msg(n, size, priority)
        data = message.data
        depth, nbytes = self.q.depth, self.q.bytes
        over = (self.count is not None and depth + 1 > self.count) or (
            self.size is not None and nbytes + len(data) > self.size
        )
        available = {self.number_of(e) for e in self.q.entries() if e.state == AVAILABLE}
        if self.policy == "reject" and over:
            with pytest.raises(ResourceLimitExceeded):
                self.q.enqueue(message)
            assert (self.q.depth, self.q.bytes) == (depth, nbytes)  # nothing changed
            return
        self.q.enqueue(message)
        self.sent[n], self.priority[n] = data, priority
        self.here.add(n)
        self.check_deliveries()
        if self.policy == "ring":
            now = {self.number_of(e) for e in self.q.entries()}
            deleted = self.here - now
            survivors = (available | {n}) & now
            if deleted and survivors:  # the least significant went first
                assert max(map(self.significance, deleted)) < min(map(self.significance, survivors))
            self.here = now
            # within its limits, unless it has nothing left to delete (a consumer holds the
            # rest: they leave when settled; a release puts one back without deleting, as
            # both Qpid brokers check a ring as messages arrive)
            assert not self.over() or self.q.available_count() <= 1
        elif self.store is not None:
            settle_store(self.store, self.posted)  # paged out, as the loop would page it

    @rule(which=st.integers(0, 1), credit=st.integers(1, 3))
    def take(self, which: int, credit: int) -> None:
        self.takers[which].grant(self.q, credit)
        self.check_deliveries()

    @rule(data=st.data(), accept=st.booleans())
    def settle(self, data: st.DataObject, accept: bool) -> None:
        if self.held:
            entry = data.draw(st.sampled_from(self.held))
            self.held.remove(entry)
            n = self.number_of(entry)
            if accept:
                self.q.settle(entry)
                self.here.discard(n)
            else:
                self.q.release(entry)
            self.check_deliveries()

    def number_of(self, entry: Entry) -> int:
        return int((entry.message.data or self.sent_data(entry)).rstrip(b"."))

    def sent_data(self, entry: Entry) -> bytes:
        """A paged-out entry's bytes are in the store: its number is read from the store."""
        assert self.store is not None and self.q.hooks.pager is not None
        return self.q.hooks.pager.page_in(entry.message)

    @invariant()
    def nothing_is_lost_and_the_counts_add_up(self) -> None:
        entries = list(self.q.entries())
        assert {self.number_of(e) for e in entries} == self.here
        assert self.q.depth == len(entries)
        assert self.q.bytes == sum(len(self.sent[self.number_of(e)]) for e in entries)
        in_memory = sum(len(e.message.data) for e in entries)
        assert self.q.hooks.budget.used == in_memory
        assert self.q.unacknowledged == len(self.held)
        check_figures(self.q, len(self.sent))

    def over(self) -> bool:
        return (self.count is not None and self.q.depth > self.count) or (
            self.size is not None and self.q.bytes > self.size
        )


OverflowModel.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)
test_overflow_keeps_its_rules_at_random = OverflowModel.TestCase
