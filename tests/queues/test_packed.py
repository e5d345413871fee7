"""A deep plain queue packs its newest messages (queues/packed.py): it takes a fraction of
the memory, and nobody can tell otherwise. The state-machine test drives a packing queue and
one that never packs through the same random history and requires the same answers."""

from __future__ import annotations

import tracemalloc
from typing import Any

import proton
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker

T0 = 1_800_000_000.0  # arrival times the tests give (seconds since the epoch)


def encoded(
    n: int, ttl: int | None = None, delay_ms: int | None = None, pad: int = 0, **props: Any
) -> bytes:
    message = proton.Message(body=b"x" * pad + b"m%d" % n, properties=props or None)
    if ttl is not None:
        message.ttl = ttl / 1000
    if delay_ms is not None:
        message.annotations = {"x-opt-delivery-delay": delay_ms}
    return bytes(message.encode())


def fill(q: Queue, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        q.enqueue(parse_message(encoded(n)), now=T0 + n)


def numbers(taker: Taker) -> list[int | None]:
    return [m.number for m in taker.messages]


def test_a_deep_plain_queue_keeps_its_newest_messages_in_a_fraction_of_the_memory() -> None:
    # Every message here shares one bytes object: what is measured is the rest, what the
    # queue holds for each message beyond its bytes.
    data = encoded(0, pad=100)
    packing, plain = build_queue("q", pack_after=100), build_queue("q", pack_after=0)
    used = []
    for q in (packing, plain):
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            q.enqueue(parse_message(data))
        used.append((tracemalloc.get_traced_memory()[0] - before) / 20_000)
        tracemalloc.stop()
    packed_extra, plain_extra = used
    assert packed_extra < 40  # three column slots: bytes, layout, arrival time (about 27)
    assert plain_extra > 250  # record, entry, number, arrival time (about 320)


def test_packed_messages_come_out_in_order_with_their_bytes_numbers_and_arrival() -> None:
    q = build_queue("q", pack_after=3)
    fill(q, 1000)
    t = Taker(credit=1000)
    q.subscribe(t)
    assert [m.data for m in t.messages] == [encoded(n) for n in range(1000)]
    assert numbers(t) == list(range(1, 1001))
    assert [m.arrival for m in t.messages] == [T0 + n for n in range(1000)]
    assert q.depth == 1000 and q.available_count() == 0


def test_a_packed_message_with_a_time_to_live_expires_when_its_time_comes() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 10)
    q.enqueue(parse_message(encoded(10, ttl=60_000)), now=T0 + 10)  # packed, expiring
    fill(q, 5, start=11)
    assert len(q._packed) == 14  # type: ignore[arg-type] # all but the first two
    assert q.purge_expired(now=T0 + 69) == 0
    assert q.purge_expired(now=T0 + 70) == 1
    assert q.depth == 15
    t = Taker(credit=100)
    q.subscribe(t)
    assert numbers(t) == [n for n in range(1, 17) if n != 11]


def test_a_message_that_cannot_be_packed_has_the_packed_ones_go_first() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 10)
    q.enqueue(parse_message(encoded(10)), now=T0 + 10, number=11)  # recovered: never packed
    assert len(q._packed) == 0  # type: ignore[arg-type]
    fill(q, 5, start=11)
    t = Taker(credit=100)
    q.subscribe(t)
    assert [m.data for m in t.messages][9:12] == [encoded(9), encoded(10), encoded(11)]
    assert numbers(t) == list(range(1, 17))


def test_a_delayed_message_behind_packed_ones_is_held_and_they_are_not() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 5)
    q.enqueue(parse_message(encoded(5, delay_ms=10_000)), now=T0 + 5)
    t = Taker(credit=100)
    q.subscribe(t)
    assert numbers(t) == [1, 2, 3, 4, 5]
    assert q.release_held(now=T0 + 16) == 1
    assert numbers(t) == [1, 2, 3, 4, 5, 6]


def test_released_messages_go_back_ahead_of_the_packed_ones() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 600)
    t = Taker(credit=3)
    q.subscribe(t)
    for entry in reversed(t.got):
        q.release(entry)
    t.grant(q, 600)
    assert numbers(t) == [1, 2, 3, *range(1, 601)]


def test_a_browser_sees_packed_messages_and_leaves_them_on_the_queue() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 700)
    browser = Taker(credit=1000, browse=True)
    q.subscribe(browser)
    assert numbers(browser) == list(range(1, 701))
    assert q.depth == 700
    consumer = Taker(credit=1000)
    q.subscribe(consumer)
    assert numbers(consumer) == list(range(1, 701))


def test_a_browser_from_a_number_inside_the_packed_tail_starts_there() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 900)
    browser = Taker(credit=1000, browse=True)
    q.subscribe(browser, from_number=650)
    assert numbers(browser) == list(range(650, 901))


def test_a_consumer_with_a_selector_finds_a_packed_message() -> None:
    class Only:
        def matches(self, message: Message) -> bool:
            return message.application_property("pick") == "yes"

    q = build_queue("q", pack_after=2)
    fill(q, 500)
    q.enqueue(parse_message(encoded(500, pick="yes")), now=T0 + 500)
    fill(q, 10, start=501)
    picky = Taker(credit=5)
    q.subscribe(picky, selector=Only())
    assert numbers(picky) == [501]
    assert q.depth == 511


def test_replay_by_arrival_time_finds_its_start_inside_the_packed_tail() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 800)
    assert q._log.first_since(T0 + 700) == 701
    assert q._log.first_since(T0 + 800) is None


def test_the_earliest_number_entries_and_clear_see_packed_messages() -> None:
    q = build_queue("q", pack_after=2)
    fill(q, 300)
    t = Taker(credit=2)
    q.subscribe(t)
    for entry in list(t.got):
        q.settle(entry)
    assert q.earliest_sequence_number == 3
    assert [e.seq for e in q.entries()] == list(range(3, 301))
    assert q.clear() == 298 and q.depth == 0 and q.bytes == 0


@pytest.mark.parametrize(
    "options",
    [
        {"x-qpid-priorities": 3},
        {"qpid.queue_sort_key": "k"},
        {"qpid.last_value_queue_key": "k"},
        {"qpid.group_header_key": "g"},
        {"qpid.max_count": 5, "qpid.policy_type": "ring"},
        {"qpid.max_count": 5, "qpid.policy_type": "flow_to_disk"},
    ],
)
def test_queues_whose_entries_leave_arrival_order_never_pack(options: dict[str, Any]) -> None:
    q = build_queue("q", parse_settings(options), pack_after=1)
    assert q._packed is None


# ---- the same history on a packing queue and one that never packs ----------------------


class Odd:
    """A selector: messages with odd numbers in their bodies."""

    def matches(self, message: Message) -> bool:
        return message.data[-1] % 2 == 1


class Twins(RuleBasedStateMachine):
    """Two queues, one packing from a small depth on, one never, driven alike."""

    def __init__(self) -> None:
        super().__init__()
        self.queues: list[Queue] = []
        self.takers: list[list[Taker]] = [[], []]
        self.sent = 0
        self.now = T0

    @initialize(pack_after=st.integers(1, 6))
    def make_queues(self, pack_after: int) -> None:
        self.queues = [build_queue("q", pack_after=pack_after), build_queue("q", pack_after=0)]

    def _each(self) -> list[tuple[Queue, list[Taker]]]:
        return list(zip(self.queues, self.takers, strict=True))

    @rule(
        ttl=st.none() | st.just(5_000),
        delay=st.none() | st.just(3_000),
        times=st.integers(1, 40),
    )
    def send(self, ttl: int | None, delay: int | None, times: int) -> None:
        for _ in range(times):
            data = encoded(self.sent, ttl, delay)
            for q, _takers in self._each():
                q.enqueue(parse_message(data), now=self.now)
            self.sent += 1
            self.now += 0.5

    @rule(browse=st.booleans(), picky=st.booleans(), credit=st.integers(0, 30))
    def attach(self, browse: bool, picky: bool, credit: int) -> None:
        for q, takers in self._each():
            taker = Taker(credit=credit, browse=browse)
            takers.append(taker)
            q.subscribe(taker, selector=Odd() if picky else None)

    @rule(which=st.integers(0, 9), credit=st.integers(1, 50))
    def grant(self, which: int, credit: int) -> None:
        for q, takers in self._each():
            if takers:
                takers[which % len(takers)].grant(q, credit)

    @rule(which=st.integers(0, 9), outcome=st.sampled_from(["accept", "release", "modify"]))
    def settle_oldest(self, which: int, outcome: str) -> None:
        for q, takers in self._each():
            if not takers:
                continue
            taker = takers[which % len(takers)]
            if taker.browse or not taker.got:
                continue
            entry = taker.got.pop(0)
            if outcome == "accept":
                q.settle(entry)
            else:
                q.release(entry, delivery_failed=outcome == "modify")

    @rule(seconds=st.floats(0, 10))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        for q, _takers in self._each():
            q.purge_expired(self.now)
            q.release_held(self.now)

    @invariant()
    def both_answer_alike(self) -> None:
        if not self.queues:
            return
        (packing, packing_takers), (plain, plain_takers) = self._each()
        for a, b in zip(packing_takers, plain_takers, strict=True):
            assert [m.data for m in a.messages] == [m.data for m in b.messages]
            assert numbers(a) == numbers(b)
        assert (packing.depth, packing.bytes) == (plain.depth, plain.bytes)
        assert packing.available_count() == plain.available_count()
        assert packing.earliest_sequence_number == plain.earliest_sequence_number
        assert packing.next_sequence_number == plain.next_sequence_number

    def teardown(self) -> None:
        if not self.queues:
            return
        packing, plain = self.queues
        assert [(e.seq, e.message.data) for e in packing.entries()] == [
            (e.seq, e.message.data) for e in plain.entries()
        ]


Twins.TestCase.settings = settings(
    max_examples=200, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
)
test_a_packing_queue_answers_like_one_that_never_packs = Twins.TestCase


def test_expiry_times_of_messages_unpacked_before_their_time_do_not_pile_up() -> None:
    q = build_queue("q", pack_after=1)
    day = 86_400_000
    for n in range(300):  # a packed tail that a consumer keeping pace never empties
        q.enqueue(parse_message(encoded(n, ttl=day)), now=T0)
    t = Taker(credit=0)
    q.subscribe(t)
    for n in range(300, 20_300):
        q.enqueue(parse_message(encoded(n, ttl=day)), now=T0 + n / 1000)
        t.grant(q, 1)
        q.settle(t.got.pop())
    packed = q._packed
    assert packed is not None and 0 < len(packed) <= 300
    assert len(packed._due) <= 2 * len(packed) + 4096  # not one for each of 20,000
