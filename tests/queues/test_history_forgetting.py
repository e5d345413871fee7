"""What sequence histories hold beyond their queues, against broker.max_history_memory, and
what they forget when it is full (queues/history.py, queues/budget.py)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import proton
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.budget import HistoryBudget
from proton_broker.queues.entries import Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.history import CUSTOM_MAX, FIRST, SEQUENCE, VERSION_COST, History
from proton_broker.queues.ports import LoopHooks
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.compaction import compact_as_usual, compact_early
from tests.queues.consumers import Taker
from tests.queues.test_history import KEYED, LVQ, msg, sequence_of

BODY = "x" * 100


def queue(options: dict[str, Any], budget: HistoryBudget, name: str = "q") -> Queue:
    return build_queue(name, parse_settings(options), hooks=LoopHooks(history_budget=budget))


def history_of(q: Queue) -> History:
    assert q.history is not None
    return q.history


def consume_all(q: Queue) -> list[int]:
    """Take and settle everything on ``q``; the sequence each delivery carried."""
    taker = Taker(credit=q.depth)
    q.subscribe(taker)
    numbers = [sequence_of(message) for message in taker.messages]
    for entry in taker.got:
        q.settle(entry)
    q.unsubscribe(taker)
    return numbers


def settle_only(q: Queue, key: str) -> None:
    """Take everything on ``q`` and settle the messages of ``key``; the rest go back."""
    taker = Taker(credit=q.depth)
    q.subscribe(taker)
    for entry in taker.got:
        if entry.message.application_property("id") == key:
            q.settle(entry)
        else:
            q.release(entry)
    q.unsubscribe(taker)


def cost(key: str = "k0000") -> int:
    """What one consumed version of ``msg(key, BODY)`` counts in the budget."""
    return len(msg(key, BODY).data) + VERSION_COST


def test_a_history_counts_what_it_holds_once_its_versions_leave_the_queue() -> None:
    budget = HistoryBudget(10**9)
    q = queue(KEYED, budget)
    for key in ("a", "b", "a"):
        q.enqueue(msg(key, BODY))
    assert budget.used == 0  # all on the queue: the memory budget counts them
    consume_all(q)
    assert budget.used == history_of(q).held == 2 * cost("a") + cost("b")


def test_new_keys_under_a_consumer_that_keeps_up_stay_within_the_budget() -> None:
    budget = HistoryBudget(50 * cost())
    q = queue(LVQ, budget)
    for i in range(1000):
        q.enqueue(msg(f"k{i:04}", BODY))
        consume_all(q)
        assert budget.used <= budget.limit
    assert budget.forgotten > 900  # the oldest keys went
    kept = [version.key for version in history_of(q).replay("first")]
    assert kept and kept[-1] == "k0999"  # the newest are still there to replay
    assert len(kept) <= 50


def test_older_versions_go_before_any_key_is_forgotten() -> None:
    budget = HistoryBudget(30 * cost())
    q = queue({**KEYED, "max_key_updates": 10}, budget)
    for _round in range(4):  # 10 keys, 4 versions each, all consumed: 40 held
        for i in range(10):
            q.enqueue(msg(f"k{i}", BODY))
        consume_all(q)
    history = history_of(q)
    assert budget.forgotten == 0
    assert budget.used <= budget.limit
    assert {v.key for v in history.replay("last")} == {f"k{i}" for i in range(10)}
    q.enqueue(msg("k0", BODY))
    assert consume_all(q) == [5]  # each key's numbers go on where they were


def test_a_forgotten_key_and_every_new_key_start_above_the_highest_number_forgotten() -> None:
    budget = HistoryBudget(5 * cost())
    q = queue(KEYED, budget)
    for _ in range(7):
        q.enqueue(msg("old", BODY))  # numbers 1 to 7
    consume_all(q)
    for i in range(5):
        q.enqueue(msg(f"new{i}", BODY))
    consume_all(q)
    history = history_of(q)
    assert history.current("old") == history.floor >= 7  # forgotten: above all it had
    q.enqueue(msg("old", BODY))
    q.enqueue(msg("brand-new", BODY))
    assert consume_all(q) == [history.floor + 1, history.floor + 1]


def test_a_key_whose_latest_value_is_on_a_last_value_queue_is_never_forgotten() -> None:
    budget = HistoryBudget(5 * cost())
    q = queue(LVQ, budget)
    for _ in range(20):  # nobody consumes: each value replaces the one before
        for key in ("a", "b"):
            q.enqueue(msg(key, BODY))
    assert budget.used <= budget.limit  # the replaced values were let go
    assert budget.forgotten == 0
    q.enqueue(msg("a", BODY))
    assert q.depth == 2  # a's value still replaces: its key is the queue's index
    assert sorted(consume_all(q)) == [20, 21]


def test_the_history_holding_the_most_forgets_first() -> None:
    budget = HistoryBudget(20 * cost())
    small, large = queue(KEYED, budget, "small"), queue(KEYED, budget, "large")
    for i in range(3):
        small.enqueue(msg(f"s{i}", BODY))
    consume_all(small)
    for i in range(30):
        large.enqueue(msg(f"l{i}", BODY))
        consume_all(large)
    assert len(history_of(small).replay("first")) == 3
    assert history_of(large).floor > 0 and budget.used <= budget.limit


def test_a_history_that_leaves_gives_back_what_it_held() -> None:
    budget = HistoryBudget(10**9)
    q = queue(KEYED, budget)
    q.enqueue(msg("a", BODY))
    consume_all(q)
    assert budget.used > 0
    history_of(q).leave()
    assert budget.used == 0 and budget.histories == []


def test_a_forgotten_key_with_the_largest_custom_number_leaves_every_key_room_to_go_on() -> None:
    budget = HistoryBudget(3 * cost())
    q = queue(KEYED, budget)
    q.enqueue(msg("big", BODY, **{SEQUENCE: CUSTOM_MAX}))
    consume_all(q)
    history = history_of(q)
    while history.floor == 0:  # new keys, consumed at once, until "big" is forgotten
        q.enqueue(msg(f"k{history.held}", BODY))
        consume_all(q)
    assert history.floor == CUSTOM_MAX
    q.enqueue(msg("after", BODY))
    q.enqueue(msg("big", BODY))
    assert consume_all(q) == [CUSTOM_MAX + 1, CUSTOM_MAX + 1]  # delivered: still a long


def test_a_key_updated_all_along_outlives_keys_that_are_not() -> None:
    budget = HistoryBudget(8 * cost())  # eight versions, of nine and more keys
    q = queue({**LVQ, "max_key_updates": 1}, budget)
    for i in range(200):  # "hot" is updated as often as new keys come
        for key in ("hot", f"cold{i}"):
            q.enqueue(msg(key, BODY))
            consume_all(q)
    kept = {version.key for version in history_of(q).replay("first")}
    assert "hot" in kept and "cold0" not in kept and budget.forgotten > 150
    q.enqueue(msg("hot", BODY))
    assert consume_all(q) == [201]  # never forgotten: its numbers went on


def test_a_key_updated_all_along_is_kept_from_the_first_forgetting_on() -> None:
    """Recency counts from the first time the budget is full: "hot", the first key seen and
    updated as often as new keys come, is never forgotten, even before the hand has gone
    round once (it went first when keys were forgotten in the order they were first seen)."""
    budget = HistoryBudget(8 * cost())
    q = queue({**LVQ, "max_key_updates": 1}, budget)
    history = history_of(q)
    for i in range(40):
        for key in ("hot", f"cold{i}"):
            q.enqueue(msg(key, BODY))
            consume_all(q)
        assert history.replay("last", key="hot"), f"hot forgotten at cold{i}"
    assert budget.forgotten > 25 and budget.used <= budget.limit


def test_forgetting_goes_on_when_the_oldest_keys_are_still_on_the_queue() -> None:
    """The cut is taken from keys that may be forgotten, and a round that lets go of
    nothing opens it to every such key, so a history over budget always gets back under."""
    budget = HistoryBudget(6 * cost())
    q = queue(LVQ, budget)
    for i in range(10):  # ten values that stay on the queue: the index, never forgotten
        q.enqueue(msg(f"queued{i}", BODY))
    for i in range(30):
        q.enqueue(msg(f"passing{i}", BODY))
        settle_only(q, f"passing{i}")
        assert budget.used <= budget.limit
    assert q.depth == 10 and budget.forgotten > 20


def test_forgetting_lets_go_of_older_versions_only_up_to_the_first_still_on_the_queue() -> None:
    budget = HistoryBudget(4 * cost())
    q = queue(KEYED, budget)
    q.enqueue(msg("a", BODY))
    consume_all(q)  # a's first version: held by the history alone, so it may go
    q.enqueue(msg("a", BODY))
    q.enqueue(msg("a", BODY))  # its second and third wait on the queue
    for i in range(8):  # other keys, each consumed as it comes: the budget fills
        q.enqueue(msg(f"k{i}", BODY))
        settle_only(q, f"k{i}")
    assert budget.used <= budget.limit
    assert [version.seq for version in history_of(q).replay("first", "a")] == [2, 3]


def two_versions_each(q: Queue, keys: list[str]) -> None:
    """Every key of ``keys`` gets two versions, all consumed: first versions, then second."""
    for _round in range(2):
        for key in keys:
            q.enqueue(msg(key, BODY))
        consume_all(q)


def versions_kept(q: Queue, key: str) -> int:
    return len(history_of(q).replay("first", key))


def test_the_hand_goes_on_from_where_it_stopped_when_keys_came_in_between() -> None:
    """Between two forgettings a new key joins the history's dictionary, which the hand
    walks: it goes on from its place, not from the first key again (which, holding one
    version now and among the oldest, it would forget)."""
    keys = [f"k{i:04}" for i in range(20)]  # as long as cost()'s
    q = queue(KEYED, HistoryBudget(10**9))
    two_versions_each(q, keys)
    history = history_of(q)
    assert history.forget(3 * cost()) >= 3 * cost()
    assert [versions_kept(q, key) for key in keys[:4]] == [1, 1, 1, 2]
    q.enqueue(msg("new", BODY))
    consume_all(q)
    history.forget(3 * cost())
    assert [versions_kept(q, key) for key in keys[:7]] == [1, 1, 1, 1, 1, 1, 2]
    assert history.budget.forgotten == 0


def test_the_hand_counts_the_keys_it_forgot_out_of_its_place() -> None:
    """Keys forgotten behind the hand leave the dictionary once it stops: its place, from
    which it goes on, counts only the keys still there."""
    old = [f"a{i:04}" for i in range(5)]
    keys = [f"b{i:04}" for i in range(10)]
    q = queue(KEYED, HistoryBudget(10**9))
    for key in old:  # one version each, the oldest numbers
        q.enqueue(msg(key, BODY))
    consume_all(q)
    two_versions_each(q, keys)
    history = history_of(q)
    history.forget(7 * cost())  # the old keys are forgotten, b0000 and b0001 trimmed
    assert history.budget.forgotten == 5
    assert [versions_kept(q, key) for key in keys[:3]] == [1, 1, 2]
    q.enqueue(msg("n0000", BODY))
    consume_all(q)
    history.forget(cost())
    assert [versions_kept(q, key) for key in keys] == [1, 1, 1] + [2] * 7


def test_a_key_first_seen_during_a_round_is_passed_in_that_round() -> None:
    keys = [f"k{i:04}" for i in range(5)]
    q = queue(KEYED, HistoryBudget(10**9))
    two_versions_each(q, keys)
    history = history_of(q)
    history.forget(2 * cost())  # the hand stops after k0000 and k0001
    two_versions_each(q, ["later"])
    history.forget(4 * cost())  # k0002 to k0004, then later: the round's last key
    assert [versions_kept(q, key) for key in [*keys, "later"]] == [1] * 6
    assert history.budget.forgotten == 0


def test_when_the_history_holding_the_most_can_give_nothing_the_others_forget() -> None:
    budget = HistoryBudget(3 * cost())
    stuck = queue(LVQ, budget, "stuck")
    taker = Taker()
    stuck.subscribe(taker)
    stuck.enqueue(msg("a", BODY))
    taker.grant(stuck, 1)  # a consumer holds the first value
    stuck.enqueue(msg("a", "y" * 1000))  # replaces nothing: the first is out with it
    stuck.enqueue(msg("a", BODY))  # replaces the second, which the history holds alone
    assert history_of(stuck).held > 2 * cost()  # but behind the first: it cannot go yet
    other = queue(KEYED, budget, "other")
    for key in ("b", "c"):
        other.enqueue(msg(key, BODY))
    consume_all(other)  # over the limit now
    assert budget.used <= budget.limit
    assert history_of(other).replay("first") == []  # the other history gave what it held
    assert history_of(stuck).held > 2 * cost()


def test_histories_that_can_give_nothing_are_asked_again_a_sixteenth_of_the_limit_later() -> None:
    budget = HistoryBudget(64 * cost())
    q = queue(KEYED, budget)
    taker = Taker()
    q.subscribe(taker)
    q.enqueue(msg("a", BODY))
    taker.grant(q, 1)  # held by its consumer: every later version of "a" waits behind it
    q.enqueue(msg("a", BODY))  # and its latest is always on the queue: "a" stays
    history = history_of(q)
    asked = 0
    forget = history.forget

    def counted(needed: int) -> int:
        nonlocal asked
        asked += 1
        return forget(needed)

    history.forget = counted  # type: ignore[method-assign]
    for _ in range(160):
        q.enqueue(msg("a", BODY))
        taker.grant(q, 1)
        q.settle(taker.got[-1])
    assert budget.used > budget.limit  # nothing could go
    assert budget.stuck_at is not None
    # over the limit for the last 96 versions, asked once for each 4 of them (64 / 16)
    assert asked <= 96 // 4 + 1


def test_a_queue_being_deleted_makes_no_other_history_forget() -> None:
    budget = HistoryBudget(2 * cost("a") + 100)
    other = queue(KEYED, budget, "other")
    for key in ("a", "b"):
        other.enqueue(msg(key, BODY))
    consume_all(other)  # its history holds two versions, within the limit
    deleted = queue(LVQ, budget, "deleted")
    deleted.enqueue(msg("a"))  # on its queue: it counts in no history budget
    deleted.clear()  # its value leaves the queue as the queue goes, and counts nowhere
    assert len(history_of(other).replay("first")) == 2
    assert budget.used == history_of(other).held == 2 * cost("a")


def test_a_forgotten_key_lets_go_of_its_older_versions_still_out_with_a_consumer() -> None:
    budget = HistoryBudget(cost())
    q = queue(KEYED, budget)
    taker = Taker()
    q.subscribe(taker)
    older, latest = msg("a", BODY), msg("a", BODY)
    q.enqueue(older)
    q.enqueue(latest)
    taker.grant(q, 1)  # the older one, held
    held = taker.got[-1]
    taker.grant(q, 1)
    q.settle(taker.got[-1])  # the latest has left the queue: the key may be forgotten
    for key in ("b", "c"):
        q.enqueue(msg(key, BODY))
        taker.grant(q, 1)
        q.settle(taker.got[-1])
    assert history_of(q).replay("first", "a") == []  # nothing of the key is kept
    assert older.on_queue and not older.in_history
    used = budget.used
    q.settle(held)  # it was never held alone: the budget does not change
    assert budget.used == used == history_of(q).held


def test_numbers_given_out_for_keys_that_never_get_a_version_are_kept_only_so_far() -> None:
    q = queue(KEYED, HistoryBudget(10**9))
    history = history_of(q)
    for i in range(30_000):  # numbered, as a transaction numbers what it stages, then dropped
        floor = history.floor
        assert q.number(msg(f"rolled-back-{i}")) == (f"rolled-back-{i}", floor + 1)
    assert len(history._ahead) <= 20_000  # forgotten past 10,000: their numbers stay taken
    q.enqueue(msg("rolled-back-0"))
    assert consume_all(q)[0] > 1


# ---- against the rules, at random ----------------------------------------------------------


@dataclass
class Watched:
    """A queue of the model and what the model knows of it."""

    queue: Queue
    taker: Taker
    bound: int  # the versions of a key it may keep
    given: dict[str, int] = field(default_factory=dict)  # the highest number given a key
    sent: dict[str, list[Message]] = field(default_factory=dict)  # a key's messages, in order
    kept: dict[str, list[Message]] = field(default_factory=dict)  # as the last step left them
    held: list[Entry] = field(default_factory=list)  # taken, not yet settled


WHICH = st.integers(0, 2)


class ForgettingModel(RuleBasedStateMachine):
    """Random sends over a few keys (some with a producer's own number, some refused, some
    with a time to live or a priority), takes, accepts, releases, expiries, purges and
    deletions on a last-value queue, a queue that numbers its keys, and one that numbers
    them with priorities (so versions leave it out of order), all in one budget small enough
    that they forget all along; after every step what forgetting must keep true (see the
    module rules of queues/history.py) holds."""

    @initialize(keep=st.sampled_from([1, 2, 5, None]), room=st.integers(1, 4))
    def start(self, keep: int | None, room: int) -> None:
        compact_early()
        self.budget = HistoryBudget(room * cost())
        kept = {} if keep is None else {"max_key_updates": keep}
        # A last-value queue keeps 100 versions of a key unless told, a numbered one all.
        self.kinds = [
            ({**LVQ, **kept}, keep or 100),
            ({**KEYED, **kept}, keep or 10**9),
            ({**KEYED, **kept, "qpid.priorities": 10}, keep or 10**9),
        ]
        self.now = time.time()
        self.watched = [self.made(which) for which in range(len(self.kinds))]

    def teardown(self) -> None:
        compact_as_usual()

    def made(self, which: int) -> Watched:
        """The queue ``which``, made anew (first, or after the one before was deleted)."""
        options, bound = self.kinds[which]
        q = queue(options, self.budget, f"q{which}")
        taker = Taker()
        q.subscribe(taker)
        return Watched(q, taker, bound)

    @rule(
        which=WHICH,
        key=st.sampled_from(["a", "b", "c", "d", "e", "f"]),
        custom=st.none() | st.integers(-2, 50),
        ttl=st.none() | st.sampled_from([1, 5]),
        priority=st.integers(0, 9),
    )
    def send(
        self, which: int, key: str, custom: int | None, ttl: int | None, priority: int
    ) -> None:
        watched = self.watched[which]
        current = history_of(watched.queue).current(key)
        properties = {"id": key} | ({} if custom is None else {SEQUENCE: current + custom})
        sent = proton.Message(body=BODY, properties=properties, priority=priority)
        if ttl is not None:
            sent.ttl = ttl
        message = parse_message(sent.encode())
        if custom is not None and custom <= 0:  # not above the key's current number
            with pytest.raises(InvalidField):
                watched.queue.enqueue(message, now=self.now)
            return
        watched.queue.enqueue(message, now=self.now)
        number = message.sequence
        assert number == (current + 1 if custom is None else current + custom)
        assert number > watched.given.get(key, 0)  # never given out twice for a key
        watched.given[key] = number
        watched.sent.setdefault(key, []).append(message)

    @rule(which=WHICH)
    def take(self, which: int) -> None:
        watched = self.watched[which]
        before = len(watched.taker.got)
        watched.taker.grant(watched.queue, 1)
        watched.held.extend(watched.taker.got[before:])

    @rule(which=WHICH, many=st.integers(1, 4))
    def consume(self, which: int, many: int) -> None:
        watched = self.watched[which]
        before = len(watched.taker.got)
        watched.taker.grant(watched.queue, many)
        for entry in watched.taker.got[before:]:
            watched.queue.settle(entry)

    @rule(which=WHICH, data=st.data(), accept=st.booleans())
    def settle(self, which: int, data: st.DataObject, accept: bool) -> None:
        watched = self.watched[which]
        if watched.held:
            entry = data.draw(st.sampled_from(watched.held))
            watched.held.remove(entry)
            if accept:
                watched.queue.settle(entry)
            else:
                watched.queue.release(entry)

    @rule(seconds=st.sampled_from([1, 3, 10]))
    def time_passes(self, seconds: int) -> None:
        self.now += seconds
        for watched in self.watched:
            watched.queue.purge_expired(now=self.now)

    @rule(which=WHICH)
    def purge(self, which: int) -> None:
        self.watched[which].queue.purge()

    @rule(which=WHICH)
    def delete(self, which: int) -> None:
        others = [history_of(w.queue) for w in self.watched if w is not self.watched[which]]
        before = [[version.message for version in h.replay(FIRST)] for h in others]
        self.watched[which].queue.clear()
        # what the deleted queue let go of made no other history forget
        assert [[version.message for version in h.replay(FIRST)] for h in others] == before
        self.watched[which] = self.made(which)

    @invariant()
    def the_budget_counts_what_the_histories_hold_alone(self) -> None:
        histories = [history_of(watched.queue) for watched in self.watched]
        assert self.budget.used == sum(history.held for history in histories)
        for history in histories:
            alone = [v.message for v in history.replay(FIRST) if not v.message.on_queue]
            assert history.held == sum(len(m.data) + VERSION_COST for m in alone)

    @invariant()
    def the_budget_is_kept_unless_nothing_more_may_go(self) -> None:
        budget = self.budget
        waiting = budget.stuck_at is not None and budget.used < budget.stuck_at + budget.limit // 16
        if budget.used > budget.limit and not waiting:  # asked again a sixteenth later
            assert sum(may_go(history_of(watched.queue)) for watched in self.watched) == 0

    @invariant()
    def a_version_on_its_queue_goes_past_its_keys_bound_or_with_its_whole_key(self) -> None:
        for watched in self.watched:
            for key, messages in watched.sent.items():
                kept = [v.message for v in history_of(watched.queue).replay(FIRST, key)]
                if messages[-1].on_queue:  # its latest stays (a last-value queue's index)
                    assert kept[-1] is messages[-1]
                lost = [m for m in watched.kept.get(key, []) if not any(m is k for k in kept)]
                if any(
                    m.on_queue and any(m is s for s in messages[-watched.bound :]) for m in lost
                ):
                    # only forgetting the key lets go of a version on the queue, and it
                    # lets go of every version the key had
                    assert not any(m is k for m in watched.kept[key] for k in kept)
                watched.kept[key] = kept

    @invariant()
    def a_keys_kept_versions_are_in_order_up_to_its_current_number(self) -> None:
        for watched in self.watched:
            history = history_of(watched.queue)
            for key, highest in watched.given.items():
                numbers = [version.seq for version in history.replay(FIRST, key)]
                assert numbers == sorted(set(numbers))
                assert history.current(key) >= highest
                if numbers:
                    assert numbers[-1] == history.current(key) == highest


def may_go(history: History) -> int:
    """What forgetting could still let go of in ``history``: a key's versions held alone
    before its first one on the queue, or every version of a key none of whose versions is."""
    total = 0
    for key in {version.key for version in history.replay(FIRST)}:
        versions = [version.message for version in history.replay(FIRST, key)]
        if any(message.on_queue for message in versions):
            versions = list(itertools.takewhile(lambda m: not m.on_queue, versions))
        total += sum(len(message.data) + VERSION_COST for message in versions)
    return total


ForgettingModel.TestCase.settings = settings(
    max_examples=120, stateful_step_count=60, deadline=None, suppress_health_check=list(HealthCheck)
)
test_forgetting_keeps_its_rules_at_random = ForgettingModel.TestCase
