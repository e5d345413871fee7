"""The FIFO queue on its own: ordering, release positions, credit, browsing and expiry."""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import proton
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from proton_broker.codec.sections import parse_message
from proton_broker.message import Header, Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import parse_selector
from tests.queues.compaction import compact_as_usual, compact_early
from tests.queues.consumers import Taker, Told, check_figures
from tests.queues.memory import traced_bytes_per_message


def msg(n: int, ttl: int | None = None) -> Message:
    message = Message(data=b"%d" % n)
    message.header = Header(ttl=ttl)
    return message


def test_entries_are_handed_out_in_arrival_order() -> None:
    q = build_queue("q")
    for i in range(5):
        q.enqueue(msg(i))
    t = Taker(credit=10)
    q.subscribe(t)
    assert t.bodies() == [b"0", b"1", b"2", b"3", b"4"]


def test_messages_joining_within_a_millisecond_share_one_arrival_time() -> None:
    q = build_queue("q", pack_after=0)
    for i in range(1000):  # a burst: a few milliseconds
        q.enqueue(msg(i))
    arrivals = [entry.arrival for entry in q.entries()]
    distinct = sorted({id(a): a for a in arrivals}.values())
    assert len(distinct) < 100  # shared objects, not a float each
    assert all(later - earlier >= 0.001 for earlier, later in pairwise(distinct))
    assert arrivals == sorted(arrivals)


def test_a_released_entry_is_served_before_later_ones() -> None:
    q = build_queue("q")
    for i in range(4):
        q.enqueue(msg(i))
    t = Taker(credit=2)
    q.subscribe(t)
    first, second = t.got
    q.release(second)
    q.release(first)
    t.credit = 10
    q.credit_granted(t)
    assert t.bodies()[2:] == [b"0", b"1", b"2", b"3"]


def test_consumers_with_credit_are_served_round_robin() -> None:
    q = build_queue("q")
    a, b = Taker(credit=10), Taker(credit=10)
    q.subscribe(a)
    q.subscribe(b)
    for i in range(6):
        q.enqueue(msg(i))
    assert a.bodies() == [b"0", b"2", b"4"]
    assert b.bodies() == [b"1", b"3", b"5"]


def test_a_consumer_out_of_credit_is_skipped() -> None:
    q = build_queue("q")
    a, b = Taker(credit=1), Taker(credit=10)
    q.subscribe(a)
    q.subscribe(b)
    for i in range(4):
        q.enqueue(msg(i))
    assert len(a.got) == 1 and len(b.got) == 3


def test_settled_entries_leave_the_queue_and_the_front_is_compacted() -> None:
    q = build_queue("q")
    t = Taker(credit=10**6)
    q.subscribe(t)
    for i in range(5000):
        q.enqueue(msg(i))
    for entry in t.got:
        q.settle(entry)
    assert q.depth == 0 and q.bytes == 0
    assert len(q._log) < 5000  # cut off in batches, not kept forever
    q.enqueue(msg(9))
    assert t.got[-1].message.data == b"9"


def test_an_entry_refused_by_one_consumer_goes_to_another() -> None:
    q = build_queue("q")
    a = Taker(credit=1)
    q.subscribe(a)
    q.enqueue(msg(0))
    q.release(a.got[0], delivery_failed=True, undeliverable_for=a.id)
    a.credit = 5
    q.credit_granted(a)
    assert len(a.got) == 1
    b = Taker(credit=5)
    q.subscribe(b)
    assert b.bodies() == [b"0"] and b.got[0].delivery_count == 1


def test_a_browser_sees_live_entries_and_takes_nothing() -> None:
    q = build_queue("q")
    for i in range(3):
        q.enqueue(msg(i))
    c = Taker(credit=1)
    q.subscribe(c)
    q.settle(c.got[0])
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert browser.bodies() == [b"1", b"2"]
    q.enqueue(msg(3))
    assert browser.bodies() == [b"1", b"2", b"3"]
    assert q.depth == 3


def test_expired_entries_are_dropped_by_the_sweep_without_consumers() -> None:
    q = build_queue("q")
    q.enqueue(msg(0, ttl=1000), now=100.0)
    q.enqueue(msg(1), now=100.0)
    assert q.purge_expired(now=100.5) == 0
    assert q.purge_expired(now=101.5) == 1
    assert q.depth == 1 and q.stats.expired == 1


def test_an_entry_a_consumer_held_past_its_time_is_dropped_by_the_sweep_once_released() -> None:
    now = time.time()  # the wall clock: a release looks at it
    q = build_queue("q")
    q.enqueue(msg(0, ttl=2000), now=now)
    t = Taker(credit=1)
    q.subscribe(t)
    assert q.purge_expired(now=now + 3) == 0  # its time has come, but a consumer holds it
    t.credit = 0
    q.release(t.got[0])
    assert q.purge_expired(now=now + 4) == 1
    assert q.depth == 0 and q.stats.expired == 1


def test_an_expired_entry_is_skipped_at_dispatch() -> None:
    q = build_queue("q")
    q.enqueue(msg(0, ttl=1), now=1.0)  # long expired by the wall clock
    q.enqueue(msg(1))
    t = Taker(credit=5)
    q.subscribe(t)
    assert t.bodies() == [b"1"]


def test_unsubscribed_consumers_get_nothing_more() -> None:
    q = build_queue("q")
    t = Taker(credit=5)
    q.subscribe(t)
    q.unsubscribe(t)
    q.enqueue(msg(0))
    assert t.got == []


def queued_bytes_per_message(encoded: bytes, count: int = 20_000) -> float:
    """Python memory a standard queue holds per message of ``encoded``."""
    return traced_bytes_per_message(build_queue("q"), [encoded] * count)


def test_a_queued_plain_message_costs_under_500_bytes_of_python_objects() -> None:
    """A 100-byte body: its bytes (146), its record (160), its entry (88), its number and
    arrival time, its places in the queue. It was 610, with a 30-field record and an entry
    with slots for every queue feature."""
    per_message = queued_bytes_per_message(proton.Message(body=b"x" * 100).encode())
    assert per_message < 500, per_message


def test_a_message_id_costs_a_queued_message_nothing_until_it_is_read() -> None:
    """The same message with a message-id, as most clients send: the id stays in the bytes
    (671 bytes a message when the record kept it decoded)."""
    per_message = queued_bytes_per_message(proton.Message(id="ID:1", body=b"x" * 100).encode())
    assert per_message < 500, per_message


# ---- browsers, against the rules, at random ------------------------------------------------


def sent(n: int, color: str, ttl: int | None, due: float | None) -> Message:
    """Message ``n`` (application property ``n``) of ``color``, with a time to live and a
    delivery time (seconds since the epoch) where given."""
    fields: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
    if due is not None:
        fields["annotations"] = {proton.symbol("x-opt-delivery-time"): int(due * 1000)}
    return parse_message(
        proton.Message(body=n, properties={"n": n, "color": color}, **fields).encode()
    )


class BrowsingModel(RuleBasedStateMachine):
    """Random sends (some with a time to live or a delivery time), a consumer taking,
    accepting and releasing, two browsers (one with a selector) and time passing, on a queue
    whose arrival log is compacted after a few dead entries, against the browsers' rules
    (queues/browsing.py): a browser sees each live entry at most once, never one the
    consumer holds, never one not yet valid, only what its selector matches, and while it
    has credit it has seen every live, valid entry it matches that the consumer never took
    (one the consumer took and released may or may not be shown: not once the browser has
    passed it)."""

    @initialize(priorities=st.booleans())
    def start(self, priorities: bool) -> None:
        compact_early()
        self.q = build_queue("q", parse_settings({"x-qpid-priorities": 10} if priorities else {}))
        self.journal: list[tuple[Told, Entry]] = []
        self.consumer = Told(self.journal)
        self.browsers = {
            "all": Told(self.journal, browse=True),
            "red": Told(self.journal, browse=True),
        }
        self.q.subscribe(self.consumer)
        self.q.subscribe(self.browsers["all"])
        self.q.subscribe(self.browsers["red"], selector=parse_selector("color = 'red'"))
        self.now = time.time()
        self.color: dict[int, str] = {}
        self.live: set[int] = set()
        self.due: dict[int, float] = {}  # not valid yet
        self.expires: dict[int, float] = {}
        self.taken: dict[int, Entry] = {}
        self.ever_taken: set[int] = set()
        self.seen: dict[str, set[int]] = {name: set() for name in self.browsers}

    def teardown(self) -> None:
        compact_as_usual()

    def matches(self, name: str, n: int) -> bool:
        return name == "all" or self.color[n] == "red"

    def deliveries(self) -> None:
        for told, entry in self.journal:
            n = entry.message.application_property("n")
            assert n in self.live and n not in self.due
            if told is self.consumer:
                assert n not in self.taken
                self.taken[n] = entry
                self.ever_taken.add(n)
                continue
            (name,) = [name for name, browser in self.browsers.items() if browser is told]
            assert self.matches(name, n) and n not in self.seen[name]
            assert n not in self.taken, f"{name} was shown {n}, which the consumer holds"
            self.seen[name].add(n)
        self.journal.clear()

    @rule(
        color=st.sampled_from(["red", "blue"]),
        ttl=st.none() | st.sampled_from([2, 6]),
        delay=st.none() | st.sampled_from([1, 4]),
        priority=st.integers(0, 9),
    )
    def send(self, color: str, ttl: int | None, delay: int | None, priority: int) -> None:
        n = len(self.color)
        self.color[n] = color
        self.live.add(n)
        if ttl is not None:
            self.expires[n] = self.now + ttl
        due = None if delay is None else self.now + delay
        if due is not None:
            self.due[n] = due
        message = sent(n, color, ttl, due)
        message.header = message.header._replace(priority=priority)
        self.q.enqueue(message, now=self.now)
        self.deliveries()

    @rule(who=st.sampled_from(["consumer", "all", "red"]), credit=st.integers(1, 4))
    def grant(self, who: str, credit: int) -> None:
        (self.consumer if who == "consumer" else self.browsers[who]).grant(self.q, credit)
        self.deliveries()

    @rule(data=st.data(), accept=st.booleans())
    def settle(self, data: st.DataObject, accept: bool) -> None:
        if self.taken:
            n = data.draw(st.sampled_from(sorted(self.taken)))
            entry = self.taken.pop(n)
            if accept:
                self.live.discard(n)
                self.q.settle(entry)
            else:
                self.q.release(entry)
            self.deliveries()

    @rule(seconds=st.sampled_from([1, 3]))
    def time_passes(self, seconds: int) -> None:
        self.now += seconds
        for n, when in list(self.due.items()):
            if when <= self.now:
                del self.due[n]
                if self.expires.get(n, self.now + 1) <= self.now:
                    self.live.discard(n)  # it expired before it was valid
        self.q.release_held(now=self.now)
        self.deliveries()
        self.q.purge_expired(now=self.now)
        self.live -= {
            n
            for n in self.live
            if n not in self.taken
            and n not in self.due  # a held one goes when it is due (above)
            and self.expires.get(n, self.now + 1) <= self.now
        }
        self.deliveries()

    @invariant()
    def a_browser_with_credit_has_seen_every_live_valid_entry_it_matches_nobody_took(self) -> None:
        for name, browser in self.browsers.items():
            if browser.credit:
                valid = {n for n in self.live if n not in self.due and self.matches(name, n)}
                assert valid - self.ever_taken <= self.seen[name]

    @invariant()
    def the_queue_holds_what_is_live(self) -> None:
        assert self.q.depth == len(self.live)
        assert self.q.unacknowledged == len(self.taken)
        check_figures(self.q, len(self.color))


BrowsingModel.TestCase.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None, suppress_health_check=list(HealthCheck)
)
test_browsers_keep_their_rules_at_random = BrowsingModel.TestCase


def test_deleting_messages_walks_on_through_compactions_and_packed_messages() -> None:
    compact_early()
    try:
        q = build_queue("q", pack_after=10)
        for i in range(100):
            q.enqueue(msg(i))
        numbers = [entry.seq for entry, _ in q.listed(0, 100)]
        evens = set(numbers[::2])
        assert q.delete_messages(evens, None, -1) == numbers[::2]
        assert [data for _, data in q.listed(0, 100)] == [b"%d" % i for i in range(1, 100, 2)]
        assert q.delete_messages(None, None, 5) == numbers[1:10:2]
        assert q.delete_messages(None, None, -1) == numbers[11::2]
        assert q.depth == 0 and q.removed == 100
    finally:
        compact_as_usual()


def test_deleting_messages_leaves_those_a_consumer_holds() -> None:
    q = build_queue("q")
    for i in range(3):
        q.enqueue(msg(i))
    taker = Taker(credit=1)
    q.subscribe(taker)
    held = taker.got[0].seq
    assert q.delete_messages({held}, None, -1) == []
    assert q.delete_messages(None, None, -1) == [held + 1, held + 2]
    assert q.depth == 1 and q.unacknowledged == 1


# ---- standby consumers (Broker-J's maximumLiveConsumers) -----------------------------------


def test_consumers_beyond_the_live_bound_wait_in_standby_and_take_a_place_that_frees() -> None:
    q = build_queue("q", parse_settings({"maximumLiveConsumers": 1}))
    live, standby, later = Taker(credit=10), Taker(credit=10), Taker(credit=10)
    for consumer in (live, standby, later):
        q.subscribe(consumer)
    for n in range(3):
        q.enqueue(msg(n))
    assert live.bodies() == [b"0", b"1", b"2"] and standby.got == [] and later.got == []
    assert q.consumer_count == 3
    held = live.got[2]
    q.settle(live.got[0])
    q.settle(live.got[1])
    q.unsubscribe(live)
    q.release(held)  # what it held goes back, as the adapter gives it back
    assert standby.bodies() == [b"2"] and later.got == []
    q.unsubscribe(later)  # one in standby goes: nothing changes for the live one
    q.enqueue(msg(3))
    assert standby.bodies() == [b"2", b"3"] and q.consumer_count == 1


def test_a_browser_counts_among_the_live_consumers_as_in_broker_j() -> None:
    q = build_queue("q", parse_settings({"maximumLiveConsumers": 1}))
    browser, consumer = Taker(credit=10, browse=True), Taker(credit=10)
    q.subscribe(browser)
    q.subscribe(consumer)
    q.enqueue(msg(0))
    assert browser.bodies() == [b"0"] and consumer.got == []
    q.unsubscribe(browser)
    assert consumer.bodies() == [b"0"]
