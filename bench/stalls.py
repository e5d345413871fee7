#!/usr/bin/env python3
"""How long the broker's one event loop stops serving its clients during big operations.

The broker runs every queue on one thread; an operation that does all its work in one go
holds every connection for as long as it takes. This script starts a broker in process
(memory store), puts a deep queue in place from the loop (far faster than over sockets),
and runs a canary: a second client that sends itself a message and waits for it every
10 ms. For each operation it prints the operation's own time and the canary's longest
round trip while it ran, beside the canary's longest round trip over a quiet second in
the same invocation (the machine is noisy: compare the two, not against another run).

Operations (``--only`` picks some; the default runs all):

* ``expiry``: COUNT messages that expire at the same instant (the sweep's work);
* ``delayed``: COUNT messages whose delivery time comes at the same instant;
* ``purge``: ``clearQueue`` of COUNT messages over ``$management``;
* ``delete``: ``DELETE`` of a queue holding COUNT messages (``force``);
* ``delete-messages``: ``deleteMessages`` with a selector that matches none of COUNT;
* ``message-info``: ``getMessageInfo`` of the last 10 of COUNT messages;
* ``selector``: a consumer attaching with a selector that matches none of COUNT.

Usage: ``PYTHONPATH=. python bench/stalls.py --count 1000000`` (a few minutes and about
2 GB at 10^6), or ``--count 100000`` for a quick look.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import proton
from proton.reactor import Selector
from proton.utils import BlockingConnection

from proton_broker.app import App
from proton_broker.codec.sections import parse_message
from proton_broker.config import Config

CHUNK = 20_000  # messages put on a queue per call on the loop


class Broker:
    """A broker serving on 127.0.0.1 from a thread of this process."""

    def __init__(self) -> None:
        config = Config()
        config.broker.host, config.broker.port = "127.0.0.1", 0
        config.broker.store = "memory"
        config.broker.data_dir = tempfile.mkdtemp(prefix="stalls-")
        config.broker.max_memory = 8 << 30
        self.app = App(config)
        host, port = self.app.listen()
        self.url = f"amqp://{host}:{port}"
        threading.Thread(target=self.app.run, daemon=True).start()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the loop thread and return its result."""
        done, result = threading.Event(), []
        self.app.server.call_soon(lambda: (result.append(fn()), done.set()))
        done.wait(600)
        return result[0]

    def fill(self, queue: str, count: int, message: proton.Message) -> float:
        """``count`` copies of ``message`` on ``queue`` (made if need be), from the loop,
        all arrived at one instant, which it returns (so they expire together)."""
        data, now = bytes(message.encode()), time.time()
        target = self.call(lambda: self.app.broker.declare(queue, {}))
        for done in range(0, count, CHUNK):
            n = min(CHUNK, count - done)
            self.call(lambda n=n: [target.enqueue(parse_message(data), now=now) for _ in range(n)])
        return now


class Canary(threading.Thread):
    """Sends itself a message every 10 ms and records each round trip."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.conn = BlockingConnection(url, timeout=600)
        self.sender = self.conn.create_sender("canary")
        self.receiver = self.conn.create_receiver("canary", credit=10)
        self.trips: list[tuple[float, float]] = []  # (start, seconds)
        self.running = True

    def run(self) -> None:
        while self.running:
            start = time.perf_counter()
            self.sender.send(proton.Message(body="ping"))
            self.receiver.receive(timeout=600)
            self.receiver.accept()
            self.trips.append((start, time.perf_counter() - start))
            time.sleep(0.01)

    def worst(self, since: float, until: float) -> float:
        """The longest round trip that overlapped [since, until]."""
        return max((s for t, s in self.trips if t + s >= since and t <= until), default=0.0)

    def stop(self) -> None:
        self.running = False
        self.join(600)
        self.conn.close()


class Management:
    """``$management`` requests over one connection."""

    def __init__(self, url: str) -> None:
        self.conn = BlockingConnection(url, timeout=600)
        self.replies = self.conn.create_receiver(None, dynamic=True, credit=10)
        self.sender = self.conn.create_sender("$management")

    def ask(self, operation: str, name: str, **more: Any) -> Any:
        properties = {"operation": operation, "type": "org.apache.qpid.Queue", "name": name}
        reply_to = self.replies.remote_source.address
        self.sender.send(proton.Message(properties=properties, body=more, reply_to=reply_to))
        answer = self.replies.receive(timeout=600)
        self.replies.accept()
        return answer.properties.get("statusCode")


def watch(canary: Canary, what: str, run: Callable[[], Any], settle: float = 0.0) -> None:
    """Run ``run`` (and wait ``settle`` seconds more, for work the loop does by itself),
    then print its time and the canary's worst round trip meanwhile (after a pause, so
    no trip held up by the fill before it counts)."""
    time.sleep(0.5)
    start = time.perf_counter()
    answer = run()
    took = time.perf_counter() - start
    time.sleep(settle)
    worst = canary.worst(start, time.perf_counter())
    print(f"{what:55} {took:8.3f} s  canary worst {worst * 1000:8.1f} ms  ({answer})", flush=True)


BLUE = proton.Message(body="x" * 20, properties={"color": "blue"})
Step = tuple[str, Callable[[], Any], float]  # what, the operation, seconds to watch after


def expiry(broker: Broker, management: Management, count: int) -> Step:
    ttl = 2.0 + count / 50_000  # beyond the fill
    arrived = broker.fill("expiring", count, proton.Message(body="x" * 20, ttl=ttl))
    left = max(0.0, arrived + ttl - time.time())  # then the sweep takes them
    return f"expiry of {count:,} at one instant", lambda: time.sleep(left), 3.0


def delayed(broker: Broker, management: Management, count: int) -> Step:
    due = time.time() + 2.0 + count / 50_000  # beyond the fill
    when = {"x-opt-delivery-time": proton.timestamp(int(due * 1000))}
    broker.fill("delayed", count, proton.Message(body="x" * 20, annotations=when))
    wait = max(0.0, due - time.time())
    return f"{count:,} delayed messages due at one instant", lambda: time.sleep(wait), 3.0


def purge(broker: Broker, management: Management, count: int) -> Step:
    broker.fill("purged", count, BLUE)
    return f"clearQueue of {count:,}", lambda: management.ask("clearQueue", "purged"), 0.0


def delete(broker: Broker, management: Management, count: int) -> Step:
    broker.fill("deleted", count, BLUE)
    run = lambda: management.ask("DELETE", "deleted", force=True)  # noqa: E731
    return f"DELETE of a queue of {count:,}", run, 0.0


def delete_messages(broker: Broker, management: Management, count: int) -> Step:
    broker.fill("selected", count, BLUE)
    run = lambda: management.ask("deleteMessages", "selected", selector="color = 'red'")  # noqa: E731
    return f"deleteMessages matching none of {count:,}", run, 0.0


def message_info(broker: Broker, management: Management, count: int) -> Step:
    broker.fill("listed", count, BLUE)
    last = {"first": count - 10, "last": count - 1}
    run = lambda: management.ask("getMessageInfo", "listed", **last)  # noqa: E731
    return f"getMessageInfo of the last 10 of {count:,}", run, 0.0


def selector(broker: Broker, management: Management, count: int) -> Step:
    broker.fill("filtered", count, BLUE)
    conn = BlockingConnection(broker.url, timeout=600)

    def attach() -> str:
        conn.create_receiver("filtered", options=Selector("color = 'red'"), credit=1)
        return "attached"

    return f"a selector consumer matching none of {count:,}", attach, 2.0


STEPS: dict[str, Callable[[Broker, Management, int], Step]] = {
    "expiry": expiry,
    "delayed": delayed,
    "purge": purge,
    "delete": delete,
    "delete-messages": delete_messages,
    "message-info": message_info,
    "selector": selector,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--only", nargs="*", choices=list(STEPS), default=list(STEPS))
    args = parser.parse_args()
    broker = Broker()
    canary, management = Canary(broker.url), Management(broker.url)
    canary.start()
    time.sleep(1.0)
    quiet = canary.worst(time.perf_counter() - 1.0, time.perf_counter())
    print(f"{'quiet (no operation)':55} {1.0:8.3f} s  canary worst {quiet * 1000:8.1f} ms")
    for name in args.only:
        what, run, settle = STEPS[name](broker, management, args.count)
        watch(canary, what, run, settle)
    canary.stop()
    management.conn.close()
    broker.app.stop()


if __name__ == "__main__":
    main()
