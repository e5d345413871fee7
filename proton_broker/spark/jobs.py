"""Batch jobs over the store: a consistent snapshot to Parquet, and Spark jobs over it.

Rules this module owns:

* Spark never reads the live SQLite file: its executors may be on other machines, and a
  reader that holds the file open while the broker commits would see a moving target.
  ``export`` takes a consistent copy with SQLite's online backup (one read transaction on
  the live file, while the broker keeps writing), decodes it on the broker's machine and
  writes Parquet, which Spark reads from wherever the snapshot is put (local disk, HDFS, S3).
* A snapshot is the messages on the queues at that moment and the past versions the
  queues' sequence histories keep (``on_queue`` false), with their arrival times and the
  queue sequence numbers the store keeps for them, plus each queue's key and group
  property. The ``key`` and ``group`` columns are the property's text as the broker's
  queues make it (:func:`proton_broker.queues.keys.key_text`), so ``latest`` gives one
  row for what the queue holds as one key. The jobs are plain DataFrame code over it, so the same
  command runs on ``local[*]`` and on a cluster (``--master``).
* ``latest``: the latest version of each key of each keyed queue (a last-value queue or a
  queue with ``sequenceKey``) as of a time T: the highest per-key sequence among versions
  that arrived at or before T. Versions the history had let go before the snapshot are not
  in it, so T should lie within the history kept.
* ``backlog``: messages, bytes and oldest arrival per queue and group, of the messages on
  the queues (history-only versions are not backlog).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from proton_broker.queues.settings import QueueSettings, parse_settings
from proton_broker.store.sqlite import FILE_NAME

MESSAGES_DIR = "messages"
QUEUES_DIR = "queues"
ROWS_PER_FILE = 100_000


def snapshot_store(data_dir: str | Path, copy_to: Path) -> Path:
    """A consistent copy of the store in ``data_dir``, taken while the broker runs."""
    live = Path(data_dir) / FILE_NAME
    if not live.exists():
        raise FileNotFoundError(f"no store at {live}")
    source = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
    target = sqlite3.connect(copy_to)
    try:
        source.backup(target)  # all pages in one step: one read transaction, consistent
    finally:
        source.close()
        target.close()
    return copy_to


def _queue_settings(options: dict[str, Any], name: str) -> QueueSettings:
    try:
        return parse_settings(options, f"queue '{name}'")
    except Exception:  # a queue the broker itself would refuse: keep its messages anyway
        return QueueSettings()


def _message_rows(
    db: sqlite3.Connection, settings: dict[str, QueueSettings]
) -> Iterator[dict[str, Any]]:
    from proton import Message

    from proton_broker.spark.rows import COLUMNS, message_to_row, stored_key

    retired = {row[0] for row in db.execute("SELECT id FROM retired")}
    for store_id, queue, arrival, data, number in db.execute(_messages_query(db)):
        qs = settings.get(queue, QueueSettings())
        key_property = qs.lvq_key or qs.sequence_key
        data = bytes(data)
        message = Message()
        message.decode(data)
        values = message_to_row(queue, number, message, key_property, data)
        row = dict(zip(COLUMNS, values, strict=True))
        group_source = stored_key(data, qs.group_key) if qs.group_key else row["group_id"]
        row.update(
            store_id=store_id,
            arrival=_dt.datetime.fromtimestamp(arrival, _dt.UTC),
            on_queue=store_id not in retired,
            group=group_source,
            size=len(data),
        )
        yield row


def _messages_query(db: sqlite3.Connection) -> str:
    """The stored messages with their queue sequence numbers, as the store keeps them: a
    row's own ``number``, or the ``numbers`` table's, which wins (a number written after
    its message, see :mod:`proton_broker.store.sqlite`); a store from before numbers
    (schema 1) has none."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    own = "m.number" if "number" in columns else "NULL"
    if "numbers" in tables:
        return (
            f"SELECT m.id, m.queue, m.arrival, m.data, COALESCE(n.number, {own}) "
            "FROM messages AS m LEFT JOIN numbers AS n ON n.id = m.id ORDER BY m.id"
        )
    return f"SELECT m.id, m.queue, m.arrival, m.data, {own} FROM messages AS m ORDER BY m.id"


def _arrow_schema() -> Any:
    import pyarrow as pa

    from proton_broker.spark.rows import arrow_fields

    return pa.schema(
        [
            *arrow_fields(),
            ("store_id", pa.int64()),
            ("arrival", pa.timestamp("us", "UTC")),
            ("on_queue", pa.bool_()),
            ("group", pa.string()),
            ("size", pa.int64()),
        ]
    )


def export(data_dir: str | Path, out: str | Path) -> dict[str, int]:
    """Write a Parquet snapshot of the store in ``data_dir`` to ``out`` (a new directory):
    ``out/messages/*.parquet`` and ``out/queues/queues.parquet``. Returns counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    (out / MESSAGES_DIR).mkdir(parents=True, exist_ok=False)
    (out / QUEUES_DIR).mkdir()
    schema = _arrow_schema()
    with tempfile.TemporaryDirectory(prefix="proton-broker-snapshot-") as tmp:
        db = sqlite3.connect(snapshot_store(data_dir, Path(tmp) / FILE_NAME))
        try:
            queues = {
                name: json.loads(options)
                for name, options in db.execute("SELECT name, options FROM queues")
            }
            settings = {name: _queue_settings(opts, name) for name, opts in queues.items()}
            batch: list[dict[str, Any]] = []
            files = count = 0
            for row in _message_rows(db, settings):
                batch.append(row)
                count += 1
                if len(batch) >= ROWS_PER_FILE:
                    _write_part(pq, pa, schema, batch, out, files)
                    files, batch = files + 1, []
            if batch or not files:
                _write_part(pq, pa, schema, batch, out, files)
        finally:
            db.close()
    queue_table = pa.table(
        {
            "queue": list(queues),
            "options": [json.dumps(queues[q], default=str) for q in queues],
            "key_property": [settings[q].lvq_key or settings[q].sequence_key for q in queues],
            "group_property": [settings[q].group_key for q in queues],
        },
        schema=pa.schema(
            [
                ("queue", pa.string()),
                ("options", pa.string()),
                ("key_property", pa.string()),
                ("group_property", pa.string()),
            ]
        ),
    )
    pq.write_table(queue_table, out / QUEUES_DIR / "queues.parquet")
    return {"queues": len(queues), "messages": count}


def _write_part(
    pq: Any, pa: Any, schema: Any, rows: list[dict[str, Any]], out: Path, index: int
) -> None:
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, out / MESSAGES_DIR / f"part-{index:05d}.parquet")


# ---- Spark jobs over a snapshot --------------------------------------------------------


def messages(spark: Any, snapshot: str) -> Any:
    return spark.read.parquet(f"{snapshot}/{MESSAGES_DIR}")


def latest_values(spark: Any, snapshot: str, as_of: _dt.datetime) -> Any:
    """The latest version of each key of each keyed queue as of ``as_of``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    versions = messages(spark, snapshot).where(
        F.col("key").isNotNull() & (F.col("arrival") <= F.lit(as_of))
    )
    newest = Window.partitionBy("queue", "key").orderBy(
        F.col("key_sequence").desc_nulls_last(), F.col("store_id").desc()
    )
    return (
        versions.withColumn("rank", F.row_number().over(newest))
        .where(F.col("rank") == 1)
        .select("queue", "key", "key_sequence", "arrival", "body_text", "body", "store_id")
    )


def backlog(spark: Any, snapshot: str) -> Any:
    """Messages, bytes and the oldest arrival per queue and group, on the queues."""
    from pyspark.sql import functions as F

    return (
        messages(spark, snapshot)
        .where(F.col("on_queue"))
        .groupBy("queue", "group")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum("size").alias("bytes"),
            F.min("arrival").alias("oldest_arrival"),
        )
    )


def _session(master: str | None, app: str) -> tuple[Any, bool]:
    """The session to run on, and whether this command made it (and so stops it)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    return builder.getOrCreate(), True


def _time(text: str) -> _dt.datetime:
    value = _dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m proton_broker.spark.jobs",
        description="Batch jobs over proton-broker stores.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    snap = commands.add_parser("export", help="write a Parquet snapshot of a store")
    snap.add_argument("--data-dir", required=True, help="the broker's data directory")
    snap.add_argument("--out", required=True, help="a new directory for the snapshot")
    for name, text in (
        ("latest", "latest value per key as of a time"),
        ("backlog", "backlog per queue and group"),
    ):
        job = commands.add_parser(name, help=text)
        job.add_argument("--snapshot", required=True, help="a directory export wrote")
        job.add_argument("--master", help="Spark master (default: spark-submit's / local)")
        job.add_argument("--out", help="write the result as Parquet here (default: print)")
        if name == "latest":
            job.add_argument(
                "--as-of",
                type=_time,
                required=True,
                help="ISO time, e.g. 2026-11-23T02:00:00 (UTC unless given)",
            )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "export":
        counts = export(args.data_dir, args.out)
        print(
            f"exported {counts['messages']} messages of {counts['queues']} durable "
            f"queues to {args.out}"
        )
        return 0
    spark, own = _session(args.master, f"proton-broker {args.command}")
    try:
        result = (
            latest_values(spark, args.snapshot, args.as_of)
            if args.command == "latest"
            else backlog(spark, args.snapshot)
        )
        if args.out:
            result.write.mode("overwrite").parquet(args.out)
        else:
            result.orderBy(*result.columns[:2]).show(truncate=False)
    finally:
        if own:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
