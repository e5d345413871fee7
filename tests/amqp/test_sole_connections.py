"""One connection per client container when a client asks (Broker-J's
``sole-connection-for-container``, which Qpid JMS desires for a program that sets a JMS
client ID): a second connection is refused the way Qpid JMS turns into
``InvalidClientIDException``, or replaces the first when the policy says close-existing."""

from __future__ import annotations

from typing import Any

from proton import Endpoint, Message, symbol, uint

from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

SOLE = "sole-connection-for-container"
POLICY = "sole-connection-enforcement-policy"


def jms_client(broker: RunningBroker, client_id: str, **properties: Any) -> EngineClient:
    """A connection as Qpid JMS opens it for a program that set ``client_id``."""
    return broker.client(container=client_id, desired_capabilities=[SOLE], properties=properties)


def closed_by_broker(client: EngineClient) -> Any:
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_CLOSED)
    return client.conn.remote_condition


def serves(client: EngineClient, queue: str) -> bool:
    sender = client.sender(queue)
    client.wait_settled(client.send(sender, Message(body=queue), pump=False))
    receiver = client.receiver(queue, credit=1)
    return bool(client.wait_received(receiver, 1)[0].message.body == queue)


def test_the_broker_offers_sole_connection_for_container(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.remote_offered_capabilities)
    assert SOLE in [str(c) for c in client.conn.remote_offered_capabilities]


def test_a_second_connection_of_a_client_id_is_refused_as_qpid_jms_expects(
    broker: RunningBroker,
) -> None:
    first = jms_client(broker, "orders-app")
    first.wait(lambda: first.conn.state & Endpoint.REMOTE_ACTIVE)
    second = jms_client(broker, "orders-app")
    condition = closed_by_broker(second)
    assert condition.name == "amqp:invalid-field"
    assert condition.info == {symbol("invalid-field"): symbol("container-id")}
    assert "refuse-connection" in condition.description
    opened = {str(k): v for k, v in second.conn.remote_properties.items()}
    assert opened["amqp:connection-establishment-failed"] is True
    assert serves(first, "still-first")  # the first goes on


def test_a_connection_that_does_not_ask_is_refused_while_one_that_asked_is_open(
    broker: RunningBroker,
) -> None:
    """The open connection's policy applies (Broker-J's rule)."""
    first = jms_client(broker, "asked")
    first.wait(lambda: first.conn.state & Endpoint.REMOTE_ACTIVE)
    plain = broker.client(container="asked")
    assert closed_by_broker(plain).name == "amqp:invalid-field"


def test_close_existing_replaces_the_open_connection(broker: RunningBroker) -> None:
    """The open connection's policy decides (Broker-J's rule), so both ask for it."""
    first = jms_client(broker, "failover-app", **{POLICY: uint(1)})
    receiver = first.receiver("replaced", credit=1)
    first.wait(lambda: receiver.state & Endpoint.REMOTE_ACTIVE)
    second = jms_client(broker, "failover-app", **{POLICY: uint(1)})
    second.wait(lambda: second.conn.state & Endpoint.REMOTE_ACTIVE)
    condition = closed_by_broker(first)
    assert condition.name == "amqp:resource-locked"
    assert condition.info == {symbol("sole-connection-enforcement"): True}
    assert "close-existing" in condition.description
    assert serves(second, "replaced")  # the first's receiver went with it


def test_the_client_id_is_free_again_once_its_connection_closes(broker: RunningBroker) -> None:
    first = jms_client(broker, "restarted-app")
    first.wait(lambda: first.conn.state & Endpoint.REMOTE_ACTIVE)
    first.close()
    again = jms_client(broker, "restarted-app")
    assert serves(again, "after-restart")


def test_connections_that_do_not_ask_may_share_a_container_id(broker: RunningBroker) -> None:
    one, other = broker.client(container="shared-id"), broker.client(container="shared-id")
    assert serves(one, "shared-one") and serves(other, "shared-other")


def test_an_unknown_policy_refuses_the_connection_with_invalid_field(
    broker: RunningBroker,
) -> None:
    client = jms_client(broker, "odd-policy", **{POLICY: uint(7)})
    condition = closed_by_broker(client)
    assert condition.name == "amqp:invalid-field"
    assert POLICY in condition.description


def test_the_open_says_the_detection_and_enforcement_policies_as_broker_js_does(
    broker: RunningBroker,
) -> None:
    asked = jms_client(broker, "policies-app", **{POLICY: uint(1)})
    asked.wait(lambda: asked.conn.state & Endpoint.REMOTE_ACTIVE)
    said = [(type(v), str(k), v) for k, v in asked.conn.remote_properties.items()]
    assert (uint, "sole-connection-detection-policy", 0) in said  # strong
    assert (uint, "sole-connection-enforcement-policy", 1) in said  # close-existing, as asked
    plain = broker.client(container="not-asking")
    plain.wait(lambda: plain.conn.state & Endpoint.REMOTE_ACTIVE)
    assert "sole-connection-detection-policy" not in map(str, plain.conn.remote_properties)
