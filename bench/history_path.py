#!/usr/bin/env python3
"""The last-value path in process: what a message costs with its key's history kept, and
what forgetting costs once the history budget is full (no sockets, no Proton reactor).

Each message is parsed from its bytes, enqueued on a last-value queue (key ``k``), handed
to a consumer that keeps up (one credit) and settled: the queue path of ``bench/run.py
--lvq-keys``, without the AMQP around it. Keys cycle in order, as the load generator's do.

* ``--queues N`` runs N queues of ``--keys`` keys in turn, ``--messages`` each, sharing one
  history budget of ``--budget`` bytes (``broker.max_history_memory``; 1 GiB as the
  broker's default). Each queue stays, as the queues of a ``bench/run.py`` invocation do,
  so at 10^6 keys the second queue's messages run with the budget full (its history lets
  go of older versions) and the third's with fewer keys held than arrive (whole keys are
  forgotten). Printed per queue: user and system CPU a message, and the part of it spent
  forgetting (``History.forget``), with the keys forgotten so far and the page faults the
  queue's messages cost the process (memory touched for the first time). The cyclic collector
  runs with the broker's thresholds (``proton_broker.collector``).
* ``--standing N`` has each queue hold N values of keys of their own first, taken by a
  consumer that never settles them: keys the forgetting hand passes but may not forget
  (with a small ``--budget``, the case where forgetting costs most a version).
* ``--bytecodes N`` counts instead the interpreter's instructions (bytecodes) of N
  messages after the warm-up, by function: the size of the path, exactly, where CPU
  figures drift by several percent from run to run. (``--plain`` gives the same for a
  plain queue and messages without properties.)

Usage (about a minute at 10^6 keys):
``PYTHONPATH=. .venv/bin/python bench/history_path.py --keys 1000000 --messages 2000000
--queues 3``; ``... --keys 100 --messages 20000 --bytecodes 1000 [--plain]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import proton
from queue_ops import Taker  # bench/ is the script's directory

from proton_broker import collector
from proton_broker.codec.sections import parse_message
from proton_broker.queues.budget import HistoryBudget
from proton_broker.queues.factory import build_queue
from proton_broker.queues.history import History
from proton_broker.queues.ports import LoopHooks
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings


def keyed(key: str | None) -> bytes:
    """A message with a 100-byte body and ``key`` as application property ``k`` (None: no
    properties)."""
    return bytes(
        proton.Message(body=b"x" * 100, properties=None if key is None else {"k": key}).encode()
    )


def encoded(keys: int, plain: bool) -> list[bytes]:
    """One message a key (see :func:`keyed`)."""
    return [keyed(None if plain else f"key-{i:07}") for i in range(keys)]


def hold(queue: Queue, standing: int) -> None:
    """``standing`` values of keys of their own, taken by a consumer that never settles
    them: on the queue, so their keys are never forgotten, and the forgetting hand passes
    them all the same."""
    for i in range(standing):
        queue.enqueue(parse_message(keyed(f"held-{i:07}")))
    queue.subscribe(Taker(standing))


def cycle(queue: Queue, messages: list[bytes]) -> Callable[[int, int], None]:
    """Messages ``start`` to ``start + n`` (keys in order, round and round) through
    ``queue``: parsed, enqueued, taken and settled."""
    taker = Taker(1)
    queue.subscribe(taker)
    enqueue, grant, settle = queue.enqueue, queue.credit_granted, queue.settle
    keys = len(messages)

    def run(start: int, n: int) -> None:
        for i in range(start, start + n):
            enqueue(parse_message(messages[i % keys]))
            taker.credit = 1
            grant(taker)
            settle(taker.last)  # type: ignore[arg-type] # it was given one

    return run


def forgetting_timed() -> list[float]:
    """Time spent in ``History.forget`` from now on (seconds of CPU, one slot)."""
    spent = [0.0]
    forget = History.forget

    def timed(history: History, needed: int) -> int:
        started = time.process_time()
        try:
            return forget(history, needed)
        finally:
            spent[0] += time.process_time() - started

    History.forget = timed  # type: ignore[method-assign]
    return spent


def queues_in_turn(args: argparse.Namespace) -> None:
    messages = encoded(args.keys, plain=False)
    collector.configure()  # the broker's thresholds: its collections, not Python's default
    budget = HistoryBudget(args.budget)
    spent = forgetting_timed()
    settings = parse_settings({"qpid.last_value_queue_key": "k"})
    for number in range(1, args.queues + 1):
        queue = build_queue(f"q{number}", settings, hooks=LoopHooks(history_budget=budget))
        hold(queue, args.standing)
        run = cycle(queue, messages)
        spent[0] = 0.0
        before = os.times()
        before_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        run(0, args.messages)
        after = os.times()
        after_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        each = 1e6 / args.messages
        print(
            f"queue {number}: {(after.user - before.user) * each:.2f} µs user, "
            f"{(after.system - before.system) * each:.2f} µs system a message, "
            f"forgetting {spent[0] * each:.2f} µs of it; "
            f"history {budget.used >> 20} MiB, {budget.forgotten:,} keys forgotten so far, "
            f"faults {after_faults - before_faults:,}",
            flush=True,
        )


def bytecodes(args: argparse.Namespace) -> None:
    messages = encoded(args.keys, plain=args.plain)
    options = {} if args.plain else {"qpid.last_value_queue_key": "k"}
    run = cycle(build_queue("q", parse_settings(options)), messages)
    run(0, args.messages)  # the warm-up: keys at their bound of versions, steady state
    counts: collections.Counter[str] = collections.Counter()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[f"{code.co_filename.split('proton_broker/')[-1]}:{code.co_name}"] += 1
        return tracer

    sys.settrace(tracer)
    try:
        run(args.messages, args.bytecodes)
    finally:
        sys.settrace(None)
    for name, count in counts.most_common(30):
        print(f"{count / args.bytecodes:8.1f}  {name}")
    print(f"{sum(counts.values()) / args.bytecodes:8.1f}  in all, a message")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys the messages cycle over")
    parser.add_argument("--messages", type=int, default=2_000_000, help="messages a queue")
    parser.add_argument("--queues", type=int, default=3, help="queues in turn, one budget")
    parser.add_argument("--budget", type=int, default=1 << 30, help="history budget, bytes")
    parser.add_argument(
        "--standing", type=int, default=0, help="values a queue holds unsettled first"
    )
    parser.add_argument(
        "--bytecodes", type=int, default=0, help="count bytecodes of this many messages"
    )
    parser.add_argument("--plain", action="store_true", help="with --bytecodes: a plain queue")
    args = parser.parse_args()
    if args.bytecodes:
        bytecodes(args)
    else:
        queues_in_turn(args)


if __name__ == "__main__":
    main()
