"""Management operations on a deep queue leave the broker's one event loop free: a canary
connection sending and receiving a message at a time keeps its round trips short while
deleteMessages, getMessageInfo, clearQueue and a forced DELETE run on a queue of several
hundred thousand messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import Message

from proton_broker.codec.sections import parse_message
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker

DEEP = 400_000  # deep enough that a walk of it stalled the loop for over BOUND here
BOUND = 0.25  # seconds: a canary round trip, generous beside the few ms it takes


class Canary(threading.Thread):
    """A client of its own that sends one message and receives it back, again and again,
    keeping the slowest round trip."""

    def __init__(self, broker: RunningBroker) -> None:
        super().__init__(daemon=True)
        self.client = broker.client()
        self.sender = self.client.sender("canary")
        self.receiver = self.client.receiver("canary", credit=10)
        self.client.answered(self.receiver)
        self.worst = 0.0
        self.trips = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            started = time.perf_counter()
            self.client.send(self.sender, Message(body=self.trips))
            (got,) = self.client.wait_received(self.receiver, self.trips + 1)[-1:]
            self.client.settle(got)
            self.worst = max(self.worst, time.perf_counter() - started)
            self.trips += 1
            time.sleep(0.005)

    def stop(self) -> float:
        self.stopping.set()
        self.join(30)
        self.client.close()
        return self.worst


def fill(broker: RunningBroker, name: str, count: int) -> None:
    """``count`` messages on ``name``, enqueued on the loop (a client would take minutes)."""
    data = bytes(Message(body="x" * 20, properties={"colour": "blue"}).encode())
    queue = broker.call(lambda: broker.broker.queues[name])

    def some(n: int) -> None:
        for _ in range(n):
            queue.enqueue(parse_message(data))

    for _ in range(count // 50_000):
        broker.call(lambda: some(50_000))


def while_watched(broker: RunningBroker, operation: Callable[[], Any]) -> tuple[Any, float]:
    """``operation``'s result and the slowest canary round trip while it ran."""
    canary = Canary(broker)
    canary.start()
    deadline = time.monotonic() + 5
    while canary.trips < 3 and time.monotonic() < deadline:  # under way first
        time.sleep(0.01)
    try:
        result = operation()
        time.sleep(0.05)
    finally:
        worst = canary.stop()
    return result, worst


@pytest.fixture
def deep(broker: RunningBroker) -> Iterator[Node]:
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "deep")))[0] == 201
    fill(broker, "deep", DEEP)
    yield node


def test_delete_messages_with_a_selector_matching_none_leaves_the_loop_free(
    broker: RunningBroker, deep: Node
) -> None:
    reply, worst = while_watched(
        broker, lambda: deep.ask(entity("deleteMessages", "deep", selector="colour = 'red'"))
    )
    assert status(reply) == (200, "OK") and reply.body == []
    assert worst < BOUND


def test_delete_messages_by_id_looks_each_up_and_takes_at_most_ten_thousand(
    broker: RunningBroker, deep: Node
) -> None:
    last = DEEP  # positions run from 1
    reply, worst = while_watched(
        broker, lambda: deep.ask(entity("deleteMessages", "deep", messageIds=[last - 5, last]))
    )
    assert reply.body == [last - 5, last] and worst < BOUND
    everything = deep.ask(entity("deleteMessages", "deep"))
    assert len(everything.body) == 10_000 and everything.body[0] == 1
    assert broker.call(lambda: broker.broker.queues["deep"].depth) == DEEP - 10_002


def test_get_message_info_at_the_end_of_a_deep_queue_neither_stalls_nor_unpacks(
    broker: RunningBroker, deep: Node
) -> None:
    queue = broker.call(lambda: broker.broker.queues["deep"])
    packed = broker.call(lambda: len(queue._packed))
    reply, worst = while_watched(
        broker, lambda: deep.ask(entity("getMessageInfo", "deep", first=DEEP - 10, last=DEEP - 1))
    )
    assert [info["id"] for info in reply.body] == list(range(DEEP - 9, DEEP + 1))
    assert worst < BOUND
    assert broker.call(lambda: len(queue._packed)) == packed  # still packed: nothing changed


def test_clear_queue_of_a_deep_queue_leaves_the_loop_free_and_empties_it(
    broker: RunningBroker, deep: Node
) -> None:
    reply, worst = while_watched(broker, lambda: deep.ask(entity("clearQueue", "deep")))
    assert status(reply) == (200, "OK") and reply.body == DEEP
    assert worst < BOUND
    assert broker.call(lambda: broker.broker.queues["deep"].depth) == 0


def body_of(data: bytes) -> Any:
    message = Message()
    message.decode(data)
    return message.body


def test_a_forced_delete_of_a_deep_queue_leaves_the_loop_free_and_dead_letters_all_in_order(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "graveyard")))[0] == 201
    created = node.ask(  # not durable: a durable one's messages go in one pass (the docs)
        entity("CREATE", "doomed"),
        {"alternateBinding": {"destination": "graveyard"}, "durable": False},
    )
    assert status(created)[0] == 201

    def mark(name: str, body: str) -> None:
        data = bytes(Message(body=body).encode())
        broker.call(lambda: broker.broker.queues[name].enqueue(parse_message(data)))

    mark("doomed", "first")
    fill(broker, "doomed", DEEP)
    mark("doomed", "last")
    reply, worst = while_watched(broker, lambda: node.ask(entity("DELETE", "doomed", force=True)))
    assert status(reply)[0] in (200, 204) and worst < BOUND
    assert status(node.ask(entity("CREATE", "doomed")))[0] == 201  # while the old one clears
    mark("doomed", "new")
    graveyard = broker.call(lambda: broker.broker.queues["graveyard"])
    deadline = time.monotonic() + 30
    while broker.call(lambda: graveyard.depth) < DEEP + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.call(lambda: graveyard.depth) == DEEP + 2
    first, last = broker.call(lambda: (graveyard.peek(1), graveyard.listed(DEEP + 1, 1)))
    assert body_of(first[0][2]) == "first" and body_of(last[0][1]) == "last"
    new = broker.call(lambda: broker.broker.queues["doomed"])
    assert broker.call(lambda: (new.depth, body_of(new.peek(1)[0][2]))) == (1, "new")
