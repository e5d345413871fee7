"""A durable message joins its queue as it arrives and is written with its number (qpidd's
order): consumers may take it at once, the producer is answered only once it is on disk,
browsers wait for the disk, and a failed write takes it back.

The store's writer is held inside its commit (its fault-test hook, before ``COMMIT``, as a
slow disk would hold it), or made to fail there as a full disk does."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator

import pytest
from proton import Disposition, Message, symbol

from tests.amqp.test_durability import DURABLE, Restartable, brokers  # noqa: F401
from tests.conftest import RunningBroker

NUMBER = symbol("x-opt-sequence-number")


class Gate:
    """Holds the store's writer inside each commit until opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        assert self.opened.wait(10), "the test never opened the gate"


def full_disk() -> None:
    raise sqlite3.OperationalError("database or disk is full")


class FailingGate(Gate):
    """Holds the writer until opened, then fails its commit as a full disk does."""

    def __call__(self) -> None:
        super().__call__()
        full_disk()


@pytest.fixture
def gate(brokers: Restartable) -> Iterator[Gate]:  # noqa: F811 - the fixture
    held = Gate()
    yield held
    held.opened.set()  # never leave a writer waiting


def hold_writes(broker: RunningBroker, hook: object) -> None:
    """From the next commit on, the writer calls ``hook`` before it commits."""
    broker.broker.store._before_commit = hook  # type: ignore[union-attr]


def declare(broker: RunningBroker, address: str, **options: object) -> None:
    """Make the durable queue (its declaration is written before any gate is set)."""
    client = broker.client()
    client.answered(client.sender(address, node_properties={**DURABLE, **options}))


def attached(broker: RunningBroker, address: str, browse: bool = False):  # type: ignore[no-untyped-def]
    """A client with a receiver on the durable queue ``address``, answered by the broker."""
    declare(broker, address)
    client = broker.client()
    receiver = client.receiver(address, credit=10, browse=browse)
    client.answered(receiver)
    return client, receiver


def send_held(broker: RunningBroker, address: str, gate: Gate, message: Message):  # type: ignore[no-untyped-def]
    """Send ``message`` with the store's writer held at ``gate``: the producer's client and
    its transfer."""
    hold_writes(broker, gate)
    producer = broker.client()
    return producer, producer.send(producer.sender(address), message)


def bodies_after_restart(brokers: Restartable, address: str) -> list:  # noqa: F811 - the fixture's name
    """The bodies a consumer of ``address`` gets from the broker started again."""
    broker = brokers.restart()
    reader = broker.client()
    receiver = reader.receiver(address, credit=10)
    reader.wait_received(receiver, 1)
    reader.pump(0.2)
    return [r.message.body for r in reader.received(receiver)]


def depth(broker: RunningBroker, address: str) -> int:
    return broker.call(lambda: broker.broker.queues[address].depth)  # type: ignore[no-any-return]


def test_a_consumer_gets_a_durable_message_while_it_is_written_and_its_producer_waits_for_the_disk(
    brokers: Restartable,  # noqa: F811 - the fixture
    gate: Gate,
) -> None:
    broker = brokers.start()
    consumer_side, consumer = attached(broker, "early")
    producer, sent = send_held(broker, "early", gate, Message(body="m", durable=True))
    got = consumer_side.wait_received(consumer, 1)
    assert [r.message.body for r in got] == ["m"]
    assert got[0].message.annotations[NUMBER] == 1
    assert gate.entered.wait(5)
    producer.pump(0.2)
    assert not sent.remote_state  # not on disk yet: no answer
    gate.opened.set()
    assert producer.wait_settled(sent).remote_state == Disposition.ACCEPTED


def test_a_browser_is_shown_a_durable_message_only_once_it_is_on_disk(
    brokers: Restartable,  # noqa: F811 - the fixture
    gate: Gate,
) -> None:
    broker = brokers.start()
    viewer, browser = attached(broker, "looked-at", browse=True)
    producer, sent = send_held(broker, "looked-at", gate, Message(body="m", durable=True))
    assert gate.entered.wait(5)
    viewer.pump(0.3)
    assert viewer.received(browser) == []  # its number is not on disk: it could change
    assert depth(broker, "looked-at") == 1  # though it is on the queue
    gate.opened.set()
    assert producer.wait_settled(sent).remote_state == Disposition.ACCEPTED
    got = viewer.wait_received(browser, 1)
    assert [(r.message.body, r.message.annotations[NUMBER]) for r in got] == [("m", 1)]


def test_a_durable_message_consumed_before_it_was_on_disk_is_not_back_after_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
    gate: Gate,
) -> None:
    broker = brokers.start()
    consumer_side, consumer = attached(broker, "quick")
    producer, sent = send_held(broker, "quick", gate, Message(body="m", durable=True))
    (got,) = consumer_side.wait_received(consumer, 1)
    consumer_side.settle(got)  # accepted while its write is still under way
    consumer_side.pump(0.2)
    gate.opened.set()
    assert producer.wait_settled(sent).remote_state == Disposition.ACCEPTED
    broker.call(lambda: None)  # the loop has handed over the removal
    broker = brokers.restart()
    assert depth(broker, "quick") == 0


def test_a_durable_message_keeps_the_number_it_was_written_with_across_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "kept")
    producer = broker.client()
    sender = producer.sender("kept")
    for body in ("a", "b", "c"):
        sent = producer.send(sender, Message(body=body, durable=True))
        assert producer.wait_settled(sent).remote_state == Disposition.ACCEPTED
    store = broker.broker.store
    rows = store._db.execute("SELECT number FROM messages ORDER BY id").fetchall()  # type: ignore[union-attr]
    assert rows == [(1,), (2,), (3,)]  # in the message's own row: no number row is needed
    assert store._db.execute("SELECT count(*) FROM numbers").fetchone() == (0,)  # type: ignore[union-attr]
    broker = brokers.restart()
    reader = broker.client()
    consumer = reader.receiver("kept", credit=10)
    got = reader.wait_received(consumer, 3)
    assert [(r.message.body, r.message.annotations[NUMBER]) for r in got] == [
        ("a", 1),
        ("b", 2),
        ("c", 3),
    ]


def test_a_durable_message_whose_write_fails_is_refused_and_taken_back_so_a_retry_is_taken(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "retried", duplicateDetectionCount=100)
    hold_writes(broker, full_disk)
    producer = broker.client()
    sender = producer.sender("retried")
    refused = producer.wait_settled(
        producer.send(sender, Message(body="m", durable=True, id="m-1"), pump=False)
    )
    assert refused.remote_state == Disposition.REJECTED
    condition = refused.remote.condition
    assert condition.name == "amqp:resource-limit-exceeded"
    assert "message not stored on 'retried'" in condition.description
    assert "full" in condition.description
    assert depth(broker, "retried") == 0  # taken back: nobody had taken it
    hold_writes(broker, None)
    again = producer.wait_settled(
        producer.send(sender, Message(body="m", durable=True, id="m-1"), pump=False)
    )
    assert again.remote_state == Disposition.ACCEPTED  # not dropped as a duplicate
    assert bodies_after_restart(brokers, "retried") == ["m"]


def test_an_exchange_s_durable_copies_are_all_taken_back_when_their_write_fails(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    declare(broker, "left")
    declare(broker, "right")
    for queue in ("left", "right"):
        broker.call(lambda queue=queue: broker.broker.bind("amq.fanout", queue, ""))
    hold_writes(broker, full_disk)
    producer = broker.client()
    sender = producer.sender("amq.fanout")
    refused = producer.wait_settled(
        producer.send(sender, Message(body="m", durable=True), pump=False)
    )
    assert refused.remote_state == Disposition.REJECTED
    assert "message not stored on its queues" in refused.remote.condition.description
    assert (depth(broker, "left"), depth(broker, "right")) == (0, 0)
    hold_writes(broker, None)
    again = producer.wait_settled(
        producer.send(sender, Message(body="n", durable=True), pump=False)
    )
    assert again.remote_state == Disposition.ACCEPTED
    assert (depth(broker, "left"), depth(broker, "right")) == (1, 1)


def test_a_durable_message_a_ring_drops_as_it_arrives_is_accepted_and_not_back_after_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    ring = {"qpid.policy_type": "ring", "qpid.max_count": 1, "qpid.priorities": 10}
    declare(broker, "ring", **ring)
    producer = broker.client()
    sender = producer.sender("ring")
    for body, priority in (("important", 9), ("dropped at once", 0)):
        sent = producer.send(sender, Message(body=body, durable=True, priority=priority))
        assert producer.wait_settled(sent).remote_state == Disposition.ACCEPTED
    assert bodies_after_restart(brokers, "ring") == ["important"]


def test_a_durable_message_a_consumer_has_when_its_write_fails_stays_with_that_consumer(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    consumer_side, consumer = attached(broker, "taken")
    failing = FailingGate()
    try:
        producer, sent = send_held(broker, "taken", failing, Message(body="m", durable=True))
        (got,) = consumer_side.wait_received(consumer, 1)
        failing.opened.set()
        assert producer.wait_settled(sent).remote_state == Disposition.REJECTED
    finally:
        failing.opened.set()
    hold_writes(broker, None)
    consumer_side.settle(got, Disposition.RELEASED)  # back on the queue, not stored
    consumer_side.pump(0.2)
    assert depth(broker, "taken") == 1
    broker = brokers.restart()
    assert depth(broker, "taken") == 0  # it was never on disk: its producer sends it again


def test_a_queue_deleted_while_a_durable_message_is_written_refuses_it_and_keeps_no_row(
    brokers: Restartable,  # noqa: F811 - the fixture
    gate: Gate,
) -> None:
    broker = brokers.start()
    declare(broker, "short-lived")
    broker.broker.store._before_write = gate  # type: ignore[union-attr] # held before BEGIN
    producer = broker.client()
    sent = producer.send(producer.sender("short-lived"), Message(body="m", durable=True))
    assert gate.entered.wait(5)
    broker.call(lambda: broker.broker.delete_queue("short-lived", force=True))
    gate.opened.set()
    refused = producer.wait_settled(sent)
    assert refused.remote_state == Disposition.REJECTED
    assert refused.remote.condition.name == "amqp:not-found"
    broker.call(lambda: None)  # the loop has handed over the removal of its row
    broker = brokers.restart()
    store = broker.broker.store
    assert store._db.execute("SELECT count(*) FROM messages").fetchone() == (0,)  # type: ignore[union-attr]


def test_a_durable_message_whose_queue_is_deleted_while_it_waits_for_the_disk_is_never_written(
    brokers: Restartable,  # noqa: F811 - the fixture
    gate: Gate,
) -> None:
    broker = brokers.start()
    declare(broker, "short-lived")
    store = broker.broker.store
    assert store is not None
    rows: list[int] = []  # messages on disk right after each commit, before any completion

    def count_rows() -> None:
        with sqlite3.connect(store.path) as db:  # type: ignore[attr-defined]
            rows.append(db.execute("SELECT count(*) FROM messages").fetchone()[0])

    store._before_write = gate  # type: ignore[attr-defined] # held before BEGIN
    store._after_commit = count_rows  # type: ignore[attr-defined]
    producer = broker.client()
    sent = producer.send(producer.sender("short-lived"), Message(body="m", durable=True))
    assert gate.entered.wait(5)
    broker.call(lambda: broker.broker.delete_queue("short-lived", force=True))
    gate.opened.set()
    producer.wait_settled(sent)
    assert rows and rows[0] == 0  # a crash now would leave nothing for a later queue
