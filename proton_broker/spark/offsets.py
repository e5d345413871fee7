"""Offsets and ranges: which sequence numbers each micro-batch and each task reads.

Rules this module owns (pure functions, unit-tested without Spark or a broker):

* An offset is ``{queue: n}``: the stream has read every message of ``queue`` numbered
  below ``n``, and ``n`` is where it goes on. A batch reads ``[start, end)`` of each queue.
* A batch never reaches past a queue's ``next`` sequence number as management read it: every
  number below it was given out already, so a range is complete once planned and reading it
  again later gives the same messages (Spark's replay of a failed batch depends on that).
* ``maxMessagesPerBatch`` caps the numbers a batch spans, shared fairly among the queues
  that have messages. Numbers may have gaps, so a batch holds at most that many messages.
* Data loss is a start below the queue's earliest retained number: the messages between
  were dropped (a ring policy, an expiry, another consumer). It fails the query by default,
  naming the queue and the numbers lost; with ``failOnDataLoss=false`` the batch starts at
  the earliest number instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proton_broker.spark.client import QueueBounds
from proton_broker.spark.options import EARLIEST, LATEST

Offset = dict[str, int]


class DataLossError(RuntimeError):
    """Messages the query had not read yet are no longer on the queue."""


@dataclass(frozen=True)
class Range:
    """One task's work: the messages of ``queue`` numbered in ``[start, end)``."""

    queue: str
    start: int
    end: int


def initial(starting: Mapping[str, int | str], bounds: Mapping[str, QueueBounds]) -> Offset:
    """The first offset of a new query, from ``startingOffsets`` and the queues' bounds."""
    out = {}
    for queue, where in starting.items():
        if where == EARLIEST:
            out[queue] = bounds[queue].earliest
        elif where == LATEST:
            out[queue] = bounds[queue].next
        else:
            out[queue] = int(where)
    return out


def lost_message(queue: str, start: int, earliest: int) -> str:
    return (
        f"queue '{queue}': messages numbered {start} to {earliest - 1} were dropped "
        f"before the query read them (the earliest message still on the queue is "
        f"number {earliest}); set failOnDataLoss=false to skip them"
    )


def effective_start(queue: str, start: int, bounds: QueueBounds, fail_on_loss: bool) -> int:
    """Where reading ``queue`` really starts: ``start``, or past dropped messages."""
    if start < bounds.earliest and start < bounds.next:
        if fail_on_loss:
            raise DataLossError(lost_message(queue, start, bounds.earliest))
        return bounds.earliest
    return start


def latest(
    start: Mapping[str, int],
    bounds: Mapping[str, QueueBounds],
    max_messages: int | None,
    fail_on_loss: bool,
    cap: Mapping[str, int] | None = None,
) -> Offset:
    """The end of the next batch: each queue's ``next`` number (or ``cap``, the target of
    an available-now query), limited to ``max_messages`` numbers in all."""
    begin = {
        q: effective_start(q, start.get(q, bounds[q].earliest), bounds[q], fail_on_loss)
        for q in bounds
    }
    top = {q: min(bounds[q].next, cap[q]) if cap and q in cap else bounds[q].next for q in bounds}
    end = {q: max(begin[q], top[q]) for q in bounds}
    if max_messages is None:
        return _not_behind(end, start)
    end = dict(begin)
    remaining = max_messages
    waiting = [q for q in bounds if top[q] > begin[q]]
    while remaining > 0 and waiting:
        share = max(1, remaining // len(waiting))
        for queue in list(waiting):
            take = min(share, top[queue] - end[queue], remaining)
            end[queue] += take
            remaining -= take
            if end[queue] >= top[queue]:
                waiting.remove(queue)
            if remaining == 0:
                break
    return _not_behind(end, start)


def _not_behind(end: Offset, start: Mapping[str, int]) -> Offset:
    """An end offset never goes below its start (Spark requires offsets to move forward)."""
    return {q: max(n, start.get(q, n)) for q, n in end.items()}


def ranges(
    start: Mapping[str, int], end: Mapping[str, int], per_partition: int | None
) -> list[Range]:
    """The tasks of a batch: each queue's non-empty range, split into pieces of at most
    ``per_partition`` numbers when that is set."""
    out = []
    for queue, stop in end.items():
        first = start.get(queue, stop)
        step = per_partition or max(stop - first, 1)
        for lo in range(first, stop, step):
            out.append(Range(queue, lo, min(lo + step, stop)))
    return out
