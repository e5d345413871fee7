"""broker.max_history_memory over AMQP: what sequence histories hold beyond their queues is
bounded, the oldest is forgotten first, and a forgotten key's numbers are never given out
again, across a restart too (docs/sequence-history.md, "History memory")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Disposition, Message

from proton_broker.config import Config
from proton_broker.queues.history import History
from tests.amqp.test_durability import Restartable
from tests.amqp.test_sequence import LVQ, SEQUENCE, replay_receiver, seen
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

LIMIT = 40_000  # bytes: about 80 consumed versions of the messages below
KEYED_DURABLE = {"sequenceKey": "id", "durable": True}


def small_history(config: Config) -> None:
    config.broker.max_history_memory = LIMIT


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Restartable]:
    made = Restartable(tmp_path / "data", small_history)
    yield made
    if made.current is not None:
        made.current.stop()


def floor(broker: RunningBroker, queue: str) -> int:
    """The highest number ``queue``'s history has forgotten."""

    def read() -> int:
        history: History | None = broker.broker.queues[queue].history
        assert history is not None
        return history.floor

    return broker.call(read)


def used(broker: RunningBroker) -> int:
    return broker.call(lambda: broker.broker.loop_hooks.history_budget.used)


def send_and_consume(
    client: EngineClient,
    address: str,
    keys: list[str],
    node: dict[str, object],
    waiting: int = 0,
    release: str | None = None,
) -> list[int]:
    """Send a version of each key (durable) and consume them all, and the ``waiting``
    messages queued before them (those of key ``release`` are released, back to the
    queue, the rest accepted); the numbers delivered."""
    sender = client.sender(address, node_properties=node)
    sent = [
        client.send(
            sender, Message(body="v" * 100, durable=True, properties={"id": key}), pump=False
        )
        for key in keys
    ]
    client.wait(lambda: all(each.remote_state for each in sent))
    receiver = client.receiver(address, credit=len(keys) + waiting, node_properties=node)
    got = client.wait_received(receiver, len(keys) + waiting)
    for each in got:
        kept = each.message.properties["id"] == release
        client.settle(each, Disposition.RELEASED if kept else Disposition.ACCEPTED, pump=False)
    receiver.close()
    client.wait_closed(receiver)
    return [each.message.annotations[SEQUENCE] for each in got]


def test_new_keys_on_a_last_value_queue_are_forgotten_oldest_first_within_the_limit(
    brokers: Restartable,
) -> None:
    broker = brokers.start()
    client = broker.client()
    keys = [f"k{i:04}" for i in range(600)]
    for batch in range(0, len(keys), 100):
        send_and_consume(client, "prices", keys[batch : batch + 100], LVQ)
        assert used(broker) <= LIMIT
    replay = replay_receiver(client, "prices", "first", credit=1000)
    client.pump(0.3)
    kept = [each.message.properties["id"] for each in client.received(replay)]
    assert 60 < len(kept) <= 80
    assert set(kept) <= set(keys[-100:])  # what left the queue last: the last batch's
    forgotten = floor(broker, "prices")
    assert forgotten >= 1
    # k0000 was forgotten: its next value is numbered above every number forgotten
    assert send_and_consume(client, "prices", ["k0000"], LVQ) == [forgotten + 1]
    client.wait_received(replay, len(kept) + 1)
    assert seen(client, replay)[-1][1] == forgotten + 1
    broker.call(lambda: broker.broker.delete_queue("prices", force=True))
    assert used(broker) == 0  # a deleted queue's history gives back what it held


def test_a_forgotten_key_is_never_numbered_again_below_its_floor_after_a_restart(
    brokers: Restartable,
) -> None:
    broker = brokers.start()
    client = broker.client()
    # "old": version 1 stays on the queue (released), version 2 is consumed
    sender = client.sender("keyed", node_properties=KEYED_DURABLE)
    for _ in range(2):
        message = Message(body="o", durable=True, properties={"id": "old"})
        client.wait_settled(client.send(sender, message, pump=False))
    receiver = client.receiver("keyed", credit=2, node_properties=KEYED_DURABLE)
    first, second = client.wait_received(receiver, 2)
    client.settle(second)
    client.settle(first, Disposition.RELEASED)
    receiver.close()
    client.wait_closed(receiver)
    # new keys, consumed, push "old" out of the history; its version 1 stays queued
    others = [f"n{i:03}" for i in range(200)]
    for batch in range(0, len(others), 50):
        keys = others[batch : batch + 50]
        send_and_consume(client, "keyed", keys, KEYED_DURABLE, waiting=1, release="old")
    forgotten = floor(broker, "keyed")
    assert forgotten >= 2
    rows = broker.call(
        lambda: broker.broker.store._db.execute(  # type: ignore[union-attr]
            "SELECT COUNT(*) FROM sequences WHERE key = 'old'"
        ).fetchone()[0]
    )
    assert rows == 0  # its number row went with it

    held = used(broker)
    broker = brokers.restart()
    client = broker.client()
    assert used(broker) == held  # the consumed versions kept came back, counted again
    assert broker.call(lambda: broker.broker.queues["keyed"].depth) == 1  # "old" 1 is back
    numbers = send_and_consume(client, "keyed", ["old", "brand-new"], KEYED_DURABLE, waiting=1)
    assert sorted(numbers)[0] == 1  # the stored version 1 of "old", as it was numbered
    assert sorted(numbers)[1:] == [
        forgotten + 1,
        forgotten + 1,
    ]  # never 2 again, nor below the floor
