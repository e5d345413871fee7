"""The ``$management`` node from a raw Proton client (AMQP Management 1.0 as Broker-J has it).

Requests go on a link to ``$management``; replies come back to ``reply-to`` (a dynamic
receiver's node, a named queue, or Broker-J's receiver attached to ``$management``) with
``correlation-id``, ``statusCode`` and ``statusDescription``."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from typing import Any

import pytest
from proton import Disposition, Link, Message, uint, ulong

from proton_broker.codec.sections import parse_message
from proton_broker.codec.values import decode_value
from proton_broker.config import Config
from tests.amqp.test_durability import Restartable, brokers, drain, send_all  # noqa: F401 - fixture
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, LinkLog, Received

QUEUE = "org.apache.qpid.Queue"
NODE = {"type": "org.amqp.management", "name": "self"}


class Node:
    """A management client on the test engine: one request link, one dynamic reply node."""

    def __init__(self, client: EngineClient) -> None:
        self.client = client
        self.replies = client.receiver(None, credit=100, dynamic=True)
        self.reply_to = client.wait(lambda: self.replies.remote_source.address)
        self.requests = client.sender("$management")
        self.count = 0

    def send(self, properties: dict[str, Any], body: Any = None, **fields: Any) -> Any:
        """Send a request; returns its delivery."""
        self.count += 1
        fields.setdefault("reply_to", self.reply_to)
        fields.setdefault("correlation_id", f"c{self.count}")
        return self.client.send(self.requests, Message(properties=properties, body=body, **fields))

    def ask(self, properties: dict[str, Any], body: Any = None, **fields: Any) -> Message:
        """Send a request and wait for its reply."""
        delivery = self.send(properties, body, **fields)
        self.client.wait_settled(delivery)
        assert delivery.remote_state == Disposition.ACCEPTED, delivery.remote_condition
        return self.client.wait_received(self.replies, self.count)[-1].message


def status(reply: Message) -> tuple[int, str]:
    return reply.properties["statusCode"], reply.properties["statusDescription"]


def entity(operation: str, name: str | None = None, kind: str = QUEUE, **more: Any) -> dict:
    props = {"operation": operation, "type": kind, **more}
    if name is not None:
        props["name"] = name
    return props


def limits_config(**broker: object) -> Config:
    config = Config()
    for key, value in broker.items():
        setattr(config.broker, key, value)
    return config


def queues(broker: RunningBroker) -> set[str]:
    return broker.call(lambda: {n for n in broker.broker.queues if not n.startswith("Temp")})


@pytest.fixture
def node(broker: RunningBroker) -> Node:
    return Node(broker.client())


# ---- CREATE ------------------------------------------------------------------------------


def test_create_makes_a_queue_whose_settings_an_attach_then_sees(
    broker: RunningBroker, node: Node
) -> None:
    reply = node.ask(entity("CREATE", "prices"), {"lvqKey": "ticker"})
    assert status(reply) == (201, "Created")
    assert reply.correlation_id == "c1"
    assert reply.body["qpid-type"] == "lvq" and reply.body["lvqKey"] == "ticker"
    client = broker.client()
    send_all(
        broker,
        "prices",
        [Message(body=f"v{i}", properties={"ticker": k}) for i, k in enumerate(["a", "b", "a"])],
    )
    receiver = client.receiver("prices", credit=10)
    client.pump(0.2)
    got = client.wait_received(receiver, 2)
    assert [r.message.body for r in got] == ["v1", "v2"]  # the older 'a' was replaced


def test_create_takes_the_name_from_the_body_and_the_kind_from_the_type(
    broker: RunningBroker, node: Node
) -> None:
    reply = node.ask(
        entity("CREATE", kind="org.apache.qpid.PriorityQueue"), {"name": "urgent", "priorities": 5}
    )
    assert status(reply)[0] == 201
    assert broker.call(lambda: broker.broker.queues["urgent"].settings.priorities) == 5


def test_create_with_a_kind_its_attributes_do_not_make_is_a_400_and_creates_nothing(
    broker: RunningBroker, node: Node
) -> None:
    reply = node.ask(entity("CREATE", "q", kind="org.apache.qpid.SortedQueue"), {})
    assert status(reply)[0] == 400 and "sortKey" in status(reply)[1]
    other = node.ask(entity("CREATE", "r", kind="org.apache.qpid.LastValueQueue"), {"sortKey": "s"})
    assert status(other)[0] == 400 and "sorted queue" in status(other)[1]
    assert not {"q", "r"} & queues(broker)


def test_create_of_a_kind_by_name_alone_takes_broker_j_defaults(
    broker: RunningBroker, node: Node
) -> None:
    """Broker-J's LastValueQueue keys on ``qpid.LVQ_key`` and its PriorityQueue has 10
    levels unless told otherwise (its context defaults queue.lvqKey, queue.priorities)."""
    last = node.ask(entity("CREATE", "last", kind="org.apache.qpid.LastValueQueue"), {})
    assert status(last)[0] == 201 and last.body["lvqKey"] == "qpid.LVQ_key"
    urgent = node.ask(entity("CREATE", "urgent"), {"qpid-type": "priority"})
    assert status(urgent)[0] == 201 and urgent.body["priorities"] == 10
    settings = broker.call(lambda: broker.broker.queues["urgent"].settings)
    assert (settings.kind, settings.priorities) == ("priority", 10)


def test_create_of_an_existing_queue_is_a_409(node: Node) -> None:
    assert status(node.ask(entity("CREATE", "twice")))[0] == 201
    assert status(node.ask(entity("CREATE", "twice")))[0] == 409


def test_a_wrong_attribute_type_is_a_400_naming_it_and_creates_nothing(
    broker: RunningBroker, node: Node
) -> None:
    reply = node.ask(entity("CREATE", "limited"), {"maximumQueueDepthMessages": "ten"})
    code, description = status(reply)
    assert code == 400 and "maximumQueueDepthMessages" in description
    assert "limited" not in queues(broker)


def test_an_unknown_attribute_is_a_400_naming_it_and_creates_nothing(
    broker: RunningBroker, node: Node
) -> None:
    code, description = status(node.ask(entity("CREATE", "odd"), {"colour": "blue"}))
    assert code == 400 and "colour" in description
    assert "odd" not in queues(broker)


def test_a_body_that_is_not_a_map_is_a_400(broker: RunningBroker, node: Node) -> None:
    code, description = status(node.ask(entity("CREATE", "listy"), ["lvqKey"]))
    assert code == 400 and "map" in description
    assert "listy" not in queues(broker)


def test_the_management_address_cannot_be_a_queue_name(broker: RunningBroker, node: Node) -> None:
    assert status(node.ask(entity("CREATE", "$management")))[0] == 400
    assert "$management" not in queues(broker)


def test_an_identity_on_create_is_a_400(broker: RunningBroker, node: Node) -> None:
    assert status(node.ask(entity("CREATE", "q"), {"id": "x"}))[0] == 400
    assert "q" not in queues(broker)


# ---- bad requests --------------------------------------------------------------------------


def test_an_unknown_type_is_a_400_with_a_description(broker: RunningBroker, node: Node) -> None:
    code, description = status(node.ask(entity("CREATE", "x", kind="org.apache.qpid.VirtualHost")))
    assert code == 400 and "org.apache.qpid.VirtualHost" in description
    assert "x" not in queues(broker)


def test_an_unknown_operation_is_a_400_with_a_description(node: Node) -> None:
    code, description = status(node.ask(entity("PURGE", "x")))
    assert code == 400 and "PURGE" in description
    assert status(node.ask({"operation": "FROB", **NODE}))[0] == 400


def test_a_request_without_operation_or_name_is_a_400(broker: RunningBroker, node: Node) -> None:
    assert status(node.ask({"type": QUEUE, "name": "x"}))[0] == 400
    code, description = status(node.ask(entity("CREATE")))
    assert code == 400 and "name" in description
    code, description = status(node.ask(entity("READ")))
    assert code == 400 and "name" in description
    assert queues(broker) == set()


# ---- READ, QUERY, GET-* ------------------------------------------------------------------------


def test_read_reports_settings_and_live_figures(broker: RunningBroker, node: Node) -> None:
    node.ask(
        entity("CREATE", "work"), {"maximumQueueDepthMessages": 100, "overflowPolicy": "reject"}
    )
    send_all(broker, "work", [Message(body="x" * 10) for _ in range(3)])
    client = broker.client()
    receiver = client.receiver("work", credit=1)
    got = client.wait_received(receiver, 1)
    client.settle(got[0])
    body = node.ask(entity("READ", "work")).body
    assert body["maximumQueueDepthMessages"] == 100 and body["overflowPolicy"] == "REJECT"
    assert body["queueDepthMessages"] == 2 and body["queueDepthBytes"] > 20
    assert body["consumerCount"] == 1
    assert (body["totalEnqueuedMessages"], body["totalDequeuedMessages"]) == (3, 1)


def test_read_finds_a_queue_by_identity_and_by_object_path(node: Node) -> None:
    created = node.ask(entity("CREATE", "found")).body
    by_id = node.ask({"operation": "READ", "type": QUEUE, "identity": created["id"]})
    by_path = node.ask(
        {"operation": "READ", "type": QUEUE, "index": "object-path", "key": "default/default/found"}
    )
    assert by_id.body["name"] == by_path.body["name"] == "found"
    assert status(node.ask(entity("READ", "missing")))[0] == 404


def test_object_paths_escape_a_slash_so_no_name_reads_as_another_s_path(node: Node) -> None:
    """Broker-J's object paths: ``x/b`` is written ``x\\/b``; the unescaped key names
    neither ``x/b`` nor ``b``; a path from the broker's node (node/host/name) still names
    its last element."""
    slashed = node.ask(entity("CREATE", "x/b")).body
    node.ask(entity("CREATE", "b"))
    assert slashed["object-path"] == "x\\/b"
    path = {"type": QUEUE, "index": "object-path"}
    read = node.ask({"operation": "READ", **path, "key": "x\\/b"})
    assert read.body["name"] == "x/b"
    refused = node.ask({"operation": "DELETE", **path, "key": "x/b"})
    assert status(refused)[0] == 404
    assert status(node.ask(entity("READ", "x/b")))[0] == 200  # both still there
    assert status(node.ask(entity("READ", "b")))[0] == 200
    by_broker = node.ask({"operation": "READ", **path, "key": "default/default/x\\/b"})
    assert by_broker.body["name"] == "x/b"


def test_a_failure_answer_leaves_out_the_list_properties_it_cannot_carry(node: Node) -> None:
    """A failure echoes the request's application properties, save the lists a request
    may give (``messageIds``, ``statistics``): the link stays and answers the next one."""
    asked = entity("deleteMessages", "no-such-queue", messageIds=[1, 2])
    failed = node.ask(asked)
    assert status(failed)[0] == 404
    assert failed.properties["name"] == "no-such-queue" and "messageIds" not in failed.properties
    assert failed.correlation_id == f"c{node.count}"
    assert status(node.ask(entity("CREATE", "after-the-failure")))[0] == 201


def test_a_binary_correlation_id_comes_back_as_it_was_sent(node: Node) -> None:
    reply = node.ask(dict(NODE, operation="GET-TYPES"), correlation_id=b"some correlation id")
    assert bytes(reply.correlation_id) == b"some correlation id"
    by_id = node.ask(dict(NODE, operation="GET-TYPES"), correlation_id=None, id=b"\x00\x01")
    assert bytes(by_id.correlation_id) == b"\x00\x01"


def assert_named_as_broker_j_names_it(node: Node, kind: str, created: dict[str, Any]) -> None:
    """``created`` (a CREATE's answer) has Broker-J's ``identity`` (our ``id``) and
    ``object-path`` (its name), and a READ by that identity finds it."""
    assert created["identity"] == created["id"] and created["object-path"] == created["name"]
    again = node.ask({"operation": "READ", "type": kind, "identity": created["identity"]})
    assert again.body["name"] == created["name"]


def test_read_answers_with_the_identity_and_object_path_broker_j_gives(node: Node) -> None:
    created = node.ask(entity("CREATE", "named")).body
    assert created["name"] == "named"
    assert_named_as_broker_j_names_it(node, QUEUE, created)


def test_read_and_query_give_the_type_class_as_type_and_the_kind_as_qpid_type(
    node: Node,
) -> None:
    """As Broker-J answers: ``type`` is the AMQP name of the queue's type class,
    ``qpid-type`` its kind."""
    node.ask(entity("CREATE", "last"), {"lvqKey": "k"})
    read = node.ask(entity("READ", "last")).body
    assert (read["type"], read["qpid-type"]) == ("org.apache.qpid.LastValueQueue", "lvq")
    asked = node.ask(
        {"operation": "QUERY", **NODE, "entityType": QUEUE},
        {"attributeNames": ["name", "type", "qpid-type"]},
    )
    assert ["last", "org.apache.qpid.LastValueQueue", "lvq"] in asked.body["results"]
    every = node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE}, {}).body
    rows = [dict(zip(every["attributeNames"], row, strict=True)) for row in every["results"]]
    last = next(row for row in rows if row["name"] == "last")
    assert (last["type"], last["qpid-type"]) == ("org.apache.qpid.LastValueQueue", "lvq")


def test_create_and_update_take_type_and_qpid_type_as_the_kind_or_the_class(
    broker: RunningBroker, node: Node
) -> None:
    lvq = "org.apache.qpid.LastValueQueue"
    given = [{"type": "lvq"}, {"type": lvq}, {"qpid-type": "lvq"}, {"qpid-type": lvq}]
    for n, body in enumerate(given):
        reply = node.ask(entity("CREATE", f"lv{n}"), {"lvqKey": "k", **body})
        assert status(reply)[0] == 201, status(reply)
        for sent in given:  # either name, under either attribute, is the queue's own
            assert status(node.ask(entity("UPDATE", f"lv{n}"), sent))[0] == 200
    wrong = node.ask(entity("CREATE", "no"), {"lvqKey": "k", "qpid-type": "sorted"})
    assert status(wrong)[0] == 400 and "qpid-type" in status(wrong)[1]
    changed = node.ask(entity("UPDATE", "lv0"), {"qpid-type": "org.apache.qpid.SortedQueue"})
    assert status(changed)[0] == 400 and "qpid-type" in status(changed)[1]
    assert "no" not in queues(broker)


def test_a_failure_answers_with_the_request_properties_as_broker_j_does(node: Node) -> None:
    """Broker-J copies a failed request's application properties into its answer, so a
    client sending many requests can tell which one failed; a success answers without. Its
    failure body is empty bytes (a data section), as Broker-J's is."""
    node.ask(entity("CREATE", "present"))
    failed = node.ask(entity("READ", "absent", requestId="r-7"))
    assert status(failed)[0] == 404
    assert failed.inferred and bytes(failed.body) == b""
    assert {"operation": "READ", "type": QUEUE, "name": "absent", "requestId": "r-7"}.items() <= (
        failed.properties.items()
    )
    read = node.ask(entity("READ", "present", requestId="r-8"))
    assert status(read)[0] == 200 and "requestId" not in read.properties


def test_read_with_another_kind_does_not_find_the_queue(node: Node) -> None:
    node.ask(entity("CREATE", "plain"))
    assert status(node.ask(entity("READ", "plain", kind="org.apache.qpid.SortedQueue")))[0] == 404


def test_read_reports_per_group_counts_on_a_grouped_queue(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(
        entity("CREATE", "grouped"),
        {"messageGroupKeyOverride": "G", "messageGroupType": "SHARED_GROUPS"},
    )
    send_all(broker, "grouped", [Message(properties={"G": g}) for g in "aab"])
    body = node.ask(entity("READ", "grouped")).body
    counts = {g["groupId"]: g["messageCount"] for g in body["messageGroups"]}
    assert counts == {"a": 2, "b": 1} and body["messageGroupCount"] == 2


def test_read_reports_the_key_count_of_a_last_value_queue(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "lv"), {"lvqKey": "k"})
    send_all(broker, "lv", [Message(properties={"k": k}) for k in "abab c".replace(" ", "")])
    body = node.ask(entity("READ", "lv")).body
    assert body["lvqKeyCount"] == 3 and body["queueDepthMessages"] == 3
    assert body["totalReplacedMessages"] == 2


def test_read_reports_the_queue_sequence_numbers_and_duplicates(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "numbered"), {"duplicateDetectionCount": 10})
    body = node.ask(entity("READ", "numbered")).body
    assert (body["earliestSequenceNumber"], body["nextSequenceNumber"]) == (1, 1)
    send_all(broker, "numbered", [Message(id=f"m{i}", body=i) for i in (1, 2, 3, 2)])
    client = broker.client()
    first = client.wait_received(client.receiver("numbered", credit=1), 1)[0]
    client.settle(first)
    client.pump(0.3)
    assert first.message.body == 1
    body = node.ask(entity("READ", "numbered")).body
    assert (body["earliestSequenceNumber"], body["nextSequenceNumber"]) == (2, 4)
    assert body["totalDuplicateMessages"] == 1 and body["duplicateDetectionCount"] == 10


def test_query_lists_queues_with_the_attributes_asked_for(node: Node) -> None:
    for name, attributes in (("b", {"lvqKey": "k"}), ("a", {}), ("c", {"sortKey": "s"})):
        node.ask(entity("CREATE", name), attributes)
    reply = node.ask(
        {"operation": "QUERY", **NODE, "entityType": QUEUE},
        {"attributeNames": ["name", "qpid-type"]},
    )
    assert status(reply)[0] == 200
    rows = [row for row in reply.body["results"] if not row[0].startswith("Temp")]
    assert reply.body["attributeNames"] == ["name", "qpid-type"]
    assert rows == [["a", "standard"], ["b", "lvq"], ["c", "sorted"]]
    kind = node.ask(
        {"operation": "QUERY", **NODE, "entityType": "org.apache.qpid.LastValueQueue"},
        {"attributeNames": ["name"]},
    )
    assert kind.body["results"] == [["b"]]


def test_query_takes_attribute_names_as_json_text_as_jms_clients_send_them(node: Node) -> None:
    """A JMS MapMessage cannot carry a list (Broker-J's own JMS management helper sends
    ``"[]"``)."""
    node.ask(entity("CREATE", "as-text"))
    reply = node.ask(
        {"operation": "QUERY", **NODE, "entityType": QUEUE}, {"attributeNames": '["name"]'}
    )
    assert status(reply)[0] == 200 and ["as-text"] in reply.body["results"]
    every = node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE}, {"attributeNames": "[]"})
    assert "qpid-type" in every.body["attributeNames"]
    bad = node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE}, {"attributeNames": "[na"})
    assert status(bad)[0] == 400


def test_query_honours_offset_and_count(node: Node) -> None:
    for name in ("A1", "A2", "A3"):  # listed before the reply queue (TempQueue...)
        node.ask(entity("CREATE", name))
    reply = node.ask(
        {"operation": "QUERY", **NODE, "entityType": QUEUE, "offset": 1, "count": 1},
        {"attributeNames": ["name"]},
    )
    assert reply.body["results"] == [["A2"]]
    bad = node.ask({"operation": "QUERY", **NODE, "count": "many"}, {})
    assert status(bad)[0] == 400 and "count" in status(bad)[1]


def reply_body(received: Received) -> tuple[int, Any]:
    """A reply's status and body, read with the broker's codec: a body of more than
    65,535 values is more than the test client's Proton can decode."""
    message = parse_message(received.data)
    start = message.app_properties_span[1] + 3  # the amqp-value section after them
    return message.application_property("statusCode"), decode_value(received.data, start)


def test_query_answers_with_every_queue_when_there_are_thousands(
    broker: RunningBroker, node: Node
) -> None:
    names = [f"many{i:04}" for i in range(1500)]  # every attribute: over 65,535 values
    broker.call(lambda: [broker.broker.declare(name) for name in names])
    node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE})
    code, body = reply_body(node.client.received(node.replies)[-1])
    assert code == 200
    listed = [row[body["attributeNames"].index("name")] for row in body["results"]]
    assert [name for name in listed if not name.startswith("TempQueue")] == names


@pytest.mark.parametrize("broker_config", [limits_config(max_message_size=4096)])
def test_an_answer_over_the_largest_message_is_a_413_and_a_page_of_it_a_200(
    broker: RunningBroker, node: Node
) -> None:
    broker.call(lambda: [broker.broker.declare(f"Page{i:02}") for i in range(40)])
    whole = node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE})
    assert status(whole)[0] == 413 and "offset" in status(whole)[1]
    assert status(whole)[1].startswith("the answer (200 OK) is ")
    page = node.ask({"operation": "QUERY", **NODE, "entityType": QUEUE, "offset": 3, "count": 2})
    assert status(page)[0] == 200
    assert [row[0] for row in page.body["results"]] == [
        "Page03",
        "Page04",
    ]  # before the reply queue, TempQueue...


def test_get_types_attributes_and_operations_describe_the_queue_types(node: Node) -> None:
    types = node.ask({"operation": "GET-TYPES", **NODE}).body
    assert types["org.apache.qpid.LastValueQueue"] == [QUEUE]
    attributes = node.ask({"operation": "GET-ATTRIBUTES", **NODE, "entityType": QUEUE}).body
    assert {"lvqKey", "queueDepthMessages", "totalEnqueuedMessages"} <= set(attributes[QUEUE])
    operations = node.ask({"operation": "GET-OPERATIONS", **NODE}).body
    assert set(operations[QUEUE]) == {
        *("CREATE", "READ", "UPDATE", "DELETE"),
        *("clearQueue", "getStatistics", "resetStatistics"),
        *("getMessageInfo", "getMessageInfoById", "deleteMessages"),
        *("getMessageContent", "moveMessages", "copyMessages"),
        *("getConsumers", "getPublishingLinks"),
        *("setContextVariable", "removeContextVariable"),
    }
    assert operations[QUEUE]["moveMessages"] == ["destination", "messageIds", "selector", "limit"]
    assert operations[QUEUE]["getStatistics"] == ["statistics"]
    assert "RELOAD-ACL" in operations["org.amqp.management"]


def test_a_queue_reads_its_flow_state_under_broker_js_name_too(node: Node) -> None:
    body = node.ask(entity("CREATE", "flowing")).body
    assert body["queueFlowStopped"] is False and body["flowStopped"] is False


def test_get_types_of_a_category_includes_its_kinds_and_of_an_unknown_type_nothing(
    node: Node,
) -> None:
    """As Broker-J's ``getTypeSpecialisations``."""
    kinds = node.ask({"operation": "GET-TYPES", **NODE, "entityType": QUEUE}).body
    assert kinds[QUEUE] == [] and kinds["org.apache.qpid.SortedQueue"] == [QUEUE]
    assert "org.apache.qpid.Exchange" not in kinds
    unknown = node.ask({"operation": "GET-ATTRIBUTES", **NODE, "entityType": "com.example.X"})
    assert status(unknown)[0] == 200 and unknown.body == {}


def test_reload_acl_without_an_acl_file_is_a_409_saying_so(node: Node) -> None:
    code, description = status(node.ask({"operation": "RELOAD-ACL", **NODE}))
    assert code == 409 and "acl.file" in description


# ---- UPDATE ------------------------------------------------------------------------------------


def test_update_changes_a_live_setting(broker: RunningBroker, node: Node) -> None:
    node.ask(entity("CREATE", "ttl"))
    reply = node.ask(entity("UPDATE", "ttl"), {"maximumMessageTtl": 60000})
    assert status(reply)[0] == 200 and reply.body["maximumMessageTtl"] == 60000
    assert broker.call(lambda: broker.broker.queues["ttl"].settings.max_ttl) == 60000


def test_update_of_a_setting_fixed_at_creation_is_a_400_and_changes_nothing(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "fixed"), {"lvqKey": "k"})
    code, description = status(
        node.ask(entity("UPDATE", "fixed"), {"lvqKey": "other", "maximumMessageTtl": 5})
    )
    assert code == 400 and "lvqKey" in description
    settings = broker.call(lambda: broker.broker.queues["fixed"].settings)
    assert (settings.lvq_key, settings.max_ttl) == ("k", None)


def test_update_accepts_a_read_map_sent_back_with_one_change(node: Node) -> None:
    node.ask(entity("CREATE", "roundtrip"), {"sortKey": "s"})
    attributes = node.ask(entity("READ", "roundtrip")).body
    attributes["ensureNondestructiveConsumers"] = True
    reply = node.ask(entity("UPDATE", "roundtrip"), attributes)
    assert status(reply)[0] == 200 and reply.body["ensureNondestructiveConsumers"] is True
    read_only_changes = (("id", "another"), ("type", "lvq"), ("qpid-type", "lvq"))
    for read_only, value in read_only_changes:
        changed = {**attributes, read_only: value}
        assert status(node.ask(entity("UPDATE", "roundtrip"), changed))[0] == 400
    # Figures move between a READ and the UPDATE that sends them back: they are passed
    # over, as Broker-J passes over names that are not attributes.
    now = node.ask(entity("READ", "roundtrip")).body
    moved = {**now, "queueDepthMessages": 7, "oldestMessageAge": 99}
    reply = node.ask(entity("UPDATE", "roundtrip"), moved)
    assert status(reply)[0] == 200, status(reply)
    assert reply.body["queueDepthMessages"] == 0


def test_create_takes_broker_js_other_attributes_at_their_defaults(
    broker: RunningBroker, node: Node
) -> None:
    """What a Broker-J client sends along (its defaults, alert thresholds) creates the
    queue; a value asking for a feature this broker lacks is a 501, and nothing is made."""
    made = node.ask(
        entity("CREATE", "broker-j-style"),
        {
            "messageDurability": "DEFAULT",
            "maximumLiveConsumers": 0,
            "noLocal": False,
            "alertThresholdQueueDepthMessages": 1000,
            "alertThresholdMessageAge": 60000,
            "maximumDistinctGroups": 255,
        },
    )
    assert status(made)[0] == 201
    session = node.ask(entity("CREATE", "per-session"), {"exclusive": "SESSION"})
    assert status(session)[0] == 501 and "exclusive" in status(session)[1]
    assert "per-session" not in queues(broker)


def test_update_changes_a_live_queues_limits_at_once_as_broker_j_does(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(
        entity("CREATE", "bounded"), {"overflowPolicy": "REJECT", "maximumQueueDepthMessages": 1}
    )
    client = broker.client()
    sender = client.sender("bounded")
    client.wait(lambda: sender.credit > 0)
    first, second = (client.send(sender, Message(body=n)) for n in range(2))
    assert client.wait_settled(second).remote_state == Disposition.REJECTED
    raised = node.ask(entity("UPDATE", "bounded"), {"maximumQueueDepthMessages": 3})
    assert status(raised)[0] == 200 and raised.body["maximumQueueDepthMessages"] == 3
    third = client.send(sender, Message(body=2))
    assert client.wait_settled(third).remote_state == Disposition.ACCEPTED
    # Producer flow control now: the sender attached before it has its credit withdrawn.
    pfc = {"overflowPolicy": "PRODUCER_FLOW_CONTROL", "maximumQueueDepthMessages": 1}
    assert status(node.ask(entity("UPDATE", "bounded"), pfc))[0] == 200
    client.wait(lambda: sender.credit == 0)
    ring = {"overflowPolicy": "RING", "maximumQueueDepthMessages": 1}
    assert status(node.ask(entity("UPDATE", "bounded"), ring))[0] == 200
    client.wait(lambda: sender.credit > 0)  # a ring never stops its producers
    figures = node.ask(entity("READ", "bounded")).body
    assert (figures["queueDepthMessages"], figures["totalEvictedMessages"]) == (1, 1)
    assert drain(broker, "bounded", 1) == [2]  # the oldest made room


def test_flow_to_disk_set_by_update_pages_out_what_is_already_beyond_the_limit(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "swelling"))
    send_all(broker, "swelling", [Message(body=f"m{n}" * 100) for n in range(6)])
    paged = {"overflowPolicy": "FLOW_TO_DISK", "maximumQueueDepthMessages": 2}
    assert status(node.ask(entity("UPDATE", "swelling"), paged))[0] == 200

    def in_memory() -> list[bool]:
        return [not e.message.paged for e in broker.broker.queues["swelling"].entries()]

    expected = [True, True, False, False, False, False]  # written to the store, then dropped
    broker.client().wait(lambda: broker.call(in_memory) == expected)
    assert drain(broker, "swelling", 6) == [f"m{n}" * 100 for n in range(6)]


def test_description_and_context_are_kept_read_back_and_changed(node: Node) -> None:
    made = node.ask(
        entity("CREATE", "described"), {"description": "orders", "context": {"team": "red"}}
    )
    assert status(made)[0] == 201
    assert made.body["description"] == "orders" and made.body["context"] == {"team": "red"}
    changed = node.ask(entity("UPDATE", "described"), {"description": "all orders"})
    assert status(changed)[0] == 200, status(changed)
    assert changed.body["description"] == "all orders"
    assert node.ask(entity("READ", "described")).body["description"] == "all orders"
    bad = node.ask(entity("CREATE", "undescribed"), {"context": ["a"]})
    assert status(bad)[0] == 400 and "context" in status(bad)[1]


# ---- clearQueue (Broker-J's queue operation) ------------------------------------------------


def test_clear_queue_removes_the_available_messages_and_answers_how_many(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "clearing"))
    send_all(broker, "clearing", [Message(body=n) for n in range(4)])
    client = broker.client()
    receiver = client.receiver("clearing", credit=1)
    (held,) = client.wait_received(receiver, 1)  # held unsettled: it stays with its consumer
    reply = node.ask(entity("clearQueue", "clearing"))
    assert status(reply) == (200, "OK") and reply.body == 3
    assert broker.call(lambda: broker.broker.queues["clearing"].depth) == 1
    client.settle_all([held])
    assert status(node.ask(entity("clearQueue", "clearing")))[0] == 200


@pytest.mark.parametrize("operation", ["clearQueue", "deleteMessages"])
def test_a_purge_of_stored_messages_is_answered_only_once_their_removals_are_on_disk(
    broker: RunningBroker, node: Node, operation: str
) -> None:
    node.ask(entity("CREATE", "purged"), {"durable": True})
    send_all(broker, "purged", [Message(body=n, durable=True) for n in range(3)])
    store = broker.broker.store
    assert store is not None
    writing = threading.Event()
    store._before_write = lambda: writing.wait(10)  # type: ignore[attr-defined] # holds the writer
    try:
        node.send(entity(operation, "purged"))
        node.client.pump(0.5)
        assert len(node.client.received(node.replies)) == 1  # CREATE's: none while they wait
    finally:
        writing.set()
    reply = node.client.wait_received(node.replies, 2)[-1].message
    assert status(reply) == (200, "OK")
    with sqlite3.connect(store.path) as db:  # type: ignore[attr-defined]
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_clear_queue_of_an_unknown_queue_is_a_404(node: Node) -> None:
    assert status(node.ask(entity("clearQueue", "nowhere")))[0] == 404


# ---- getMessageInfo and getMessageInfoById (Broker-J's operations) ---------------------------


def test_get_message_info_lists_the_messages_waiting_as_broker_j_describes_them(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "described-messages"))
    sent = [
        Message(
            id=f"m{n}",
            subject="order",
            correlation_id="c1",
            content_type="text/plain",
            priority=7,
            durable=True,
            properties={"n": n},
            body=f"order {n}",
        )
        for n in range(3)
    ]
    send_all(broker, "described-messages", sent)
    client = broker.client()
    receiver = client.receiver("described-messages", credit=1)
    client.wait_received(receiver, 1)  # held: Acquired
    reply = node.ask(entity("getMessageInfo", "described-messages"))
    assert status(reply)[0] == 200
    infos = reply.body
    assert [i["messageId"] for i in infos] == ["m0", "m1", "m2"]
    assert [i["state"] for i in infos] == ["Acquired", "Available", "Available"]
    first = infos[0]
    assert (first["type"], first["correlationId"], first["mimeType"]) == (
        "order",
        "c1",
        "text/plain",
    )
    assert (first["priority"], first["persistent"], first["messageType"]) == (7, True, "AMQP 1.0")
    assert first["deliveryCount"] == 0 and first["size"] > 0 and first["arrivalTime"] > 0
    assert "headers" not in first  # includeHeaders is false by default
    second = node.ask(
        entity("getMessageInfo", "described-messages", first="1", last=1, includeHeaders=True)
    ).body
    assert [(i["messageId"], i["headers"]) for i in second] == [("m1", {"n": 1})]
    by_id = node.ask(
        entity("getMessageInfoById", "described-messages", messageId=infos[2]["id"])
    ).body
    assert by_id["messageId"] == "m2" and by_id["headers"] == {"n": 2}  # headers by default
    gone = node.ask(entity("getMessageInfoById", "described-messages", messageId=999))
    assert status(gone)[0] == 404
    bad = node.ask(entity("getMessageInfo", "described-messages", first="one"))
    assert status(bad)[0] == 400 and "first" in status(bad)[1]


def test_get_message_info_pages_through_a_deep_queue_that_packs_its_messages(
    broker: RunningBroker, node: Node
) -> None:
    """A deep plain queue keeps its newest messages packed (queues/packed.py): a page past
    the unpacked ones still shows them, and nothing is taken."""
    node.ask(entity("CREATE", "deep"))
    broker.call(lambda: setattr(broker.broker.queues["deep"]._packed, "after", 5))
    send_all(broker, "deep", [Message(id=f"d{n}", body=n) for n in range(40)])
    assert broker.call(lambda: broker.broker.queues["deep"]._packed.size) > 30
    page = node.ask(entity("getMessageInfo", "deep", first=30, last=34)).body
    assert [i["messageId"] for i in page] == [f"d{n}" for n in range(30, 35)]
    assert broker.call(lambda: broker.broker.queues["deep"].depth) == 40


def test_message_ids_of_number_types_are_shown_as_their_decimal_text(
    broker: RunningBroker, node: Node
) -> None:
    """As Broker-J shows them (the id's text), not Proton's repr ("ulong(7)")."""
    send_all(
        broker,
        "numbered-ids",
        [Message(id=ulong(7), correlation_id=uint(8)), Message(id=b"raw", body="x")],
    )
    infos = node.ask(entity("getMessageInfo", "numbered-ids")).body
    assert [(i["messageId"], i.get("correlationId")) for i in infos] == [
        ("7", "8"),
        ("raw", None),
    ]


def test_delete_messages_removes_those_named_or_selected_that_nobody_holds(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "pruned"))
    colours = ["red", "blue", "red", "blue", "red"]
    send_all(
        broker,
        "pruned",
        [Message(id=f"p{n}", properties={"colour": c}) for n, c in enumerate(colours)],
    )
    client = broker.client()
    receiver = client.receiver("pruned", credit=1)
    client.wait_received(receiver, 1)  # p0, held by its consumer
    ids = [i["id"] for i in node.ask(entity("getMessageInfo", "pruned")).body]
    named = node.ask(entity("deleteMessages", "pruned", messageIds=ids[:3]))
    assert status(named)[0] == 200 and named.body == ids[1:3]  # p0 stays with its consumer
    selected = node.ask(entity("deleteMessages", "pruned", selector="colour = 'red'", limit="1"))
    assert selected.body == [ids[4]]
    left = node.ask(entity("getMessageInfo", "pruned")).body
    assert [i["messageId"] for i in left] == ["p0", "p3"]
    as_text = node.ask(entity("deleteMessages", "pruned", messageIds=json.dumps([ids[3]])))
    assert as_text.body == [ids[3]]  # a list as JSON text, as JMS clients send it
    bad = node.ask(entity("deleteMessages", "pruned", selector="colour = "))
    assert status(bad)[0] == 400
    assert broker.call(lambda: broker.broker.queues["pruned"].depth) == 1


# ---- getStatistics and resetStatistics (Broker-J's operations) -------------------------------


def test_get_statistics_answers_broker_js_queue_statistics(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "counted"))
    send_all(broker, "counted", [Message(body="x" * 10) for _ in range(3)])
    client = broker.client()
    receiver = client.receiver("counted", credit=1)
    (held,) = client.wait_received(receiver, 1)
    reply = node.ask(entity("getStatistics", "counted"))
    assert status(reply)[0] == 200
    figures = reply.body
    assert (figures["queueDepthMessages"], figures["totalEnqueuedMessages"]) == (3, 3)
    assert figures["totalEnqueuedBytes"] == figures["queueDepthBytes"] > 30
    assert (figures["unacknowledgedMessages"], figures["availableMessages"]) == (1, 2)
    assert (figures["consumerCount"], figures["consumerCountWithCredit"]) == (1, 0)
    assert (figures["totalDequeuedMessages"], figures["bindingCount"]) == (0, 0)
    assert isinstance(figures["oldestMessageAge"], int) and figures["oldestMessageAge"] >= 0
    assert "maximumQueueDepthMessages" not in figures  # settings are not statistics
    client.settle(held)
    wanted = ["unacknowledgedMessages", "totalDequeuedMessages", "noSuchStatistic"]
    reply = node.ask(entity("getStatistics", "counted", statistics=wanted))
    assert reply.body == {"unacknowledgedMessages": 0, "totalDequeuedMessages": 1}


def test_get_statistics_takes_the_names_as_json_text_as_jms_clients_send_them(
    node: Node,
) -> None:
    node.ask(entity("CREATE", "texted"))
    asked = entity("getStatistics", "texted", statistics='["queueDepthMessages"]')
    assert node.ask(asked).body == {"queueDepthMessages": 0}
    wrong = node.ask(entity("getStatistics", "texted", statistics="queueDepthMessages"))
    assert status(wrong)[0] == 400 and "statistics" in status(wrong)[1]


def test_every_message_that_leaves_counts_as_dequeued_as_the_anchors_count_it(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "leaving"))
    send_all(broker, "leaving", [Message(body=n) for n in range(4)])
    client = broker.client()
    receiver = client.receiver("leaving", credit=1)
    client.settle_all(client.wait_received(receiver, 1))  # consumed
    node.ask(entity("clearQueue", "leaving"))  # three purged
    figures = node.ask(entity("READ", "leaving")).body
    assert (figures["totalDequeuedMessages"], figures["totalConsumedMessages"]) == (4, 1)
    assert figures["totalDequeuedBytes"] == figures["totalEnqueuedBytes"]


def test_the_oldest_message_age_is_how_long_the_oldest_has_waited(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "waiting"))
    empty = node.ask(entity("getStatistics", "waiting", statistics=["oldestMessageAge"]))
    assert empty.body == {"oldestMessageAge": 0}
    send_all(broker, "waiting", [Message(body="old")])
    time.sleep(0.3)
    send_all(broker, "waiting", [Message(body="new")])
    aged = node.ask(entity("getStatistics", "waiting", statistics=["oldestMessageAge"]))
    assert 300 <= aged.body["oldestMessageAge"] < 5000


def test_reset_statistics_starts_the_counters_again_but_not_the_depth(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "restarted"))
    send_all(broker, "restarted", [Message(body=n) for n in range(2)])
    reply = node.ask(entity("resetStatistics", "restarted"))
    assert status(reply)[0] == 200
    figures = node.ask(entity("getStatistics", "restarted")).body
    assert (figures["totalEnqueuedMessages"], figures["totalEnqueuedBytes"]) == (0, 0)
    assert figures["queueDepthMessages"] == 2
    assert status(node.ask(entity("getStatistics", "nowhere")))[0] == 404


# ---- DELETE ------------------------------------------------------------------------------------


def test_delete_refuses_a_non_empty_queue_without_force(broker: RunningBroker, node: Node) -> None:
    node.ask(entity("CREATE", "full"))
    send_all(broker, "full", [Message(body="keep")])
    code, description = status(node.ask(entity("DELETE", "full")))
    assert code == 409 and "force" in description
    assert broker.call(lambda: broker.broker.queues["full"].depth) == 1


def test_delete_with_force_detaches_consumers_with_resource_deleted(
    broker: RunningBroker, node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    node.ask(entity("CREATE", "doomed"))
    send_all(broker, "doomed", [Message(body="x"), Message(body="y")])
    client = broker.client()
    receiver = client.receiver("doomed", credit=1)
    client.wait_received(receiver, 1)  # one held unsettled by the consumer
    with caplog.at_level(logging.INFO, logger="proton_broker.broker"):
        reply = node.ask(entity("DELETE", "doomed", force=True))
    assert status(reply)[0] == 204
    client.wait_closed(receiver)
    assert receiver.remote_condition.name == "amqp:resource-deleted"
    assert "doomed" not in queues(broker)
    assert 'QUE-1002 Deleted : "doomed"' in caplog.text


def test_deleting_a_durable_queue_removes_it_and_its_messages_from_the_store(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    node = Node(broker.client())
    node.ask(entity("CREATE", "kept"), {"durable": True})
    node.ask(entity("CREATE", "gone"), {"durable": True})
    send_all(broker, "gone", [Message(body="old", durable=True)])
    assert status(node.ask(entity("DELETE", "gone", force=True)))[0] == 204
    broker = brokers.restart()
    assert queues(broker) == {"kept"}
    node = Node(broker.client())
    node.ask(entity("CREATE", "gone"), {"durable": True})
    assert drain(broker, "gone", 0) == []


def test_create_without_durable_makes_a_durable_queue_as_broker_j_does(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    node = Node(brokers.start().client())
    assert node.ask(entity("CREATE", "lasting")).body["durable"] is True
    assert node.ask(entity("CREATE", "passing"), {"durable": False}).body["durable"] is False
    send_all(brokers.current, "lasting", [Message(body="kept", durable=True)])  # type: ignore[arg-type]
    broker = brokers.restart()
    assert queues(broker) >= {"lasting"} and "passing" not in queues(broker)
    assert drain(broker, "lasting", 1) == ["kept"]


def test_maps_set_by_update_survive_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    node = Node(brokers.start().client())
    node.ask(entity("CREATE", "kept"))
    filters = {"x-qpid-replay-period": {"x-qpid-replay-period": ["60"]}}
    changes = {"defaultFilters": filters, "context": {"team": "red"}, "description": "d"}
    assert status(node.ask(entity("UPDATE", "kept"), changes))[0] == 200
    node = Node(brokers.restart().client())
    read = node.ask(entity("READ", "kept")).body
    assert read["defaultFilters"] == filters and read["context"] == {"team": "red"}
    assert read["description"] == "d"


def test_numbers_of_any_amqp_type_are_kept_as_numbers_across_an_update_and_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    """rhea and qpid::messaging send whole numbers as uint or ulong: a queue keeps their
    value, not the text of its type, so an UPDATE and a restart read them again."""
    node = Node(brokers.start().client())
    limits = {"overflowPolicy": "REJECT", "maximumQueueDepthMessages": uint(5)}
    assert status(node.ask(entity("CREATE", "typed"), limits))[0] == 201
    raised = node.ask(entity("UPDATE", "typed"), {"maximumQueueDepthBytes": ulong(1000)})
    assert status(raised)[0] == 200, status(raised)
    node = Node(brokers.restart().client())
    read = node.ask(entity("READ", "typed")).body
    assert (read["maximumQueueDepthMessages"], read["maximumQueueDepthBytes"]) == (5, 1000)


# ---- replies -------------------------------------------------------------------------------


def test_the_correlation_id_falls_back_to_the_message_id(node: Node) -> None:
    reply = node.ask(NODE | {"operation": "GET-TYPES"}, correlation_id=None, id="m-42")
    assert reply.correlation_id == "m-42"


def test_a_reply_to_a_named_queue_is_delivered_there(broker: RunningBroker, node: Node) -> None:
    node.ask(entity("CREATE", "answers"))
    delivery = node.send(entity("READ", "answers"), reply_to="answers")
    assert node.client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
    client = broker.client()
    got = client.wait_received(client.receiver("answers", credit=5), 1)
    assert got[0].message.properties["statusCode"] == 200
    assert got[0].message.body["name"] == "answers"


def management_receiver(client: EngineClient, address: str) -> Link:
    """A receiver attached from ``$management`` whose target address is ``address``, the
    reply-to of its requests (Broker-J's shape)."""
    replies = client.session.receiver(f"mgmt-replies-{address}")
    replies.source.address = "$management"
    replies.target.address = address
    replies.open()
    client.logs[replies.name] = LinkLog()
    replies.flow(5)
    return replies


def test_a_reply_goes_to_a_receiver_attached_to_management_by_its_target_address(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    replies = management_receiver(client, "my-replies")
    requests = client.sender("$management")
    client.wait(lambda: replies.remote_source.address)
    assert replies.remote_source.address == "$management"
    client.send(
        requests,
        Message(
            reply_to="my-replies",
            correlation_id="j1",
            properties={"operation": "GET-TYPES", **NODE},
        ),
    )
    got = client.wait_received(replies, 1)
    assert got[0].message.correlation_id == "j1"
    assert got[0].message.properties["statusCode"] == 200
    replies.close()
    client.pump(0.2)
    assert broker.call(lambda: [n for n in broker.broker.queues if n.startswith("Temp")]) == []


def test_another_connections_request_is_never_answered_on_a_management_receivers_queue(
    broker: RunningBroker,
) -> None:
    """Broker-J matches such a receiver on the requester's connection only; another
    connection's reply-to of that address is an address like any other."""
    owner, other = broker.client(container="owner"), broker.client(container="other")
    replies = management_receiver(owner, "shared-name")
    owner.wait(lambda: replies.remote_source.address)
    requests = other.sender("$management")
    request = Message(reply_to="shared-name", properties={"operation": "GET-TYPES", **NODE})
    delivery = other.wait_settled(other.send(requests, request, pump=False))
    assert delivery.remote.condition.name == "amqp:not-found"  # no queue of that name
    owner.pump(0.3)
    assert owner.received(replies) == []
    assert "shared-name" not in queues(broker)  # a reply never makes a queue


def test_a_request_without_reply_to_is_rejected_and_not_performed(
    broker: RunningBroker, node: Node
) -> None:
    delivery = node.send(entity("CREATE", "silent"), reply_to=None)
    node.client.wait_settled(delivery)
    assert delivery.remote_state == Disposition.REJECTED
    assert "reply-to" in delivery.remote.condition.description
    assert "silent" not in queues(broker)


def test_a_request_whose_reply_to_names_no_node_is_rejected_and_not_performed(
    broker: RunningBroker, node: Node
) -> None:
    """Even where a sender's attach would create the queue: neither Qpid broker makes a
    queue for a reply."""
    delivery = node.send(entity("CREATE", "lost"), reply_to="nowhere")
    node.client.wait_settled(delivery)
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition.name == "amqp:not-found"
    assert "lost" not in queues(broker) and "nowhere" not in queues(broker)


def test_a_dynamic_node_goes_when_its_link_detaches(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver(None, credit=1, dynamic=True)
    address = client.wait(lambda: link.remote_source.address)
    assert broker.call(lambda: address in broker.broker.queues)
    link.close()
    client.wait_closed(link)
    assert broker.call(lambda: address not in broker.broker.queues)


def test_update_with_a_wrong_attribute_type_is_a_400_and_changes_nothing(
    broker: RunningBroker, node: Node
) -> None:
    node.ask(entity("CREATE", "typed"), {"maximumMessageTtl": 1000})
    code, description = status(node.ask(entity("UPDATE", "typed"), {"maximumMessageTtl": "soon"}))
    assert code == 400 and "maximumMessageTtl" in description
    assert broker.call(lambda: broker.broker.queues["typed"].settings.max_ttl) == 1000


def test_answers_are_marked_with_the_jms_message_type_a_qpid_jms_client_reads(
    node: Node,
) -> None:
    """As Broker-J marks them: a map is a MapMessage (2), a list a StreamMessage (4), the
    bytes of a failure a BytesMessage (3, application/octet-stream)."""
    jms_type = "x-opt-jms-msg-type"
    created = node.ask(entity("CREATE", "typed"))
    assert created.annotations[jms_type] == 2
    listed = node.ask(entity("getMessageInfo", "typed"))
    assert isinstance(listed.body, list) and listed.annotations[jms_type] == 4
    failed = node.ask(entity("READ", "no-such-queue"))
    assert failed.annotations[jms_type] == 3
    assert failed.content_type == "application/octet-stream"


def test_a_name_that_is_not_text_is_refused_not_made_into_text(node: Node) -> None:
    assert status(node.ask(entity("CREATE", ["a"])))[0] == 400  # type: ignore[arg-type]
    assert status(node.ask(entity("READ", "['a']")))[0] == 404  # no queue was made


def test_qpidds_qmf_address_is_refused_as_not_implemented_not_made_a_queue_nobody_answers(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    for address in ("qmf.default.direct/broker", "qmf.default.topic"):
        link = client.sender(address)
        client.wait_closed(link)
        assert link.remote_condition.name == "amqp:not-implemented", address
        assert "$management" in link.remote_condition.description
    assert not broker.call(lambda: [q for q in broker.broker.queues if q.startswith("qmf.")])
