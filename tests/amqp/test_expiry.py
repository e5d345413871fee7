"""Message TTL: expired messages are never delivered and are dropped without a scan."""

from __future__ import annotations

import time

from proton import Disposition, Message

from tests.amqp.canary import Canary, fill
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


def test_messages_expiring_together_leave_in_slices_while_other_clients_are_served(
    broker: RunningBroker,
) -> None:
    """As qpidd's maxPurgeBatch: the sweep drops 1000 a loop turn, not 200,000 in one go
    (a stall of about a second before), the packed tail of the deep queue unpacked in
    slices too."""
    canary = Canary(broker)
    broker.client().sender("expiring")  # the queue
    fill(broker, "expiring", 200_000, Message(body="x" * 20, ttl=1.0), now=time.time())
    worst = canary.worst_round_trip(2.5)
    assert depth(broker, "expiring") == 0
    assert broker.call(lambda: broker.broker.queues["expiring"].stats.expired) == 200_000
    assert worst < 0.5, f"a round trip took {worst:.2f} s while messages expired"


def test_a_message_that_expired_while_held_is_dropped_once_released_and_not_before(
    broker: RunningBroker,
) -> None:
    """The sweep lets go of a held message whose time passed (it looked at every one on
    every sweep) and tracks it again when it comes back."""
    broker.config.broker.expiry_interval = 0.1
    client = broker.client()
    sender = client.sender("held-ttl")
    client.wait_settled(client.send(sender, Message(body="held", ttl=0.2), pump=False))
    receiver = client.receiver("held-ttl", credit=1)
    (held,) = client.wait_received(receiver, 1)
    client.pump(0.5)  # a few sweeps past its time
    assert depth(broker, "held-ttl") == 1  # never expired under its consumer
    client.settle(held, Disposition.RELEASED)
    client.wait(lambda: depth(broker, "held-ttl") == 0, timeout=5)
    assert broker.call(lambda: broker.broker.queues["held-ttl"].stats.expired) == 1
