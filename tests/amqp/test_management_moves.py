"""Broker-J's moveMessages and copyMessages on ``$management`` (proton_broker/moving.py),
driven by real AMQP clients: the messages land on the destination as they were sent, a move
leaves what consumers hold, a full destination stops it, durable ones move in the store too,
and the ACL's ``move`` rule guards both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from proton import Message

from proton_broker import moving
from proton_broker.testing import BrokerProcess
from tests.amqp.test_acl import QUEUE, depth, fill, manage, start_secured
from tests.amqp.test_durability import Restartable, brokers, drain, send_all  # noqa: F401 - fixture
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker


def ids_of(node: Node, queue: str) -> list[int]:
    return [info["id"] for info in node.ask(entity("getMessageInfo", queue)).body]


def message_ids(node: Node, queue: str) -> list[str]:
    return [info["messageId"] for info in node.ask(entity("getMessageInfo", queue)).body]


def coloured(prefix: str, colours: list[str]) -> list[Message]:
    return [
        Message(id=f"{prefix}{n}", properties={"colour": c}, body=f"body {n}")
        for n, c in enumerate(colours)
    ]


def test_move_messages_moves_those_named_or_selected_that_nobody_holds(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    for name in ("parked", "retry"):
        node.ask(entity("CREATE", name))
    send_all(broker, "parked", coloured("m", ["red", "blue", "red", "blue", "red"]))
    client = broker.client()
    receiver = client.receiver("parked", credit=1)
    (held,) = client.wait_received(receiver, 1)  # m0, held by its consumer
    ids = ids_of(node, "parked")
    named = node.ask(entity("moveMessages", "parked", destination="retry", messageIds=ids[:3]))
    assert status(named) == (200, "OK") and named.body == ids[1:3]  # m0 stays with its consumer
    selected = node.ask(
        entity("moveMessages", "parked", destination="retry", selector="colour = 'red'", limit=1)
    )
    assert selected.body == [ids[4]]
    assert message_ids(node, "parked") == ["m0", "m3"]
    assert message_ids(node, "retry") == ["m1", "m2", "m4"]
    shown = node.ask(entity("getMessageInfo", "retry", includeHeaders=True)).body
    assert [info["headers"] for info in shown] == [{"colour": c} for c in ("blue", "red", "red")]
    assert drain(broker, "retry", 3) == ["body 1", "body 2", "body 4"]
    client.settle(held)
    assert broker.call(lambda: broker.broker.queues["parked"].depth) == 1


def test_copy_messages_copies_every_message_those_consumers_hold_too(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    for name in ("original", "copies"):
        node.ask(entity("CREATE", name))
    send_all(broker, "original", coloured("c", ["red", "blue", "red"]))
    client = broker.client()
    receiver = client.receiver("original", credit=1)
    client.wait_received(receiver, 1)  # c0, held: copied all the same
    ids = ids_of(node, "original")
    copied = node.ask(entity("copyMessages", "original", destination="copies"))
    assert status(copied)[0] == 200 and copied.body == ids
    assert message_ids(node, "original") == ["c0", "c1", "c2"]  # nothing left
    assert message_ids(node, "copies") == ["c0", "c1", "c2"]
    reds = node.ask(
        entity("copyMessages", "original", destination="copies", selector="colour = 'red'")
    )
    assert reds.body == [ids[0], ids[2]]
    assert message_ids(node, "copies") == ["c0", "c1", "c2", "c0", "c2"]


def test_a_full_destination_stops_a_move_before_the_message_that_would_overfill_it(
    broker: RunningBroker,
) -> None:
    """Broker-J's rule, whatever the destination's policy: a ring evicts nothing for a move,
    and what does not fit stays where it was."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "many"))
    node.ask(
        entity("CREATE", "small"),
        {"maximumQueueDepthMessages": 3, "overflowPolicy": "RING"},
    )
    send_all(broker, "small", [Message(id="s0")])
    send_all(broker, "many", [Message(id=f"n{n}") for n in range(5)])
    ids = ids_of(node, "many")
    moved = node.ask(entity("moveMessages", "many", destination="small"))
    assert moved.body == ids[:2]
    assert message_ids(node, "small") == ["s0", "n0", "n1"]
    assert message_ids(node, "many") == ["n2", "n3", "n4"]


def test_a_destination_whose_overflow_policy_is_none_takes_every_message(
    broker: RunningBroker,
) -> None:
    """Broker-J's isUnderfull: a maximum depth that no policy enforces does not stop a move,
    as it does not stop a producer."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "many"))
    node.ask(
        entity("CREATE", "unbounded"),
        {"maximumQueueDepthMessages": 2, "overflowPolicy": "NONE"},
    )
    send_all(broker, "many", [Message(id=f"n{n}") for n in range(5)])
    ids = ids_of(node, "many")
    moved = node.ask(entity("moveMessages", "many", destination="unbounded"))
    assert moved.body == ids
    assert message_ids(node, "unbounded") == [f"n{n}" for n in range(5)]
    assert message_ids(node, "many") == []


def test_one_request_moves_at_most_its_bound_and_a_tool_repeats_it(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(moving, "MAX_TRANSFER", 3)  # 10,000 in earnest
    node = Node(broker.client())
    for name in ("deep", "drained"):
        node.ask(entity("CREATE", name))
    send_all(broker, "deep", [Message(id=f"d{n}") for n in range(5)])
    copied = node.ask(entity("copyMessages", "deep", destination="drained", limit=10))
    assert len(copied.body) == 3  # a limit above the bound is the bound
    first = node.ask(entity("moveMessages", "deep", destination="drained"))
    assert first.body == copied.body
    rest = node.ask(entity("moveMessages", "deep", destination="drained"))
    assert len(rest.body) == 2
    moved = ["d0", "d1", "d2", "d0", "d1", "d2", "d3", "d4"]
    assert message_ids(node, "drained") == moved and message_ids(node, "deep") == []


def test_a_destination_that_is_missing_unknown_or_the_queue_itself_is_a_400(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "here"))
    send_all(broker, "here", [Message(id="h0")])
    for asked in ({}, {"destination": "nowhere"}, {"destination": "here"}):
        for operation in ("moveMessages", "copyMessages"):
            reply = node.ask(entity(operation, "here", **asked))
            code, description = status(reply)
            assert code == 400 and "destination" in description, (operation, asked, reply)
    assert message_ids(node, "here") == ["h0"]


def test_ids_may_be_json_text_as_jms_management_clients_send_them(broker: RunningBroker) -> None:
    node = Node(broker.client())
    for name in ("texts", "moved"):
        node.ask(entity("CREATE", name))
    send_all(broker, "texts", [Message(id=f"t{n}") for n in range(3)])
    ids = ids_of(node, "texts")
    reply = node.ask(
        entity("moveMessages", "texts", destination="moved", messageIds=json.dumps([ids[1]]))
    )
    assert reply.body == [ids[1]] and message_ids(node, "moved") == ["t1"]


def test_durable_messages_move_in_the_store_too(brokers: Restartable) -> None:  # noqa: F811 - fixture
    broker = brokers.start()
    node = Node(broker.client())
    for name in ("stored", "landed"):
        node.ask(entity("CREATE", name), {"durable": True})
    send_all(broker, "stored", [Message(id=f"d{n}", durable=True) for n in range(4)])
    ids = ids_of(node, "stored")
    moved = node.ask(entity("moveMessages", "stored", destination="landed", limit=2))
    assert moved.body == ids[:2]
    copied = node.ask(entity("copyMessages", "stored", destination="landed", limit=1))
    assert copied.body == [ids[2]]
    assert message_ids(node, "landed") == ["d0", "d1", "d2"]  # on disk, then answered
    broker = brokers.restart()
    node = Node(broker.client())
    assert message_ids(node, "stored") == ["d2", "d3"]
    assert message_ids(node, "landed") == ["d0", "d1", "d2"]


def keyed_numbers(broker: RunningBroker, queue: str, count: int) -> list[tuple[str, int]]:
    """The bodies and x-opt-sequence numbers of ``queue``'s messages, browsed."""
    client = broker.client()
    browser = client.receiver(queue, credit=count + 5, browse=True)
    client.wait_received(browser, count)
    client.pump(0.1)
    return [
        (r.message.body, r.message.annotations["x-opt-sequence"]) for r in client.received(browser)
    ]


def test_keyed_messages_moved_or_copied_to_a_queue_keyed_alike_are_numbered_there_afresh(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    node = Node(broker.client())
    for name in ("keyed_from", "keyed_to"):
        node.ask(entity("CREATE", name), {"durable": True, "sequenceKey": "id"})
    keyed = [Message(body=f"from{n}", durable=True, properties={"id": "K"}) for n in range(2)]
    send_all(broker, "keyed_from", keyed)  # numbered 1 and 2 there, in their stored bytes
    send_all(
        broker,
        "keyed_to",
        [Message(body=f"to{n}", durable=True, properties={"id": "K"}) for n in range(3)],
    )
    ids = ids_of(node, "keyed_from")
    assert (
        node.ask(entity("copyMessages", "keyed_from", destination="keyed_to", limit=1)).body
        == ids[:1]
    )
    assert node.ask(entity("moveMessages", "keyed_from", destination="keyed_to")).body == ids
    landed = [("to0", 1), ("to1", 2), ("to2", 3), ("from0", 4), ("from0", 5), ("from1", 6)]
    assert keyed_numbers(broker, "keyed_to", 6) == landed  # none refused as a stale number
    broker = brokers.restart()
    send_all(broker, "keyed_to", [Message(body="after", durable=True, properties={"id": "K"})])
    assert keyed_numbers(broker, "keyed_to", 7) == [*landed, ("after", 7)]  # and none reused


MOVE_RULES = """\
group admins alice@QPID
acl allow admins all
acl allow all create queue name=TempQueue*
acl allow all access queue name=TempQueue*
acl allow all consume queue name=TempQueue*
acl allow bob move queue name=app.in queuename=app.parked
acl deny-log all all
"""


def test_the_acl_move_rule_names_the_source_and_the_destination(tmp_path: Path) -> None:
    process: BrokerProcess = start_secured(tmp_path, MOVE_RULES)
    try:
        with manage(process, "alice") as alice:
            for name in ("app.in", "app.parked", "app.other"):
                assert alice.request("CREATE", QUEUE, name, {}).ok
        fill(process, "app.in", "one", "two", "three")
        with manage(process, "bob") as bob:
            allowed = bob.request(
                "moveMessages", QUEUE, "app.in", destination="app.parked", limit=1
            )
            assert allowed.ok and len(allowed.body) == 1
            elsewhere = bob.request("moveMessages", QUEUE, "app.in", destination="app.other")
            copy = bob.request("copyMessages", QUEUE, "app.in", destination="app.other")
        for reply in (elsewhere, copy):
            assert reply.status == 403 and "bob" in reply.description
        assert (depth(process, "app.in"), depth(process, "app.parked")) == (2, 1)
        assert depth(process, "app.other") == 0
    finally:
        process.stop()
