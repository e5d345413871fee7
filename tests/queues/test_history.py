"""Per-key sequence numbers, custom sequences, history size and replay (queues/history.py)."""

from __future__ import annotations

from typing import Any

import proton
import pytest

from proton_broker.codec.encode import with_sequence_number
from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.factory import LVQ_HISTORY, build_queue
from proton_broker.queues.history import SEQUENCE
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker
from tests.queues.memory import traced_bytes_per_message

LVQ = {"qpid.last_value_queue_key": "id"}
KEYED = {"sequenceKey": "id"}


def msg(key: str | None, value: Any = "", **properties: Any) -> Message:
    if key is not None:
        properties["id"] = key
    return parse_message(proton.Message(body=value, properties=properties).encode())


def queue(options: dict[str, Any], default_keep: int | None = None) -> Queue:
    return build_queue("q", parse_settings(options), max_key_updates=default_keep)


def sequence_of(entry_or_message: Any) -> int:
    """The ``x-opt-sequence`` a delivery of it carries."""
    message = getattr(entry_or_message, "message", entry_or_message)
    delivered = parse_message(with_sequence_number(message, message.number or 0))
    return delivered.message_annotation(SEQUENCE)


def replayed(q: Queue, start: int | str, key: str | None = None) -> list[tuple[str, int]]:
    assert q.history is not None
    return [(v.key, v.seq) for v in q.history.replay(start, key)]


def test_each_key_counts_its_own_updates_from_one() -> None:
    q = queue(KEYED)
    for key in ["a", "b", "a", "a", "b"]:
        q.enqueue(msg(key))
    assert [sequence_of(e) for e in q.entries()] == [1, 1, 2, 3, 2]


def test_keys_are_compared_whole_not_by_prefix() -> None:
    q = queue(KEYED)
    for key in ["1", "10", "1", "100"]:
        q.enqueue(msg(key))
    assert [sequence_of(e) for e in q.entries()] == [1, 1, 2, 1]


def test_messages_without_the_key_get_no_sequence() -> None:
    q = queue(KEYED)
    q.enqueue(msg(None))
    (entry,) = q.entries()
    assert sequence_of(entry) is None


def test_the_sequence_is_delivered_and_the_rest_is_kept() -> None:
    q = queue(LVQ)
    q.enqueue(msg("k", "payload", colour="red"))
    (entry,) = q.entries()
    decoded = proton.Message()
    decoded.decode(with_sequence_number(entry.message, 1))
    assert decoded.annotations == {SEQUENCE: 1, "x-opt-sequence-number": 1}
    assert decoded.body == "payload" and decoded.properties == {"id": "k", "colour": "red"}


def test_a_queued_message_keeps_the_bytes_the_producer_sent() -> None:
    sent = msg("k", "payload")
    original = sent.data
    queue(LVQ).enqueue(sent)
    assert sent.sequence == 1 and sent.data is original  # the number is added as it leaves


def test_a_message_written_to_the_store_carries_its_sequence_in_its_bytes() -> None:
    durable = msg("k", "payload")
    durable.store_id = 1  # as the broker gives one to a durable message on a durable queue
    queue(LVQ).enqueue(durable)
    assert durable.message_annotation(SEQUENCE) == 1  # so its row reads back with it


def test_a_custom_sequence_must_fit_in_a_long_and_leave_half_of_it_to_go_on() -> None:
    q = queue(KEYED)
    with pytest.raises(InvalidField, match="must be an integer"):
        q.enqueue(msg("k", **{SEQUENCE: proton.ulong(2**63)}))
    with pytest.raises(InvalidField, match="at most 4611686018427387904"):
        q.enqueue(msg("k", **{SEQUENCE: 2**63 - 1}))
    q.enqueue(msg("k", **{SEQUENCE: 2**62}))
    q.enqueue(msg("k"))
    assert [sequence_of(e) for e in q.entries()] == [2**62, 2**62 + 1]


def test_a_custom_sequence_must_be_greater_than_the_current_one() -> None:
    q = queue(KEYED)
    q.enqueue(msg("k", **{SEQUENCE: 999}))
    assert sequence_of(list(q.entries())[-1]) == 999
    q.enqueue(msg("k"))
    assert sequence_of(list(q.entries())[-1]) == 1000
    for stale in (1000, 5):
        with pytest.raises(InvalidField, match="not greater than its current sequence 1000"):
            q.enqueue(msg("k", **{SEQUENCE: stale}))
    with pytest.raises(InvalidField, match="must be an integer"):
        q.enqueue(msg("k", **{SEQUENCE: "soon"}))
    assert q.depth == 2  # the refused ones never joined


def test_a_custom_sequence_is_read_from_the_annotations_or_the_properties_only() -> None:
    q = queue(KEYED)
    annotated = proton.Message(
        body="v", properties={"id": "k"}, annotations={proton.symbol(SEQUENCE): 7}
    )
    q.enqueue(parse_message(annotated.encode()))
    q.enqueue(msg("k", "x-opt-sequence 99"))  # its name in the body is no number
    q.enqueue(msg("k", note="x-opt-sequence"))  # nor is it as a property's value
    q.enqueue(msg("k", note="x-opt-sequence", **{SEQUENCE: 20}))
    q.enqueue(msg("k"))
    assert [sequence_of(entry) for entry in q.entries()] == [7, 8, 9, 20, 21]


@pytest.mark.parametrize(
    "keep, kept", [(None, [1, 2, 3, 4, 5]), (0, [5]), (1, [5]), (3, [3, 4, 5])]
)
def test_max_key_updates_keeps_exactly_the_newest_versions(
    keep: int | None, kept: list[int]
) -> None:
    q = queue({**LVQ, **({} if keep is None else {"max_key_updates": keep})})
    for _ in range(5):
        q.enqueue(msg("k"))
    q.enqueue(msg("other"))
    assert [seq for _, seq in replayed(q, "first", "k")] == kept
    assert q.depth == 2  # the LVQ itself holds one value per key


def test_a_last_value_queue_keeps_a_bounded_history_unless_told_otherwise() -> None:
    lvq, numbered = queue(LVQ), queue({"sequenceKey": "id"})
    for q in (lvq, numbered):
        for _ in range(LVQ_HISTORY + 50):
            q.enqueue(msg("k"))
    assert [s for _, s in replayed(lvq, "first")] == list(range(51, LVQ_HISTORY + 51))
    assert len(replayed(numbered, "first")) == LVQ_HISTORY + 50  # every version, as told


def test_the_broker_wide_default_applies_unless_the_queue_sets_its_own() -> None:
    default, own = queue(LVQ, default_keep=2), queue({**LVQ, "max_key_updates": 4}, default_keep=2)
    for q in (default, own):
        for _ in range(6):
            q.enqueue(msg("k"))
    assert [s for _, s in replayed(default, "first")] == [5, 6]
    assert [s for _, s in replayed(own, "first")] == [3, 4, 5, 6]


@pytest.mark.parametrize("keep", [None, 1, 3])
def test_a_key_with_one_version_replays_like_a_key_with_several(keep: int | None) -> None:
    q = queue({**KEYED, **({} if keep is None else {"max_key_updates": keep})})
    for key in ["lone", "many", "many"]:
        q.enqueue(msg(key))
    assert replayed(q, "first", "lone") == replayed(q, "last", "lone") == [("lone", 1)]
    assert replayed(q, "first", "many") == (
        [("many", 2)] if keep == 1 else [("many", 1), ("many", 2)]
    )
    assert replayed(q, "last") == [("lone", 1), ("many", 2)]
    assert replayed(q, 1, "lone") == [("lone", 1)] and replayed(q, 2, "lone") == []
    assert replayed(q, "first", "none") == []


def test_replay_from_a_number_first_and_last() -> None:
    q = queue(KEYED)
    for key in ["a", "b", "a", "b", "a"]:
        q.enqueue(msg(key))
    assert replayed(q, 2) == [("a", 2), ("b", 2), ("a", 3)]
    assert replayed(q, 2, "a") == [("a", 2), ("a", 3)]
    assert replayed(q, "first", "b") == [("b", 1), ("b", 2)]
    assert replayed(q, "last", "a") == [("a", 3)]
    assert replayed(q, "last") == [("b", 2), ("a", 3)]


def test_a_replaying_browser_gets_the_history_then_follows_new_updates_of_its_key() -> None:
    q = queue(LVQ)
    for key in ["a", "b", "a", "a"]:
        q.enqueue(msg(key))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, sequence=(2, "a"))
    assert [sequence_of(e) for e in browser.got] == [2, 3]
    q.enqueue(msg("b"))
    q.enqueue(msg("a"))
    q.enqueue(msg("a"))  # replaces the last one on the LVQ at once: the browser still gets it
    assert [sequence_of(e) for e in browser.got] == [2, 3, 4, 5]
    assert q.depth == 2 and q.stats.dequeued == 0  # browsing took nothing


def test_a_replay_waits_for_credit_and_loses_nothing_meanwhile() -> None:
    q = queue(LVQ)
    browser = Taker(credit=0, browse=True)
    q.subscribe(browser, sequence=("first", None))
    for _ in range(5):
        q.enqueue(msg("k"))
    browser.grant(q, 10)
    assert [sequence_of(e) for e in browser.got] == [1, 2, 3, 4, 5]


def test_a_replay_needs_a_keyed_queue_and_a_browser() -> None:
    with pytest.raises(InvalidField, match="needs a queue with sequence numbers"):
        queue({}).subscribe(Taker(credit=1, browse=True), sequence=(1, None))
    with pytest.raises(InvalidField, match="browse"):
        queue(LVQ).subscribe(Taker(credit=1), sequence=(1, None))


def test_history_memory_stays_bounded_with_a_limit() -> None:
    q = queue({**KEYED, "max_key_updates": 2})
    for i in range(10_000):
        q.enqueue(msg(f"k{i % 10}"))
    assert q.history is not None  # 20 versions kept; dropped ones let go at once
    assert len(q.history.replay("first")) == 20
    assert sum(1 for e in q.entries() if e.message.in_history) == 20


# ---- a key's current number --------------------------------------------------------------


def test_a_number_given_out_before_its_version_joins_is_already_the_current_one() -> None:
    q = queue(KEYED)
    q.enqueue(msg("a"))
    early = msg("a")
    assert q.number(early) == ("a", 2)  # as the broker numbers a durable message it writes
    assert q.history is not None and q.history.current("a") == 2
    q.enqueue(msg("a"))
    q.enqueue(early)
    assert [sequence_of(e) for e in q.entries()] == [1, 3, 2]
    assert q.history.current("a") == 3


def test_a_version_recorded_behind_a_greater_number_leaves_the_greater_one_current() -> None:
    q = queue(KEYED)
    first, second = msg("a"), msg("a")
    q.number(first)
    q.number(second)
    q.enqueue(second)  # written first, joins first
    q.enqueue(first)
    assert q.history is not None and q.history.current("a") == 2
    q.enqueue(msg("a"))
    assert sequence_of(list(q.entries())[-1]) == 3


def test_restored_counters_are_current_for_keys_with_and_without_versions() -> None:
    q = queue(KEYED)
    q.enqueue(msg("a"))
    assert q.history is not None
    q.history.restore({"a": 7, "b": 4})
    assert (q.history.current("a"), q.history.current("b"), q.history.current("c")) == (7, 4, 0)
    q.enqueue(msg("b"))
    assert sequence_of(list(q.entries())[-1]) == 5 and q.history.current("b") == 5


def test_a_queued_message_of_a_sequenced_queue_keeps_no_copy_of_its_keys_text() -> None:
    """On a queue that numbers a key's messages but is not a last-value queue, an entry
    does not keep its key's text (the history does, once a key): 100 keys over 20,000
    queued messages cost 468 bytes a message of Python objects, 533 when every entry held
    a copy of the text read from its message."""
    template = proton.Message(body=b"x" * 100, properties={"k": "K0000000"}).encode()
    q = build_queue("q", parse_settings({"sequenceKey": "k", "max_key_updates": 1}))
    messages = (template.replace(b"K0000000", b"K%07d" % (n % 100)) for n in range(20_000))
    per_message = traced_bytes_per_message(q, messages)
    assert per_message < 500, per_message
