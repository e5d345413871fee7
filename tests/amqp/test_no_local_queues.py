"""qpidd's queue option ``no-local`` (Broker-J's ``noLocal``) over AMQP: while a connection
consumes from such a queue, what that connection publishes to it is accepted and dropped,
as qpidd's ``Queue::accept`` drops a message local to the queue; other connections' messages
join it, by every way they reach it (the queue's address, an exchange, the anonymous relay,
a transaction)."""

from __future__ import annotations

from proton import Disposition, Message

from tests.amqp.test_exchanges import bodies, publish, subscriber
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker

NO_LOCAL = {"no-local": True}


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def test_a_consumers_own_messages_are_accepted_and_do_not_join(broker: RunningBroker) -> None:
    mine, other = broker.client(), broker.client()
    receiver = subscriber(mine, "chat", node_properties=NO_LOCAL)
    assert publish(mine, "chat", Message(body="my own")) == [Disposition.ACCEPTED]
    assert publish(other, "chat", Message(body="someone else's")) == [Disposition.ACCEPTED]
    assert bodies(mine, receiver, 1) == ["someone else's"]
    assert depth(broker, "chat") == 0


def test_once_its_receivers_are_gone_a_connections_messages_join_again(
    broker: RunningBroker,
) -> None:
    mine = broker.client()
    receiver = subscriber(mine, "chat", node_properties=NO_LOCAL)
    publish(mine, "chat", Message(body="while consuming"))
    receiver.close()
    mine.wait(lambda: receiver.state & receiver.REMOTE_CLOSED)
    publish(mine, "chat", Message(body="after"))
    assert depth(broker, "chat") == 1
    again = subscriber(broker.client(), "chat")
    assert bodies(broker.clients[-1], again, 1) == ["after"]


def test_an_exchange_the_relay_and_a_transaction_leave_local_messages_out_too(
    broker: RunningBroker,
) -> None:
    broker.call(lambda: broker.broker.declare("feed", {"noLocal": True}))
    broker.call(lambda: broker.broker.bind("amq.fanout", "feed"))
    mine, other = broker.client(), broker.client()
    receiver = subscriber(mine, "feed")
    for client, whose in ((mine, "mine"), (other, "theirs")):
        publish(client, "amq.fanout", Message(body=f"{whose}, routed"))
        publish(client, None, Message(address="feed", body=f"{whose}, relayed"))
        coordinator = client.coordinator()
        txn = client.declare(coordinator)
        sent = client.send(client.sender("feed"), Message(body=f"{whose}, in a txn"), txn=txn)
        assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
        assert client.wait_settled(sent).remote_state is not None
    assert bodies(mine, receiver, 3) == ["theirs, routed", "theirs, relayed", "theirs, in a txn"]


def test_a_subscription_queue_declared_no_local_is_a_no_local_subscription(
    broker: RunningBroker,
) -> None:
    """qpid::messaging declares a topic subscription's queue with x-declare arguments, which
    reach the broker as link properties."""
    mine, other = broker.client(), broker.client()
    receiver = subscriber(mine, "amq.fanout", link_properties=NO_LOCAL)
    publish(mine, "amq.fanout", Message(body="my own"))
    publish(other, "amq.fanout", Message(body="someone else's"))
    assert bodies(mine, receiver, 1) == ["someone else's"]


def test_management_creates_and_reads_broker_js_no_local(broker: RunningBroker) -> None:
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "quiet"), {"noLocal": True}))[0] == 201
    assert node.ask(entity("READ", "quiet")).body["noLocal"] is True
    assert node.ask(entity("READ", "quiet")).body["arguments"]["noLocal"] == "True"
