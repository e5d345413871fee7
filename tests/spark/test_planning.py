"""Options, offsets and row mapping: the connector's driver-side logic, without a JVM."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest
from proton import Message, symbol, ulong

from proton_broker.spark import offsets
from proton_broker.spark.client import QueueBounds
from proton_broker.spark.options import OptionError, sink_options, source_options
from proton_broker.spark.rows import COLUMNS, body_columns, message_to_row, row_to_message


def test_the_broker_and_its_command_never_import_pyspark() -> None:
    code = (
        "import sys, proton_broker.broker, proton_broker.__main__; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'py4j', 'pyarrow') or m.startswith('proton_broker.spark')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_source_options_read_queues_starting_offsets_and_limits_case_insensitively() -> None:
    opts = source_options(
        {
            "URL": "amqp://h:1",
            "queues": "a, b,a",
            "maxmessagesperbatch": "7",
            "startingOffsets": '{"b": 5}',
            "failOnDataLoss": "false",
        }
    )
    assert opts.url == "amqp://h:1"
    assert opts.queues == ("a", "b")
    assert opts.starting == {"a": "earliest", "b": 5}
    assert opts.max_per_batch == 7
    assert opts.fail_on_data_loss is False


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "queues"),
        ({"queue": "a", "maxMessagesPerBatch": "0"}, "maxMessagesPerBatch"),
        ({"queue": "a", "maxMessagesPerBatch": "many"}, "maxMessagesPerBatch"),
        ({"queue": "a", "startingOffsets": "middle"}, "startingOffsets"),
        ({"queue": "a", "startingOffsets": '{"b": 1}'}, "startingOffsets"),
        ({"queue": "a", "startingOffsets": '{"a": -3}'}, "startingOffsets"),
        ({"queue": "a", "failOnDataLoss": "perhaps"}, "failOnDataLoss"),
        ({"queue": "a", "timeout": "-1"}, "timeout"),
        ({"queue": "a", "timeout": "nan"}, "option timeout must be a finite number"),
        ({"queue": "a", "timeout": "inf"}, "option timeout must be a finite number"),
        ({"queue": "a", "queues": "b"}, "options queue and queues are both given"),
    ],
)
def test_bad_source_options_are_refused_naming_the_option(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(OptionError, match=named):
        source_options(options)


def test_the_sink_writes_to_exactly_one_queue() -> None:
    assert sink_options({"queue": "out"}).queue == "out"
    with pytest.raises(OptionError, match="one queue"):
        sink_options({"queue": "a,b"})
    with pytest.raises(OptionError, match="options queue and queues are both given"):
        sink_options({"queue": "a", "QUEUES": "b"})
    with pytest.raises(OptionError, match="option timeout must be a finite number"):
        sink_options({"queue": "a", "timeout": "infinity"})


BOUNDS = {"a": QueueBounds(earliest=3, next=13), "b": QueueBounds(earliest=1, next=3)}


def test_initial_offsets_follow_earliest_latest_and_explicit_numbers() -> None:
    assert offsets.initial({"a": "earliest", "b": "latest"}, BOUNDS) == {"a": 3, "b": 3}
    assert offsets.initial({"a": 8, "b": "earliest"}, BOUNDS) == {"a": 8, "b": 1}


def test_latest_offset_reaches_each_queues_next_number_without_a_limit() -> None:
    assert offsets.latest({"a": 3, "b": 1}, BOUNDS, None, True) == {"a": 13, "b": 3}


def test_the_batch_limit_is_shared_among_queues_and_never_exceeded() -> None:
    end = offsets.latest({"a": 3, "b": 1}, BOUNDS, 5, True)
    assert sum(end[q] - s for q, s in {"a": 3, "b": 1}.items()) == 5
    assert end["b"] == 3  # b had only two; a takes the rest
    end = offsets.latest(end, BOUNDS, 5, True)
    assert end == {"a": 11, "b": 3}
    end = offsets.latest(end, BOUNDS, 5, True)
    assert end == {"a": 13, "b": 3}
    assert offsets.latest(end, BOUNDS, 5, True) == end  # nothing new: no movement


def test_an_available_now_target_caps_the_end_offset() -> None:
    assert offsets.latest({"a": 3, "b": 1}, BOUNDS, None, True, cap={"a": 6, "b": 3}) == {
        "a": 6,
        "b": 3,
    }


def test_a_start_below_the_earliest_retained_number_is_data_loss() -> None:
    with pytest.raises(
        offsets.DataLossError, match="'a': messages numbered 1 to 2 were consumed or"
    ):
        offsets.latest({"a": 1, "b": 1}, BOUNDS, None, True)


def test_data_loss_is_skipped_when_asked_and_the_limit_counts_from_the_earliest() -> None:
    assert offsets.latest({"a": 1, "b": 3}, BOUNDS, 4, False) == {"a": 7, "b": 3}


def test_an_emptied_queue_behind_the_start_is_loss_but_one_at_the_start_is_not() -> None:
    empty = {"a": QueueBounds(earliest=9, next=9)}
    with pytest.raises(offsets.DataLossError):
        offsets.latest({"a": 4}, empty, None, True)
    assert offsets.latest({"a": 9}, empty, None, True) == {"a": 9}


def test_a_start_above_the_next_number_is_data_loss_or_moves_back_to_the_earliest() -> None:
    restarted = {"a": QueueBounds(earliest=2, next=5), "b": QueueBounds(earliest=1, next=3)}
    with pytest.raises(offsets.DataLossError, match="'a': the query counted numbers up to 8, but"):
        offsets.latest({"a": 9, "b": 1}, restarted, None, True)
    end = offsets.latest({"a": 9, "b": 1}, restarted, 10, False)
    assert end == {"a": 2, "b": 3}  # a goes back to its earliest; b reads as before
    assert [(r.queue, r.start, r.end) for r in offsets.ranges({"a": 9, "b": 1}, end, None)] == [
        ("b", 1, 3)
    ]
    assert offsets.latest(end, restarted, 10, False) == {"a": 5, "b": 3}
    # A task whose range [1, 9) was planned before a's numbering started again.
    with pytest.raises(offsets.DataLossError, match="counted numbers up to 8"):
        offsets.effective_start("a", 1, restarted["a"], True, end=9)
    assert offsets.effective_start("a", 1, restarted["a"], False, end=9) == 9  # reads nothing


def test_priority_and_sorted_queues_are_refused_naming_their_order() -> None:
    offsets.check_order({"a": QueueBounds(1, 5, priorities=1)})  # one level: number order
    with pytest.raises(offsets.UnorderedQueueError, match="'p' is a priority queue"):
        offsets.check_order({"a": BOUNDS["a"], "p": QueueBounds(1, 5, priorities=10)})
    with pytest.raises(offsets.UnorderedQueueError, match="'s' is a sorted queue"):
        offsets.check_order({"s": QueueBounds(1, 5, sort_key="price")})


def test_ranges_split_by_partition_size_and_skip_empty_queues() -> None:
    got = offsets.ranges({"a": 3, "b": 3}, {"a": 10, "b": 3}, 3)
    assert [(r.queue, r.start, r.end) for r in got] == [("a", 3, 6), ("a", 6, 9), ("a", 9, 10)]


def test_a_message_becomes_a_row_with_every_section() -> None:
    message = Message(
        body="hello",
        id="m-1",
        subject="s",
        group_id="g1",
        properties={"colour": "red", "n": 7},
        annotations={symbol("x-opt-sequence"): 4},
    )
    message.creation_time = 1_700_000_000.5
    row = dict(zip(COLUMNS, message_to_row("q", 12, message, "colour"), strict=True))
    assert (row["queue"], row["sequence_number"]) == ("q", 12)
    assert (row["body"], row["body_text"]) == (b"hello", "hello")
    assert row["message_id"] == "m-1"
    assert row["group_id"] == "g1"
    assert row["application_properties"] == {"colour": "red", "n": "7"}
    assert row["annotations"] == {"x-opt-sequence": "4"}
    assert (row["key"], row["key_sequence"]) == ("red", 4)
    assert row["creation_time"] == dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=dt.UTC)


def test_bodies_become_bytes_and_text_where_they_are_text() -> None:
    assert body_columns(b"\xff\x00") == (b"\xff\x00", None)
    assert body_columns(b"caf\xc3\xa9") == (b"caf\xc3\xa9", "café")
    assert body_columns({"a": 1}) == (b'{"a": 1}', '{"a": 1}')
    assert body_columns(ulong(5)) == (b"5", "5")


def test_a_row_becomes_a_message_with_its_columns_as_properties() -> None:
    row = {
        "body": bytearray(b"x"),
        "subject": "s",
        "group_id": "g",
        "ticker": "IBM",
        "price": 1.5,
        "application_properties": {"extra": "e"},
        "skip": None,
    }
    message = row_to_message(row, "query/1/0/3")
    assert message.id == "query/1/0/3"
    assert message.body == b"x"
    assert (message.subject, message.group_id) == ("s", "g")
    assert message.properties == {"ticker": "IBM", "price": 1.5, "extra": "e"}


def test_a_row_with_its_own_message_id_keeps_it() -> None:
    assert row_to_message({"body": "b", "message_id": "mine"}, "generated").id == "mine"


def test_offsets_are_plain_json_as_spark_stores_them() -> None:
    end = offsets.latest({"a": 3}, {"a": BOUNDS["a"]}, 4, True)
    assert json.loads(json.dumps(end)) == end == {"a": 7}
