"""A store commit that moves messages (a dead letter's move, a client's transaction, a
management move) and fails, as on a full disk: nothing of it is written, the broker keeps
the messages where the store has them, and a restart finds them there. Only plain
acknowledgements are held back for a later commit (store/sqlite.py).

The store's writer fails its commits through its fault-test hook, before ``COMMIT``, with
SQLite's disk-full error (as test_durable_join does)."""

from __future__ import annotations

import logging

import pytest
from proton import Disposition, Message

from proton_broker.queues.entries import ACQUIRED, AVAILABLE
from tests.amqp.test_durability import DURABLE, Restartable, brokers  # noqa: F401
from tests.amqp.test_durable_join import declare, depth, full_disk, hold_writes
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker


def browse(broker: RunningBroker, address: str) -> list:
    """The bodies on ``address``, browsed."""
    client = broker.client()
    receiver = client.receiver(address, credit=10, browse=True)
    client.answered(receiver)
    client.pump(0.2)
    return [r.message.body for r in client.received(receiver)]


def on_queue(broker: RunningBroker, address: str) -> list[tuple[int, str]]:
    """(position, state) of each message on ``address``, in order."""
    names = {AVAILABLE: "available", ACQUIRED: "taken"}
    queue = broker.broker.queues[address]
    return broker.call(lambda: [(n, names.get(s, "other")) for n, s, _ in queue.peek(10)])  # type: ignore[no-any-return]


def write_something(broker: RunningBroker) -> None:
    """A commit that succeeds: it would carry removals a failed one held back."""
    client = broker.client()
    sender = client.sender("other", node_properties=DURABLE)
    sent = client.wait_settled(client.send(sender, Message(body="later", durable=True)))
    assert sent.remote_state == Disposition.ACCEPTED


def test_a_rejected_message_whose_dead_letter_move_cannot_be_written_stays_on_its_queue(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "dlq")
    declare(broker, "work", alternateBinding="dlq")
    client = broker.client()
    sender = client.sender("work")
    client.wait_settled(client.send(sender, Message(body="A", durable=True)))
    receiver = client.receiver("work", credit=1)
    (got,) = client.wait_received(receiver, 1)
    hold_writes(broker, full_disk)
    client.settle(got, Disposition.REJECTED)
    client.wait(lambda: on_queue(broker, "work") == [(1, "available")])  # back, as stored
    assert depth(broker, "dlq") == 0
    hold_writes(broker, None)
    write_something(broker)
    broker = brokers.restart()
    assert (browse(broker, "work"), browse(broker, "dlq")) == (["A"], [])


def test_a_transaction_whose_commit_cannot_be_written_keeps_its_acknowledged_message(
    brokers: Restartable,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = brokers.start()
    declare(broker, "work")
    client = broker.client()
    sender = client.sender("work")
    client.wait_settled(client.send(sender, Message(body="B", durable=True)))
    receiver = client.receiver("work", credit=1)
    (got,) = client.wait_received(receiver, 1)
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    client.settle(got, Disposition.ACCEPTED, txn=txn, settle=False)
    hold_writes(broker, full_disk)
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        discharged = client.discharge(coordinator, txn)
    assert discharged.remote.condition.name == "amqp:transaction:rollback"
    assert "MST-1011" not in caplog.text  # a rolled-back removal is not an acknowledgement
    hold_writes(broker, None)
    client.settle(got, Disposition.RELEASED)  # as told by the rollback: it still has it
    write_something(broker)
    assert browse(broker, "work") == ["B"]
    broker = brokers.restart()
    assert browse(broker, "work") == ["B"]


def test_a_move_that_cannot_be_written_leaves_the_messages_on_the_source(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "dst")
    declare(broker, "src")
    client = broker.client()
    sender = client.sender("src")
    for body in ("M0", "M1"):
        client.wait_settled(client.send(sender, Message(body=body, durable=True)))
    hold_writes(broker, full_disk)
    reply = Node(client).ask(entity("moveMessages", "src", destination="dst"))
    code, description = status(reply)
    assert code == 500 and "nothing moved, the messages stay on 'src'" in description
    assert reply.body == []
    assert (depth(broker, "src"), depth(broker, "dst")) == (2, 0)
    hold_writes(broker, None)
    write_something(broker)
    broker = brokers.restart()
    assert (browse(broker, "src"), browse(broker, "dst")) == (["M0", "M1"], [])


def test_a_message_a_ring_evicts_whose_move_cannot_be_written_is_back_at_the_next_start(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "dlq")
    ring = {"qpid.policy_type": "ring", "qpid.max_count": 1}
    declare(broker, "ring", alternateBinding="dlq", **ring)
    client = broker.client()
    sender = client.sender("ring")
    client.wait_settled(client.send(sender, Message(body="A", durable=True)))
    hold_writes(broker, full_disk)
    refused = client.wait_settled(client.send(sender, Message(body="B", durable=True)))
    assert refused.remote_state == Disposition.REJECTED  # B's own write failed too
    assert (depth(broker, "ring"), depth(broker, "dlq")) == (0, 0)  # A: in the store only
    hold_writes(broker, None)
    write_something(broker)
    broker = brokers.restart()
    assert (browse(broker, "ring"), browse(broker, "dlq")) == (["A"], [])


def test_a_message_whose_dead_letter_move_cannot_be_written_goes_back_to_its_own_place(
    brokers: Restartable,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = brokers.start()
    declare(broker, "dlq")
    declare(broker, "work", alternateBinding="dlq")
    client = broker.client()
    sender = client.sender("work")
    for body in ("A", "B", "C"):
        client.wait_settled(client.send(sender, Message(body=body, durable=True)))
    receiver = client.receiver("work", credit=2)
    first, second = client.wait_received(receiver, 2)
    hold_writes(broker, full_disk)
    with caplog.at_level(logging.DEBUG, logger="proton_broker.deadletters"):
        client.settle(first, Disposition.REJECTED)
        client.settle(second, Disposition.REJECTED)
        # Each in its own place, as a released message would be, its number kept.
        expected = [(1, "available"), (2, "available"), (3, "available")]
        client.wait(lambda: on_queue(broker, "work") == expected)
        hold_writes(broker, None)
        third = broker.client()
        (again,) = third.wait_received(third.receiver("work", credit=1), 1)
        third.settle(again, Disposition.REJECTED)
        third.wait(lambda: depth(broker, "dlq") == 1)
    failed = [r for r in caplog.records if "could not be stored" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.ERROR, logging.DEBUG]  # once an episode
    assert any("stored again" in r.getMessage() for r in caplog.records)
    assert browse(broker, "work") == ["B", "C"]
    broker = brokers.restart()
    assert (browse(broker, "work"), browse(broker, "dlq")) == (["B", "C"], ["A"])


def test_a_move_that_cannot_be_written_puts_each_message_back_in_its_own_place(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "dst")
    declare(broker, "src")
    client = broker.client()
    sender = client.sender("src")
    for body in ("M0", "M1", "M2"):
        client.wait_settled(client.send(sender, Message(body=body, durable=True)))
    hold_writes(broker, full_disk)
    reply = Node(client).ask(entity("moveMessages", "src", destination="dst", messageIds=[1, 3]))
    assert status(reply)[0] == 500
    assert on_queue(broker, "src") == [(1, "available"), (2, "available"), (3, "available")]
    assert browse(broker, "src") == ["M0", "M1", "M2"]
    hold_writes(broker, None)
    write_something(broker)
    broker = brokers.restart()
    assert (browse(broker, "src"), browse(broker, "dst")) == (["M0", "M1", "M2"], [])
