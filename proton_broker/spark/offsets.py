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
  were consumed or dropped (another consumer, a ring policy, an expiry). It fails the query
  by default, naming the queue and the numbers lost; with ``failOnDataLoss=false`` the
  batch starts at the earliest number instead.
* A start above the queue's ``next`` number is data loss too: numbers never go back on a
  queue, so its numbering started again (the queue was deleted and created again, or it
  was not durable and the broker restarted) and the messages it holds now are not the ones
  the offset counted (Spark's Kafka source reports a partition whose offsets went back the
  same way). It fails the query naming the numbers; with ``failOnDataLoss=false`` the
  batch moves that queue's offset back to its earliest number, reading nothing of it, and
  the next batch reads the queue from there. A task whose range ends above the queue's
  next number finds the same (the range was planned below it); it fails, or reads nothing
  and leaves the queue to the next batch. A queue started again that has already given
  out the numbers the offset counted cannot be told from the old one by its numbers.
* Ranges are only read from queues browsers see in sequence-number order. A priority
  queue (more than one level) or a sorted queue shows them in its own order, so a range
  would have to read the rest of the queue to be sure it saw every number in it: such a
  queue is refused, naming what orders it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proton_broker.spark.client import QueueBounds
from proton_broker.spark.options import EARLIEST, LATEST

Offset = dict[str, int]


class DataLossError(RuntimeError):
    """Messages the query had not read yet are no longer on the queue."""


class UnorderedQueueError(ValueError):
    """A queue browsers do not see in sequence-number order cannot be read by ranges."""


def check_order(bounds: Mapping[str, QueueBounds]) -> None:
    """Refuse the priority and sorted queues among ``bounds`` (see the module rules)."""
    for queue, b in bounds.items():
        if b.priorities is not None and b.priorities > 1:
            order = f"a priority queue ({b.priorities} levels)"
        elif b.sort_key is not None:
            order = f"a sorted queue (sortKey '{b.sort_key}')"
        else:
            continue
        raise UnorderedQueueError(
            f"queue '{queue}' is {order}: browsers see it in that order, not in "
            f"sequence-number order, so the amqp source cannot read it by ranges of "
            f"numbers; read a queue without priorities or a sort key"
        )


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
        f"queue '{queue}': messages numbered {start} to {earliest - 1} were consumed or "
        f"dropped before the query read them (the earliest message still on the queue is "
        f"number {earliest}); set failOnDataLoss=false to skip them"
    )


def restarted_message(queue: str, counted: int, bounds: QueueBounds) -> str:
    held = (
        f"it holds numbers {bounds.earliest} to {bounds.next - 1}"
        if bounds.next > bounds.earliest
        else "it is empty"
    )
    return (
        f"queue '{queue}': the query counted numbers up to {counted - 1}, but the queue's next "
        f"number is {bounds.next}: its numbering started again (it was deleted and created "
        f"again, or it was not durable and the broker restarted; or startingOffsets named "
        f"a number it had not given out), so its messages numbered below {counted} are not "
        f"the ones the query read ({held}); set failOnDataLoss=false to read the queue "
        f"again from its earliest number"
    )


def numbering_restarted(queue: str, counted: int, bounds: QueueBounds, fail_on_loss: bool) -> bool:
    """Whether the numbers below ``counted`` (an offset, or a planned range's end) go past
    the queue's next number (see the module rules): fails with :class:`DataLossError`
    unless ``fail_on_loss`` is false."""
    if counted <= bounds.next:
        return False
    if fail_on_loss:
        raise DataLossError(restarted_message(queue, counted, bounds))
    return True


def effective_start(
    queue: str, start: int, bounds: QueueBounds, fail_on_loss: bool, end: int | None = None
) -> int:
    """Where reading ``queue`` really starts: ``start``, or past messages consumed or
    dropped. A task's range (``end``) on a queue whose numbering started again since the
    batch was planned fails; with ``failOnDataLoss=false`` it starts at ``end``, reading
    nothing, and the next batch starts the queue again (see :func:`latest`)."""
    counted = start if end is None else end
    if numbering_restarted(queue, counted, bounds, fail_on_loss):
        return counted
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
    an available-now query), limited to ``max_messages`` numbers in all. A queue whose
    numbering started again ends at its earliest number (below its start: the batch reads
    nothing of it), unless that is data loss to fail on."""
    again = {
        q: bounds[q].earliest
        for q in bounds
        if q in start and numbering_restarted(q, start[q], bounds[q], fail_on_loss)
    }
    bounds = {q: b for q, b in bounds.items() if q not in again}
    return {**_latest(start, bounds, max_messages, fail_on_loss, cap), **again}


def _latest(
    start: Mapping[str, int],
    bounds: Mapping[str, QueueBounds],
    max_messages: int | None,
    fail_on_loss: bool,
    cap: Mapping[str, int] | None,
) -> Offset:
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
    """An end offset never goes below its start: offsets move forward (the one exception,
    a queue whose numbering started again, is made in :func:`latest`)."""
    return {q: max(n, start.get(q, n)) for q, n in end.items()}


def ranges(
    start: Mapping[str, int], end: Mapping[str, int], per_partition: int | None
) -> list[Range]:
    """The tasks of a batch: each queue's non-empty range, split into pieces of at most
    ``per_partition`` numbers when that is set (a queue whose end is below its start, its
    numbering started again, has none)."""
    out = []
    for queue, stop in end.items():
        first = start.get(queue, stop)
        step = per_partition or max(stop - first, 1)
        for lo in range(first, stop, step):
            out.append(Range(queue, lo, min(lo + step, stop)))
    return out
