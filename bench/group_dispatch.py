#!/usr/bin/env python3
"""Micro-benchmark of message-group dispatch, in process (no sockets, no Proton reactor).

The requirement: "10,000 active groups with 10 consumers must dispatch at close to the speed
of a plain queue". Each timed operation is one message through the queue: enqueue it, let a
consumer take one (top up its credit by one and call ``credit_granted``), settle (accept) the
oldest message that consumer holds. Figures are µs per message, the best of several
interleaved batches (the machine is shared and noisy), and the RATIO to the plain-FIFO
baseline measured in the same run: a ratio near 1 means grouping costs nearly nothing.

Scenarios, "backlog" pattern (the queue holds a steady backlog, each of the 10 consumers
holds a window of 10 unsettled messages, consumers are served round-robin):

* plain: a FIFO queue (the baseline).
* shared: ``qpid.shared_msg_group`` with ``qpid.group_header_key``; 10,000 groups, two
  messages per group queued, new messages cycling over the groups.
* standard: a group key without shared groups (Broker-J's default): each group sticks to
  the consumer that took it first.
* shared+blocked: as shared, but 9 of the 10 consumers each hold one message of their own
  group and never settle it, with many more messages of those 9 groups queued ahead of
  everything else (``--blocked`` per group). Only the tenth consumer works. The dispatcher
  must not scan the blocked groups' messages, so the figure should stay near the others.

"Trickle" pattern (the queue is empty and all 10 consumers wait with plenty of credit, so
every enqueue is dispatched at once): plain versus shared groups. This is where a
dispatcher that tries every waiting consumer after each hand-out shows up.

Messages are encoded once with Proton and parsed once with ``parse_message``; each timed
message is a fresh copy of the parsed record (made before the clock starts, its bytes
patched to name its group) whose application properties are NOT decoded yet, so the group
key's decoding happens in the timed enqueue as in the broker. The "decode" column shows that
share alone (pure Python, see ``proton_broker.codec``).

Usage: ``python bench/group_dispatch.py`` (about a minute) or ``--quick`` (about 10 s);
``--profile CASE`` prints a cProfile of one batch of that case. See ``--help``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence

import proton
from records import clone, gc_paused

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import QueueSettings, parse_settings

KEY = "GROUP_KEY"
MARK = "g" + "X" * 7  # fixed width, so patched encodings keep every offset valid
CONSUMERS = 10
WINDOW = 10  # unsettled messages each consumer holds in the backlog pattern


class Taker:
    """A consumer as the queue sees it: credit, and what it holds unsettled, oldest first."""

    browse = False

    def __init__(self, consumer_id: int, credit: int = 0) -> None:
        self.id = consumer_id
        self.credit = credit
        self.pending: deque[Entry] = deque()

    def deliver(self, entry: Entry) -> None:
        self.credit -= 1
        self.pending.append(entry)


# ---- messages ------------------------------------------------------------------------------


def template(grouped: bool) -> Message:
    properties = {KEY: MARK} if grouped else {"n": 1}
    return parse_message(proton.Message(body="x" * 64, properties=properties).encode())


def group_name(n: int) -> str:
    return f"g{n:07d}"


class Source:
    """Fresh message records cycling over ``groups`` groups (None: ungrouped)."""

    def __init__(self, groups: int | None) -> None:
        self.groups = groups
        self.base = template(groups is not None)
        self.next = 0
        mark = MARK.encode()
        # One encoding per group, made once; each message is a fresh record of it.
        self.encoded = (
            [self.base.data.replace(mark, group_name(g).encode(), 1) for g in range(groups)]
            if groups
            else [self.base.data]
        )

    def take(self, n: int, decoded: bool = False) -> list[Message]:
        out = []
        for _ in range(n):
            i = self.next % len(self.encoded)
            self.next += 1
            properties = None
            if decoded:  # set-up only: skip the decoding to keep pre-filling short
                properties = {KEY: group_name(i)} if self.groups else {"n": 1}
            out.append(clone(self.base, self.encoded[i], properties))
        return out


# ---- cases ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    label: str
    pattern: str  # "backlog" or "trickle": the ratio is to the plain case of the pattern
    queue: Queue
    source: Source
    run: Callable[[list[Message]], None]
    best: float = float("inf")  # seconds per message


def backlog_run(queue: Queue, workers: list[Taker]) -> Callable[[list[Message]], None]:
    def run(messages: list[Message]) -> None:
        enqueue, grant, settle = queue.enqueue, queue.credit_granted, queue.settle
        n = len(workers)
        for i, message in enumerate(messages):
            enqueue(message)
            consumer = workers[i % n]
            if consumer.pending:
                settle(consumer.pending.popleft())
            consumer.credit += 1
            grant(consumer)

    return run


def trickle_run(queue: Queue, consumers: list[Taker]) -> Callable[[list[Message]], None]:
    def run(messages: list[Message]) -> None:
        enqueue, settle = queue.enqueue, queue.settle
        for message in messages:
            enqueue(message)  # a waiting consumer gets it at once
            for consumer in consumers:
                if consumer.pending:
                    settle(consumer.pending.popleft())

    return run


def settings_for(kind: str) -> QueueSettings:
    if kind == "plain":
        return QueueSettings()
    if kind == "standard":
        return parse_settings({"qpid.group_header_key": KEY})
    return parse_settings({"qpid.group_header_key": KEY, "qpid.shared_msg_group": 1})


def backlog_case(kind: str, groups: int, blocked: int) -> Case:
    grouped = kind != "plain"
    queue = build_queue(kind, settings_for(kind))
    source = Source(groups if grouped else None)
    consumers = [Taker(i + 1) for i in range(CONSUMERS)]
    workers = consumers
    with gc_paused():
        if kind == "shared+blocked":
            holders, workers = consumers[:-1], consumers[-1:]
            for h in range(len(holders)):
                for message in Source(1).take(blocked, decoded=True):
                    message.app_properties_cache = {KEY: f"held-{h}"}
                    queue.enqueue(message, now=0.0)
            for holder in holders:  # each takes the head of its own group, never settles
                holder.credit = 1
                queue.subscribe(holder)
                assert len(holder.pending) == 1
        for message in source.take(2 * groups if grouped else 2 * 10_000, decoded=True):
            queue.enqueue(message, now=0.0)
        for worker in workers:
            worker.credit = WINDOW
            queue.subscribe(worker)
            assert len(worker.pending) == WINDOW
    label = {
        "plain": "plain FIFO (baseline)",
        "shared": f"shared groups, {groups:,} groups",
        "standard": f"standard groups, {groups:,} groups",
        "shared+blocked": f"shared, {groups:,} groups, 9 blocked x {blocked:,}",
    }[kind]
    return Case(label, "backlog", queue, source, backlog_run(queue, workers))


def trickle_case(kind: str, groups: int) -> Case:
    grouped = kind != "plain"
    queue = build_queue(kind, settings_for(kind))
    consumers = [Taker(i + 1, credit=10**12) for i in range(CONSUMERS)]
    for consumer in consumers:
        queue.subscribe(consumer)
    label = (
        "trickle: plain FIFO (baseline)"
        if not grouped
        else f"trickle: shared groups, {groups:,} groups"
    )
    return Case(
        label, "trickle", queue, Source(groups if grouped else None), trickle_run(queue, consumers)
    )


# ---- timing --------------------------------------------------------------------------------


def measure(cases: Sequence[Case], ops: int, repeat: int) -> None:
    """Interleave batches of the cases; keep each case's best seconds per message."""
    for _ in range(repeat):
        for case in cases:
            with gc_paused():
                messages = case.source.take(ops)
            start = time.perf_counter()
            case.run(messages)
            case.best = min(case.best, (time.perf_counter() - start) / ops)
            depth = case.queue.depth
            assert depth < 10**6, f"{case.label}: the queue grew to {depth}"


def decode_cost(source: Source, ops: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        messages = source.take(ops)
        start = time.perf_counter()
        for message in messages:
            message.application_property(KEY)
        best = min(best, (time.perf_counter() - start) / ops)
    return best


def profile(case: Case, ops: int) -> None:
    messages = case.source.take(ops)
    profiler = cProfile.Profile()
    profiler.enable()
    case.run(messages)
    profiler.disable()
    print(f"\ncProfile of {ops:,} messages through: {case.label}")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


# ---- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="In-process micro-benchmark of message-group dispatch (no sockets): "
        "enqueue -> dispatch -> settle through a queue with 10 consumers. Prints "
        "µs/message (best of N interleaved batches) and the ratio to a plain FIFO "
        "queue measured in the same run."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a ~10 s run: fewer messages per batch and fewer batches",
    )
    parser.add_argument(
        "--groups", type=int, default=10_000, help="distinct active groups (default 10,000)"
    )
    parser.add_argument(
        "--blocked",
        type=int,
        default=None,
        help="messages queued behind each of the 9 blocked groups (default "
        "20,000; 5,000 with --quick)",
    )
    parser.add_argument(
        "--ops",
        type=int,
        default=None,
        help="messages per timed batch (default 20,000; 5,000 with --quick)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="interleaved batches per case; the best is kept (default 5; 3 with --quick)",
    )
    parser.add_argument(
        "--profile",
        choices=["plain", "shared", "standard", "blocked", "trickle-plain", "trickle-shared"],
        help="also print a cProfile of one batch of this case",
    )
    args = parser.parse_args(argv)

    ops = args.ops or (5_000 if args.quick else 20_000)
    repeat = args.repeat or (3 if args.quick else 5)
    blocked = args.blocked or (5_000 if args.quick else 20_000)
    groups = args.groups

    print(
        f"group_dispatch: Python {sys.version.split()[0]}, {CONSUMERS} consumers, "
        f"{ops:,} messages per batch, best of {repeat} interleaved batches"
    )
    started = time.perf_counter()
    cases = {
        "plain": backlog_case("plain", groups, blocked),
        "shared": backlog_case("shared", groups, blocked),
        "standard": backlog_case("standard", groups, blocked),
        "blocked": backlog_case("shared+blocked", groups, blocked),
        "trickle-plain": trickle_case("plain", groups),
        "trickle-shared": trickle_case("shared", groups),
    }
    measure(list(cases.values()), ops, repeat)
    decode = decode_cost(Source(groups), ops, repeat)

    baselines = {"backlog": cases["plain"].best, "trickle": cases["trickle-plain"].best}
    width = max(len(c.label) for c in cases.values())
    print(f"\n{'case':<{width}}  {'µs/msg':>8}  {'ratio':>6}")
    for case in cases.values():
        ratio = case.best / baselines[case.pattern]
        print(f"{case.label:<{width}}  {case.best * 1e6:8.2f}  {ratio:6.2f}")
    print(
        f"\ndecoding the group key alone (part of every grouped enqueue): {decode * 1e6:.2f} µs/msg"
    )
    print(
        f"ratio = µs/msg / the plain FIFO figure of the same pattern; "
        f"run took {time.perf_counter() - started:.1f} s"
    )
    if args.profile:
        profile(cases[args.profile], ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
