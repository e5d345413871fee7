"""Durable queues and messages over AMQP, across a restart of the broker (same data dir).

The promise: a durable message sent unsettled to a durable queue is on disk once the broker
answers accepted; a message a consumer accepted does not come back."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proton import Disposition, Message

from proton_broker.config import Config
from proton_broker.store.sqlite import FILE_NAME
from tests.conftest import RunningBroker

DURABLE = {"durable": True}


class Restartable:
    """Brokers run one after another on the same data directory."""

    def __init__(self, data_dir: Path, configure: Callable[[Config], object] | None = None) -> None:
        self.data_dir = data_dir
        self.configure = configure  # changes every broker's config from the defaults
        self.current: RunningBroker | None = None

    def start(self) -> RunningBroker:
        config = Config()
        config.broker.data_dir = str(self.data_dir)
        if self.configure is not None:
            self.configure(config)
        self.current = RunningBroker(config)
        return self.current

    def restart(self) -> RunningBroker:
        assert self.current is not None
        self.current.stop()
        return self.start()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Restartable]:
    made = Restartable(tmp_path / "data")
    yield made
    if made.current is not None:
        made.current.stop()


def send_all(
    broker: RunningBroker,
    address: str,
    messages: list[Message],
    node_properties: dict | None = None,
) -> None:
    client = broker.client()
    sender = client.sender(address, node_properties=node_properties)
    deliveries = [client.send(sender, m, pump=False) for m in messages]
    for delivery in deliveries:
        assert client.wait_settled(delivery).remote_state == Disposition.ACCEPTED


def drain(broker: RunningBroker, address: str, expect: int) -> list:
    client = broker.client()
    receiver = client.receiver(address, credit=max(expect, 1) + 10)
    got = client.wait_received(receiver, expect) if expect else []
    client.pump(0.3)
    got = client.received(receiver)
    client.settle_all(got)
    return [r.message.body for r in got]


def test_durable_messages_on_a_durable_queue_survive_a_restart(brokers: Restartable) -> None:
    broker = brokers.start()
    send_all(broker, "orders", [Message(body=i, durable=True) for i in range(5)], DURABLE)
    broker = brokers.restart()
    assert broker.call(lambda: broker.broker.queues["orders"].settings.durable)
    assert drain(broker, "orders", 5) == [0, 1, 2, 3, 4]


def test_non_durable_messages_and_non_durable_queues_are_not_kept(brokers: Restartable) -> None:
    broker = brokers.start()
    send_all(
        broker, "mixed", [Message(body="transient"), Message(body="kept", durable=True)], DURABLE
    )
    send_all(broker, "scratch", [Message(body="gone", durable=True)])
    broker = brokers.restart()
    assert drain(broker, "mixed", 1) == ["kept"]
    assert not broker.call(lambda: "scratch" in broker.broker.queues)


def test_a_message_a_consumer_accepted_does_not_come_back(brokers: Restartable) -> None:
    broker = brokers.start()
    send_all(broker, "work", [Message(body=i, durable=True) for i in range(4)], DURABLE)
    assert drain(broker, "work", 4) == [0, 1, 2, 3]  # received and accepted
    broker = brokers.restart()
    assert drain(broker, "work", 0) == []


def test_stored_messages_of_a_queue_the_store_no_longer_has_are_removed_at_start_up(
    brokers: Restartable, caplog: pytest.LogCaptureFixture
) -> None:
    broker = brokers.start()
    send_all(broker, "kept", [Message(body="kept", durable=True)], DURABLE)
    broker.stop()
    with sqlite3.connect(brokers.data_dir / FILE_NAME) as db:  # as a broker before the fix left
        db.execute("UPDATE messages SET queue = 'deleted'")  # one (its queue was deleted)
        db.execute(
            "INSERT INTO messages SELECT id + 1, queue, arrival, crc, data, number FROM messages"
        )
        db.execute("UPDATE messages SET queue = 'kept' WHERE id = (SELECT min(id) FROM messages)")
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        broker = brokers.start()
    said = "MST-1015 : 1 messages of queue 'deleted', which was deleted before they were written"
    assert said in caplog.text
    send_all(broker, "deleted", [Message(body="new", durable=True)], DURABLE)  # a new queue
    broker = brokers.restart()
    assert drain(broker, "deleted", 1) == ["new"]
    assert drain(broker, "kept", 1) == ["kept"]


def test_queue_types_and_their_order_are_recovered(brokers: Restartable) -> None:
    broker = brokers.start()
    send_all(
        broker,
        "prio",
        [Message(body=f"p{p}", priority=p, durable=True) for p in (1, 9, 4)],
        {**DURABLE, "qpid.priorities": 10},
    )
    send_all(
        broker,
        "lvq",
        [
            Message(body=v, properties={"k": k}, durable=True)
            for k, v in [("a", 1), ("b", 2), ("a", 3)]
        ],
        {**DURABLE, "qpid.last_value_queue_key": "k"},
    )
    broker = brokers.restart()
    assert drain(broker, "prio", 3) == ["p9", "p4", "p1"]
    assert drain(broker, "lvq", 2) == [2, 3]


def test_a_durable_queue_keeps_its_settings_across_a_restart(brokers: Restartable) -> None:
    broker = brokers.start()
    broker.client().sender(
        "settings", node_properties={**DURABLE, "qpid.max_count": 7, "qpid.policy_type": "ring"}
    )
    broker = brokers.restart()
    settings = broker.call(lambda: broker.broker.queues["settings"].settings)
    assert (settings.max_count, settings.overflow_policy) == (7, "ring")
