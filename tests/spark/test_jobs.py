"""The batch jobs: a snapshot of a live store, and the Spark jobs over it checked against
a plain SQL query (SQLite) over the same snapshot rows."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from proton import Message
from proton.utils import BlockingConnection

from proton_broker.spark import jobs
from proton_broker.spark.client import send_all
from proton_broker.testing import BrokerProcess


def _send(url: str, queue: str, options: dict[str, Any], *bodies: tuple[Any, ...]) -> None:
    messages = (
        Message(
            body=body,
            durable=True,
            group_id=group,
            properties={"sensor": sensor} if sensor else None,
        )
        for body, sensor, group in bodies
    )
    send_all(url, queue, messages, node_options=options)


def _consume(url: str, queue: str, count: int) -> list[Any]:
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(queue, credit=count)
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=10).body)
            receiver.accept()
        return got
    finally:
        conn.close()


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with a keyed queue (sequence history keeps every version) and a grouped
    queue, exported while the broker runs; T lies between the two rounds of updates."""
    with BrokerProcess() as broker:
        url = broker.url
        keyed = {"durable": True, "sequenceKey": "sensor"}
        grouped = {"durable": True, "messageGroupType": "standard"}
        _send(url, "readings", keyed, ("a1", "a", None), ("b1", "b", None), ("a2", "a", None))
        time.sleep(0.3)
        as_of = dt.datetime.now(dt.UTC)
        time.sleep(0.3)
        _send(url, "readings", keyed, ("a3", "a", None), ("c1", "c", None), ("plain", None, None))
        assert _consume(url, "readings", 2) == ["a1", "b1"]  # history only now
        _send(
            url,
            "work",
            grouped,
            ("w1", None, "g1"),
            ("w2", None, "g2"),
            ("w3", None, "g1"),
            ("w4", None, None),
        )
        _send(url, "scratch", {}, ("not durable: not in the store", None, None))
        out = tmp_path_factory.mktemp("snap") / "snapshot"
        counts = jobs.export(broker.data_dir, out)
        assert broker.alive()
    return {"dir": str(out), "as_of": as_of, "counts": counts}


def _sql(snapshot_dir: str) -> sqlite3.Connection:
    """The snapshot's message rows in an in-memory SQLite table."""
    table = pq.read_table(Path(snapshot_dir) / jobs.MESSAGES_DIR)
    db = sqlite3.connect(":memory:")
    db.execute(
        'CREATE TABLE m (queue, "key", key_sequence, arrival REAL, body_text, '
        'store_id, on_queue, "group", size)'
    )
    for row in table.to_pylist():
        db.execute(
            "INSERT INTO m VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["queue"],
                row["key"],
                row["key_sequence"],
                row["arrival"].timestamp(),
                row["body_text"],
                row["store_id"],
                row["on_queue"],
                row["group"],
                row["size"],
            ),
        )
    return db


def test_export_writes_every_durable_message_and_the_history_the_queues_keep(
    snapshot: dict[str, Any],
) -> None:
    assert snapshot["counts"] == {"queues": 2, "messages": 10}
    rows = pq.read_table(Path(snapshot["dir"]) / jobs.MESSAGES_DIR).to_pylist()
    readings = [
        (r["body_text"], r["key"], r["key_sequence"], r["on_queue"])
        for r in rows
        if r["queue"] == "readings"
    ]
    assert readings == [
        ("a1", "a", 1, False),
        ("b1", "b", 1, False),
        ("a2", "a", 2, True),
        ("a3", "a", 3, True),
        ("c1", "c", 1, True),
        ("plain", None, None, True),
    ]
    queues = pq.read_table(Path(snapshot["dir"]) / jobs.QUEUES_DIR).to_pylist()
    assert {q["queue"]: q["key_property"] for q in queues} == {"readings": "sensor", "work": None}


def test_export_gives_each_message_the_queue_sequence_number_the_store_keeps(
    snapshot: dict[str, Any],
) -> None:
    rows = pq.read_table(Path(snapshot["dir"]) / jobs.MESSAGES_DIR).to_pylist()
    numbers = {
        q: [r["sequence_number"] for r in rows if r["queue"] == q] for q in ("readings", "work")
    }
    assert numbers == {"readings": [1, 2, 3, 4, 5, 6], "work": [1, 2, 3, 4]}


@pytest.fixture(scope="module")
def number_keys(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A snapshot of a keyed queue and a grouped queue whose key properties are numbers
    and booleans: the long 2 and the double 2.0 are one key to the broker, true and "1" one."""
    with BrokerProcess() as broker:
        keyed = {"durable": True, "sequenceKey": "sensor"}
        _send(
            broker.url,
            "keyed",
            keyed,
            *((f"v{n}", k, None) for n, k in enumerate([2, 2.0, True, "1"])),
        )
        grouped = {"durable": True, "messageGroupType": "standard", "messageGroupKey": "sensor"}
        _send(broker.url, "grouped", grouped, ("g1", 1, None), ("g2", True, None))
        out = tmp_path_factory.mktemp("keys") / "snapshot"
        jobs.export(broker.data_dir, out)
    return str(out)


def test_export_keys_and_groups_are_the_brokers_text_of_numbers_and_booleans(
    spark: Any, number_keys: str
) -> None:
    rows = pq.read_table(Path(number_keys) / jobs.MESSAGES_DIR).to_pylist()
    assert [(r["body_text"], r["key"], r["key_sequence"], r["group"]) for r in rows] == [
        ("v0", "2", 1, None),
        ("v1", "2", 2, None),
        ("v2", "1", 1, None),
        ("v3", "1", 2, None),
        ("g1", None, None, "1"),
        ("g2", None, None, "1"),
    ]
    latest = jobs.latest_values(spark, number_keys, dt.datetime(2100, 1, 1, tzinfo=dt.UTC))
    assert sorted((r["key"], r["body_text"]) for r in latest.collect()) == [
        ("1", "v3"),
        ("2", "v1"),
    ]


def test_latest_value_per_key_as_of_a_time_matches_plain_sql(
    spark: Any, snapshot: dict[str, Any]
) -> None:
    got = sorted(
        (r["queue"], r["key"], r["key_sequence"], r["body_text"])
        for r in jobs.latest_values(spark, snapshot["dir"], snapshot["as_of"]).collect()
    )
    assert got == [("readings", "a", 2, "a2"), ("readings", "b", 1, "b1")]
    t = snapshot["as_of"].timestamp()
    plain = sorted(
        _sql(snapshot["dir"]).execute(
            """SELECT queue, "key", key_sequence, body_text FROM m AS v
           WHERE "key" IS NOT NULL AND arrival <= ? AND NOT EXISTS (
             SELECT 1 FROM m AS w WHERE w.queue = v.queue AND w."key" = v."key"
               AND w.arrival <= ? AND w.key_sequence > v.key_sequence)""",
            (t, t),
        )
    )
    assert got == plain


def test_backlog_per_queue_and_group_matches_plain_sql(
    spark: Any, snapshot: dict[str, Any]
) -> None:
    got = sorted(
        (
            (r["queue"], r["group"], r["messages"], r["bytes"])
            for r in jobs.backlog(spark, snapshot["dir"]).collect()
        ),
        key=_nulls_first,
    )
    plain = sorted(
        _sql(snapshot["dir"]).execute(
            'SELECT queue, "group", COUNT(*), SUM(size) FROM m WHERE on_queue GROUP BY 1, 2'
        ),
        key=_nulls_first,
    )
    assert got == plain
    assert [(q, g, n) for q, g, n, _ in got] == [
        ("readings", None, 4),
        ("work", None, 1),
        ("work", "g1", 2),
        ("work", "g2", 1),
    ]


def _nulls_first(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((value is not None, value) for value in row)


def test_the_jobs_run_as_commands(
    snapshot: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "backlog"
    assert jobs.main(["backlog", "--snapshot", snapshot["dir"], "--out", str(out)]) == 0
    assert pq.read_table(out).num_rows == 4
