#!/usr/bin/env python3
"""Throughput of the PySpark connector against a broker in a subprocess, on local[2].

* source: COUNT messages (100-byte bodies) are put on a queue first, then a streaming query
  (``trigger(availableNow=True)``, from ``earliest``) reads them through the ``amqp`` source
  into a Parquet sink; messages/s = COUNT / the query's wall time, Spark's planning and
  commit work included. Run with the queue's range in one task and split into two
  (``maxMessagesPerPartition``), since local[2] has two task slots.
* sink: a DataFrame of COUNT rows (100-character bodies, two partitions) written with
  ``df.write.format("amqp")``: every row sent unsettled and accepted; messages/s = COUNT /
  the write's wall time.

Before the clock starts, one small streaming query and one small write run untimed: the
first of each in a session pays a few seconds of one-off start-up (classes loaded, Python
workers started), which would otherwise be counted against whichever case ran first.

The broker and Spark (JVM plus Python workers) share the machine's cores, as they would on
one host; on a cluster the executors' work spreads out and the broker is the limit. The
script uses only ``client.send_all``, ``client.browse_range`` and ``client.queue_bounds``,
whose calling conventions every version of the connector keeps, so the same script measures
an older checkout (``PYTHONPATH=<checkout>``).

Usage: PYTHONPATH=. .venv/bin/python bench/spark_connector.py [--count 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from typing import Any

from proton import Message

from proton_broker.spark import register
from proton_broker.spark.client import browse_range, queue_bounds, send_all
from proton_broker.testing import BrokerProcess


def session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("proton-broker-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def fill(url: str, queue: str, count: int) -> None:
    body = b"x" * 100
    send_all(url, queue, (Message(body=body, properties={"n": i}) for i in range(count)))


def client_rates(url: str, count: int) -> tuple[float, float]:
    """The connector's AMQP client alone, in this process (no Spark): what one task can do
    at most."""
    queue = f"bench.client.{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    fill(url, queue, count)
    send = count / (time.perf_counter() - started)
    bounds = queue_bounds(url, [queue])[queue]
    started = time.perf_counter()
    got = sum(1 for _ in browse_range(url, queue, bounds.earliest, bounds.next))
    browse = got / (time.perf_counter() - started)
    if got != count:  # a rate of a short read would hide a lost range
        raise SystemExit(f"client: {got} messages browsed, {count} expected")
    return send, browse


def source_rate(spark: Any, url: str, count: int, per_partition: int | None) -> float:
    queue = f"bench.source.{uuid.uuid4().hex[:8]}"
    fill(url, queue, count)
    with tempfile.TemporaryDirectory() as tmp:
        reader = spark.readStream.format("amqp").option("url", url).option("queues", queue)
        if per_partition:
            reader = reader.option("maxMessagesPerPartition", str(per_partition))
        started = time.perf_counter()
        query = (
            reader.load()
            .writeStream.format("parquet")
            .option("path", f"{tmp}/out")
            .option("checkpointLocation", f"{tmp}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        written = spark.read.parquet(f"{tmp}/out").count()
    if written != count:
        raise SystemExit(f"source: {written} rows written, {count} expected")
    return count / elapsed


def sink_rate(spark: Any, url: str, count: int) -> float:
    queue = f"bench.sink.{uuid.uuid4().hex[:8]}"
    frame = (
        spark.range(count, numPartitions=2)
        .selectExpr("lpad(cast(id as string), 100, 'x') AS body", "id AS n")
        .cache()
    )
    frame.count()  # build the rows before the clock starts
    started = time.perf_counter()
    frame.write.format("amqp").mode("append").option("url", url).option("queue", queue).save()
    elapsed = time.perf_counter() - started
    bounds = queue_bounds(url, [queue])[queue]
    if bounds.next - bounds.earliest != count:
        raise SystemExit(
            f"sink: the queue holds {bounds.next - bounds.earliest} messages, {count} expected"
        )
    return count / elapsed


def warm_up(spark: Any, url: str) -> None:
    """Run each path once, untimed (see the module notes)."""
    source_rate(spark, url, 1000, 500)
    sink_rate(spark, url, 1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    args = parser.parse_args()
    spark = session()
    try:
        with BrokerProcess("--store", "memory") as broker:
            spark.range(1).count()  # warm the JVM and a Python worker
            warm_up(spark, broker.url)
            send, browse = client_rates(broker.url, args.count)
            one = source_rate(spark, broker.url, args.count, None)
            two = source_rate(spark, broker.url, args.count, (args.count + 1) // 2)
            sink = sink_rate(spark, broker.url, args.count)
    finally:
        spark.stop()
    print(f"{args.count:,} messages of 100 bytes, Spark local[2], broker in a subprocess")
    print(f"client alone: send (unsettled)          {send:10,.0f} msgs/s")
    print(f"client alone: browse a range            {browse:10,.0f} msgs/s")
    print(f"source -> Parquet, one task per queue:  {one:10,.0f} msgs/s")
    print(f"source -> Parquet, two tasks:           {two:10,.0f} msgs/s")
    print(f"DataFrame -> sink (2 partitions):       {sink:10,.0f} msgs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
