"""Prefetch (Broker-J 4.7.6): once a message is sent to a consumer its place is fixed, so
credit decides how exactly a consumer sees priority order."""

from __future__ import annotations

from proton import Message

from tests.conftest import RunningBroker


def _attach_then_send(broker: RunningBroker, queue: str, credit: int):  # type: ignore[no-untyped-def]
    client = broker.client()
    sender = client.sender(queue, node_properties={"x-qpid-priorities": 10})
    consumer = client.receiver(queue, credit=credit)
    for body, priority in [("low-1", 1), ("low-2", 1), ("high", 9)]:
        client.wait_settled(client.send(sender, Message(body=body, priority=priority), pump=False))
    return client, consumer


def test_with_credit_one_the_consumer_sees_exact_priority_order(broker: RunningBroker) -> None:
    client, consumer = _attach_then_send(broker, "prefetch-one", credit=1)
    order = []
    for count in range(1, 4):
        received = client.wait_received(consumer, count)[-1]
        order.append(received.message.body)
        client.settle(received)
        consumer.flow(1)
    assert order == ["low-1", "high", "low-2"]


def test_with_a_large_credit_messages_go_out_as_they_arrive(broker: RunningBroker) -> None:
    client, consumer = _attach_then_send(broker, "prefetch-many", credit=100)
    got = client.wait_received(consumer, 3)
    assert [r.message.body for r in got] == ["low-1", "low-2", "high"]
