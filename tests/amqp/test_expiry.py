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


def test_the_absolute_expiry_time_is_not_read_only_the_ttl_expires_a_message(
    broker: RunningBroker,
) -> None:
    """As both Qpid brokers: ``absolute-expiry-time`` is the producer's clock's (Qpid JMS
    sets it beside the ttl), so a producer whose clock runs behind loses nothing."""
    client = broker.client()
    sender = client.sender("abs-expiry")
    skewed = Message(body="skewed clock", ttl=60)
    skewed.expiry_time = time.time() - 10
    no_ttl = Message(body="no ttl")
    no_ttl.expiry_time = time.time() - 10
    expiring = Message(body="ttl passed", ttl=0.05)
    expiring.expiry_time = time.time() + 60
    for message in (skewed, no_ttl, expiring):
        client.wait_settled(client.send(sender, message, pump=False))
    time.sleep(0.2)
    receiver = client.receiver("abs-expiry", credit=5)
    got = client.wait_received(receiver, 2)
    client.pump(0.2)
    assert [r.message.body for r in got] == ["skewed clock", "no ttl"]
    assert got[0].message.expiry_time == skewed.expiry_time  # passed on as sent


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
