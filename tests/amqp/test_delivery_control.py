"""Queue-level delivery control over AMQP: non-destructive consumers and the TTL bounds."""

from __future__ import annotations

import time

from proton import Message, Terminus

from tests.amqp.test_disposition import depth
from tests.conftest import RunningBroker


def test_with_ensure_nondestructive_consumers_every_consumer_browses(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("history", node_properties={"ensureNondestructiveConsumers": True})
    for i in range(3):
        client.wait_settled(client.send(sender, Message(body=i), pump=False))
    first = client.receiver("history", credit=10)  # asked for move: gets copy
    second = client.receiver("history", credit=10)
    assert [r.message.body for r in client.wait_received(first, 3)] == [0, 1, 2]
    assert [r.message.body for r in client.wait_received(second, 3)] == [0, 1, 2]
    assert first.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    assert depth(broker, "history") == 3


def test_a_maximum_ttl_bounds_messages_that_have_none(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("bounded", node_properties={"maximumMessageTtl": 300})
    client.wait_settled(client.send(sender, Message(body="forever?"), pump=False))
    time.sleep(0.6)
    receiver = client.receiver("bounded", credit=10)
    client.pump(0.5)
    assert client.received(receiver) == []
    client.wait(lambda: depth(broker, "bounded") == 0)


def test_a_minimum_ttl_lengthens_a_short_one(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("floored", node_properties={"minimumMessageTtl": 5000})
    client.wait_settled(client.send(sender, Message(body="kept", ttl=0.1), pump=False))
    time.sleep(0.6)  # well past its own 100 ms
    receiver = client.receiver("floored", credit=10)
    assert [r.message.body for r in client.wait_received(receiver, 1)] == ["kept"]
