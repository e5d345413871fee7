"""Duplicate detection over AMQP: a message whose message-id the queue saw within its window
is answered accepted and not enqueued; the options come from wherever queue options do; on
a durable queue the window survives a restart and a kill."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from proton import Disposition, Message

from proton_broker.config import Config
from proton_broker.testing import BrokerProcess
from tests.amqp.test_durability import Restartable, brokers, drain  # noqa: F401
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

WINDOW = {"duplicateDetectionCount": 100}
DURABLE_WINDOW = {"durable": True, "duplicate_detection_seconds": 3600}


def send_ids(
    client: EngineClient,
    sender,
    ids: list[object],  # type: ignore[no-untyped-def]
    durable: bool = False,
) -> list[object]:
    """Send one message per id (body = its position) unsettled; the outcomes, in order."""
    deliveries = [
        client.send(sender, Message(id=i, body=n, durable=durable), pump=False)
        for n, i in enumerate(ids)
    ]
    return [client.wait_settled(d).remote_state for d in deliveries]


def stat(broker: RunningBroker, name: str, what: str) -> int:
    return broker.call(lambda: getattr(broker.broker.queues[name].stats, what))


def test_a_duplicate_is_accepted_but_not_enqueued(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("dedupe", node_properties=WINDOW)
    outcomes = send_ids(client, sender, ["a", "b", "a", "c", "b"])
    assert outcomes == [Disposition.ACCEPTED] * 5
    assert drain(broker, "dedupe", 3) == [0, 1, 3]
    assert stat(broker, "dedupe", "duplicates") == 2


def test_messages_without_an_id_are_all_enqueued(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("no-ids", node_properties=WINDOW)
    for body in range(3):
        client.wait_settled(client.send(sender, Message(body=body), pump=False))
    assert drain(broker, "no-ids", 3) == [0, 1, 2]
    assert stat(broker, "no-ids", "duplicates") == 0


def test_the_options_may_come_in_a_consumers_source_properties(broker: RunningBroker) -> None:
    client = broker.client()
    client.receiver("declared-by-consumer", node_properties={"duplicate_detection_count": 1})
    sender = client.sender("declared-by-consumer")
    send_ids(client, sender, ["x", "x", "y", "x"])
    assert drain(broker, "declared-by-consumer", 3) == [0, 2, 3]  # y pushed x out


def test_a_bad_window_option_refuses_the_attach_and_creates_nothing(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("bad-window", node_properties={"duplicateDetectionSeconds": 0})
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:invalid-field"
    assert "duplicateDetectionSeconds" in sender.remote_condition.description
    assert "bad-window" not in broker.broker.queues


def test_a_queue_from_the_config_file_detects_duplicates(tmp_path: Path) -> None:
    config = Config()
    config.broker.data_dir = str(tmp_path / "data")
    config.queues = {"configured": {"duplicateDetectionCount": 10}}
    broker = RunningBroker(config)
    try:
        client = broker.client()
        send_ids(client, client.sender("configured"), [1, 1, 2])
        assert drain(broker, "configured", 2) == [0, 2]
    finally:
        broker.stop()


def test_a_duplicate_inside_a_transaction_is_dropped_at_commit(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("txn-dedupe", node_properties=WINDOW)
    send_ids(client, sender, ["once"])
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    client.send(sender, Message(id="once", body="retry"), txn=txn)
    client.send(sender, Message(id="new", body="new"), txn=txn)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert drain(broker, "txn-dedupe", 2) == [0, "new"]


def test_durable_duplicates_are_recognised_after_a_restart(brokers: Restartable) -> None:  # noqa: F811
    broker = brokers.start()
    client = broker.client()
    sender = client.sender("kept-window", node_properties=DURABLE_WINDOW)
    send_ids(client, sender, ["a", "b"], durable=True)
    assert drain(broker, "kept-window", 2) == [0, 1]  # consumed: only the window knows them
    broker = brokers.restart()
    client = broker.client()
    sender = client.sender("kept-window")
    outcomes = send_ids(client, sender, ["a", "c", "b"], durable=True)
    assert outcomes == [Disposition.ACCEPTED] * 3
    assert drain(broker, "kept-window", 1) == [1]  # only c, sent second
    assert stat(broker, "kept-window", "duplicates") == 2


def test_two_durable_copies_in_flight_at_once_leave_one_on_the_queue_and_in_the_store(
    brokers: Restartable,  # noqa: F811
) -> None:
    broker = brokers.start()
    client = broker.client()
    first = client.sender("racing", node_properties=DURABLE_WINDOW)
    second = client.sender("racing")
    one = client.send(first, Message(id="same", body="first", durable=True), pump=False)
    two = client.send(second, Message(id="same", body="second", durable=True), pump=False)
    assert client.wait_settled(one).remote_state == Disposition.ACCEPTED
    assert client.wait_settled(two).remote_state == Disposition.ACCEPTED
    assert broker.call(lambda: broker.broker.queues["racing"].depth) == 1
    broker = brokers.restart()
    assert drain(broker, "racing", 1) == ["first"]


def test_a_retry_after_the_broker_is_killed_is_still_recognised(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with BrokerProcess(data_dir=data) as broker:
        client = EngineClient(broker.host, broker.port)
        sender = client.sender("crash-window", node_properties=DURABLE_WINDOW)
        assert send_ids(client, sender, ["m1", "m2"], durable=True) == [Disposition.ACCEPTED] * 2
        receiver = client.receiver("crash-window", credit=10)
        for received in client.wait_received(receiver, 2):
            client.settle(received)
        client.pump(0.5)  # the consumer's accepts reach the disk
        os.kill(broker.pid, signal.SIGKILL)
        broker.proc.wait()  # type: ignore[union-attr]
    with BrokerProcess(data_dir=data) as broker:
        client = EngineClient(broker.host, broker.port)
        sender = client.sender("crash-window")
        assert (
            send_ids(client, sender, ["m1", "m2", "m3"], durable=True) == [Disposition.ACCEPTED] * 3
        )
        receiver = client.receiver("crash-window", credit=10)
        client.wait_received(receiver, 1)
        client.pump(0.5)
        assert [r.message.body for r in client.received(receiver)] == [2]  # m3 alone
        client.close()
