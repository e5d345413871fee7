"""Broker-J's setContextVariable and removeContextVariable on ``$management``
(proton_broker/management_context.py), asked by a real management client: each answers the
value before, changes one variable of a queue's or an exchange's context, and a queue
follows Broker-J's ``queue.queueFlowResumeLimit`` set that way."""

from __future__ import annotations

from typing import Any

from proton import Disposition, Message

from proton_broker.testing import BrokerProcess
from tests.amqp.test_acl import QUEUE, manage, secured  # noqa: F401 - fixture
from tests.amqp.test_durability import Restartable, brokers, send_all  # noqa: F401 - fixture
from tests.amqp.test_management import NODE, Node, entity, status
from tests.conftest import RunningBroker

EXCHANGE = "org.apache.qpid.Exchange"


def by_path(operation: str, path: str, kind: str = QUEUE, **more: Any) -> dict[str, Any]:
    """A request naming its entity as Broker-J's clients do: by object path."""
    return {"operation": operation, "type": kind, "index": "object-path", "key": path, **more}


def context_of(node: Node, name: str, kind: str = QUEUE) -> dict[str, str]:
    return node.ask(by_path("READ", name, kind)).body.get("context") or {}


def test_set_answers_the_value_before_and_remove_takes_the_variable_away(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "orders"), {"context": {"team": "billing"}})
    first = node.ask(by_path("setContextVariable", "orders", name="owner", value="ann"))
    assert status(first)[0] == 200 and bytes(first.body) == b""  # no value before: Broker-J's
    assert context_of(node, "orders") == {"team": "billing", "owner": "ann"}
    again = node.ask(by_path("setContextVariable", "orders", name="team", value="sales"))
    assert again.body == "billing"
    assert context_of(node, "orders") == {"team": "sales", "owner": "ann"}
    removed = node.ask(by_path("removeContextVariable", "orders", name="owner"))
    assert removed.body == "ann"
    assert context_of(node, "orders") == {"team": "sales"}
    nothing = node.ask(by_path("removeContextVariable", "orders", name="owner"))
    assert status(nothing)[0] == 200 and bytes(nothing.body) == b""


def test_an_exchange_has_its_context_variables_too(broker: RunningBroker) -> None:
    node = Node(broker.client())
    node.ask({"operation": "CREATE", "type": EXCHANGE, "name": "events"}, {"type": "topic"})
    answer = node.ask(by_path("setContextVariable", "events", EXCHANGE, name="x", value=7))
    assert status(answer)[0] == 200
    assert context_of(node, "events", EXCHANGE) == {"x": "7"}  # a number, as its text


def test_a_request_naming_its_entity_only_by_name_is_a_400(broker: RunningBroker) -> None:
    """``name`` is the variable's, so the entity must be named by identity or path, as
    Broker-J finds every entity; without a name or a value it is a 400 too."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "orders"))
    by_name = node.ask(entity("setContextVariable", "orders", value="v"))
    assert status(by_name)[0] == 400 and "identity" in status(by_name)[1]
    no_value = node.ask(by_path("setContextVariable", "orders", name="v"))
    assert status(no_value)[0] == 400 and "'value'" in status(no_value)[1]
    identity = node.ask(entity("READ", "orders")).body["identity"]
    named = {"operation": "setContextVariable", "type": QUEUE, "identity": identity}
    assert status(node.ask({**named, "name": "v", "value": "1"}))[0] == 200
    assert context_of(node, "orders") == {"v": "1"}


def flow_stopped(node: Node, name: str) -> bool:
    return node.ask(entity("READ", name)).body["queueFlowStopped"]


def test_a_queue_resumes_its_producers_at_the_context_s_flow_resume_limit(
    broker: RunningBroker,
) -> None:
    """Broker-J reads the resume percentage from the context variable
    ``queue.queueFlowResumeLimit`` (80 by default); set on a live queue it applies at
    once."""
    node = Node(broker.client())
    limit = {"overflowPolicy": "PRODUCER_FLOW_CONTROL", "maximumQueueDepthMessages": 10}
    node.ask(entity("CREATE", "work"), limit)
    send_all(broker, "work", [Message(body=n) for n in range(10)])
    producer = broker.client()
    over = producer.send(producer.sender("work"), Message(body=10))  # its settlement waits
    producer.wait(lambda: flow_stopped(node, "work"))
    resume = {"name": "queue.queueFlowResumeLimit", "value": "50"}
    assert status(node.ask(by_path("setContextVariable", "work", **resume)))[0] == 200
    node.ask(entity("deleteMessages", "work", limit=5))  # 6 left: above 50% of 10
    assert flow_stopped(node, "work")  # at the default 80% it would have resumed
    assert not over.remote_state
    node.ask(entity("deleteMessages", "work", limit=1))  # 5 left
    assert not flow_stopped(node, "work")
    assert producer.wait_settled(over).remote_state == Disposition.ACCEPTED


def test_a_flow_resume_limit_that_is_not_a_percentage_is_refused(broker: RunningBroker) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "work"), {"context": {"queue.queueFlowResumeLimit": "60"}})
    for bad in ("150", "-1", "most"):
        refused = node.ask(
            by_path("setContextVariable", "work", name="queue.queueFlowResumeLimit", value=bad)
        )
        assert status(refused)[0] == 400 and "queue.queueFlowResumeLimit" in status(refused)[1]
    assert context_of(node, "work") == {"queue.queueFlowResumeLimit": "60"}
    created = node.ask(entity("CREATE", "other"), {"context": {"queue.queueFlowResumeLimit": "x"}})
    assert status(created)[0] == 400
    assert broker.call(lambda: "other" not in broker.broker.queues)


def test_a_durable_queue_keeps_its_context_across_a_restart(brokers: Restartable) -> None:  # noqa: F811
    broker = brokers.start()
    node = Node(broker.client())
    node.ask(entity("CREATE", "kept"))  # durable, as Broker-J's default
    node.ask(by_path("setContextVariable", "kept", name="owner", value="ann"))
    broker = brokers.restart()
    assert context_of(Node(broker.client()), "kept") == {"owner": "ann"}


def test_get_operations_lists_both_for_queues_and_exchanges(broker: RunningBroker) -> None:
    node = Node(broker.client())
    operations = node.ask({**NODE, "operation": "GET-OPERATIONS"}).body
    for kind in (QUEUE, EXCHANGE):
        assert operations[kind]["setContextVariable"] == ["name", "value"]
        assert operations[kind]["removeContextVariable"] == ["name"]


def test_both_need_the_acls_update_on_the_entity(secured: BrokerProcess) -> None:  # noqa: F811
    """bob may read app.in (``access``) but not change it."""
    with manage(secured, "bob") as bob:
        ask = {"index": "object-path", "key": "app.in", "value": "1"}
        asked = bob.request("setContextVariable", QUEUE, "v", **ask)  # name: the variable
        assert asked.status == 403
    with manage(secured, "alice") as alice:
        read = alice.request("READ", QUEUE, "app.in")
        assert "v" not in (read.body.get("context") or {})
