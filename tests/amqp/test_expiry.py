"""Message TTL: expired messages are never delivered and are dropped without a scan."""

from __future__ import annotations

import time

from proton import Disposition, Message

from tests.amqp.test_disposition import depth
from tests.conftest import RunningBroker


def test_a_message_whose_ttl_passed_is_never_delivered(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("ttl")
    client.wait_settled(client.send(sender, Message(body="short", ttl=0.1), pump=False))
    client.wait_settled(client.send(sender, Message(body="long", ttl=60), pump=False))
    time.sleep(0.3)
    receiver = client.receiver("ttl", credit=5)
    got = client.wait_received(receiver, 1)
    client.pump(0.2)
    assert [r.message.body for r in got] == ["long"]


def test_a_message_past_its_absolute_expiry_time_is_never_delivered(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("abs-expiry")
    past = Message(body="old")
    past.expiry_time = time.time() - 1
    client.wait_settled(client.send(sender, past, pump=False))
    client.wait_settled(client.send(sender, Message(body="new"), pump=False))
    receiver = client.receiver("abs-expiry", credit=5)
    got = client.wait_received(receiver, 1)
    client.pump(0.2)
    assert [r.message.body for r in got] == ["new"]


def test_expired_messages_leave_the_queue_even_with_no_consumer(broker: RunningBroker) -> None:
    broker.config.broker.expiry_interval = 0.1
    client = broker.client()
    sender = client.sender("ttl-sweep")
    for _ in range(3):
        client.send(sender, Message(body="x", ttl=0.1))
    client.wait(lambda: depth(broker, "ttl-sweep") == 0, timeout=5)
    assert broker.call(lambda: broker.broker.queues["ttl-sweep"].stats.expired) == 3


def test_a_browser_does_not_see_expired_messages(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("ttl-browse")
    client.wait_settled(client.send(sender, Message(body="gone", ttl=0.05), pump=False))
    client.wait_settled(client.send(sender, Message(body="here"), pump=False))
    time.sleep(0.2)
    browser = client.receiver("ttl-browse", credit=5, browse=True)
    got = client.wait_received(browser, 1)
    client.pump(0.2)
    assert [r.message.body for r in got] == ["here"]


def test_a_delivery_carries_the_time_to_live_left_as_both_qpid_brokers_send_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("left")
    client.wait_settled(client.send(sender, Message(body="m", ttl=30.0), pump=False))
    time.sleep(1.0)
    receiver = client.receiver("left", credit=5)
    (first,) = client.wait_received(receiver, 1)
    assert 27.0 <= first.message.ttl <= 29.1  # about a second spent here (Proton: seconds)
    assert first.message.delivery_count == 0
    time.sleep(0.5)
    client.settle(first, Disposition.MODIFIED, failed=True)
    again = client.wait_received(receiver, 2)[1]
    assert again.message.ttl <= first.message.ttl - 0.4
    assert again.message.delivery_count == 1
