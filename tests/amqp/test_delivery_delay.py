"""Delivery delay as Qpid JMS sends it: the broker offers DELAYED_DELIVERY, a message with
``x-opt-delivery-time`` (or ``x-opt-delivery-delay``) reaches nobody before its time, messages
without one pass it, and a durable delayed message keeps its time across a restart."""

from __future__ import annotations

import time
from pathlib import Path

from proton import Disposition, Message, symbol

from tests.amqp.canary import Canary, fill
from tests.amqp.test_durability import Restartable
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

JMS_TYPE = {symbol("x-opt-jms-msg-type"): 5}  # every Qpid JMS message carries one


def jms_message(body: str, delay_ms: int | None = None, durable: bool = False) -> Message:
    """What Qpid JMS sends for producer.setDeliveryDelay(delay_ms): the absolute time."""
    annotations = dict(JMS_TYPE)
    if delay_ms is not None:
        annotations[symbol("x-opt-delivery-time")] = int(time.time() * 1000) + delay_ms
    return Message(body=body, annotations=annotations, durable=durable)


def send(client: EngineClient, address: str, *messages: Message) -> None:
    sender = client.sender(address)
    for message in messages:
        assert client.wait_settled(client.send(sender, message, pump=False)).remote_state == (
            Disposition.ACCEPTED
        )


def bodies(client: EngineClient, link) -> list:
    return [r.message.body for r in client.received(link)]


def test_the_broker_offers_delayed_delivery(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.remote_offered_capabilities)
    assert "DELAYED_DELIVERY" in {str(c) for c in client.conn.remote_offered_capabilities}


def test_a_delayed_message_waits_and_messages_without_a_delay_pass_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    send(client, "jobs", jms_message("delayed", delay_ms=1500), jms_message("at once"))
    receiver = client.receiver("jobs", credit=10)
    client.wait_received(receiver, 1)
    client.pump(0.5)
    assert bodies(client, receiver) == ["at once"]
    client.wait_received(receiver, 2, timeout=5)
    assert bodies(client, receiver) == ["at once", "delayed"]


def test_a_relative_delivery_delay_is_honoured_too(broker: RunningBroker) -> None:
    client = broker.client()
    late = Message(body="late", annotations={symbol("x-opt-delivery-delay"): 800})
    send(client, "relative", late)
    receiver = client.receiver("relative", credit=10)
    client.pump(0.4)
    assert bodies(client, receiver) == []
    client.wait_received(receiver, 1, timeout=5)
    assert bodies(client, receiver) == ["late"]


def test_a_delivery_time_that_is_no_number_goes_at_once_and_stalls_no_other(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    odd = Message(body="nan", annotations={symbol("x-opt-delivery-time"): float("nan")})
    send(client, "odd", jms_message("soon", delay_ms=300), odd, jms_message("later", 600))
    receiver = client.receiver("odd", credit=10)
    client.wait_received(receiver, 3, timeout=5)
    assert bodies(client, receiver) == ["nan", "soon", "later"]


def test_a_browser_does_not_see_a_delayed_message_before_its_time(broker: RunningBroker) -> None:
    client = broker.client()
    send(client, "peek", jms_message("delayed", delay_ms=60_000))
    browser = client.receiver("peek", credit=10, browse=True)
    client.pump(0.5)
    assert bodies(client, browser) == []
    assert broker.call(lambda: broker.broker.queues["peek"].depth) == 1


def test_a_durable_delayed_message_keeps_its_time_across_a_restart(tmp_path: Path) -> None:
    brokers = Restartable(tmp_path / "data")
    first = brokers.start()
    try:
        client = first.client()
        sender = client.sender("durable-jobs", node_properties={"durable": True})
        delivery = client.send(sender, jms_message("kept", delay_ms=2500, durable=True))
        assert client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
    finally:
        first.stop()
    second = brokers.start()
    try:
        client = second.client()
        receiver = client.receiver("durable-jobs", credit=10)
        client.pump(0.3)
        assert bodies(client, receiver) == []  # still early after the restart
        client.wait_received(receiver, 1, timeout=6)
        assert bodies(client, receiver) == ["kept"]
    finally:
        second.stop()


def test_messages_due_at_one_instant_are_released_in_slices_while_other_clients_are_served(
    broker: RunningBroker,
) -> None:
    """1000 a loop turn, as qpidd's maxPurgeBatch, not 400,000 in one go (a stall of half
    a second before; they take less work than expiring ones, hence the tighter bound)."""
    canary = Canary(broker)
    broker.client().sender("due-together")  # the queue
    due = time.time() + 5.0  # after the queue is filled
    when = {symbol("x-opt-delivery-time"): int(due * 1000)}
    fill(broker, "due-together", 400_000, Message(body="x" * 20, annotations=when), time.time())
    queue = broker.broker.queues["due-together"]
    assert broker.call(queue.available_count) == 0
    worst = canary.worst_round_trip(due - time.time() + 1.0)
    assert broker.call(queue.available_count) == 400_000
    assert worst < 0.25, f"a round trip took {worst:.2f} s while messages became due"
