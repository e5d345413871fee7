"""What sequence histories hold beyond their queues, against broker.max_history_memory, and
what they forget when it is full (queues/history.py, queues/budget.py)."""

from __future__ import annotations

from typing import Any

from proton_broker.queues.budget import HistoryBudget
from proton_broker.queues.factory import build_queue
from proton_broker.queues.history import CUSTOM_MAX, SEQUENCE, VERSION_COST, History
from proton_broker.queues.ports import LoopHooks
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
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


def test_numbers_given_out_for_keys_that_never_get_a_version_are_kept_only_so_far() -> None:
    q = queue(KEYED, HistoryBudget(10**9))
    history = history_of(q)
    for i in range(30_000):  # numbered, as a transaction numbers what it stages, then dropped
        floor = history.floor
        assert q.number(msg(f"rolled-back-{i}")) == (f"rolled-back-{i}", floor + 1)
    assert len(history._ahead) <= 20_000  # forgotten past 10,000: their numbers stay taken
    q.enqueue(msg("rolled-back-0"))
    assert consume_all(q)[0] > 1
