"""rhea as a Broker-J management client: CREATE, getStatistics (its parameter a list in
the application properties), resetStatistics, an UPDATE of a live queue's limit,
getMessageInfo, deleteMessages, copyMessages, moveMessages, getPublishingLinks and
getConsumers, setContextVariable and removeContextVariable, a QUERY of the connections, over
``$management``, each answer checked against what the broker did."""

from __future__ import annotations

import json
from typing import Any

from interop.clients import NODE_DIR, PYTHON, RHEA, run
from proton_broker.testing import BrokerProcess

QUEUE = "org.apache.qpid.Queue"
EXCHANGE = "org.apache.qpid.Exchange"


def manage(broker: BrokerProcess, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    """Send ``requests`` ({properties, body}) with rhea; their answers, in order."""
    answers = run(["node", str(NODE_DIR / "management.js"), broker.url, json.dumps(requests)], 20)
    assert [a["correlation_id"] for a in answers] == [f"request-{n}" for n in range(len(requests))]
    return answers


def request(operation: str, kind: str, name: str, body: Any = None, **more: Any) -> dict:
    return {
        "properties": {"operation": operation, "type": kind, "name": name, **more},
        "body": body,
    }


def test_rhea_creates_a_queue_and_reads_its_statistics_as_broker_j_names_them(
    broker: BrokerProcess, queue: str
) -> None:
    (created,) = manage(broker, request("CREATE", QUEUE, queue, {"description": "from rhea"}))
    assert created["statusCode"] == 201 and created["body"]["description"] == "from rhea"
    PYTHON.send(broker.url, queue, [{"id": n, "body": f"m{n}"} for n in range(3)])
    wanted = ["queueDepthMessages", "totalEnqueuedMessages", "unacknowledgedMessages"]
    stats, reset, after = manage(
        broker,
        request("getStatistics", QUEUE, queue, statistics=wanted),
        request("resetStatistics", QUEUE, queue),
        request("getStatistics", QUEUE, queue, statistics=wanted),
    )
    assert stats["statusCode"] == 200
    assert stats["body"] == {
        "queueDepthMessages": 3,
        "totalEnqueuedMessages": 3,
        "unacknowledgedMessages": 0,
    }
    assert reset["statusCode"] == 200
    assert after["body"] == {
        "queueDepthMessages": 3,
        "totalEnqueuedMessages": 0,
        "unacknowledgedMessages": 0,
    }
    assert [m["body"] for m in RHEA.receive(broker.url, queue, 3)] == ["m0", "m1", "m2"]
    (drained,) = manage(broker, request("getStatistics", QUEUE, queue))
    assert drained["body"]["totalDequeuedMessages"] == 3
    assert drained["body"]["queueDepthMessages"] == 0


def test_rhea_raises_a_live_queues_limit_and_the_next_message_gets_in(
    broker: BrokerProcess, queue: str
) -> None:
    limited = {"overflowPolicy": "REJECT", "maximumQueueDepthMessages": 1}
    (created,) = manage(broker, request("CREATE", QUEUE, queue, limited))
    assert created["statusCode"] == 201
    PYTHON.send(broker.url, queue, [{"id": 0, "body": "first"}])
    (raised,) = manage(broker, request("UPDATE", QUEUE, queue, {"maximumQueueDepthMessages": 2}))
    assert raised["statusCode"] == 200, raised
    assert raised["body"]["maximumQueueDepthMessages"] == 2
    PYTHON.send(broker.url, queue, [{"id": 1, "body": "second"}])  # refused before the UPDATE
    assert [m["body"] for m in PYTHON.receive(broker.url, queue, 2)] == ["first", "second"]


def test_rhea_reads_an_exchanges_statistics(broker: BrokerProcess) -> None:
    (stats,) = manage(broker, request("getStatistics", EXCHANGE, "amq.direct"))
    assert stats["statusCode"] == 200
    assert {"messagesIn", "bytesIn", "messagesDropped", "bytesDropped"} <= set(stats["body"])


def test_rhea_lists_and_deletes_messages_by_id(broker: BrokerProcess, queue: str) -> None:
    PYTHON.send(broker.url, queue, [{"id": n, "body": f"m{n}"} for n in range(4)])
    (listed,) = manage(broker, request("getMessageInfo", QUEUE, queue, includeHeaders=True))
    ids = [info["id"] for info in listed["body"]]
    assert len(ids) == 4 and all(info["state"] == "Available" for info in listed["body"])
    (deleted,) = manage(broker, request("deleteMessages", QUEUE, queue, messageIds=ids[1:3]))
    assert deleted["statusCode"] == 200 and deleted["body"] == ids[1:3]
    assert [m["body"] for m in RHEA.receive(broker.url, queue, 2)] == ["m0", "m3"]


def test_rhea_copies_and_moves_messages_to_another_queue(broker: BrokerProcess, queue: str) -> None:
    target = f"{queue}-moved"
    (created,) = manage(broker, request("CREATE", QUEUE, target))
    assert created["statusCode"] == 201
    PYTHON.send(broker.url, queue, [{"id": n, "body": f"m{n}"} for n in range(4)])
    (listed,) = manage(broker, request("getMessageInfo", QUEUE, queue))
    ids = [info["id"] for info in listed["body"]]
    copied, moved = manage(
        broker,
        request("copyMessages", QUEUE, queue, destination=target, messageIds=ids[:1]),
        request("moveMessages", QUEUE, queue, destination=target, messageIds=ids[2:]),
    )
    assert copied["statusCode"] == 200 and copied["body"] == ids[:1]
    assert moved["statusCode"] == 200 and moved["body"] == ids[2:]
    assert [m["body"] for m in RHEA.receive(broker.url, target, 3)] == ["m0", "m2", "m3"]
    assert [m["body"] for m in RHEA.receive(broker.url, queue, 2)] == ["m0", "m1"]


def test_rhea_reads_the_publishing_links_and_consumers_of_a_queue(
    broker: BrokerProcess, queue: str
) -> None:
    created, bound, links, consumers = manage(
        broker,
        request("CREATE", QUEUE, queue),
        request("bind", EXCHANGE, "amq.direct", destination=queue, bindingKey="urgent"),
        request("getPublishingLinks", QUEUE, queue),
        request("getConsumers", QUEUE, queue),
    )
    assert created["statusCode"] == 201 and bound["body"] is True
    assert links["statusCode"] == 200
    assert links["body"] == [
        {
            "name": "urgent",
            "type": "binding",
            "bindingKey": "urgent",
            "destination": queue,
            "arguments": {},
        }
    ]
    assert consumers["statusCode"] == 200 and consumers["body"] == []


def test_rhea_sets_and_removes_a_context_variable_by_object_path(
    broker: BrokerProcess, queue: str
) -> None:
    """Broker-J's setContextVariable: ``name`` is the variable, the queue its object path."""

    def variable(operation: str, **more: Any) -> dict:
        path = {"index": "object-path", "key": queue}
        return {"properties": {"operation": operation, "type": QUEUE, **path, **more}}

    created, first, second, removed, read = manage(
        broker,
        request("CREATE", QUEUE, queue),
        variable("setContextVariable", name="queue.queueFlowResumeLimit", value="70"),
        variable("setContextVariable", name="queue.queueFlowResumeLimit", value="55.5"),
        variable("removeContextVariable", name="queue.queueFlowResumeLimit"),
        request("READ", QUEUE, queue),
    )
    assert created["statusCode"] == 201
    assert first["statusCode"] == 200 and second["body"] == "70"
    assert removed["statusCode"] == 200 and removed["body"] == "55.5"
    assert not read["body"].get("context")


def test_rhea_lists_the_connections_and_finds_its_own(broker: BrokerProcess) -> None:
    """Broker-J's org.apache.qpid.Connection, queried by rhea: its own connection, the only
    one open, with rhea's container id and what rhea announced (no product)."""
    node = {"operation": "QUERY", "type": "org.amqp.management", "name": "self"}
    query = {
        "properties": {**node, "entityType": "org.apache.qpid.Connection"},
        "body": {"attributeNames": ["clientId", "clientProduct", "principal", "protocol"]},
    }
    (listed,) = manage(broker, query)
    assert listed["statusCode"] == 200
    ((client_id, product, principal, protocol),) = listed["body"]["results"]
    assert client_id and product is None
    assert (principal, protocol) == ("anonymous", "AMQP_1_0")
