"""Duplicate detection: a message whose message-id is in the queue's window is dropped (the
protocol adapter still says accepted); the window is a count, a time, or both."""

from __future__ import annotations

import uuid

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField, ResourceLimitExceeded
from proton_broker.message import Message
from proton_broker.queues.duplicates import DuplicateWindow, id_key
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker


def msg(message_id: object, body: object = "x") -> Message:
    return parse_message(proton.Message(id=message_id, body=body).encode())


def queue(**options: object) -> Queue:
    return build_queue("dedupe", parse_settings(options))


def test_a_repeated_message_id_is_dropped_and_counted() -> None:
    q = queue(duplicateDetectionCount=10)
    assert q.enqueue(msg("a"))
    assert not q.enqueue(msg("a", "again"))
    assert q.depth == 1
    assert (q.stats.enqueued, q.stats.duplicates) == (1, 1)


def test_the_count_window_remembers_only_the_last_n_ids() -> None:
    q = queue(duplicateDetectionCount=2)
    for name in ("a", "b", "c"):
        q.enqueue(msg(name))
    assert q.enqueue(msg("a"))  # a fell out when c arrived
    assert not q.enqueue(msg("c"))
    assert q.depth == 4


def test_the_time_window_forgets_ids_older_than_its_seconds() -> None:
    q = queue(duplicate_detection_seconds=10)
    q.enqueue(msg("a"), now=1000.0)
    assert not q.enqueue(msg("a"), now=1009.0)
    assert q.enqueue(msg("a"), now=1010.5)  # ten seconds after the first


def test_a_duplicate_does_not_extend_the_window() -> None:
    q = queue(duplicateDetectionSeconds=10)
    q.enqueue(msg("a"), now=1000.0)
    q.enqueue(msg("a"), now=1008.0)
    assert q.enqueue(msg("a"), now=1011.0)


def test_with_both_bounds_an_id_is_forgotten_at_whichever_comes_first() -> None:
    q = queue(duplicateDetectionCount=100, duplicateDetectionSeconds=5)
    q.enqueue(msg("a"), now=1000.0)
    assert q.enqueue(msg("a"), now=1006.0)
    small = queue(duplicateDetectionCount=1, duplicateDetectionSeconds=3600)
    small.enqueue(msg("a"), now=1000.0)
    small.enqueue(msg("b"), now=1001.0)
    assert small.enqueue(msg("a"), now=1002.0)


def test_messages_without_a_message_id_are_never_dropped() -> None:
    q = queue(duplicateDetectionCount=10)
    plain = proton.Message(body="no id").encode()
    for _ in range(3):
        assert q.enqueue(parse_message(plain))
    assert q.depth == 3


def test_ids_are_compared_with_their_type() -> None:
    q = queue(duplicateDetectionCount=10)
    same = uuid.UUID(int=1)
    for message_id in (1, "1", b"1", same):
        assert q.enqueue(msg(message_id))
    assert not q.enqueue(msg(proton.ulong(1)))
    assert not q.enqueue(msg(uuid.UUID(int=1)))
    assert len({id_key(v) for v in (1, "1", b"1", same)}) == 4


def test_a_queue_without_duplicate_detection_keeps_every_copy() -> None:
    q = build_queue("plain")
    q.enqueue(msg("a"))
    assert q.enqueue(msg("a"))
    assert q.depth == 2


def test_a_message_a_full_queue_refused_is_not_remembered() -> None:
    q = queue(duplicateDetectionCount=10, maximumQueueDepthMessages=1, overflowPolicy="reject")
    q.enqueue(msg("first"))
    with pytest.raises(ResourceLimitExceeded):
        q.enqueue(msg("second"))
    taker = Taker(credit=1)
    q.subscribe(taker)
    q.settle(taker.got[0])  # room again
    assert q.enqueue(msg("second"))  # the retry is not taken for a duplicate


def test_a_recovered_message_is_never_taken_for_a_duplicate_of_its_own_record() -> None:
    q = queue(duplicateDetectionCount=10)
    q.numbers.restore_seen([("s:a", 1000.0)], now=1001.0)
    assert q.enqueue(msg("a"), now=1000.0, number=1)  # recovery
    assert not q.enqueue(msg("a"), now=1002.0)  # a retry after the restart


def test_restoring_drops_records_that_fell_out_of_the_window_while_down() -> None:
    forgotten: list[str] = []
    window = DuplicateWindow(2, 60.0, forgotten.append)
    stale = window.restore(
        [("s:old", 100.0), ("s:a", 950.0), ("s:b", 960.0), ("s:c", 970.0)], now=1000.0
    )
    assert sorted(stale) == ["s:a", "s:old"]
    assert "s:b" in window and "s:c" in window and len(window) == 2


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("duplicateDetectionCount", 0),
        ("duplicateDetectionCount", -3),
        ("duplicateDetectionCount", "many"),
        ("duplicate_detection_count", 1.5),
        ("duplicateDetectionSeconds", 0),
        ("duplicateDetectionSeconds", -1),
        ("duplicate_detection_seconds", "soon"),
        ("duplicateDetectionSeconds", True),
    ],
)
def test_bad_window_options_are_refused_naming_the_option(option: str, value: object) -> None:
    with pytest.raises(InvalidField) as refused:
        parse_settings({option: value})
    assert option in refused.value.description
    assert repr(value) in refused.value.description


def test_the_window_options_accept_their_text_forms_and_aliases() -> None:
    settings = parse_settings(
        {"duplicate_detection_count": "5", "duplicateDetectionSeconds": "2.5"}
    )
    assert (settings.duplicate_count, settings.duplicate_seconds) == (5, 2.5)
    assert settings.detects_duplicates
    assert not parse_settings({}).detects_duplicates


def test_a_message_refused_for_a_bad_key_sequence_is_not_remembered() -> None:
    q = queue(duplicateDetectionCount=10, sequenceKey="k")
    bad = parse_message(
        proton.Message(id="m", properties={"k": "a"}, annotations={"x-opt-sequence": "x"}).encode()
    )
    with pytest.raises(InvalidField):
        q.enqueue(bad)
    good = parse_message(proton.Message(id="m", properties={"k": "a"}).encode())
    assert q.enqueue(good)
