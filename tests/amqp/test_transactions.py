"""Local transactions (amqp:txn): the coordinator, transactional sends and acknowledgements."""

from __future__ import annotations

from dataclasses import dataclass

from proton import (
    Delivery,
    Described,
    Disposition,
    Endpoint,
    Link,
    Message,
    Terminus,
    symbol,
    ulong,
)

from tests.amqp.test_connection import symbols_of
from tests.amqp.test_durability import DURABLE, Restartable, brokers  # noqa: F401 - fixture
from tests.amqp.test_flow import fill
from tests.conftest import RunningBroker
from tests.engine_client import TRANSACTIONAL_STATE, EngineClient, Received


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def bodies(client: EngineClient, receiver: object, count: int) -> list[object]:
    return [r.message.body for r in client.wait_received(receiver, count)]  # type: ignore[arg-type]


def outcome_in(delivery: Delivery, txn: bytes) -> tuple[int, str | None]:
    """The outcome inside the ``transactional-state`` the broker answered a transfer with:
    (its descriptor, the rejected error's condition or None)."""
    assert delivery.remote_state == TRANSACTIONAL_STATE
    named, outcome = delivery.remote.data
    assert named == txn
    fields = outcome.value or []
    error = fields[0].value[0] if fields and isinstance(fields[0], Described) else None
    return int(outcome.descriptor), None if error is None else str(error)


ACCEPTED, REJECTED = 0x24, 0x25


def nothing_more(client: EngineClient, receiver: object, had: int) -> bool:
    client.pump(0.3)
    return len(client.received(receiver)) == had  # type: ignore[arg-type]


@dataclass
class Acked:
    """A consumer that took the first message of a queue and accepted it in a transaction."""

    client: EngineClient
    coordinator: Link
    txn: bytes
    receiver: Link
    got: Received


def accept_first_in_txn(
    broker: RunningBroker, address: str, messages: int, credit: int = 1, settle: bool = False
) -> Acked:
    fill(broker, address, messages)
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    receiver = client.receiver(address, credit=credit)
    got = client.wait_received(receiver, 1)[0]
    client.settle(got, Disposition.ACCEPTED, txn=txn, settle=settle)
    return Acked(client, coordinator, txn, receiver, got)


def test_the_coordinator_answers_a_declare_with_a_transaction_id(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    assert coordinator.remote_target.type == Terminus.COORDINATOR
    assert symbols_of(coordinator.remote_target.capabilities) == ["amqp:local-transactions"]
    first, second = client.declare(coordinator), client.declare(coordinator)
    assert first and second and first != second


def test_messages_sent_in_a_transaction_appear_only_when_it_commits(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("txsend")
    sent = [client.send(sender, Message(body=i), txn=txn) for i in range(3)]
    client.wait(lambda: all(d.remote_state for d in sent))
    assert [d.remote_state for d in sent] == [TRANSACTIONAL_STATE] * 3
    assert all(bytes(d.remote.data[0]) == txn for d in sent)
    assert all(d.remote.data[1].descriptor == Disposition.ACCEPTED for d in sent)
    receiver = client.receiver("txsend", credit=10)
    assert nothing_more(client, receiver, 0) and depth(broker, "txsend") == 0
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert bodies(client, receiver, 3) == [0, 1, 2]


def test_messages_sent_in_a_rolled_back_transaction_never_appear(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("txabort")
    client.send(sender, Message(body="dropped"), txn=txn)
    client.send(sender, Message(body="kept"))  # outside the transaction
    assert client.discharge(coordinator, txn, fail=True).remote_state == Disposition.ACCEPTED
    receiver = client.receiver("txabort", credit=10)
    assert bodies(client, receiver, 1) == ["kept"]
    assert nothing_more(client, receiver, 1)


def test_an_acknowledgement_in_a_transaction_takes_effect_at_commit(broker: RunningBroker) -> None:
    acked = accept_first_in_txn(broker, "txack", 2)
    client, first = acked.client, acked.got
    other = broker.client()
    rival = other.receiver("txack", credit=5)
    assert [r.message.body for r in other.wait_received(rival, 1)] == [1]
    assert nothing_more(other, rival, 1)  # message 0 is still held by the first consumer
    assert depth(broker, "txack") == 2
    client.discharge(acked.coordinator, acked.txn)
    client.wait(lambda: depth(broker, "txack") == 1)
    client.wait(lambda: first.delivery.remote_state and first.delivery.settled)
    assert first.delivery.remote_state == Disposition.ACCEPTED  # settled by the broker


def test_a_modified_outcome_in_a_transaction_merges_its_annotations_at_commit(
    broker: RunningBroker,
) -> None:
    fill(broker, "txmod", 1)
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    receiver = client.receiver("txmod", credit=1)
    got = client.wait_received(receiver, 1)[0]
    note = {symbol("x-retry-reason"): "timeout"}
    client.settle(got, Disposition.MODIFIED, failed=True, txn=txn, annotations=note)
    client.discharge(coordinator, txn)
    receiver.flow(1)
    again = client.wait_received(receiver, 2)[1].message
    assert again.body == 0 and again.delivery_count == 1
    assert again.annotations["x-retry-reason"] == "timeout"


def test_a_rolled_back_acknowledgement_leaves_the_message_with_its_consumer(
    broker: RunningBroker,
) -> None:
    acked = accept_first_in_txn(broker, "txundo", 1)
    client, got, receiver = acked.client, acked.got, acked.receiver
    client.discharge(acked.coordinator, acked.txn, fail=True)
    assert depth(broker, "txundo") == 1
    assert not got.delivery.settled  # unsettled with us again: we may settle it anew
    client.settle(got, Disposition.RELEASED)
    receiver.flow(1)
    assert bodies(client, receiver, 2)[1] == 0


def test_a_consumer_that_settled_in_a_rolled_back_transaction_gets_the_message_again(
    broker: RunningBroker,
) -> None:
    acked = accept_first_in_txn(broker, "txsettled", 1, credit=2, settle=True)
    client = acked.client
    client.pump(0.2)
    client.discharge(acked.coordinator, acked.txn, fail=True)
    again = client.wait_received(acked.receiver, 2)[1]
    assert again.message.body == 0 and again.message.delivery_count == 1


def test_a_transaction_whose_connection_drops_is_rolled_back(broker: RunningBroker) -> None:
    acked = accept_first_in_txn(broker, "txdrop", 1)
    client = acked.client
    sender = client.sender("txdrop")
    client.send(sender, Message(body="staged"), txn=acked.txn)
    client.drop()
    watcher = broker.client()
    watcher.wait(lambda: broker.call(lambda: len(broker.broker.transactions)) == 0)
    again = watcher.receiver("txdrop", credit=5)
    assert bodies(watcher, again, 1) == [0]  # the acknowledged one is back, nothing staged
    assert nothing_more(watcher, again, 1)


def test_unknown_transaction_ids_are_refused(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    sender = client.sender("txunknown")
    sent = client.wait_settled(client.send(sender, Message(body=1), txn=b"no-such-txn", pump=False))
    assert sent.remote_state == Disposition.REJECTED
    assert sent.remote.condition.name == "amqp:transaction:unknown-id"
    discharged = client.discharge(coordinator, b"no-such-txn")
    assert discharged.remote_state == Disposition.REJECTED
    assert discharged.remote.condition.name == "amqp:transaction:unknown-id"
    assert depth(broker, "txunknown") == 0


def test_a_transaction_is_discharged_once(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    again = client.discharge(coordinator, txn)
    assert again.remote.condition.name == "amqp:transaction:unknown-id"


def test_distributed_transactions_are_refused(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    answer = client.control(coordinator, 0x31, [b"global-id"])
    assert answer.remote_state == Disposition.REJECTED
    assert answer.remote.condition.name == "amqp:not-implemented"
    garbage = client.control(coordinator, 0x77, [])
    assert garbage.remote.condition.name == "amqp:invalid-field"
    assert client.declare(coordinator)  # the coordinator still serves


def test_a_transaction_from_another_connection_cannot_be_discharged(
    broker: RunningBroker,
) -> None:
    owner, intruder = broker.client(), broker.client()
    txn = owner.declare(owner.coordinator())
    answer = intruder.discharge(intruder.coordinator(), txn)
    assert answer.remote.condition.name == "amqp:transaction:unknown-id"


def declared(broker: RunningBroker) -> tuple[EngineClient, Link, bytes]:
    """A client, its coordinator link and a transaction it declared."""
    client = broker.client()
    coordinator = client.coordinator()
    return client, coordinator, client.declare(coordinator)


def full_queue_and_a_transaction(
    broker: RunningBroker, name: str
) -> tuple[EngineClient, Link, bytes, Link]:
    """A client with a declared transaction and a sender to ``name``, a reject-policy queue
    of one message that one message has filled."""
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    limits = {"qpid.max_count": 1, "qpid.policy_type": "reject"}
    sender = client.sender(name, node_properties=limits)
    client.wait_settled(client.send(sender, Message(body="fills it"), pump=False))
    return client, coordinator, txn, sender


def test_a_full_reject_queue_refuses_a_transactional_send_when_it_is_sent(
    broker: RunningBroker,
) -> None:
    client, coordinator, txn, sender = full_queue_and_a_transaction(broker, "txfull")
    refused = client.wait_settled(client.send(sender, Message(body="over"), txn=txn, pump=False))
    assert outcome_in(refused, txn) == (REJECTED, "amqp:resource-limit-exceeded")
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert depth(broker, "txfull") == 1


def test_staged_messages_hold_their_room_on_a_reject_queue_until_the_transaction_ends(
    broker: RunningBroker,
) -> None:
    """As Broker-J's reject policy counts uncommitted messages: a transaction cannot stage
    more than the queue has room for, and a rollback gives the room back."""
    client, coordinator, txn = declared(broker)
    limits = {"qpid.max_count": 3, "qpid.policy_type": "reject"}
    sender = client.sender("txroom", node_properties=limits)

    def stage(txn: bytes, count: int) -> list[tuple[int, str | None]]:
        sent = [client.send(sender, Message(body=i), txn=txn, pump=False) for i in range(count)]
        client.wait(lambda: all(d.remote_state for d in sent))
        return [outcome_in(d, txn) for d in sent]

    full = (REJECTED, "amqp:resource-limit-exceeded")
    assert stage(txn, 5) == [(ACCEPTED, None)] * 3 + [full] * 2
    assert client.discharge(coordinator, txn, fail=True).remote_state == Disposition.ACCEPTED
    txn = client.declare(coordinator)
    assert stage(txn, 4) == [(ACCEPTED, None)] * 3 + [full]
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert depth(broker, "txroom") == 3


def test_a_send_outside_a_transaction_counts_its_staged_messages_so_the_commit_fits(
    broker: RunningBroker,
) -> None:
    client, coordinator, txn = declared(broker)
    limits = {"qpid.max_count": 1, "qpid.policy_type": "reject"}
    sender = client.sender("txfits", node_properties=limits)
    client.wait_settled(client.send(sender, Message(body="staged"), txn=txn, pump=False))
    other = broker.client()
    plain = other.sender("txfits")
    refused = other.wait_settled(other.send(plain, Message(body="plain"), pump=False))
    assert refused.remote_state == Disposition.REJECTED
    assert refused.remote.condition.name == "amqp:resource-limit-exceeded"
    assert "1 of them in open transactions" in refused.remote.condition.description
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    receiver = other.receiver("txfits", credit=5)
    assert bodies(other, receiver, 1) == ["staged"]
    assert nothing_more(other, receiver, 1)


def test_a_staged_messages_time_to_live_counts_from_its_receipt_not_from_the_commit(
    broker: RunningBroker,
) -> None:
    """As qpidd computes the expiration on receipt and Broker-J fixes the arrival time then."""
    client, coordinator, txn = declared(broker)
    sender = client.sender("txttl")
    for body, ttl in (("short", 0.3), ("long", 5.0)):
        client.wait_settled(client.send(sender, Message(body=body, ttl=ttl), txn=txn, pump=False))
    client.pump(0.5)  # the short one's time is up before the commit
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    receiver = client.receiver("txttl", credit=5)
    (got,) = client.wait_received(receiver, 1)
    assert got.message.body == "long"
    assert got.message.ttl <= 4.5  # what is left of it since its receipt
    assert nothing_more(client, receiver, 1)


def test_a_transactional_send_through_an_exchange_is_staged_for_every_queue_or_none(
    broker: RunningBroker,
) -> None:
    client, coordinator, txn, _ = full_queue_and_a_transaction(broker, "txfan-full")
    broker.call(lambda: broker.broker.declare("txfan-room"))
    for queue in ("txfan-full", "txfan-room"):
        broker.call(lambda q=queue: broker.broker.bind("amq.fanout", q, ""))
    sender = client.sender("amq.fanout")
    refused = client.wait_settled(client.send(sender, Message(body="both"), txn=txn, pump=False))
    assert outcome_in(refused, txn) == (REJECTED, "amqp:resource-limit-exceeded")
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert depth(broker, "txfan-room") == 0  # told rejected: no copy of it anywhere


def test_a_transactional_send_to_an_unknown_relay_address_is_rejected_inside_its_state(
    broker: RunningBroker,
) -> None:
    client, coordinator, txn = declared(broker)
    relay = client.sender(None)
    lost = client.wait_settled(
        client.send(relay, Message(address="txnowhere", body=1), txn=txn, pump=False)
    )
    assert outcome_in(lost, txn) == (REJECTED, "amqp:not-found")
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED


def test_a_settled_transactional_send_to_an_unknown_relay_address_rolls_the_commit_back(
    broker: RunningBroker,
) -> None:
    """Its producer cannot be told, so a commit would lose it (Broker-J's rollback-only)."""
    client, coordinator, txn = declared(broker)
    broker.call(lambda: broker.broker.declare("txthere"))
    relay = client.sender(None)
    client.send(relay, Message(address="txthere", body="kept"), txn=txn, pump=False)
    client.send(relay, Message(address="txnowhere", body="lost"), txn=txn, settled=True)
    answer = client.discharge(coordinator, txn)
    assert answer.remote_state == Disposition.REJECTED
    assert answer.remote.condition.name == "amqp:transaction:rollback"
    assert depth(broker, "txthere") == 0  # "kept" was rolled back with it


def test_a_transactional_send_no_binding_takes_is_accepted_inside_its_state_and_dropped(
    broker: RunningBroker,
) -> None:
    client, coordinator, txn = declared(broker)
    sender = client.sender("amq.direct")
    dropped = client.wait_settled(
        client.send(sender, Message(subject="unbound", body=1), txn=txn, pump=False)
    )
    assert outcome_in(dropped, txn) == (ACCEPTED, None)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED


def test_a_transaction_belongs_to_the_connection_that_declared_it(broker: RunningBroker) -> None:
    # Broker-J's rule: another connection's transfer naming it hears of no such transaction.
    owner, intruder = broker.client(), broker.client()
    coordinator = owner.coordinator()
    txn = owner.declare(coordinator)
    sender = intruder.sender("txowned")
    slipped = intruder.wait_settled(intruder.send(sender, Message(body="in"), txn=txn, pump=False))
    assert slipped.remote_state == Disposition.REJECTED
    assert slipped.remote.condition.name == "amqp:transaction:unknown-id"
    assert owner.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    assert depth(broker, "txowned") == 0


def test_a_refused_settled_send_leaves_the_transaction_to_roll_back(broker: RunningBroker) -> None:
    # The producer sent it settled and cannot be told; a commit would lose it (Broker-J).
    client, coordinator, txn, sender = full_queue_and_a_transaction(broker, "txlost")
    client.send(sender, Message(body="kept"), txn=txn, pump=False)
    client.send(sender, Message(body="over"), txn=txn, settled=True)
    answer = client.discharge(coordinator, txn)
    assert answer.remote_state == Disposition.REJECTED
    assert answer.remote.condition.name == "amqp:transaction:rollback"
    assert "was refused" in answer.remote.condition.description
    assert depth(broker, "txlost") == 1  # "kept" was rolled back with it


def test_a_commit_whose_queue_was_deleted_rolls_back(broker: RunningBroker) -> None:
    client, coordinator, txn = declared(broker)
    sender = client.sender("txgone")
    client.wait_settled(client.send(sender, Message(body="staged"), txn=txn, pump=False))
    broker.call(lambda: broker.broker.delete_queue("txgone", force=True))
    answer = client.discharge(coordinator, txn)
    assert answer.remote_state == Disposition.REJECTED
    assert answer.remote.condition.name == "amqp:transaction:rollback"
    assert "has been deleted" in answer.remote.condition.description


def test_committed_durable_work_survives_a_restart_and_rolled_back_work_does_not(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    broker = brokers.start()
    fill_client = broker.client()
    sender = fill_client.sender("txdurable", node_properties=DURABLE)
    for body in ("acked", "left"):
        fill_client.wait_settled(
            fill_client.send(sender, Message(body=body, durable=True), pump=False)
        )
    client = broker.client()
    coordinator = client.coordinator()
    committed, aborted = client.declare(coordinator), client.declare(coordinator)
    receiver = client.receiver("txdurable", credit=1)
    (got,) = client.wait_received(receiver, 1)
    client.settle(got, Disposition.ACCEPTED, txn=committed, settle=False)
    txsender = client.sender("txdurable")
    client.send(txsender, Message(body="committed", durable=True), txn=committed)
    client.send(txsender, Message(body="aborted", durable=True), txn=aborted)
    assert client.discharge(coordinator, committed).remote_state == Disposition.ACCEPTED
    assert client.discharge(coordinator, aborted, fail=True).remote_state == Disposition.ACCEPTED
    broker = brokers.restart()
    after = broker.client()
    receiver = after.receiver("txdurable", credit=10)
    assert bodies(after, receiver, 2) == ["left", "committed"]
    assert nothing_more(after, receiver, 2)


def test_a_discharge_that_names_no_transaction_is_refused_with_decode_error(
    broker: RunningBroker,
) -> None:
    """txn-id is a mandatory field of a discharge: Broker-J's decoder refuses it missing."""
    client = broker.client()
    coordinator = client.coordinator()
    for fields in ([], [None, False]):
        answer = client.control(coordinator, 0x32, fields)
        assert answer.remote_state == Disposition.REJECTED
        assert answer.remote.condition.name == "amqp:decode-error"
        assert "txn-id is mandatory" in answer.remote.condition.description
    assert client.declare(coordinator)  # the coordinator goes on


def test_a_controller_that_accepts_no_rejected_outcome_is_detached_with_the_error(
    broker: RunningBroker,
) -> None:
    """As Broker-J's coordinator, and as the broker's producers: an error goes back as
    ``rejected`` only to a source that allows it."""
    client = broker.client()
    coordinator = client.coordinator("picky", outcomes=["amqp:accepted:list"])
    client.send(coordinator, Message(body=Described(ulong(0x32), [b"txn:nope", False])))
    client.wait_closed(coordinator)
    assert coordinator.remote_condition.name == "amqp:transaction:unknown-id"


def test_an_acknowledgement_without_an_outcome_waits_and_one_settled_so_is_accepted(
    broker: RunningBroker,
) -> None:
    """A transactional state with no outcome in it (Qpid JMS always gives one): unsettled,
    the delivery waits for its outcome, as in both Qpid brokers; settled, it is accepted
    under the transaction, as qpidd takes it. The consumer stays attached either way."""
    fill(broker, "no-outcome", 2)
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    receiver = client.receiver("no-outcome", credit=2)
    first, second = client.wait_received(receiver, 2)
    for got, settle in ((first, False), (second, True)):
        got.delivery.local.data = [txn]  # transactional-state(txn-id), no outcome
        got.delivery.update(TRANSACTIONAL_STATE)
        if settle:
            got.delivery.settle()
    client.pump(0.2)
    assert receiver.state & Endpoint.REMOTE_ACTIVE  # still attached
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    client.wait(lambda: depth(broker, "no-outcome") == 1)  # the settled one is gone
    assert not first.delivery.remote_state  # the other, still its consumer's, unsettled
    receiver.close()  # and it goes back to the queue
    client.wait_closed(receiver)
    again = client.receiver("no-outcome", credit=1, name="again")
    assert [r.message.body for r in client.wait_received(again, 1)] == [0]
