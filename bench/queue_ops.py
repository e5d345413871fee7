#!/usr/bin/env python3
"""Micro-benchmark of queue operations, in process (no sockets, no Proton reactor).

It measures how the cost of one queue operation changes with the size of the queue, and
reports RATIOS between sizes (a ratio near 1 means the operation does not depend on the
queue's size). Absolute µs/op figures are printed for context only: the machine is shared
and noisy, so each figure is the best of several interleaved batches (small queue batch,
big queue batch, small, big, ...), never a single run.

Scenarios:

* LVQ replace: a last-value queue pre-filled with one message per key (100 keys versus
  1,000,000 keys); each timed operation enqueues a new value for an existing key (chosen at
  random), which replaces the older entry. Nobody consumes.
* Cycle: enqueue one message, let a consumer take one (grant it one credit) and settle
  (accept) it, on a FIFO queue, a priority queue (10 levels, priorities 0-9 at random) and a
  sorted queue (random 7-digit keys), each held at a steady depth of 1,000 versus 1,000,000.
* Selector: the same cycle by a consumer with the JMS selector ``color = 'red'``, of red
  messages, on a FIFO queue that also holds 1,000 versus 1,000,000 blue messages nobody
  takes (its cursor is past them: they must not be looked at again).
* Delayed: enqueue a message with ``x-opt-delivery-time`` in the future onto a queue already
  holding 1,000 versus 1,000,000 such messages (a heap push: O(log n)).

Messages are encoded once with Proton and parsed once with ``parse_message``; each
operation gets a fresh copy of the parsed record (made before the clock starts) whose
application properties are NOT decoded yet. The LVQ key and the sort key are read from the
application properties, so their decoding (pure Python, see ``proton_broker.codec``)
happens inside the timed enqueue, as it does in the broker: it is a real, size-independent
part of the figure. The "decode" column shows that part on its own. Pre-filled messages
carry their properties already decoded, only to keep the set-up short.

Usage: ``python bench/queue_ops.py`` (about a minute) or ``--quick`` (about 10 s, with a
smaller big queue). See ``--help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import proton
from records import clone, gc_paused

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import QueueSettings, parse_settings
from proton_broker.selector import parse_selector

KEY_MARK = "k" + "X" * 7  # fixed width, so patched encodings keep every offset valid
SORT_MARK = "s" + "X" * 7


class Taker:
    """The trivial consumer the queue sees: credit, and the last entry it was given."""

    browse = False

    def __init__(self, consumer_id: int) -> None:
        self.id = consumer_id
        self.credit = 0
        self.last: Entry | None = None

    def deliver(self, entry: Entry) -> None:
        self.credit -= 1
        self.last = entry


# ---- messages ------------------------------------------------------------------------------


def template(properties: dict[str, Any], priority: int | None = None) -> Message:
    kwargs = {} if priority is None else {"priority": priority}
    body = "x" * 64
    return parse_message(proton.Message(body=body, properties=properties, **kwargs).encode())


def with_text(base: Message, mark: str, text: str) -> Message:
    """A fresh record of ``base`` whose property value ``mark`` reads ``text`` (same width),
    its application properties not yet decoded."""
    return clone(base, base.data.replace(mark.encode(), text.encode(), 1))


def fresh(base: Message) -> Message:
    return clone(base)


def predecoded(base: Message, properties: dict[str, Any]) -> Message:
    """A record whose properties are already in the decode cache (set-up only)."""
    return clone(base, properties=properties)


# ---- timing --------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """One queue under test: how to fill it, how to make timed messages, one operation."""

    label: str
    queue: Queue
    make: Callable[[int], list[Message]]  # n fresh messages for timed operations
    run: Callable[[Queue, list[Message]], None]
    best: float = float("inf")  # seconds per operation


def lvq_run(queue: Queue, messages: list[Message]) -> None:
    enqueue = queue.enqueue
    for message in messages:
        enqueue(message)


def cycle_run_for(consumer: Taker) -> Callable[[Queue, list[Message]], None]:
    def run(queue: Queue, messages: list[Message]) -> None:
        enqueue, grant, settle = queue.enqueue, queue.credit_granted, queue.settle
        for message in messages:
            enqueue(message)
            consumer.credit = 1
            grant(consumer)
            settle(consumer.last)

    return run


def measure(cases: Sequence[Case], ops: int, repeat: int) -> None:
    """Interleave batches of the cases; keep each case's best µs/op."""
    for _ in range(repeat):
        for case in cases:
            with gc_paused():
                messages = case.make(ops)
            start = time.perf_counter()
            case.run(case.queue, messages)
            elapsed = time.perf_counter() - start
            case.best = min(case.best, elapsed / ops)


def decode_cost(make: Callable[[int], list[Message]], ops: int, repeat: int) -> float:
    """Seconds per message to decode the application properties (the key lookup's share)."""
    best = float("inf")
    for _ in range(repeat):
        with gc_paused():
            messages = make(ops)
        start = time.perf_counter()
        for message in messages:
            message.application_properties  # noqa: B018
        best = min(best, (time.perf_counter() - start) / ops)
    return best


# ---- scenarios -----------------------------------------------------------------------------


def lvq_case(keys: int, rng: random.Random) -> Case:
    base = template({"ticker": KEY_MARK, "seq": 0})
    queue = build_queue(f"lvq-{keys}", parse_settings({"qpid.last_value_queue_key": "ticker"}))
    for i in range(keys):
        key = f"k{i:07d}"
        queue.enqueue(predecoded(base, {"ticker": key, "seq": 0}), now=0.0)
    assert queue.depth == keys

    def make(n: int) -> list[Message]:
        return [with_text(base, KEY_MARK, f"k{rng.randrange(keys):07d}") for _ in range(n)]

    return Case(f"LVQ replace, {keys:,} keys", queue, make, lvq_run)


def cycle_case(kind: str, depth: int, rng: random.Random, consumer_id: int) -> Case:
    if kind == "fifo":
        settings = QueueSettings()
        base = template({"n": 1})

        def prefill() -> Message:
            return predecoded(base, {"n": 1})

        def make(n: int) -> list[Message]:
            return [fresh(base) for _ in range(n)]
    elif kind == "priority":
        settings = parse_settings({"qpid.priorities": 10})
        bases = [template({"n": 1}, priority=p) for p in range(10)]

        def prefill() -> Message:
            return fresh(bases[rng.randrange(10)])

        def make(n: int) -> list[Message]:
            return [fresh(bases[rng.randrange(10)]) for _ in range(n)]
    else:
        settings = parse_settings({"qpid.queue_sort_key": "rank"})
        base = template({"rank": SORT_MARK})
        # Random keys, enqueued in ascending order: the sorted structure ends up holding the
        # same keys as with random arrivals, but filling it is several times faster.
        ranks = iter(sorted(f"s{rng.randrange(10**7):07d}" for _ in range(depth)))

        def prefill() -> Message:
            return predecoded(base, {"rank": next(ranks)})

        def make(n: int) -> list[Message]:
            return [with_text(base, SORT_MARK, f"s{rng.randrange(10**7):07d}") for _ in range(n)]

    queue = build_queue(f"{kind}-{depth}", settings)
    for _ in range(depth):
        queue.enqueue(prefill(), now=0.0)
    consumer = Taker(consumer_id)
    queue.subscribe(consumer)
    assert queue.depth == depth
    label = {"fifo": "FIFO", "priority": "priority (10 levels)", "sorted": "sorted"}[kind]
    return Case(f"{label} cycle, depth {depth:,}", queue, make, cycle_run_for(consumer))


def selector_case(depth: int, consumer_id: int) -> Case:
    red, blue = template({"color": "red"}), template({"color": "blue"})
    queue = build_queue(f"selector-{depth}", QueueSettings())
    for _ in range(depth):
        queue.enqueue(predecoded(blue, {"color": "blue"}), now=0.0)
    consumer = Taker(consumer_id)
    queue.subscribe(consumer, selector=parse_selector("color = 'red'"))
    consumer.credit = 1
    queue.credit_granted(consumer)  # walks past the blue messages once, before timing
    assert queue.depth == depth and consumer.credit == 1

    def make(n: int) -> list[Message]:
        return [fresh(red) for _ in range(n)]

    return Case(f"selector cycle, {depth:,} unmatched", queue, make, cycle_run_for(consumer))


def delayed_case(depth: int, rng: random.Random) -> Case:
    """A queue holding ``depth`` delayed messages (x-opt-delivery-time in the future); each
    timed operation enqueues one more, at a random time among theirs (a heap push)."""
    mark = 10**15  # ms: far in the future, 16 digits like the times patched in below
    base = parse_message(
        proton.Message(
            body="x" * 64, annotations={proton.symbol("x-opt-delivery-time"): mark}
        ).encode()
    )
    encoded_mark = mark.to_bytes(8, "big")

    def at(when: int) -> Message:
        return clone(base, base.data.replace(encoded_mark, when.to_bytes(8, "big"), 1))

    queue = build_queue(f"delayed-{depth}", QueueSettings())
    for _ in range(depth):
        queue.enqueue(at(mark + rng.randrange(10**9)), now=0.0)
    assert queue.depth == depth and queue.available_count() == 0

    def make(n: int) -> list[Message]:
        return [at(mark + rng.randrange(10**9)) for _ in range(n)]

    return Case(f"delayed enqueue, {depth:,} held", queue, make, lvq_run)


# ---- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="In-process micro-benchmark of queue operations (no sockets). Prints "
        "µs/op (best of N interleaved batches) and the ratio big/small; a ratio "
        "near 1 means the operation's cost does not depend on the queue's size."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a ~10 s run: smaller big queue (100k), fewer operations",
    )
    parser.add_argument(
        "--big",
        type=int,
        default=None,
        help="keys / depth of the big queue (default 1,000,000; 100,000 with --quick)",
    )
    parser.add_argument(
        "--ops",
        type=int,
        default=None,
        help="operations per timed batch (default 20,000; 5,000 with --quick)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="interleaved batches per queue; the best is kept (default 3)",
    )
    parser.add_argument(
        "--only",
        choices=["lvq", "fifo", "priority", "sorted", "selector", "delayed"],
        action="append",
        help="run only these scenarios (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = parser.parse_args(argv)

    big = args.big or (100_000 if args.quick else 1_000_000)
    ops = args.ops or (5_000 if args.quick else 20_000)
    repeat = args.repeat or 3
    lvq_small, cycle_small = 100, 1_000
    scenarios = args.only or ["lvq", "fifo", "priority", "sorted", "selector", "delayed"]
    rng = random.Random(args.seed)

    print(
        f"queue_ops: Python {sys.version.split()[0]}, {ops:,} ops per batch, best of "
        f"{repeat} interleaved batches; big queue {big:,}"
    )
    rows: list[tuple[str, str, float, float, float, float]] = []
    started = time.perf_counter()
    for scenario in scenarios:
        t0 = time.perf_counter()
        if scenario == "lvq":
            with gc_paused():
                small_case, big_case = lvq_case(lvq_small, rng), lvq_case(big, rng)
            name = "LVQ replace (enqueue, key exists)"
            sizes = f"{lvq_small} vs {big:,} keys"
        elif scenario == "delayed":
            with gc_paused():
                small_case, big_case = delayed_case(cycle_small, rng), delayed_case(big, rng)
            name = "delayed message: enqueue (held)"
            sizes = f"{cycle_small:,} vs {big:,} held"
        elif scenario == "selector":
            with gc_paused():
                small_case, big_case = selector_case(cycle_small, 1), selector_case(big, 2)
            name = "selector: enqueue+acquire+settle"
            sizes = f"{cycle_small:,} vs {big:,} unmatched"
        else:
            with gc_paused():
                small_case = cycle_case(scenario, cycle_small, rng, 1)
                big_case = cycle_case(scenario, big, rng, 2)
            label = {"fifo": "FIFO", "priority": "priority 10 levels", "sorted": "sorted"}
            name = f"{label[scenario]}: enqueue+acquire+settle"
            sizes = f"depth {cycle_small:,} vs {big:,}"
        setup = time.perf_counter() - t0
        measure([small_case, big_case], ops, repeat)
        decode = decode_cost(small_case.make, ops, repeat) if scenario in ("lvq", "sorted") else 0.0
        rows.append(
            (name, sizes, small_case.best, big_case.best, big_case.best / small_case.best, decode)
        )
        print(
            f"  ... {scenario}: set-up {setup:.1f} s, total {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        del small_case, big_case
        gc.collect()

    print()
    header = ("operation", "sizes", "small µs/op", "big µs/op", "ratio big/small", "decode µs/op")
    widths = (43, 26, 12, 12, 16, 13)
    print(
        "  ".join(
            h.ljust(w) if i < 2 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    print("  ".join("-" * w for w in widths))
    for name, sizes, small, large, ratio, decode in rows:
        cells = (
            name,
            sizes,
            f"{small * 1e6:.2f}",
            f"{large * 1e6:.2f}",
            f"{ratio:.2f}",
            f"{decode * 1e6:.2f}" if decode else "-",
        )
        print(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    print()
    print(
        "decode = decoding the application-properties section for the LVQ / sort key, "
        "included in the µs/op (once per message, size-independent)."
    )
    print(
        "ratio = big/small; ~1 means independent of size. The sorted queue is O(log n) by "
        "design (proton_broker.queues.queue rules), so a ratio above 1 is expected there."
    )
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
