"""A canary for the broker's one event loop: a client that sends itself a message and waits
for it, again and again, and reports its longest round trip. While the loop does a long
piece of work in one go, every connection waits, and the canary's round trip shows it."""

from __future__ import annotations

import time
from collections.abc import Callable

from proton import Message

from proton_broker.codec.sections import parse_message
from tests.conftest import RunningBroker

CHUNK = 20_000  # messages put on a queue per call on the loop (a call must answer in 5 s)


class Canary:
    """One connection with a sender and a receiver on a queue of its own."""

    def __init__(self, broker: RunningBroker, address: str = "canary") -> None:
        self.client = broker.client()
        self.sender = self.client.sender(address)
        self.receiver = self.client.receiver(address, credit=1)

    def worst_round_trip(self, seconds: float) -> float:
        """The longest round trip (seconds) over ``seconds``, one every 10 ms or so."""
        client, worst = self.client, 0.0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            count = len(client.received(self.receiver)) + 1
            start = time.perf_counter()
            client.send(self.sender, Message(body="ping"), pump=False)
            got = client.wait_received(self.receiver, count, timeout=30)
            worst = max(worst, time.perf_counter() - start)
            client.settle(got[-1], pump=False)
            self.receiver.flow(1)
            time.sleep(0.01)
        return worst


def fill(broker: RunningBroker, name: str, count: int, message: Message, now: float) -> None:
    """Put ``count`` copies of ``message`` on queue ``name`` from the loop, all arrived at
    ``now``, as fast as the queue takes them (the sockets would take far longer)."""
    data = bytes(message.encode())
    queue = broker.broker.queues[name]

    def some(n: int) -> Callable[[], None]:
        return lambda: [queue.enqueue(parse_message(data), now=now) for _ in range(n)] and None

    for done in range(0, count, CHUNK):
        broker.call(some(min(CHUNK, count - done)))
