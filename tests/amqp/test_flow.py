"""Flow: credit is honoured exactly, shared round-robin, and drain is answered at once."""

from __future__ import annotations

from proton import Message

from tests.conftest import RunningBroker


def fill(broker: RunningBroker, address: str, count: int) -> None:
    client = broker.client()
    sender = client.sender(address)
    for i in range(count):
        client.send(sender, Message(body=i))
    client.wait(lambda: broker.call(lambda: broker.broker.queues[address].depth) == count)


def test_a_consumer_never_receives_more_than_its_credit(broker: RunningBroker) -> None:
    fill(broker, "credit", 10)
    client = broker.client()
    receiver = client.receiver("credit", credit=3)
    client.wait_received(receiver, 3)
    client.pump(0.3)
    assert len(client.received(receiver)) == 3
    receiver.flow(2)
    client.wait_received(receiver, 5)
    client.pump(0.3)
    assert len(client.received(receiver)) == 5


def test_a_consumer_with_no_credit_receives_nothing(broker: RunningBroker) -> None:
    fill(broker, "nocredit", 2)
    client = broker.client()
    receiver = client.receiver("nocredit", credit=0)
    client.pump(0.3)
    assert client.received(receiver) == []


def test_consumers_with_credit_share_messages_round_robin(broker: RunningBroker) -> None:
    client = broker.client()
    first = client.receiver("rr", credit=100)
    second = client.receiver("rr", credit=100)
    sender = client.sender("rr")
    for i in range(10):
        client.send(sender, Message(body=i))
    client.wait(lambda: len(client.received(first)) + len(client.received(second)) == 10)
    assert len(client.received(first)) == 5
    assert len(client.received(second)) == 5


def test_drain_sends_what_is_available_then_zeroes_the_credit(broker: RunningBroker) -> None:
    fill(broker, "drain", 2)
    client = broker.client()
    receiver = client.receiver("drain", credit=0)
    receiver.drain(10)
    client.wait(lambda: not receiver.draining() and len(client.received(receiver)) == 2)
    assert receiver.credit == 0
    assert [r.message.body for r in client.received(receiver)] == [0, 1]


def test_drain_on_an_empty_queue_is_answered_promptly(broker: RunningBroker) -> None:
    client = broker.client()
    receiver = client.receiver("drain-empty", credit=0)
    receiver.drain(5)
    client.wait(lambda: not receiver.draining(), timeout=2)
    assert receiver.credit == 0
    assert client.received(receiver) == []


def test_producers_are_granted_generous_credit(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("credit-for-producers")
    client.wait(lambda: sender.credit > 0)
    assert sender.credit >= 100
