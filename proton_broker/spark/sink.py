"""The Spark sink: ``df.write.format("amqp")`` and ``df.writeStream.format("amqp")``.

Rules this module owns:

* Spark hands each task its rows as Arrow record batches (the Arrow writer classes); they
  are encoded column by column (:mod:`proton_broker.spark.outgoing`), never turned into
  ``Row`` or ``proton.Message`` objects.
* Each task opens its own connection, sends its rows as unsettled transfers and returns
  only once every one came back ``accepted`` (see :func:`client.send_all`); any other
  outcome fails the task, and Spark retries it or fails the batch.
* Message ids are deterministic: ``queryId/batchId/partition/row`` for a stream (the
  query id is the one kept in the checkpoint, so a replay after a restart gives the same
  ids), ``writeId/partition/row`` for a batch write (``writeId`` defaults to a new id per
  write, shared by the retries of its tasks). A queue with duplicate detection
  (``duplicateDetectionCount`` / ``duplicateDetectionSeconds``) then drops what a retry
  sends again, still answering ``accepted``: Spark's at-least-once becomes exactly-once on
  the queue. A row that has a ``message_id`` column keeps its own id.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from proton_broker.spark import client, outgoing
from proton_broker.spark.options import SinkOptions
from proton_broker.spark.source import InjectedFailure

QUERY_ID = "sql.streaming.queryId"  # Spark's local properties, set on every task
BATCH_ID = "streaming.sql.batchId"


@dataclass
class Sent(WriterCommitMessage):
    partition: int
    count: int


def write_rows(opts: SinkOptions, batches: Iterator[Any], prefix: str, partition: int) -> Sent:
    """Send one task's rows (Arrow record batches); runs on an executor."""
    messages = outgoing.messages(batches, f"{prefix}/{partition}")
    if _take_fail_file(opts.fail_once_file):
        every = list(messages)
        half = every[: (len(every) + 1) // 2]
        client.send_all(opts.url, opts.queue, iter(half), opts.window, opts.timeout, tls=opts.tls)
        raise InjectedFailure(
            f"injected failure writing to {opts.queue} after {len(half)} of {len(every)} rows"
        )
    count = client.send_all(opts.url, opts.queue, messages, opts.window, opts.timeout, tls=opts.tls)
    return Sent(partition, count)


def _take_fail_file(path: str | None) -> bool:
    """Fault tests: fail this task half way when ``path`` exists (removing it)."""
    if not path:
        return False
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the AMQP sink's write() must run in a Spark task")
    return context


class AmqpBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.write_id = opts.write_id or uuid.uuid4().hex  # fixed on the driver, shared

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        partition = _task().partitionId()
        return write_rows(self.opts, iterator, self.write_id, partition)


class AmqpStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        task = _task()
        query, batch = task.getLocalProperty(QUERY_ID), task.getLocalProperty(BATCH_ID)
        if query is None or batch is None:
            raise RuntimeError(
                "the AMQP stream sink found no query and batch id on its "
                f"task (local properties {QUERY_ID}, {BATCH_ID})"
            )
        prefix = f"{self.opts.write_id or query}/{batch}"
        return write_rows(self.opts, iterator, prefix, task.partitionId())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was accepted before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: rows a failed batch sent are recognised as duplicates when the
        batch is replayed (with duplicate detection on the queue)."""
