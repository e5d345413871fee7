#!/usr/bin/env python3
"""How long the broker takes to recover durable messages at start-up.

Writes COUNT durable messages (100-byte bodies, as the load generator sends them) for one
durable queue straight through the SQLite store, then times ``Broker.open_store`` on a fresh
broker over that data directory: reading the rows, checking each CRC, parsing each message
and putting it back on its queue. Also times the same for COUNT/10 in the same invocation,
so the ratio shows whether recovery is linear.

Usage: PYTHONPATH=. python bench/recovery.py [--count 1000000]
"""

from __future__ import annotations

import argparse
import queue
import tempfile
import time

import proton

from proton_broker.broker import Broker
from proton_broker.config import Config
from proton_broker.store.base import StoredMessage, Unit
from proton_broker.store.sqlite import SqliteStore


def fill(directory: str, count: int) -> None:
    posted: queue.SimpleQueue = queue.SimpleQueue()
    store = SqliteStore(directory, posted.put)
    store.open()
    store.save_queue("recovered", {"durable": "True"})
    data = bytes(
        proton.Message(id="loadgen-msg", durable=True, body=b"x" * 100, inferred=True).encode()
    )
    now = time.time()
    for start in range(0, count, 10_000):
        batch = [
            StoredMessage(store.next_id(), "recovered", data, now)
            for _ in range(min(10_000, count - start))
        ]
        store.commit(Unit(enqueues=batch, done=lambda error: None))
    store.close()


def recover(directory: str) -> tuple[float, int]:
    config = Config()
    config.broker.data_dir = directory
    broker = Broker(config)
    started = time.perf_counter()
    broker.open_store(lambda fn: None)
    elapsed = time.perf_counter() - started
    depth = broker.queues["recovered"].depth
    broker.close()
    return elapsed, depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    args = parser.parse_args()
    results = {}
    for count in (args.count // 10, args.count):
        with tempfile.TemporaryDirectory(prefix="recovery-") as directory:
            fill(directory, count)
            elapsed, depth = recover(directory)
            assert depth == count, f"recovered {depth} of {count}"
            results[count] = elapsed
            print(
                f"{count:>10,} messages recovered in {elapsed:6.1f} s "
                f"({count / elapsed:,.0f} msgs/s)"
            )
    small, big = args.count // 10, args.count
    print(
        f"ratio of per-message times, {big:,} vs {small:,}: "
        f"{(results[big] / big) / (results[small] / small):.2f}"
    )


if __name__ == "__main__":
    main()
