#!/usr/bin/env python3
"""Memory of queued messages, in process: bytes of RSS per queued message, per last-value
key, and what a last-value queue under churn adds round after round.

Each scenario runs in a fresh child process (so one scenario's freed memory cannot hide the
next one's), which fills a queue as the broker would (each message its own bytes, parsed
once by ``parse_message``) and reads its resident set size (``/proc/self/statm``) before and
after, with the cyclic collector run first. With ``--baseline CHECKOUT`` every scenario also
runs against that checkout's package in the same invocation and the figures are printed
with their ratio to it.

Scenarios:

* plain: ``--count`` messages of 100-byte bodies on a standard queue: bytes per message
  (all but the first ``queue.pack_after`` of them packed: proton_broker/queues/packed.py).
* unpacked: the same on a queue that never packs (``pack_after`` 0): what a message costs
  as a record and an entry, as the first ``pack_after`` messages of every queue are held.
* ttl: the same as plain, each message with a time to live (an hour), which packs with its
  expiry time kept aside.
* client: the same, each message as Qpid JMS sends one (a message-id, the address in
  ``to``, a creation time, the JMS type and destination annotations, durable).
* lvq: ``--keys`` keys on a last-value queue (one message each): bytes per key.
* churn: the same last-value queue with ``max_key_updates`` 1, then ``--rounds`` rounds of
  ``--keys``/10 replacements of random keys; the growth of each round, in MiB. A queue in a
  steady state should stop growing after its first rounds (its depth does not change).

Usage: ``PYTHONPATH=. python bench/memory.py [--count N] [--keys N] [--rounds R]
[--baseline CHECKOUT]`` (about a minute with the defaults).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KEY_MARK = b"K0000000"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled_rss() -> int:
    gc.collect()
    return rss()


def child(scenario: str, count: int, keys: int, rounds: int) -> dict[str, Any]:
    """Run one scenario in this process (the package on sys.path is the one measured)."""
    import proton

    from proton_broker.codec.sections import parse_message
    from proton_broker.queues.factory import build_queue
    from proton_broker.queues.settings import parse_settings

    body = b"x" * 100
    if scenario in ("plain", "client", "unpacked", "ttl"):
        template = (
            proton.Message(body=body, ttl=3600.0 if scenario == "ttl" else 0)
            if scenario != "client"
            else proton.Message(
                id="ID:6a1c0b8e-2f4d-4c1e-9a57-1d2e3f405162:1:1:1-1",
                address="q",
                creation_time=1795650704.123,
                durable=True,
                annotations={
                    "x-opt-jms-msg-type": proton.byte(3),
                    "x-opt-jms-dest": proton.byte(0),
                },
                body=body,
            )
        ).encode()
        queue = plain_queue(build_queue, parse_settings({}), scenario == "unpacked")
        before = settled_rss()
        for _ in range(count):
            queue.enqueue(parse_message(template[:1] + template[1:]))  # its own bytes
        return {"bytes_per_message": (settled_rss() - before) / count}
    template = proton.Message(body=body, properties={"k": KEY_MARK.decode()}).encode()

    def keyed(key: int) -> Any:
        return parse_message(template.replace(KEY_MARK, b"K%07d" % key))

    options: dict[str, Any] = {"lvqKey": "k"}
    if scenario == "churn":
        options["max_key_updates"] = 1
    queue = build_queue("q", parse_settings(options))
    before = settled_rss()
    for key in range(keys):
        queue.enqueue(keyed(key))
    filled = settled_rss()
    if scenario == "lvq":
        return {"bytes_per_key": (filled - before) / keys}
    chooser = random.Random(7)
    growth = []
    last = filled
    for _ in range(rounds):
        for _ in range(keys // 10):
            queue.enqueue(keyed(chooser.randrange(keys)))
        now = settled_rss()
        growth.append(round((now - last) / 2**20, 1))
        last = now
    return {"round_growth_mib": growth, "total_growth_mib": round((last - filled) / 2**20, 1)}


def plain_queue(build_queue: Any, settings: Any, unpacked: bool) -> Any:
    """A standard queue; ``unpacked``: one that never packs (a checkout from before packing
    has no such option, and never packs)."""
    if not unpacked:
        return build_queue("q", settings)
    try:
        return build_queue("q", settings, pack_after=0)
    except TypeError:
        return build_queue("q", settings)


def run(checkout: Path, scenario: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONSAFEPATH": "1"}
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        scenario,
        "--count",
        str(args.count),
        "--keys",
        str(args.keys),
        "--rounds",
        str(args.rounds),
    ]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="plain: messages")
    parser.add_argument("--keys", type=int, default=1_000_000, help="lvq, churn: keys")
    parser.add_argument("--rounds", type=int, default=8, help="churn: rounds of keys/10")
    parser.add_argument("--scenarios", default="plain,unpacked,ttl,client,lvq,churn")
    parser.add_argument("--baseline", metavar="CHECKOUT", help="also measure that checkout")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.count, args.keys, args.rounds)))
        return
    for scenario in args.scenarios.split(","):
        ours = run(REPO, scenario, args)
        line = f"{scenario:6} ours {json.dumps(ours)}"
        if args.baseline:
            base = run(Path(args.baseline).resolve(), scenario, args)
            line += f"\n{'':6} base {json.dumps(base)}"
            for name, value in ours.items():
                if isinstance(value, float) and base.get(name):
                    line += f"\n{'':6} {name}: {value / base[name]:.2f}x the baseline"
        print(line, flush=True)


if __name__ == "__main__":
    main()
