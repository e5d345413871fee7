"""The connector end to end: Spark queries against the broker in a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from proton import Message
from proton.reactor import Copy
from proton.utils import BlockingConnection

from proton_broker.cli.client import ManagementClient
from proton_broker.spark.client import send_all


def _send(
    url: str, queue: str, bodies: range | list[str], options: dict[str, Any] | None = None
) -> None:
    send_all(
        url,
        queue,
        (
            Message(
                body=f"m{b}" if isinstance(b, int) else b,
                properties={"n": b} if isinstance(b, int) else None,
            )
            for b in bodies
        ),
        node_options=options,
    )


def _drain(url: str, queue: str, browse: bool = False) -> list[Message]:
    """Every message on ``queue`` (consumed, or browsed)."""
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(queue, credit=100, options=Copy() if browse else None)
        got = []
        while True:
            try:
                got.append(receiver.receive(timeout=1.0))
            except Exception:  # proton.Timeout: nothing more
                return got
            if not browse:
                receiver.accept()
    finally:
        conn.close()


def _take(url: str, queue: str, count: int) -> list[str]:
    """The bodies of the first ``count`` messages on ``queue``, consumed."""
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(queue, credit=count)
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=5).body)
            receiver.accept()
        return got
    finally:
        conn.close()


def _stream(spark: Any, url: str, queue: str, **options: str) -> Any:
    reader = spark.readStream.format("amqp").option("url", url).option("queues", queue)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run_to_parquet(frame: Any, out: Path, checkpoint: Path) -> Any:
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return query


def _read_numbers(spark: Any, out: Path) -> list[int]:
    return sorted(r["sequence_number"] for r in spark.read.parquet(str(out)).collect())


def test_a_batch_write_puts_every_row_on_the_queue_with_its_columns(
    spark: Any, broker_url: str, queue_name: str
) -> None:
    frame = spark.createDataFrame(
        [(f"body {i}", i % 3, f"g{i % 2}") for i in range(25)],
        "body STRING, shard INT, group_id STRING",
    ).repartition(3)
    (
        frame.write.format("amqp")
        .mode("append")
        .option("url", broker_url)
        .option("queue", queue_name)
        .save()
    )
    got = _drain(broker_url, queue_name)
    assert sorted(m.body for m in got) == sorted(f"body {i}" for i in range(25))
    by_body = {m.body: m for m in got}
    assert by_body["body 7"].properties == {"shard": 1}
    assert by_body["body 7"].group_id == "g1"
    ids = [m.id for m in got]
    assert len(set(ids)) == 25
    assert all(len(str(i).split("/")) == 3 for i in ids)  # writeId/partition/row


def test_a_sink_given_two_queues_is_refused_before_anything_is_sent(
    spark: Any, broker_url: str
) -> None:
    frame = spark.createDataFrame([("x",)], "body STRING")
    with pytest.raises(Exception, match="the sink writes to one queue"):
        (
            frame.write.format("amqp")
            .mode("append")
            .option("url", broker_url)
            .option("queues", "a,b")
            .save()
        )


def test_a_write_fails_when_the_queue_refuses_a_row(
    spark: Any, broker_url: str, queue_name: str
) -> None:
    _send(
        broker_url,
        queue_name,
        ["first"],
        options={"qpid.max_count": 2, "qpid.policy_type": "reject"},
    )
    frame = spark.createDataFrame([(f"row {i}",) for i in range(5)], "body STRING")
    with pytest.raises(Exception, match=f"queue '{queue_name}' did not accept a message"):
        (
            frame.coalesce(1)
            .write.format("amqp")
            .mode("append")
            .option("url", broker_url)
            .option("queue", queue_name)
            .save()
        )
    assert len(_drain(broker_url, queue_name, browse=True)) == 2  # full, nothing more


def test_a_streaming_query_with_a_checkpoint_continues_exactly_where_it_stopped(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _send(broker_url, queue_name, range(10))
    _run_to_parquet(_stream(spark, broker_url, queue_name), out, checkpoint)
    first = _read_numbers(spark, out)
    assert len(first) == 10
    _send(broker_url, queue_name, range(10, 25))
    _run_to_parquet(_stream(spark, broker_url, queue_name), out, checkpoint)
    rows = spark.read.parquet(str(out)).collect()
    numbers = sorted(r["sequence_number"] for r in rows)
    assert len(numbers) == len(set(numbers)) == 25
    assert numbers[:10] == first
    assert sorted(r["body_text"] for r in rows) == sorted(f"m{i}" for i in range(25))
    assert {r["application_properties"]["n"] for r in rows} == {str(i) for i in range(25)}
    assert len(_drain(broker_url, queue_name, browse=True)) == 25  # browsing took nothing


def test_a_batch_that_fails_inside_read_is_replayed_with_no_loss_and_no_duplicate(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    out, checkpoint, fail = tmp_path / "out", tmp_path / "checkpoint", tmp_path / "fail"
    _send(broker_url, queue_name, range(30))
    fail.touch()
    query = (
        _stream(spark, broker_url, queue_name, failOnceFile=str(fail))
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="injected failure reading"):
        query.awaitTermination(120)
    assert not fail.exists()
    offsets_logged = sorted((checkpoint / "offsets").iterdir())
    assert offsets_logged, "the failed batch's offsets are in the checkpoint"
    _run_to_parquet(_stream(spark, broker_url, queue_name), out, checkpoint)
    numbers = _read_numbers(spark, out)
    assert len(numbers) == len(set(numbers)) == 30


def test_max_messages_per_batch_limits_every_micro_batch(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    _send(broker_url, queue_name, range(10))
    query = _run_to_parquet(
        _stream(spark, broker_url, queue_name, maxMessagesPerBatch="4"),
        tmp_path / "out",
        tmp_path / "checkpoint",
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [4, 4, 2]
    assert len(_read_numbers(spark, tmp_path / "out")) == 10


def test_starting_offsets_latest_and_json_start_where_they_say(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    _send(broker_url, queue_name, range(5))
    latest = _run_to_parquet(
        _stream(spark, broker_url, queue_name, startingOffsets="latest"),
        tmp_path / "latest",
        tmp_path / "c1",
    )
    assert all(not p["numInputRows"] for p in latest.recentProgress)
    frame = spark.read.format("amqp").option("url", broker_url).option("queue", queue_name)
    numbers = sorted(r["sequence_number"] for r in frame.load().collect())
    start = json.dumps({queue_name: numbers[2]})
    _run_to_parquet(
        _stream(spark, broker_url, queue_name, startingOffsets=start),
        tmp_path / "json",
        tmp_path / "c2",
    )
    assert _read_numbers(spark, tmp_path / "json") == numbers[2:]


def test_a_batch_read_returns_the_queues_current_contents_in_order(
    spark: Any, broker_url: str, queue_name: str
) -> None:
    _send(broker_url, queue_name, range(12))
    rows = (
        spark.read.format("amqp")
        .option("url", broker_url)
        .option("queue", queue_name)
        .option("maxMessagesPerPartition", "5")
        .load()
        .collect()
    )
    assert [r["body_text"] for r in sorted(rows, key=lambda r: r["sequence_number"])] == [
        f"m{i}" for i in range(12)
    ]
    assert {r["queue"] for r in rows} == {queue_name}


def test_rows_carry_the_queue_key_and_the_per_key_sequence(
    spark: Any, broker_url: str, queue_name: str
) -> None:
    readings = [("a", "1"), ("b", "2"), ("a", "3")]
    send_all(
        broker_url,
        queue_name,
        (Message(body=value, properties={"sensor": sensor}) for sensor, value in readings),
        node_options={"sequenceKey": "sensor"},
    )
    rows = (
        spark.read.format("amqp")
        .option("url", broker_url)
        .option("queue", queue_name)
        .load()
        .orderBy("sequence_number")
        .collect()
    )
    assert [(r["key"], r["key_sequence"], r["body_text"]) for r in rows] == [
        ("a", 1, "1"),
        ("b", 1, "2"),
        ("a", 2, "3"),
    ]


def test_data_loss_fails_the_query_or_is_skipped_with_fail_on_data_loss_false(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    ring = {"qpid.max_count": 5, "qpid.policy_type": "ring"}
    _send(broker_url, queue_name, range(3), options=ring)
    _run_to_parquet(
        _stream(spark, broker_url, queue_name), tmp_path / "out", tmp_path / "checkpoint"
    )
    _send(broker_url, queue_name, range(3, 13))  # the ring drops 3..7 before we read them
    with pytest.raises(Exception, match=f"queue '{queue_name}': messages numbered"):
        _run_to_parquet(
            _stream(spark, broker_url, queue_name), tmp_path / "out", tmp_path / "checkpoint"
        )
    _run_to_parquet(
        _stream(spark, broker_url, queue_name, failOnDataLoss="false"),
        tmp_path / "out",
        tmp_path / "checkpoint",
    )
    bodies = sorted(r["body_text"] for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert bodies == sorted(f"m{i}" for i in [0, 1, 2, 8, 9, 10, 11, 12])


def test_commit_moves_the_named_cursor_on_the_broker(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    cursor = f"{queue_name}.cursor"

    def run() -> list[int]:
        _run_to_parquet(
            _stream(spark, broker_url, queue_name, cursor=cursor),
            tmp_path / "out",
            tmp_path / "checkpoint",
        )
        return _read_numbers(spark, tmp_path / "out")

    _send(broker_url, queue_name, range(4))
    first = run()
    _send(broker_url, queue_name, range(4, 6))
    assert len(run()) == 6
    # Spark commits a batch to its source when it plans the next one: after the second
    # run the cursor holds the end of the first (the LVQ keeps one message per queue).
    got = _drain(broker_url, cursor, browse=True)
    assert [(m.body["queue"], m.body["next"]) for m in got] == [(queue_name, max(first) + 1)]


def test_the_stream_sink_with_an_injected_task_failure_leaves_every_row_once(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    source_dir, checkpoint, fail = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "fail"
    spark.createDataFrame([(f"row {i}", i) for i in range(40)], "body STRING, n INT").repartition(
        2
    ).write.json(str(source_dir))
    _send(broker_url, queue_name, [], options={"duplicateDetectionCount": 1000})

    def run() -> Any:
        frame = spark.readStream.schema("body STRING, n INT").json(str(source_dir))
        return (
            frame.writeStream.format("amqp")
            .option("url", broker_url)
            .option("queue", queue_name)
            .option("failOnceFile", str(fail))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    fail.touch()
    with pytest.raises(Exception, match="injected failure writing"):
        run().awaitTermination(120)
    assert 0 < len(_drain(broker_url, queue_name, browse=True)) < 40  # half a task is in
    run().awaitTermination(120)  # the batch is replayed with the same message ids
    got = _drain(broker_url, queue_name)
    assert sorted(m.body for m in got) == sorted(f"row {i}" for i in range(40))


@pytest.mark.parametrize(
    ("order", "named"),
    [
        pytest.param({"qpid.priorities": 10}, "a priority queue (10 levels)", id="priority"),
        pytest.param({"qpid.queue_sort_key": "n"}, "a sorted queue (sortKey 'n')", id="sorted"),
    ],
)
def test_a_priority_or_sorted_queue_is_refused_rather_than_read_with_gaps(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path, order: dict, named: str
) -> None:
    # Browsers see these queues in their own order (here 6..10 before 1..5), not in
    # sequence-number order, so ranges of numbers would skip messages.
    send_all(
        broker_url,
        queue_name,
        [
            Message(body=f"m{n}", priority=0 if n < 5 else 9, properties={"n": 9 - n})
            for n in range(10)
        ],
        node_options=order,
    )
    with pytest.raises(Exception, match=rf"queue '{queue_name}' is {re.escape(named)}"):
        _run_to_parquet(
            _stream(spark, broker_url, queue_name, maxMessagesPerBatch="5"),
            tmp_path / "out",
            tmp_path / "checkpoint",
        )
    frame = spark.read.format("amqp").option("url", broker_url).option("queue", queue_name)
    with pytest.raises(Exception, match=rf"queue '{queue_name}' is {re.escape(named)}"):
        frame.load().count()


def test_a_queue_whose_numbering_started_again_is_data_loss_or_read_again_from_its_start(
    spark: Any, broker_url: str, queue_name: str, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _send(broker_url, queue_name, range(5))  # numbered 1..5: the query goes on from 6
    _run_to_parquet(_stream(spark, broker_url, queue_name), out, checkpoint)
    with ManagementClient(broker_url) as admin:
        assert admin.request("DELETE", "org.apache.qpid.Queue", queue_name, force=True).ok
    _send(broker_url, queue_name, range(5, 8))  # a new queue: numbered 1..3
    with pytest.raises(
        Exception, match=f"queue '{queue_name}': the query counted numbers up to 5, but"
    ):
        _run_to_parquet(_stream(spark, broker_url, queue_name), out, checkpoint)
    _run_to_parquet(_stream(spark, broker_url, queue_name, failOnDataLoss="false"), out, checkpoint)
    bodies = sorted(r["body_text"] for r in spark.read.parquet(str(out)).collect())
    assert bodies == sorted(f"m{i}" for i in range(8))


def test_a_batch_read_is_what_is_left_when_a_consumer_took_messages_after_planning(
    spark: Any, broker_url: str, queue_name: str
) -> None:
    _send(broker_url, queue_name, range(12))
    frame = (
        spark.read.format("amqp")
        .option("url", broker_url)
        .option("queue", queue_name)
        .option("maxMessagesPerPartition", "4")
        .load()
    )
    planned = frame.select("body_text").rdd  # the ranges are planned here, not read
    taken = _take(broker_url, queue_name, 6)
    assert taken == [f"m{i}" for i in range(6)]
    left = sorted(int(r["body_text"][1:]) for r in planned.collect())
    assert left == list(range(6, 12))
