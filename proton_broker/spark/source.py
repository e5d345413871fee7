"""The Spark source: ``spark.readStream.format("amqp")`` and ``spark.read.format("amqp")``.

Rules this module owns:

* Nothing here connects in ``__init__``: readers are built in the planner and pickled to
  executors. The driver side (offsets, planning) asks the broker for each queue's bounds by
  management READ; each task's ``read()`` opens its own connection, browses exactly its
  range (see :mod:`proton_broker.spark.client`) and closes it.
* ``read()`` is deterministic for a range: it returns the messages of ``[start, end)``
  still on the queue, in sequence order. Spark keeps the offsets of every batch in its
  checkpoint and replays a failed batch from them; correctness lives there. ``commit()``
  only moves the optional named cursor (option ``cursor``) so people can watch progress.
* A stream's task that finds its start below the queue's earliest number at read time, or
  its end above the queue's next one, reports data loss the same way the planner does (see
  :mod:`proton_broker.spark.offsets`). A batch read is a snapshot of what the queues hold
  when its tasks run: a task reads what is left of its range, with no data-loss check
  (messages another consumer took meanwhile were not lost to it).
* Priority and sorted queues are refused, by the planner and by each task
  (:func:`proton_broker.spark.offsets.check_order`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from proton_broker.spark import client, encoding, offsets
from proton_broker.spark.columns import ColumnBatch
from proton_broker.spark.options import SourceOptions


class RangePartition(InputPartition):
    """One task: a range of one queue (picklable)."""

    def __init__(self, queue: str, start: int, end: int) -> None:
        super().__init__((queue, start, end))
        self.queue, self.start, self.end = queue, start, end


class InjectedFailure(RuntimeError):
    """A fault test asked this task to fail (option ``failOnceFile``)."""


ROWS_PER_BATCH = 5000  # rows per Arrow record batch handed to Spark


def read_range(opts: SourceOptions, part: RangePartition, snapshot: bool = False) -> Iterator[Any]:
    """The rows of one range as Arrow record batches, built column-wise from the
    messages' bytes (:mod:`proton_broker.spark.columns`); runs on an executor. A
    ``snapshot`` (a batch read) reads what is on the queue of the range, whatever was
    consumed since planning; a stream's range checks for data loss first."""
    bounds = client.queue_bounds(opts.url, [part.queue], opts.timeout, opts.tls)[part.queue]
    offsets.check_order({part.queue: bounds})
    start = part.start
    if not snapshot:
        start = offsets.effective_start(
            part.queue, start, bounds, opts.fail_on_data_loss, end=part.end
        )
    fail_at = _fail_point(opts.fail_once_file, part)
    rows = ColumnBatch(part.queue, opts.key_property or bounds.key)
    browsed = client.browse_range(
        opts.url, part.queue, start, part.end, opts.credit, timeout=opts.timeout, tls=opts.tls
    )
    for count, (seq, data) in enumerate(browsed):
        if count == fail_at:
            raise InjectedFailure(
                f"injected failure reading {part.queue} [{part.start}, {part.end}) at {seq}"
            )
        rows.add(seq, data)
        if len(rows) >= ROWS_PER_BATCH:
            yield rows.batch()
    if len(rows):
        yield rows.batch()


def _fail_point(path: str | None, part: RangePartition) -> int | None:
    """Fault tests: when ``path`` exists, remove it and fail half way through the range."""
    if not path:
        return None
    try:
        os.remove(path)
    except FileNotFoundError:
        return None
    return max((part.end - part.start) // 2, 0)


class AmqpStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.target: dict[str, int] | None = None  # available-now: stop here

    def _bounds(self) -> dict[str, client.QueueBounds]:
        bounds = client.queue_bounds(
            self.opts.url, list(self.opts.queues), self.opts.timeout, self.opts.tls
        )
        offsets.check_order(bounds)
        return bounds

    def initialOffset(self) -> dict:
        return offsets.initial(self.opts.starting, self._bounds())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_per_batch is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_per_batch)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets.latest(start, self._bounds(), most, self.opts.fail_on_data_loss, self.target)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {queue: b.next for queue, b in self._bounds().items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [
            RangePartition(r.queue, r.start, r.end)
            for r in offsets.ranges(start, end, self.opts.max_per_partition)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        if self.opts.cursor:
            move_cursor(self.opts, end)


class AmqpBatchReader(DataSourceReader):
    """A bounded read of the queues' current contents: ``[earliest, next)`` of each as
    planned, each task reading what is still there of its range when it runs (a
    snapshot: no data-loss check)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        bounds = client.queue_bounds(
            self.opts.url, list(self.opts.queues), self.opts.timeout, self.opts.tls
        )
        offsets.check_order(bounds)
        start = {q: b.earliest for q, b in bounds.items()}
        end = {q: b.next for q, b in bounds.items()}
        found = offsets.ranges(start, end, self.opts.max_per_partition)
        # Spark wants at least one partition; an empty range reads nothing.
        return [RangePartition(r.queue, r.start, r.end) for r in found] or [
            RangePartition(self.opts.queues[0], 0, 0)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        if partition.end <= partition.start:
            return iter(())
        return read_range(self.opts, partition, snapshot=True)


CURSOR_KEY = "cursor"


def move_cursor(opts: SourceOptions, end: dict) -> None:
    """Record the committed offset of each queue on the broker, in the last-value queue
    named by the ``cursor`` option (created on first use, keyed by ``cursor``): one
    message per queue, ``{"queue": q, "next": n}``, the latest replacing the previous."""
    messages = [
        encoding.message(None, {CURSOR_KEY: q}, content={"queue": q, "next": int(n)})
        for q, n in sorted(end.items())
    ]
    client.send_all(
        opts.url,
        opts.cursor or "",
        messages,
        timeout=opts.timeout,
        node_options={"qpid.last_value_queue_key": CURSOR_KEY},
        tls=opts.tls,
    )
