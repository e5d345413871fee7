"""Broker-J's ``messageDurability`` over AMQP, across a restart: which messages a durable
queue's store keeps, on every way a message reaches a queue (a producer's transfer, an
exchange, a transaction, a move, dead-lettering, a management reply), changed on a live
queue by management, and what a queue that is not durable says of it."""

from __future__ import annotations

from typing import Any

from proton import Condition, Disposition, Message

from tests.amqp.test_durability import Restartable, brokers, drain, send_all  # noqa: F401 - fixture
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker

ALWAYS = {"durable": True, "messageDurability": "ALWAYS"}
NEVER = {"durable": True, "messageDurability": "NEVER"}
PATHS = ("sent", "routed", "in-txn", "moved", "dead-lettered")


def _read(node: Node, name: str) -> dict[str, Any]:
    reply = node.ask(entity("READ", name))
    assert status(reply)[0] == 200, status(reply)
    return reply.body


def _reach_by_every_path(broker: RunningBroker, prefix: str, durable: bool) -> None:
    """One message (durable or not) onto each of ``<prefix>-<path>``, each by its path."""
    node = Node(broker.client())
    broker.call(lambda: broker.broker.bind("amq.fanout", f"{prefix}-routed"))
    node.ask(entity("CREATE", "parked"))
    dead_letters = {"alternateBinding": {"destination": f"{prefix}-dead-lettered"}}
    assert status(node.ask(entity("CREATE", "orders"), dead_letters))[0] == 201
    send_all(broker, f"{prefix}-sent", [Message(body="sent", durable=durable)])
    send_all(broker, "amq.fanout", [Message(body="routed", durable=durable)])
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    client.send(client.sender(f"{prefix}-in-txn"), Message(body="in-txn", durable=durable), txn=txn)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    send_all(broker, "parked", [Message(body="moved", durable=durable)])
    moved = node.ask(entity("moveMessages", "parked", destination=f"{prefix}-moved"))
    assert status(moved)[0] == 200, status(moved)
    send_all(broker, "orders", [Message(body="dead-lettered", durable=durable)])
    receiver = client.receiver("orders", credit=1)
    (got,) = client.wait_received(receiver, 1)
    got.delivery.local.condition = Condition("app:bad", "refused")
    client.settle(got, Disposition.REJECTED)
    client.wait(lambda: broker.call(lambda: broker.broker.queues[f"{prefix}-dead-lettered"].depth))


def _restarted_after_every_path(
    brokers: Restartable,  # noqa: F811 - fixture
    prefix: str,
    options: dict[str, Any],
    durable: bool,
) -> RunningBroker:
    """Queues ``<prefix>-<path>`` made with ``options``, reached each by its path with one
    message (durable or not); then the broker restarted."""
    broker = brokers.start()
    for path in PATHS:
        broker.call(lambda path=path: broker.broker.declare(f"{prefix}-{path}", options))
    _reach_by_every_path(broker, prefix, durable)
    return brokers.restart()


def test_always_keeps_messages_that_are_not_durable_on_every_path_in(
    brokers: Restartable,  # noqa: F811 - fixture
) -> None:
    broker = _restarted_after_every_path(brokers, "always", ALWAYS, durable=False)
    for path in PATHS:
        client = broker.client()
        receiver = client.receiver(f"always-{path}", credit=5)
        (got,) = client.wait_received(receiver, 1)
        assert got.message.body == path
        assert not got.message.durable  # kept, and delivered as it was sent
        client.settle(got)


def test_never_keeps_no_message_on_a_durable_queue_on_every_path_in(
    brokers: Restartable,  # noqa: F811 - fixture
) -> None:
    broker = _restarted_after_every_path(brokers, "never", NEVER, durable=True)
    for path in PATHS:
        assert broker.call(lambda path=path: broker.broker.queues[f"never-{path}"].settings.durable)
        assert drain(broker, f"never-{path}", 0) == []


def test_a_producer_declares_it_in_its_node_properties_and_management_reads_it(
    broker: RunningBroker,
) -> None:
    send_all(
        broker, "declared", [Message(body=1)], {"durable": True, "messageDurability": "always"}
    )
    assert _read(Node(broker.client()), "declared")["messageDurability"] == "ALWAYS"


def test_management_changes_it_for_the_messages_that_arrive_after(
    brokers: Restartable,  # noqa: F811 - fixture
) -> None:
    broker = brokers.start()
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "switched"), {"durable": True}))[0] == 201
    assert _read(node, "switched")["messageDurability"] == "DEFAULT"
    send_all(broker, "switched", [Message(body="before")])
    changed = node.ask(entity("UPDATE", "switched"), {"messageDurability": "ALWAYS"})
    assert status(changed)[0] == 200, status(changed)
    send_all(broker, "switched", [Message(body="after")])
    broker = brokers.restart()
    assert drain(broker, "switched", 1) == ["after"]
    assert _read(Node(broker.client()), "switched")["messageDurability"] == "ALWAYS"


def test_a_queue_that_is_not_durable_reads_never_whatever_it_was_given(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    made = node.ask(entity("CREATE", "passing"), {"durable": False, "messageDurability": "ALWAYS"})
    assert status(made)[0] == 201
    assert _read(node, "passing")["messageDurability"] == "NEVER"


def test_a_value_broker_j_does_not_know_is_refused_naming_the_attribute(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    made = node.ask(entity("CREATE", "odd"), {"durable": True, "messageDurability": "SOMETIMES"})
    assert status(made)[0] == 400 and "messageDurability" in status(made)[1]


def test_a_last_value_queue_keeping_nothing_numbers_keys_on_above_a_restart(
    tmp_path: Any,
) -> None:
    """Versions the store does not keep still reserve their key numbers, so a consumer
    never sees a key's number again after a restart."""
    made = Restartable(tmp_path / "data")
    keyed = {**NEVER, "qpid.last_value_queue_key": "k"}
    try:
        broker = made.start()
        sent = [Message(body=n, properties={"k": "a"}, durable=True) for n in range(3)]
        send_all(broker, "prices", sent, keyed)
        seen = broker.call(lambda: broker.broker.queues["prices"].history.current("a"))
        broker = made.restart()
        send_all(broker, "prices", [Message(body="next", properties={"k": "a"})])
        client = broker.client()
        (got,) = client.wait_received(client.receiver("prices", credit=5), 1)
        assert got.message.body == "next"
        assert got.message.annotations["x-opt-sequence"] > seen == 3
    finally:
        if made.current is not None:
            made.current.stop()


def test_a_management_reply_to_a_queue_that_keeps_every_message_survives_a_restart(
    brokers: Restartable,  # noqa: F811 - fixture
) -> None:
    broker = brokers.start()
    broker.call(lambda: broker.broker.declare("replies", ALWAYS))
    client = broker.client()
    request = Message(
        reply_to="replies",
        correlation_id="asked",
        properties={"operation": "READ", "type": "org.apache.qpid.Queue", "name": "replies"},
    )
    client.wait_settled(client.send(client.sender("$management"), request))
    client.wait(lambda: broker.call(lambda: broker.broker.queues["replies"].depth))
    broker = brokers.restart()
    client = broker.client()
    (reply,) = client.wait_received(client.receiver("replies", credit=5), 1)
    assert reply.message.correlation_id == "asked"
    assert reply.message.properties["statusCode"] == 200
