"""What the HTTP gateway and the web console put on a queue is written first when the queue
keeps it (its messageDurability, docs/durability.md), and comes back after a restart; the
answer waits for the write."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path

import pytest
from proton.utils import BlockingConnection

from proton_broker.config import Config
from tests.amqp.test_durability import Restartable
from tests.conftest import RunningBroker
from tests.http.conftest import Http
from tests.http.console_client import ConsoleClient, queue_path

KEEPS_ALL = {"durable": True, "messageDurability": "ALWAYS"}


def with_gateway(config: Config) -> None:
    """The broker's gateway on a free port (the console with it), and a SQLite store."""
    config.http.enabled, config.http.port = True, 0


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Restartable]:
    made = Restartable(tmp_path / "data", configure=with_gateway)
    yield made
    if made.current is not None:
        made.current.stop()


def received(running: RunningBroker, queue: str, count: int) -> list[object]:
    conn = BlockingConnection(running.url, timeout=10)
    try:
        receiver = conn.create_receiver(queue)
        bodies = [receiver.receive(timeout=5).body for _ in range(count)]
        receiver.accept()
        return bodies
    finally:
        conn.close()


def test_the_gateways_send_to_a_queue_that_keeps_every_message_survives_a_restart(
    brokers: Restartable,
) -> None:
    http = Http(brokers.start())
    keyed = {**KEEPS_ALL, "sequenceKey": "id"}
    http.running.call(lambda: http.running.broker.declare("prices", keyed))
    status, body = http.send("prices", {"id": "k", "payload": "kept"})
    assert status == 200 and body["sequence"] == 1
    http = Http(brokers.restart())
    assert http.poll("prices", "sequence=first", key="k") == (
        200,
        {"id": "k", "sequence": 1, "payload": "kept"},
    )


def test_the_consoles_test_messages_are_kept_when_durable_or_when_the_queue_keeps_all(
    brokers: Restartable,
) -> None:
    http = Http(brokers.start())
    console = ConsoleClient(http.base)
    console.login()
    made = {"name": "audit", "options": KEEPS_ALL}
    assert console.change("POST", "/console/api/queues", made)[0] == 201
    plain = {"name": "orders", "options": {"durable": True}}
    assert console.change("POST", "/console/api/queues", plain)[0] == 201
    for queue, message in (
        ("audit", {"body": "not durable"}),
        ("orders", {"body": "durable", "durable": True}),
        ("orders", {"body": "not kept"}),
    ):
        assert console.change("POST", queue_path(queue, "/messages"), message)[0] == 201
    http = Http(brokers.restart())
    assert received(http.running, "audit", 1) == ["not durable"]
    assert received(http.running, "orders", 1) == ["durable"]
    assert http.running.call(lambda: http.running.broker.queues["orders"].depth) == 0


def test_concurrent_sends_of_one_key_are_each_answered_with_the_sequence_they_got(
    brokers: Restartable,
) -> None:
    http = Http(brokers.start())
    keyed = {**KEEPS_ALL, "sequenceKey": "id"}
    http.running.call(lambda: http.running.broker.declare("ticks", keyed))
    threads, each = 6, 10

    def sends(thread: int) -> list[tuple[str, int]]:
        answers = []
        for n in range(each):
            status, body = http.send("ticks", {"id": "k", "payload": f"{thread}-{n}"})
            assert status == 200
            answers.append((body["payload"], body["sequence"]))
        return answers

    with ThreadPoolExecutor(threads) as pool:
        answered = dict(chain.from_iterable(pool.map(sends, range(threads))))
    assert sorted(answered.values()) == list(range(1, threads * each + 1))
    for payload, sequence in answered.items():  # the version kept under that number
        assert http.poll("ticks", f"sequence={sequence}", key="k")[1]["payload"] == payload
