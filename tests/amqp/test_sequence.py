"""Per-key sequence numbers over AMQP: the x-opt-sequence annotation, custom sequences, and
replay with the x-opt-sequence source filter (docs/sequence-history.md)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from proton import Disposition, Message, symbol, ulong

from proton_broker.testing import BrokerProcess
from tests.amqp.test_durability import DURABLE, Restartable, brokers  # noqa: F401 - fixture
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, terminus_map

LVQ = {"qpid.last_value_queue_key": "id"}
SEQUENCE = "x-opt-sequence"


def send_updates(
    client: EngineClient,
    address: str,
    updates: list[tuple[str, Any]],
    node_properties: dict[str, Any] | None = None,
) -> list[Any]:
    sender = client.sender(address, node_properties=node_properties or LVQ)
    sent = [
        client.send(sender, Message(body=value, properties={"id": key}), pump=False)
        for key, value in updates
    ]
    client.wait(lambda: all(d.remote_state for d in sent))
    return [d.remote_state for d in sent]


def replay_receiver(
    client: EngineClient, address: str, start: Any, key: str | None = None, credit: int = 100
) -> Any:
    filters: dict[str, Any] = {symbol(SEQUENCE): start}
    if key is not None:
        filters[symbol("x-opt-sequence-key")] = key
    return client.receiver(address, credit=credit, filters=filters)


def seen(client: EngineClient, link: Any) -> list[tuple[Any, int]]:
    return [(r.message.body, r.message.annotations[SEQUENCE]) for r in client.received(link)]


def test_every_delivered_update_carries_its_sequence(broker: RunningBroker) -> None:
    client = broker.client()
    send_updates(client, "prices", [("IBM", 100), ("HPQ", 50), ("IBM", 101)])
    receiver = client.receiver("prices", credit=10, node_properties=LVQ)
    client.wait_received(receiver, 2)
    assert sorted(seen(client, receiver)) == [(50, 1), (101, 2)]


def test_a_replay_from_a_sequence_gets_the_kept_versions_then_follows_live(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    send_updates(client, "ticks", [("IBM", v) for v in range(1, 6)] + [("HPQ", 9)])
    receiver = replay_receiver(client, "ticks", 3, key="IBM")
    assert terminus_map(receiver.remote_source.filter)[SEQUENCE] == 3  # echoed
    client.wait_received(receiver, 3)
    assert seen(client, receiver) == [(3, 3), (4, 4), (5, 5)]
    send_updates(client, "ticks", [("HPQ", 10), ("IBM", 6)])
    client.wait_received(receiver, 4)
    client.pump(0.2)
    assert seen(client, receiver)[3:] == [(6, 6)]  # only its key


def test_first_and_last_replay_the_oldest_kept_and_the_latest_versions(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    send_updates(
        client, "fl", [("k", v) for v in "abcd"], node_properties={**LVQ, "max_key_updates": 2}
    )
    first = replay_receiver(client, "fl", "first", key="k")
    last = replay_receiver(client, "fl", "last", key="k")
    client.wait_received(first, 2)
    client.wait_received(last, 1)
    client.pump(0.2)
    assert seen(client, first) == [("c", 3), ("d", 4)]  # max_key_updates 2: two kept
    assert seen(client, last) == [("d", 4)]


def test_a_custom_sequence_is_kept_and_a_stale_one_is_rejected(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("custom", node_properties=LVQ)
    ok = client.wait_settled(
        client.send(sender, Message(body="x", properties={"id": "k", SEQUENCE: 999}), pump=False)
    )
    stale = client.wait_settled(
        client.send(
            sender,
            Message(body="y", properties={"id": "k"}, annotations={symbol(SEQUENCE): 10}),
            pump=False,
        )
    )
    assert ok.remote_state == Disposition.ACCEPTED
    assert stale.remote_state == Disposition.REJECTED
    assert stale.remote.condition.name == "amqp:invalid-field"
    assert "not greater than its current sequence 999" in stale.remote.condition.description
    receiver = replay_receiver(client, "custom", "first", key="k")
    client.wait_received(receiver, 1)
    assert seen(client, receiver) == [("x", 999)]


def test_a_custom_sequence_beyond_a_long_is_rejected_and_the_link_goes_on(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("huge", node_properties=LVQ)
    huge = client.wait_settled(
        client.send(
            sender, Message(body="x", properties={"id": "k", SEQUENCE: ulong(2**63)}), pump=False
        )
    )
    assert huge.remote_state == Disposition.REJECTED
    assert huge.remote.condition.name == "amqp:invalid-field"
    assert "must be an integer (a long)" in huge.remote.condition.description
    ok = client.wait_settled(
        client.send(sender, Message(body="y", properties={"id": "k"}), pump=False)
    )
    assert ok.remote_state == Disposition.ACCEPTED  # the same link: it was not closed


def test_a_custom_sequence_that_is_not_an_integer_is_rejected_as_over_http(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("textual", node_properties={"sequenceKey": "id"})
    for text in ("7", " 8 ", "1_0"):
        refused = client.wait_settled(
            client.send(
                sender,
                Message(body=text, properties={"id": "k"}, annotations={symbol(SEQUENCE): text}),
                pump=False,
            )
        )
        assert refused.remote_state == Disposition.REJECTED
        assert refused.remote.condition.name == "amqp:invalid-field"
        assert f"{SEQUENCE} must be an integer (a long), got {text!r}" in (
            refused.remote.condition.description
        )


def test_a_sequence_key_filter_without_a_replay_is_refused_naming_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    send_updates(client, "keyonly", [("A", 1), ("B", 2)], node_properties={"sequenceKey": "id"})
    link = client.receiver("keyonly", credit=10, filters={symbol("x-opt-sequence-key"): "A"})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "x-opt-sequence-key" in link.remote_condition.description
    assert broker.call(lambda: broker.broker.queues["keyonly"].depth) == 2  # nothing taken


def test_a_transactional_send_is_numbered_in_its_key_when_it_commits(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("txorder", node_properties={"sequenceKey": "id"})
    client.wait_settled(
        client.send(sender, Message(body="staged", properties={"id": "K"}), txn=txn)
    )
    client.wait_settled(client.send(sender, Message(body="direct", properties={"id": "K"})))
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    replay = replay_receiver(client, "txorder", "first", key="K")
    client.wait_received(replay, 2)
    assert seen(client, replay) == [("direct", 1), ("staged", 2)]  # in order, as qpidd


def test_a_transactional_custom_sequence_passed_before_the_commit_rolls_it_back(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("txcustom", node_properties={"sequenceKey": "id"})
    staged = Message(body="staged", properties={"id": "K", SEQUENCE: 5})
    assert client.wait_settled(client.send(sender, staged, txn=txn)).remote_state
    passed = Message(body="direct", properties={"id": "K", SEQUENCE: 7})
    assert client.wait_settled(client.send(sender, passed)).remote_state == Disposition.ACCEPTED
    discharge = client.discharge(coordinator, txn)
    assert discharge.remote_state == Disposition.REJECTED
    assert discharge.remote.condition.name == "amqp:transaction:rollback"
    assert "not greater than its current sequence 7" in discharge.remote.condition.description
    replay = replay_receiver(client, "txcustom", "first", key="K")
    client.wait_received(replay, 1)
    client.pump(0.2)
    assert seen(client, replay) == [("direct", 7)]  # the history stays ordered


def test_bad_replay_filters_are_refused_with_invalid_field(broker: RunningBroker) -> None:
    client = broker.client()
    send_updates(client, "badreplay", [("k", 1)])
    for address, start in (("badreplay", "yesterday"), ("plainq", 1)):
        if address == "plainq":
            client.sender("plainq")
        link = replay_receiver(client, address, start)
        client.wait_closed(link)
        assert link.remote_condition.name == "amqp:invalid-field"


def test_a_client_that_reconnects_from_its_last_sequence_sees_every_update_once(
    broker: RunningBroker,
) -> None:
    """The documented long-poll loop, over AMQP: take some, drop, come back at last + 1."""
    producer = broker.client()
    total = 60
    send_updates(producer, "loop", [("cart", 0)])
    got: list[int] = []
    next_seq, value = 1, 1
    while next_seq <= total:
        client = broker.client()
        receiver = replay_receiver(client, "loop", next_seq, key="cart", credit=7)
        if value < total:
            send_updates(
                producer, "loop", [("cart", v) for v in range(value, min(value + 9, total))]
            )
            value = min(value + 9, total)
        client.wait_received(receiver, min(7, total - next_seq + 1))
        sequences = [s for _, s in seen(client, receiver)]
        got += sequences
        next_seq = sequences[-1] + 1
        client.drop()
    assert got == list(range(1, total + 1))


def test_values_a_flow_to_disk_queue_paged_out_are_replayed_whole_after_they_are_replaced(
    brokers: Restartable,  # noqa: F811 - the fixture (a SQLite store pages)
) -> None:
    broker = brokers.start()
    client = broker.client()
    paging = {**LVQ, "qpid.policy_type": "flow_to_disk", "qpid.max_count": 2}
    first = [(f"k{i}", f"v{i}") for i in range(6)]  # all but two paged out
    send_updates(client, "paged", first, paging)
    send_updates(client, "paged", [(key, "new") for key, _ in first], paging)  # replaced
    replay = replay_receiver(client, "paged", "first")
    client.wait_received(replay, 12)
    assert [body for body, _ in seen(client, replay)] == [v for _, v in first] + ["new"] * 6


def test_numbers_and_consumed_versions_survive_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    keyed = {"sequenceKey": "id", **DURABLE}
    broker = brokers.start()
    client = broker.client()
    sender = client.sender("durseq", node_properties=keyed)
    for value in ("a", "b", "c"):
        client.wait_settled(
            client.send(
                sender, Message(body=value, durable=True, properties={"id": "k"}), pump=False
            )
        )
    receiver = client.receiver("durseq", credit=2, node_properties=keyed)
    for got in client.wait_received(receiver, 2):  # a and b consumed, c left
        client.settle(got)
    client.wait(lambda: broker.call(lambda: broker.broker.queues["durseq"].depth) == 1)
    broker = brokers.restart()
    client = broker.client()
    replay = replay_receiver(client, "durseq", "first", key="k")
    client.wait_received(replay, 3)  # consumed versions are history: kept across the restart
    assert seen(client, replay) == [("a", 1), ("b", 2), ("c", 3)]
    assert broker.call(lambda: broker.broker.queues["durseq"].depth) == 1  # only c is queued
    sender = client.sender("durseq", node_properties=keyed)
    client.wait_settled(
        client.send(sender, Message(body="d", durable=True, properties={"id": "k"}), pump=False)
    )
    client.wait_received(replay, 4)
    assert seen(client, replay)[3] == ("d", 4)  # numbers are never given out twice


def test_kept_versions_survive_a_restart_and_dropped_ones_leave_the_store(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    durable_lvq = {**LVQ, **DURABLE, "max_key_updates": 3}
    broker = brokers.start()
    client = broker.client()
    sender = client.sender("durlvq", node_properties=durable_lvq)
    for value in range(1, 6):
        client.wait_settled(
            client.send(
                sender, Message(body=value, durable=True, properties={"id": "k"}), pump=False
            )
        )
    client.wait_settled(
        client.send(sender, Message(body=0, durable=True, properties={"id": "other"}), pump=False)
    )
    broker = brokers.restart()
    client = broker.client()
    replay = replay_receiver(client, "durlvq", "first")
    client.wait_received(replay, 4)
    client.pump(0.2)
    assert seen(client, replay) == [(3, 3), (4, 4), (5, 5), (0, 1)]
    assert broker.call(lambda: broker.broker.queues["durlvq"].depth) == 2  # one value a key
    stored = broker.call(
        lambda: broker.broker.store._db.execute(  # type: ignore[union-attr]
            "SELECT COUNT(*) FROM messages"
        ).fetchone()[0]
    )
    assert stored == 4  # the three kept versions of k and the one of 'other'


def test_a_value_held_when_it_was_replaced_is_not_delivered_again_after_a_kill(
    tmp_path: Path,
) -> None:
    """A1 is out with a consumer, never settled, when A2 replaces it; A2 is consumed. After
    kill -9 and a restart A1 comes back from the store first, then A2's kept version, which
    supersedes it: nobody gets A1 again, and the history still has both."""
    data = str(tmp_path / "data")
    lvq = {**LVQ, **DURABLE, "max_key_updates": 3}
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port)
        sender = client.sender("held", node_properties=lvq)
        update = client.send(sender, Message(body="A1", durable=True, properties={"id": "A"}))
        client.wait_settled(update)
        holder = client.receiver("held", credit=1)
        client.wait_received(holder, 1)  # held, never settled
        update = client.send(sender, Message(body="A2", durable=True, properties={"id": "A"}))
        client.wait_settled(update)
        taker = client.receiver("held", credit=1)
        (newer,) = client.wait_received(taker, 1)
        client.settle(newer)
        client.pump(0.5)  # the settlement reaches the store
        os.kill(process.pid, signal.SIGKILL)
        process.proc.wait()  # type: ignore[union-attr]
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port)
        consumer = client.receiver("held", credit=10)
        client.pump(1.0)
        assert client.received(consumer) == []
        replay = replay_receiver(client, "held", "first", key="A")
        client.wait_received(replay, 2)
        assert seen(client, replay) == [("A1", 1), ("A2", 2)]
        client.close()


def test_a_version_acknowledged_in_a_transaction_stays_in_the_history_after_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    keyed = {"sequenceKey": "id", **DURABLE}
    broker = brokers.start()
    client = broker.client()
    sender = client.sender("txseq", node_properties=keyed)
    client.wait_settled(
        client.send(sender, Message(body="v1", durable=True, properties={"id": "k"}), pump=False)
    )
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    receiver = client.receiver("txseq", credit=1, node_properties=keyed)
    (got,) = client.wait_received(receiver, 1)
    client.settle(got, Disposition.ACCEPTED, txn=txn, settle=False)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    broker = brokers.restart()
    client = broker.client()
    assert broker.call(lambda: broker.broker.queues["txseq"].depth) == 0  # consumed
    replay = replay_receiver(client, "txseq", "first", key="k")
    client.wait_received(replay, 1)
    assert seen(client, replay) == [("v1", 1)]  # but still a kept version


def test_a_number_staged_in_a_transaction_and_committed_later_is_never_given_out_again(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    keyed = {"sequenceKey": "id", "max_key_updates": 1, **DURABLE}
    broker = brokers.start()
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("txnum", node_properties=keyed)
    staged = Message(body="staged", durable=True, properties={"id": "K"})
    client.wait_settled(client.send(sender, staged, txn=txn, pump=False))  # not numbered yet
    direct = Message(body="direct", durable=True, properties={"id": "K"})
    client.wait_settled(client.send(sender, direct, pump=False))  # 1, written at once
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED  # 2 written
    receiver = client.receiver("txnum", credit=10, node_properties=keyed)
    client.settle_all(client.wait_received(receiver, 2))
    client.pump(0.2)
    broker = brokers.restart()
    client = broker.client()
    sender = client.sender("txnum", node_properties=keyed)
    after = Message(body="after", durable=True, properties={"id": "K"})
    client.wait_settled(client.send(sender, after, pump=False))
    receiver = client.receiver("txnum", credit=10, node_properties=keyed)
    client.wait_received(receiver, 1)
    assert seen(client, receiver) == [("after", 3)]  # not 2 again


def test_numbers_given_to_messages_that_are_not_durable_are_not_given_out_again_after_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    keyed = {"sequenceKey": "id", **DURABLE}
    broker = brokers.start()
    client = broker.client()
    sent = [("A", "a1", True), ("A", "a2", False), ("B", "b1", False)]  # B is never stored
    sender = client.sender("mixed", node_properties=keyed)
    for key, body, durable in sent:
        message = Message(body=body, durable=durable, properties={"id": key})
        client.wait_settled(client.send(sender, message, pump=False))
    follower = replay_receiver(client, "mixed", "first")
    client.wait_received(follower, 3)
    before = {(body, number) for body, number in seen(client, follower)}
    assert before == {("a1", 1), ("a2", 2), ("b1", 1)}
    broker = brokers.restart()
    client = broker.client()
    sender = client.sender("mixed", node_properties=keyed)
    for key, body in [("A", "a3"), ("B", "b2")]:
        message = Message(body=body, durable=True, properties={"id": key})
        client.wait_settled(client.send(sender, message, pump=False))
    follower = replay_receiver(client, "mixed", "first")
    client.wait_received(follower, 3)
    client.pump(0.2)
    after = seen(client, follower)
    assert [body for body, _ in after] == ["a1", "a3", "b2"]  # a2 and b1 were not kept
    numbers = dict(after)
    assert numbers["a1"] == 1  # a stored version keeps its number
    assert numbers["a3"] > 2 and numbers["b2"] > 1  # a client that saw a2 or b1 misses nothing
