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


def test_a_message_that_arrives_after_a_drain_goes_to_a_consumer_with_credit(
    broker: RunningBroker,
) -> None:
    """JMS's receiveNoWait and qpid::messaging's fetch drain: once the drain is answered
    the consumer has no credit, and neither Qpid broker takes a message for it then."""
    client = broker.client()
    drained = client.receiver("after-drain", credit=0, name="drained")
    drained.drain(5)
    client.wait(lambda: not drained.draining(), timeout=2)
    waiting = client.receiver("after-drain", credit=10, name="waiting")
    client.answered(waiting)
    client.send(client.sender("after-drain"), Message(body="for whoever has credit"))
    got = client.wait_received(waiting, 1)
    assert [r.message.body for r in got] == ["for whoever has credit"]
    assert client.received(drained) == []
    drained.flow(1)  # credit again: the drained consumer is served as before
    client.send(client.sender("after-drain"), Message(body="next"))
    client.wait(lambda: len(client.received(drained)) + len(client.received(waiting)) == 2)


def test_a_drained_consumer_alone_on_its_queue_takes_nothing_until_it_grants_credit(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    drained = client.receiver("drained-alone", credit=0)
    drained.drain(3)
    client.wait(lambda: not drained.draining(), timeout=2)
    fill(broker, "drained-alone", 2)
    client.pump(0.3)
    assert client.received(drained) == []
    available = broker.call(lambda: broker.broker.queues["drained-alone"].available_count())
    assert available == 2  # on the queue, acquired by nobody
    drained.flow(2)
    assert [r.message.body for r in client.wait_received(drained, 2)] == [0, 1]


def test_producers_are_granted_generous_credit(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("credit-for-producers")
    client.wait(lambda: sender.credit > 0)
    assert sender.credit >= 100
