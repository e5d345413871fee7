"""Broker-J's connections on ``$management`` (proton_broker/management_connections.py): QUERY
lists the open connections with what their clients announced, READ and getStatistics read
one, DELETE closes it with ``amqp:connection:forced``, and the ACL guards both as it guards
the web console's connection list."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from proton import Disposition, Message
from proton.utils import BlockingConnection

from tests.amqp.test_acl import RULES, manage, start_secured, url
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker

CONNECTION = "org.apache.qpid.Connection"


def listed(node: Node, *names: str) -> list[dict[str, Any]]:
    reply = node.ask(
        {"operation": "QUERY", "entityType": CONNECTION}, {"attributeNames": list(names)}
    )
    assert status(reply)[0] == 200, status(reply)
    return [
        dict(zip(reply.body["attributeNames"], row, strict=True)) for row in reply.body["results"]
    ]


def test_query_lists_each_open_connection_with_what_its_client_announced(
    broker: RunningBroker,
) -> None:
    announced = {"product": "order-service", "version": "2.1"}
    client = broker.client(container="orders-app", properties=announced)
    client.wait(lambda: client.conn.remote_container)
    blocking = BlockingConnection(broker.url)  # Proton's own client, a container id of its own
    try:
        node = Node(broker.client(container="admin"))
        rows = listed(node, "name", "clientId", "clientProduct", "clientVersion", "transport")
        mine = next(row for row in rows if row["clientId"] == "orders-app")
        assert (mine["clientProduct"], mine["clientVersion"]) == ("order-service", "2.1")
        assert mine["transport"] == "TCP" and mine["name"].startswith("[")
        assert blocking.container.container_id in [row["clientId"] for row in rows]
        assert [row["clientId"] for row in rows].count("admin") == 1
        numbers = [int(row["name"][1 : row["name"].index("]")]) for row in rows]
        assert numbers == sorted(numbers)  # by number, as they opened
    finally:
        blocking.close()


def test_read_and_get_statistics_count_its_sessions_and_messages(broker: RunningBroker) -> None:
    client = broker.client(container="counted")
    sender = client.sender("counted-queue")
    for n in range(3):
        client.wait_settled(client.send(sender, Message(body=n)))
    receiver = client.receiver("counted-queue", credit=2)
    client.wait_received(receiver, 2)
    node = Node(broker.client())
    (row,) = [row for row in listed(node, "name", "clientId") if row["clientId"] == "counted"]
    read = node.ask(entity("READ", row["name"], kind=CONNECTION)).body
    assert (read["messagesIn"], read["messagesOut"], read["sessionCount"]) == (3, 2, 1)
    assert read["principal"] == "anonymous" and read["protocol"] == "AMQP_1_0"
    by_identity = node.ask({"operation": "READ", "type": CONNECTION, "identity": read["identity"]})
    assert by_identity.body["name"] == row["name"]
    statistics = node.ask(entity("getStatistics", row["name"], kind=CONNECTION)).body
    counted = {name: statistics[name] for name in ("sessionCount", "messagesIn", "messagesOut")}
    assert counted == {"sessionCount": 1, "messagesIn": 3, "messagesOut": 2}
    assert set(statistics) == BROKER_J_STATISTICS - {"oldestTransactionStartTime"}  # none open
    named = entity("getStatistics", row["name"], kind=CONNECTION, statistics=["bytesIn"])
    some = node.ask(named).body
    assert set(some) == {"bytesIn"}


BROKER_J_STATISTICS = {  # Broker-J's Connection statistics this broker keeps
    "sessionCount",
    "messagesIn",
    "messagesOut",
    "bytesIn",
    "bytesOut",
    "lastIoTime",
    "localTransactionBegins",
    "localTransactionRollbacks",
    "localTransactionOpen",
    "oldestTransactionStartTime",
    "transactedMessagesIn",
    "transactedMessagesOut",
}


def statistics_of(node: Node, container: str) -> dict[str, Any]:
    """getStatistics of the one open connection whose client id is ``container``."""
    (row,) = [row for row in listed(node, "name", "clientId") if row["clientId"] == container]
    reply = node.ask(entity("getStatistics", row["name"], kind=CONNECTION))
    assert status(reply)[0] == 200, status(reply)
    return dict(reply.body)


def test_messages_of_links_that_have_gone_still_count_for_their_connection(
    broker: RunningBroker,
) -> None:
    client = broker.client(container="short-links")
    sender = client.sender("short-lived")
    for n in range(4):
        client.wait_settled(client.send(sender, Message(body=n)))
    sender.close()
    client.wait_closed(sender)
    receiver = client.receiver("short-lived", credit=3)
    client.wait_received(receiver, 3)
    receiver.close()
    client.wait_closed(receiver)
    node = Node(broker.client())
    counted = statistics_of(node, "short-links")
    assert (counted["messagesIn"], counted["messagesOut"]) == (4, 3)


def test_bytes_in_and_out_are_what_the_socket_carried_and_last_io_is_when(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    client = broker.client(container="bulky")
    client.wait(lambda: client.conn.remote_container)
    before = statistics_of(node, "bulky")
    started = time.time()
    sender = client.sender("bulky-queue")
    client.wait_settled(client.send(sender, Message(body=b"x" * 50_000)))
    receiver = client.receiver("bulky-queue", credit=1)
    client.wait_received(receiver, 1)
    after = statistics_of(node, "bulky")
    assert 50_000 <= after["bytesIn"] - before["bytesIn"] < 52_000  # the transfer and frames
    assert 50_000 <= after["bytesOut"] - before["bytesOut"] < 52_000
    assert int(started * 1000) <= after["lastIoTime"] <= int(time.time() * 1000)
    (row,) = [
        row
        for row in listed(node, "clientId", "localAddress", "remoteAddress")
        if row["clientId"] == "bulky"
    ]
    assert row["localAddress"] == f"127.0.0.1:{broker.port}"  # the listener's end
    assert row["remoteAddress"] != row["localAddress"]


def test_transactions_are_counted_for_the_connection_that_declared_them(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    client = broker.client(container="transacting")
    coordinator = client.coordinator()
    sender = client.sender("txn-counted")
    committed = client.declare(coordinator)
    for n in range(2):
        client.send(sender, Message(body=n), txn=committed)
    client.discharge(coordinator, committed)
    receiver = client.receiver("txn-counted", credit=2)
    got = client.wait_received(receiver, 2)
    declared = time.time()
    open_one = client.declare(coordinator)
    client.settle(got[0], Disposition.ACCEPTED, txn=open_one)
    counted = statistics_of(node, "transacting")
    assert counted["localTransactionBegins"] == 2 and counted["localTransactionOpen"] == 1
    assert counted["localTransactionRollbacks"] == 0
    assert (counted["transactedMessagesIn"], counted["transactedMessagesOut"]) == (2, 1)
    assert int(declared * 1000) <= counted["oldestTransactionStartTime"] <= time.time() * 1000
    assert client.discharge(coordinator, open_one, fail=True).remote_state == Disposition.ACCEPTED
    counted = statistics_of(node, "transacting")
    assert counted["localTransactionRollbacks"] == 1 and counted["localTransactionOpen"] == 0
    assert "oldestTransactionStartTime" not in counted  # null: left out, as Broker-J does
    assert counted["transactedMessagesOut"] == 1  # given under it, whatever became of it


def test_delete_closes_the_connection_with_connection_forced(broker: RunningBroker) -> None:
    doomed = broker.client(container="doomed")
    doomed.wait(lambda: doomed.conn.remote_container)
    node = Node(broker.client())
    (row,) = [row for row in listed(node, "name", "clientId") if row["clientId"] == "doomed"]
    number = row["name"][1 : row["name"].index("]")]
    reply = node.ask(entity("DELETE", number, kind=CONNECTION))  # its number alone names it
    assert status(reply)[0] == 204, status(reply)
    doomed.wait(lambda: doomed.conn.remote_condition)
    assert doomed.conn.remote_condition.name == "amqp:connection:forced"
    assert "by management" in doomed.conn.remote_condition.description
    node.client.pump(0.1)
    assert "doomed" not in [row["clientId"] for row in listed(node, "clientId")]
    assert status(node.ask(entity("READ", row["name"], kind=CONNECTION)))[0] == 404


def test_clients_make_connections_so_create_and_update_are_refused(broker: RunningBroker) -> None:
    node = Node(broker.client())
    assert (
        status(node.ask(entity("CREATE", "[1] nowhere:1", kind=CONNECTION)))[0] == 501
    )  # as Broker-J
    (row,) = listed(node, "name")
    assert status(node.ask(entity("UPDATE", row["name"], kind=CONNECTION), {}))[0] == 501


def test_get_types_and_operations_know_connections(broker: RunningBroker) -> None:
    node = Node(broker.client())
    assert (
        CONNECTION
        in node.ask({"operation": "GET-TYPES", "type": "org.amqp.management", "name": "self"}).body
    )
    operations = node.ask(
        {
            "operation": "GET-OPERATIONS",
            "type": "org.amqp.management",
            "name": "self",
            "entityType": CONNECTION,
        }
    ).body
    assert sorted(operations[CONNECTION]) == ["DELETE", "READ", "getStatistics"]


def test_the_acl_guards_listing_and_closing_as_it_guards_the_consoles(tmp_path: Path) -> None:
    rules = RULES.replace(
        "acl allow carol access query name=queue\n",
        "acl allow carol access query name=queue\nacl allow carol access query name=connection\n",
    )
    process = start_secured(tmp_path, rules)
    victim = BlockingConnection(url(process, "bob"), timeout=10)
    try:
        with manage(process, "bob") as bob:
            assert bob.node("QUERY", {}, entityType=CONNECTION).status == 403
        with manage(process, "carol") as carol:
            query = {"attributeNames": ["name", "clientId"]}
            rows = carol.node("QUERY", query, entityType=CONNECTION).body["results"]
            (name,) = [n for n, client in rows if client == victim.container.container_id]
            assert carol.request("DELETE", CONNECTION, name).status == 403
        with manage(process, "alice") as alice:
            assert alice.request("DELETE", CONNECTION, name).status == 204
    finally:
        with contextlib.suppress(Exception):  # closed by alice already
            victim.close()
        process.stop()
