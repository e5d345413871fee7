"""A fault inside a handler closes only what it concerns; the broker keeps serving."""

from __future__ import annotations

import logging

import pytest
from proton import Message

from proton_broker.broker import Broker
from tests.amqp.test_management import Node, entity
from tests.conftest import RunningBroker


def test_a_fault_while_storing_a_transfer_closes_only_that_link(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = broker.client()
    bad = client.sender("faulty")
    good = client.sender("healthy")
    queue = broker.call(lambda: broker.broker.queues["faulty"])

    def explode(message: object, now: object = None) -> None:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(queue, "enqueue", explode)
    client.send(bad, Message(body=1))
    client.wait_closed(bad)
    assert bad.remote_condition.name == "amqp:internal-error"
    assert "injected fault" in bad.remote_condition.description
    client.wait_settled(client.send(good, Message(body=2), pump=False))
    receiver = client.receiver("healthy", credit=1)
    assert client.wait_received(receiver, 1)[0].message.body == 2


def test_a_fault_while_attaching_closes_the_link_and_others_keep_working(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Broker.resolve

    def resolve(self: Broker, name: str | None, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "boom":
            raise RuntimeError("injected attach fault")
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(Broker, "resolve", resolve)
    client = broker.client()
    boom = client.receiver("boom", credit=1)
    client.wait_closed(boom)
    assert boom.remote_condition.name == "amqp:internal-error"
    other = broker.client()
    sender = other.sender("fine")
    other.wait_settled(other.send(sender, Message(body="ok"), pump=False))
    assert broker.alive()


# ---- a delivery that raises (the dispatcher's backstop) ----------------------------------

# A queue that stamps qpidd's qpid.queue_msg_sequence on each delivery, and a message the
# broker stores but cannot stamp: a message-annotations key that is a list (the broker
# lets lists through in annotations; re-encoding the map with the stamp then raises).
STAMPED = {"qpid.queue_msg_sequence": "qpid.seq"}
POISON = (
    b"\x00\x53\x72"
    + bytes([0xC1, 4, 2, 0x45, 0x54, 1])  # message-annotations {[]: 1}
    + b"\x00\x53\x77\xa1\x06poison"  # amqp-value "poison"
)


def message_info(node: Node, queue: str) -> list[tuple[int, str, int]]:
    """(id, state, delivery count) of each message on ``queue``, in order."""
    reply = node.ask(entity("getMessageInfo", queue))
    return [(info["id"], info["state"], info["deliveryCount"]) for info in reply.body]


def test_a_message_whose_delivery_fails_stays_in_its_place_and_only_its_consumer_is_detached(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    producer = broker.client()
    sender = producer.sender("stamped", node_properties=STAMPED)
    producer.wait_settled(producer.send(sender, POISON))
    producer.wait_settled(producer.send(sender, Message(body="fine")))
    client = broker.client()
    other = client.receiver("elsewhere", credit=5)
    with caplog.at_level(logging.ERROR, logger="proton_broker"):
        consumer = client.receiver("stamped", credit=5)
        client.wait_closed(consumer)
    assert consumer.remote_condition.name == "amqp:internal-error"
    description = consumer.remote_condition.description
    assert "message 1 on queue 'stamped'" in description and "TypeError" in description
    failures = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert len(failures) == 1  # logged once, with its traceback
    node = Node(broker.client())
    # Back where it was, not acquired, its delivery count unchanged: nothing was sent.
    assert message_info(node, "stamped") == [(1, "Available", 0), (2, "Available", 0)]
    # The rest of the broker goes on: the same connection, the producer.
    producer.wait_settled(producer.send(sender, Message(body="more")))
    producer.send(producer.sender("elsewhere"), Message(body="here"))
    assert client.wait_received(other, 1)[0].message.body == "here"
    # An operator can take it away (only available messages are deleted): the queue flows.
    assert node.ask(entity("deleteMessages", "stamped", messageIds=[1])).body == [1]
    again = client.receiver("stamped", credit=5, name="again")
    bodies = [r.message.body for r in client.wait_received(again, 2)]
    assert bodies == ["fine", "more"]


def test_a_poison_message_detaches_each_consumer_that_reaches_it_once_and_the_broker_does_not_spin(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    producer = broker.client()
    sender = producer.sender("stamped", node_properties=STAMPED)
    producer.wait_settled(producer.send(sender, POISON))
    clients = [broker.client() for _ in range(3)]
    with caplog.at_level(logging.ERROR, logger="proton_broker"):
        links = [c.receiver("stamped", credit=5, browse=n == 2) for n, c in enumerate(clients)]
        for client, link in zip(clients, links, strict=True):
            client.wait_closed(link)
            assert link.remote_condition.name == "amqp:internal-error"
    assert len([r for r in caplog.records if r.exc_info]) == 3  # one each, nothing more
    assert broker.call(lambda: broker.broker.queues["stamped"].consumer_count) == 0
    assert message_info(Node(broker.client()), "stamped") == [(1, "Available", 0)]
