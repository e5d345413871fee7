#!/usr/bin/env python3
"""Micro-benchmark of exchange routing, in process (no sockets, no Proton reactor).

How the cost of routing one message changes with the number of bindings on the exchange,
reported as RATIOS to the smallest exchange in the same invocation (near 1: the cost does
not grow with the bindings). Each message matches a few bindings whatever the size, so
what is measured is the cost of the bindings that do not match. Figures are the best of
several interleaved batches (small, medium, big, small, ...): the machine is noisy.

Scenarios, each at 10, 1,000 and 100,000 bindings, one queue per binding:

* direct: keys ``k<n>``, a message's key bound by two queues.
* topic: patterns ``<a>.<b>.*``, ``<a>.#`` and ``<a>.<b>.<c>`` over distinct words; a
  message's key ``<a>.<b>.<c>`` matches three of them.
* headers: ``x-match all`` on one property each; every binding is tested (qpidd's headers
  exchange works the same way), so this one grows: it is here to show by how much.

Usage: ``python bench/routing.py`` (about 20 s) or ``--quick``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

import proton

from proton_broker.codec.sections import parse_message
from proton_broker.exchanges.exchange import Exchange
from proton_broker.message import Message

SIZES = (10, 1000, 100000)


def direct(size: int) -> tuple[Exchange, list[str]]:
    exchange = Exchange("d", "direct")
    for n in range(size // 2):
        exchange.bind(f"q{n}a", f"k{n}")
        exchange.bind(f"q{n}b", f"k{n}")
    return exchange, [f"k{n}" for n in range(size // 2)]


def topic(size: int) -> tuple[Exchange, list[str]]:
    exchange = Exchange("t", "topic")
    keys = []
    for n in range(size // 3):
        a, b, c = f"a{n}", f"b{n}", f"c{n}"
        exchange.bind(f"q{n}star", f"{a}.{b}.*")
        exchange.bind(f"q{n}hash", f"{a}.#")
        exchange.bind(f"q{n}exact", f"{a}.{b}.{c}")
        keys.append(f"{a}.{b}.{c}")
    return exchange, keys


def headers(size: int) -> tuple[Exchange, list[str]]:
    exchange = Exchange("h", "headers")
    for n in range(size):
        exchange.bind(f"q{n}", "", {"x-match": "all", "n": n})
    return exchange, [""]


def messages(count: int, headers_size: int) -> list[Message]:
    made = []
    for _ in range(count):
        props = {"n": random.randrange(headers_size)}
        message = parse_message(proton.Message(body="x", properties=props).encode())
        _ = message.application_properties  # decoded up front: routing is what is timed
        made.append(message)
    return made


def best_per_op(
    route: Callable[[str, Message], object], keys: list[str], pool: list[Message], ops: int
) -> float:
    picks = [(random.choice(keys), random.choice(pool)) for _ in range(ops)]
    start = time.perf_counter()
    for key, message in picks:
        route(key, message)
    return (time.perf_counter() - start) / ops


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter batches")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    ops = 5000 if args.quick else 20000
    rounds = 2 if args.quick else args.rounds
    print(f"{'scenario':<10}{'bindings':>10}{'µs/route':>10}{'ratio':>8}")
    for name, build in (("direct", direct), ("topic", topic), ("headers", headers)):
        sizes = SIZES if name != "headers" else SIZES[:2]
        built = {size: build(size) for size in sizes}
        pools = {size: messages(200, size) for size in sizes}
        best = dict.fromkeys(sizes, float("inf"))
        for _ in range(rounds):
            for size in sizes:
                exchange, keys = built[size]
                best[size] = min(best[size], best_per_op(exchange.route, keys, pools[size], ops))
        for size in sizes:
            ratio = best[size] / best[sizes[0]]
            print(f"{name:<10}{size:>10}{best[size] * 1e6:>10.2f}{ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
