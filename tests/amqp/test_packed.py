"""Over AMQP, a deep queue that packs its newest messages (queue.pack_after) hands out,
browses and keeps exactly what a queue that never packs would."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from proton_broker.config import Config
from tests.amqp.test_durability import DURABLE, drain, send_all
from tests.conftest import RunningBroker

SEQUENCE_NUMBER = "x-opt-sequence-number"


@pytest.fixture
def broker_config() -> Config:
    config = Config()
    config.queue.pack_after = 10
    return config


def packed(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: len(broker.broker.queues[name]._packed))


def test_a_browser_and_then_a_consumer_see_every_packed_message_in_order(
    broker: RunningBroker,
) -> None:
    send_all(broker, "deep", [Message(body=i) for i in range(300)])
    assert packed(broker, "deep") == 290  # all but the first ten
    client = broker.client()
    browser = client.receiver("deep", credit=300, browse=True)
    browsed = client.wait_received(browser, 300)
    assert [r.message.body for r in browsed] == list(range(300))
    assert [r.message.annotations[SEQUENCE_NUMBER] for r in browsed] == list(range(1, 301))
    assert drain(broker, "deep", 300) == list(range(300))
    assert broker.call(lambda: broker.broker.queues["deep"].depth) == 0


def test_durable_messages_among_packed_ones_keep_their_place_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    config = Config()
    config.queue.pack_after = 10
    config.broker.data_dir = str(tmp_path / "data")
    messages = [Message(body=i, durable=i % 7 == 0) for i in range(100)]
    broker = RunningBroker(config)
    try:
        send_all(broker, "mixed", messages, DURABLE)
        send_all(broker, "mixed-2", messages, DURABLE)
        assert drain(broker, "mixed", 100) == list(range(100))
    finally:
        broker.stop()
    broker = RunningBroker(config)
    try:
        assert drain(broker, "mixed-2", 15) == list(range(0, 100, 7))
    finally:
        broker.stop()
