"""A queue that is deleted: who is detached, who stays, and what late messages meet.

Consumers and browsers are detached at once with ``amqp:resource-deleted``. A sender stays
attached until its next transfer, which detaches it with ``amqp:resource-deleted`` naming
the queue and is left unsettled (qpidd's ``IncomingToQueue::handle``; Broker-J detaches
senders at once). The anonymous relay never brings a deleted (or any unknown) queue back.
"""

from __future__ import annotations

from proton import Disposition, Endpoint, Message

from tests.conftest import RunningBroker


def queue_exists(broker: RunningBroker, name: str) -> bool:
    return bool(broker.call(lambda: name in broker.broker.queues))


def delete(broker: RunningBroker, name: str) -> None:
    broker.call(lambda: broker.broker.delete_queue(name, force=True))


def test_a_sender_stays_attached_when_its_queue_is_deleted_until_it_sends(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("doomed")
    consumer = client.receiver("doomed", credit=5)
    client.wait_settled(client.send(sender, Message(body="before"), pump=False))
    delete(broker, "doomed")
    client.wait_closed(consumer)
    assert consumer.remote_condition.name == "amqp:resource-deleted"
    client.pump(0.1)
    assert sender.state & Endpoint.REMOTE_ACTIVE


def test_a_transfer_to_a_deleted_queue_detaches_its_sender_with_resource_deleted(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("gone-later")
    client.wait_settled(client.send(sender, Message(body="kept"), pump=False))
    delete(broker, "gone-later")
    late = client.send(sender, Message(body="late"), pump=False)
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:resource-deleted"
    assert sender.remote_condition.description == "queue 'gone-later' was deleted"
    assert not late.remote_state  # not accepted: the producer may send it again elsewhere
    assert not queue_exists(broker, "gone-later")  # not brought back by the late message
    again = client.receiver("gone-later", credit=1)  # the connection goes on serving
    client.wait(lambda: again.state & Endpoint.REMOTE_ACTIVE)


def test_a_sender_to_a_deleted_exchange_is_detached_with_resource_deleted(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    broker.call(lambda: broker.broker.declare_exchange("doomed-x", "fanout"))
    sender = client.sender("doomed-x")
    client.wait_settled(client.send(sender, Message(body="routed nowhere"), pump=False))
    broker.call(lambda: broker.broker.delete_exchange("doomed-x"))
    client.pump(0.1)
    assert sender.state & Endpoint.REMOTE_ACTIVE
    client.send(sender, Message(body="late"), pump=False)
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:resource-deleted"
    assert sender.remote_condition.description == "exchange 'doomed-x' was deleted"


def test_a_server_outlives_the_temporary_queues_of_the_clients_it_answers(
    broker: RunningBroker,
) -> None:
    """Proton's server examples keep one sender per reply-to address, and a client's
    reply address is never used again once the client has gone."""
    server = broker.client(container="server")
    replies = {}
    for n in range(3):
        client = broker.client(container=f"client-{n}")
        reply_queue = client.receiver(None, credit=1, dynamic=True)
        address = client.wait(lambda link=reply_queue: link.remote_source.address)
        replies[address] = server.sender(address)
        server.wait_settled(server.send(replies[address], Message(body=f"answer {n}"), pump=False))
        (answer,) = client.wait_received(reply_queue, 1)
        assert answer.message.body == f"answer {n}"
        client.close()
        server.wait(lambda a=address: not queue_exists(broker, a))
    server.pump(0.1)
    assert all(sender.state & Endpoint.REMOTE_ACTIVE for sender in replies.values())
    first, *others = replies.values()
    server.send(first, Message(body="too late"), pump=False)
    server.wait_closed(first)
    assert first.remote_condition.name == "amqp:resource-deleted"
    assert all(sender.state & Endpoint.REMOTE_ACTIVE for sender in others)
    assert server.conn.state & Endpoint.REMOTE_ACTIVE


def test_a_sender_held_by_flow_control_is_settled_and_given_credit_when_its_queue_goes(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender(
        "stopped",
        node_properties={"qpid.policy_type": "producer-flow-control", "qpid.max_count": 1},
    )
    first = client.send(sender, Message(body=1))
    second = client.send(sender, Message(body=2))  # over the limit: settlement withheld
    client.wait_settled(first)
    client.pump(0.2)
    assert not second.remote_state
    delete(broker, "stopped")
    client.wait_settled(second)
    assert second.remote_state == Disposition.ACCEPTED  # it was stored, then went with it
    client.wait(lambda: sender.credit > 0)
    client.send(sender, Message(body=3), pump=False)
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:resource-deleted"


# ---- the anonymous relay ---------------------------------------------------------------------


def test_the_anonymous_relay_never_creates_a_queue_even_with_auto_create(
    broker: RunningBroker,
) -> None:
    assert broker.config.broker.auto_create  # the default
    client = broker.client()
    relay = client.sender(None)
    delivery = client.wait_settled(
        client.send(relay, Message(address="nowhere", body=1), pump=False)
    )
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition.name == "amqp:not-found"
    assert "'nowhere'" in delivery.remote.condition.description
    assert not queue_exists(broker, "nowhere")


def test_a_late_reply_through_the_relay_does_not_bring_a_temporary_queue_back(
    broker: RunningBroker,
) -> None:
    """A request/reply service whose clients time out leaks no queue."""
    server = broker.client(container="server")
    relay = server.sender(None)
    before = broker.call(lambda: len(broker.broker.queues))
    for _ in range(5):
        client = broker.client()
        reply_queue = client.receiver(None, credit=1, dynamic=True)
        address = client.wait(lambda link=reply_queue: link.remote_source.address)
        client.close()  # timed out: gone before the answer
        server.wait(lambda a=address: not queue_exists(broker, a))
        late = server.wait_settled(
            server.send(relay, Message(address=address, body="late"), pump=False)
        )
        assert late.remote.condition.name == "amqp:not-found"
    assert broker.call(lambda: len(broker.broker.queues)) == before


# ---- re-used link names ------------------------------------------------------------------


def test_a_link_name_can_be_attached_again_once_its_detach_is_acknowledged(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    first = client.receiver("renamed", credit=1, name="the-name")
    delete(broker, "renamed")
    client.wait_closed(first)
    first.close()  # the client's acknowledging detach
    client.pump(0.05)
    client.sender("renamed").close()  # make the queue again
    second = client.receiver("renamed", credit=1, name="the-name")
    client.wait(lambda: second.state & Endpoint.REMOTE_ACTIVE)
    assert second.remote_source.address == "renamed"


def test_attaching_a_name_still_in_use_ends_only_that_connection(broker: RunningBroker) -> None:
    """Proton's engine, not the broker, decides this: an attach naming a link whose handle is
    still mapped (attached, or detached by the broker but not yet acknowledged) is a
    connection error, ``amqp:invalid-field`` "link name already attached"."""
    bystander = broker.client(container="bystander")
    keep = bystander.receiver("same-name-queue", credit=1)
    client = broker.client(container="reuser")
    client.receiver("same-name-queue", credit=1, name="dup")
    client.receiver("same-name-queue", credit=1, name="dup")
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_CLOSED)
    assert client.conn.remote_condition.name == "amqp:invalid-field"
    assert "link name already attached: dup" in client.conn.remote_condition.description
    sender = bystander.sender("same-name-queue")
    bystander.wait_settled(bystander.send(sender, Message(body="still served"), pump=False))
    assert bystander.wait_received(keep, 1)[0].message.body == "still served"


def test_a_name_attached_again_from_another_connection_of_the_container_is_a_second_link(
    broker: RunningBroker,
) -> None:
    """Proton's engine checks a name within one session; as in qpidd, nothing is stolen
    (Broker-J would detach the older link with ``amqp:link:stolen``)."""
    first, second = broker.client(container="same"), broker.client(container="same")
    older = first.receiver("twice-named", credit=5, name="dup")
    newer = second.receiver("twice-named", credit=5, name="dup")
    for client, link in ((first, older), (second, newer)):
        client.wait(lambda link=link: link.state & Endpoint.REMOTE_ACTIVE)
    sender = first.sender("twice-named")
    for n in range(4):
        first.wait_settled(first.send(sender, Message(body=n), pump=False))
    got = first.wait_received(older, 2) + second.wait_received(newer, 2)
    assert sorted(r.message.body for r in got) == [0, 1, 2, 3]
