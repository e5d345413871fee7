"""Dead-lettering over AMQP: every way a message reaches its queue's alternate, what it
carries there, and the paths where it does not (docs/dead-letters.md)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from proton import Condition, Disposition, Message, symbol

from proton_broker.config import Config
from proton_broker.errors import PreconditionFailed
from proton_broker.testing import BrokerProcess
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, Received

DLQ = {"alternateBinding": {"destination": "dead"}}


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def declare(broker: RunningBroker, name: str, options: dict[str, Any] | None = None) -> None:
    broker.call(lambda: broker.broker.declare(name, options))


def send(client: EngineClient, address: str, *messages: Message) -> None:
    sender = client.sender(address)
    deliveries = [client.send(sender, message) for message in messages]
    client.wait(lambda: all(d.remote_state == Disposition.ACCEPTED for d in deliveries))
    sender.close()


def take_one(client: EngineClient, address: str) -> Received:
    link = client.receiver(address, credit=1)
    (got,) = client.wait_received(link, 1)
    return got


def annotations(received: Received) -> dict[str, Any]:
    return {str(k): v for k, v in (received.message.annotations or {}).items()}


def test_a_rejected_message_goes_to_the_alternate_queue_annotated(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "orders", DLQ)
    client = broker.client()
    before = int(time.time() * 1000)
    sent = Message(body="poison", subject="s", properties={"k": 1}, durable=True)
    send(client, "orders", sent)
    got = take_one(client, "orders")
    got.delivery.local.condition = Condition("app:bad-order", "no such product")
    client.settle(got, Disposition.REJECTED)
    client.wait(lambda: depth(broker, "dead") == 1)
    assert depth(broker, "orders") == 0
    dead = take_one(client, "dead")
    assert dead.message.body == "poison"
    assert dead.message.properties == {"k": 1}
    assert dead.message.subject == "s"
    assert dead.message.durable
    found = annotations(dead)
    assert found["x-opt-dead-letter-reason"] == "rejected"
    assert found["x-opt-dead-letter-queue"] == "orders"
    assert found["x-opt-dead-letter-count"] == 1
    assert found["x-opt-dead-letter-description"] == "app:bad-order: no such product"
    assert before <= found["x-opt-dead-letter-time"] <= int(time.time() * 1000)
    stats = broker.call(lambda: broker.broker.queues["orders"].stats)
    assert (stats.rejected, stats.dead_lettered) == (1, 1)


def test_a_dead_letter_from_a_keyed_queue_keeps_its_number_in_its_key(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "prices", {**DLQ, "qpid.last_value_queue_key": "sym"})
    client = broker.client()
    send(client, "prices", *(Message(body=n, properties={"sym": "X"}) for n in (1, 2)))
    got = take_one(client, "prices")
    assert annotations(got)["x-opt-sequence"] == 2
    client.settle(got, Disposition.REJECTED)
    dead = take_one(client, "dead")
    assert dead.message.body == 2
    assert annotations(dead)["x-opt-sequence"] == 2  # as it was delivered from its queue
    assert annotations(dead)["x-opt-dead-letter-queue"] == "prices"


def keyed_numbers(client: EngineClient, address: str, count: int) -> list[tuple[Any, int]]:
    """The bodies and x-opt-sequence numbers of the first ``count`` messages on ``address``,
    browsed."""
    browser = client.receiver(address, credit=count + 5, browse=True)
    client.wait_received(browser, count)
    client.pump(0.1)
    return [(r.message.body, annotations(r)["x-opt-sequence"]) for r in client.received(browser)]


def test_a_dead_letter_to_an_alternate_keyed_on_the_same_property_is_numbered_there_afresh(
    broker: RunningBroker,
) -> None:
    declare(broker, "keyed_dlq", {"sequenceKey": "id"})
    declare(
        broker,
        "keyed_work",
        {"sequenceKey": "id", "alternateBinding": {"destination": "keyed_dlq"}},
    )
    client = broker.client()
    send(
        client, "keyed_dlq", *(Message(body=f"direct{n}", properties={"id": "K"}) for n in range(3))
    )
    send(client, "keyed_work", Message(body="work", properties={"id": "K"}))
    got = take_one(client, "keyed_work")
    assert annotations(got)["x-opt-sequence"] == 1  # its number on its own queue
    client.settle(got, Disposition.REJECTED)
    client.wait(lambda: depth(broker, "keyed_dlq") == 4)  # not lost as a custom number 1
    assert keyed_numbers(client, "keyed_dlq", 4)[3] == ("work", 4)  # the alternate's next


def test_a_durable_dead_letter_keeps_its_alternates_number_across_a_restart(
    tmp_path: Path,
) -> None:
    from tests.amqp.test_durability import Restartable

    brokers = Restartable(tmp_path / "data")
    broker = brokers.start()
    keyed = {"durable": True, "sequenceKey": "id"}
    try:
        declare(broker, "kdead", keyed)
        declare(broker, "kwork", {**keyed, "alternateBinding": {"destination": "kdead"}})
        client = broker.client()
        direct = (
            Message(body=f"direct{n}", durable=True, properties={"id": "K"}) for n in range(3)
        )
        send(client, "kdead", *direct)
        send(client, "kwork", Message(body="work", durable=True, properties={"id": "K"}))
        client.settle(take_one(client, "kwork"), Disposition.REJECTED)
        client.wait(lambda: depth(broker, "kdead") == 4)
        client.close()
        broker = brokers.restart()
        client = broker.client()
        send(client, "kdead", Message(body="after", durable=True, properties={"id": "K"}))
        numbers = keyed_numbers(client, "kdead", 5)
        assert numbers[3:] == [("work", 4), ("after", 5)]  # its own number, not 1, and no reuse
        client.close()
    finally:
        broker.stop()


def test_qpidds_alternate_exchange_routes_a_rejected_message_by_its_subject(
    broker: RunningBroker,
) -> None:
    broker.call(lambda: broker.broker.declare_exchange("dlx", "topic"))
    declare(broker, "red")
    declare(broker, "keyless")
    declare(broker, "by-queue")
    broker.call(lambda: broker.broker.bind("dlx", "red", "colour.red"))
    broker.call(lambda: broker.broker.bind("dlx", "keyless", ""))
    broker.call(lambda: broker.broker.bind("dlx", "by-queue", "work"))
    client = broker.client()
    link = client.receiver("work", credit=2, node_properties={"alternate-exchange": "dlx"})
    send(client, "work", Message(body=1, subject="colour.red"), Message(body=2))
    for got in client.wait_received(link, 2):
        client.settle(got, Disposition.REJECTED)
    client.wait(lambda: depth(broker, "red") == 1 and depth(broker, "keyless") == 1)
    assert take_one(client, "red").message.body == 1
    assert take_one(client, "keyless").message.body == 2  # no subject: "" (qpidd, Broker-J)
    assert depth(broker, "by-queue") == 0  # the queue's name is not a key


def test_a_message_goes_to_the_alternate_after_the_maximum_delivery_attempts(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "jobs", {**DLQ, "maximumDeliveryAttempts": 3})
    client = broker.client()
    send(client, "jobs", Message(body="job"))
    link = client.receiver("jobs", credit=10)
    for attempt in range(1, 4):
        got = client.wait_received(link, attempt)[-1]
        assert got.message.delivery_count == attempt - 1
        client.settle(got, Disposition.MODIFIED, failed=True)
    client.wait(lambda: depth(broker, "dead") == 1)
    assert depth(broker, "jobs") == 0
    dead = take_one(client, "dead")
    assert annotations(dead)["x-opt-dead-letter-reason"] == "maximum-delivery-attempts"
    assert broker.call(lambda: broker.broker.queues["jobs"].stats.exhausted) == 1


def test_a_producers_delivery_count_is_not_a_delivery_attempt(broker: RunningBroker) -> None:
    # A message sent on again (Proton's send of a received one keeps its header) starts at
    # 0, as both Qpid brokers count their own deliveries.
    declare(broker, "dead")
    declare(broker, "relayed", {**DLQ, "maximumDeliveryAttempts": 3})
    client = broker.client()
    send(client, "relayed", Message(body="job", delivery_count=2))
    link = client.receiver("relayed", credit=10)
    for attempt in range(1, 4):
        got = client.wait_received(link, attempt)[-1]
        assert got.message.delivery_count == attempt - 1
        client.settle(got, Disposition.MODIFIED, failed=True)
        if attempt < 3:
            assert depth(broker, "dead") == 0
    client.wait(lambda: depth(broker, "dead") == 1)


def test_a_delayed_message_does_not_wait_again_where_it_is_dead_lettered(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "later", DLQ)
    client = broker.client()
    delayed = Message(body="late", annotations={symbol("x-opt-delivery-delay"): 1000})
    send(client, "later", delayed)
    got = client.wait_received(client.receiver("later", credit=1), 1, timeout=5)[0]
    client.settle(got, Disposition.REJECTED)
    link = client.receiver("dead", credit=1)
    (dead,) = client.wait_received(link, 1, timeout=0.5)  # at once, not after 1 s more
    assert annotations(dead)["x-opt-delivery-delay"] == 0


def test_released_is_not_a_delivery_attempt(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "calm", {**DLQ, "maximumDeliveryAttempts": 1})
    client = broker.client()
    send(client, "calm", Message(body="x"))
    link = client.receiver("calm", credit=10)
    for attempt in range(1, 4):
        client.settle(client.wait_received(link, attempt)[-1], Disposition.RELEASED)
    client.wait_received(link, 4)
    assert depth(broker, "dead") == 0


def test_a_consumer_that_goes_holding_a_message_uses_one_of_its_attempts(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "held", {**DLQ, "maximumDeliveryAttempts": 1})
    client = broker.client()
    send(client, "held", Message(body="x"))
    link = client.receiver("held", credit=1)
    client.wait_received(link, 1)
    link.close()
    client.wait(lambda: depth(broker, "dead") == 1)
    assert depth(broker, "held") == 0


def test_the_maximum_without_an_alternate_discards_the_message_and_says_so(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    declare(broker, "lonely", {"maximumDeliveryAttempts": 1})
    client = broker.client()
    send(client, "lonely", Message(body="x"))
    client.settle(take_one(client, "lonely"), Disposition.MODIFIED, failed=True)
    client.wait(lambda: depth(broker, "lonely") == 0)
    assert broker.call(lambda: broker.broker.dead_letters.discarded) == 1
    assert any("CHN-1009" in r.getMessage() and "lonely" in r.getMessage() for r in caplog.records)


def test_broker_js_dlq_arguments_make_the_dead_letter_queue(broker: RunningBroker) -> None:
    client = broker.client()
    options = {"x-qpid-dlq-enabled": True, "x-qpid-maximum-delivery-count": 2}
    link = client.receiver("payments", credit=10, node_properties=options)
    send(client, "payments", Message(body="p"))
    for attempt in (1, 2):
        client.settle(client.wait_received(link, attempt)[-1], Disposition.MODIFIED, failed=True)
    client.wait(lambda: depth(broker, "payments_DLQ") == 1)
    queue = broker.call(lambda: broker.broker.queues["payments"])
    assert (queue.alternate, queue.max_delivery_attempts) == ("payments_DLQ", 2)


def test_a_ring_queue_sends_what_it_evicts_to_its_alternate(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "ring", {**DLQ, "qpid.max_count": 2, "qpid.policy_type": "ring"})
    client = broker.client()
    send(client, "ring", *(Message(body=i) for i in range(4)))
    client.wait(lambda: depth(broker, "dead") == 2)
    link = client.receiver("dead", credit=2)
    got = client.wait_received(link, 2)
    assert [r.message.body for r in got] == [0, 1]
    assert {annotations(r)["x-opt-dead-letter-reason"] for r in got} == {"ring-overflow"}


def test_an_expired_message_is_deleted_by_default(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "brief", DLQ)
    client = broker.client()
    send(client, "brief", Message(body="x", ttl=0.05))
    client.wait(
        lambda: broker.call(lambda: broker.broker.purge_expired()) or not depth(broker, "brief")
    )
    assert depth(broker, "dead") == 0


def test_an_expired_message_goes_to_the_alternate_under_route_to_alternate(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "brief", {**DLQ, "expiryPolicy": "ROUTE_TO_ALTERNATE"})
    client = broker.client()
    send(client, "brief", Message(body="x", ttl=0.05))
    time.sleep(0.1)
    broker.call(lambda: broker.broker.purge_expired())
    client.wait(lambda: depth(broker, "dead") == 1)
    time.sleep(0.1)
    broker.call(lambda: broker.broker.purge_expired())
    dead = take_one(client, "dead")  # it does not expire where it lands
    assert dead.message.ttl == 0
    assert annotations(dead)["x-opt-dead-letter-reason"] == "expired"


def test_a_deleted_queues_messages_go_to_its_alternate_even_those_held(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "doomed", DLQ)
    client = broker.client()
    send(client, "doomed", *(Message(body=i) for i in range(3)))
    link = client.receiver("doomed", credit=1)
    client.wait_received(link, 1)  # acquired by a consumer when the queue goes
    broker.call(lambda: broker.broker.delete_queue("doomed", force=True))
    client.wait(lambda: depth(broker, "dead") == 3)
    got = client.wait_received(client.receiver("dead", credit=3), 3)
    assert sorted(r.message.body for r in got) == [0, 1, 2]
    assert {annotations(r)["x-opt-dead-letter-reason"] for r in got} == {"queue-deleted"}


def test_an_exchanges_alternate_gets_what_it_routes_nowhere(broker: RunningBroker) -> None:
    declare(broker, "unrouted")
    broker.call(
        lambda: broker.broker.declare_exchange(
            "events", "direct", arguments={"alternate-exchange": "unrouted"}
        )
    )
    client = broker.client()
    send(client, "events", Message(body="lost", subject="nobody"))
    assert take_one(client, "unrouted").message.body == "lost"


def test_an_alternate_in_use_cannot_be_deleted(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "orders", DLQ)

    def delete(name: str) -> Exception | None:
        try:
            broker.broker.delete_queue(name)
        except PreconditionFailed as exc:
            return exc
        return None

    refused = broker.call(lambda: delete("dead"))
    assert "it is the alternate of queue 'orders'" in str(refused.description)
    assert broker.call(lambda: delete("orders")) is None
    assert broker.call(lambda: delete("dead")) is None


def test_alternates_that_lead_back_to_each_other_end_in_a_discard(broker: RunningBroker) -> None:
    ring = {"qpid.max_count": 1, "qpid.policy_type": "ring"}
    declare(broker, "ping", ring)
    declare(broker, "pong", {"alternate-exchange": "ping", **ring})
    broker.call(lambda: broker.broker.update_queue("ping", {"alternate-exchange": "pong"}))
    client = broker.client()
    send(client, "ping", *(Message(body=i) for i in range(3)))
    client.wait(lambda: broker.call(lambda: broker.broker.dead_letters.discarded) >= 1)
    client.pump(0.2)
    assert depth(broker, "ping") == 1 and depth(broker, "pong") == 1


def test_a_transactional_rejection_dead_letters_when_it_commits(broker: RunningBroker) -> None:
    declare(broker, "dead")
    declare(broker, "txq", DLQ)
    client = broker.client()
    send(client, "txq", Message(body="t"))
    got = take_one(client, "txq")
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    client.settle(got, Disposition.REJECTED, txn=txn)
    client.pump(0.1)
    assert depth(broker, "dead") == 0
    client.wait_settled(client.discharge(coordinator, txn))
    client.wait(lambda: depth(broker, "dead") == 1)
    assert depth(broker, "txq") == 0


def test_a_rejection_under_a_transaction_gives_the_dead_letter_the_consumers_error(
    broker: RunningBroker,
) -> None:
    declare(broker, "dead")
    declare(broker, "txwhy", DLQ)
    client = broker.client()
    send(client, "txwhy", Message(body="plain"), Message(body="in a transaction"))
    link = client.receiver("txwhy", credit=2)
    plain, transactional = client.wait_received(link, 2)
    client.settle(plain, Disposition.REJECTED, error=Condition("app:bad", "plain rejection"))
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    client.settle(
        transactional,
        Disposition.REJECTED,
        txn=txn,
        error=Condition("app:bad", "rejected in a transaction"),
    )
    client.wait_settled(client.discharge(coordinator, txn))
    dead = client.receiver("dead", credit=2)
    found = {
        got.message.body: annotations(got)["x-opt-dead-letter-description"]
        for got in client.wait_received(dead, 2)
    }
    assert found == {
        "plain": "app:bad: plain rejection",
        "in a transaction": "app:bad: rejected in a transaction",
    }


def test_the_broker_defaults_give_queues_made_on_demand_a_dead_letter_queue(
    tmp_path: Path,
) -> None:
    config = Config()
    config.broker.data_dir = str(tmp_path / "data")
    config.queue.maximum_delivery_attempts = 1
    config.queue.dead_letter_queues = True
    broker = RunningBroker(config)
    try:
        client = broker.client()
        send(client, "made", Message(body="x"))
        client.settle(take_one(client, "made"), Disposition.MODIFIED, failed=True)
        client.wait(lambda: depth(broker, "made_DLQ") == 1)
        assert "made_DLQ_DLQ" not in broker.call(lambda: set(broker.broker.queues))
        declare(broker, "declared")  # not made on demand: no dead-letter queue
        assert broker.call(lambda: broker.broker.queues["declared"].alternate) is None
    finally:
        broker.stop()


# ---- durable moves ---------------------------------------------------------------------


def test_a_durable_move_survives_a_restart_once(tmp_path: Path) -> None:
    from tests.amqp.test_durability import Restartable

    brokers = Restartable(tmp_path / "data")
    broker = brokers.start()
    try:
        declare(broker, "dead", {"durable": True})
        declare(broker, "keep", {"durable": True, **DLQ})
        client = broker.client()
        send(client, "keep", Message(body="d", durable=True))
        client.settle(take_one(client, "keep"), Disposition.REJECTED)
        client.wait(lambda: depth(broker, "dead") == 1)
        client.close()
        broker = brokers.restart()
        assert (depth(broker, "keep"), depth(broker, "dead")) == (0, 1)
        client = broker.client()
        assert annotations(take_one(client, "dead"))["x-opt-dead-letter-queue"] == "keep"
        client.close()
    finally:
        broker.stop()


def test_deleting_a_durable_queue_moves_its_durable_messages_in_one_step(tmp_path: Path) -> None:
    from tests.amqp.test_durability import Restartable

    brokers = Restartable(tmp_path / "data")
    broker = brokers.start()
    try:
        declare(broker, "dead", {"durable": True})
        declare(broker, "old", {"durable": True, **DLQ})
        client = broker.client()
        send(client, "old", *(Message(body=i, durable=True) for i in range(5)))
        client.close()
        broker.call(lambda: broker.broker.delete_queue("old", force=True))
        assert depth(broker, "dead") == 5
        broker = brokers.restart()
        assert "old" not in broker.call(lambda: set(broker.broker.queues))
        assert depth(broker, "dead") == 5
    finally:
        broker.stop()


def test_every_rejected_durable_message_is_on_one_queue_after_kill_9(tmp_path: Path) -> None:
    """Reject many durable messages and kill the broker mid-stream: after the restart each
    is on the queue or on its dead-letter queue, exactly once."""
    data = str(tmp_path / "data")
    options = {"durable": True, "x-qpid-dlq-enabled": True}
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port)
        sender = client.sender("orders", node_properties=options)
        deliveries = [
            client.send(sender, Message(body=i, durable=True), pump=False) for i in range(200)
        ]
        client.wait(
            lambda: all(d.remote_state == Disposition.ACCEPTED for d in deliveries), timeout=15
        )
        link = client.receiver("orders", credit=200)
        got = client.wait_received(link, 200, timeout=15)
        for received in got[:150]:
            received.delivery.update(Disposition.REJECTED)
            received.delivery.settle()
        client.pump(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.proc.wait()  # type: ignore[union-attr]
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port)
        found: list[int] = []
        for name in ("orders", "orders_DLQ"):
            link = client.receiver(name, credit=500)
            client.pump(1.0)
            found += [r.message.body for r in client.received(link)]
        assert sorted(found) == list(range(200))
        client.close()


def test_a_durable_queues_alternate_exchange_is_back_after_a_restart(tmp_path: Path) -> None:
    from tests.amqp.test_durability import Restartable

    brokers = Restartable(tmp_path / "data")
    broker = brokers.start()
    try:
        broker.call(lambda: broker.broker.declare_exchange("dlx", "fanout", durable=True))
        declare(broker, "graveyard", {"durable": True})
        broker.call(lambda: broker.broker.bind("dlx", "graveyard"))
        declare(broker, "work", {"durable": True, "alternate-exchange": "dlx"})
        broker = brokers.restart()
        assert broker.call(lambda: broker.broker.queues["work"].alternate) == "dlx"
        client = broker.client()
        send(client, "work", Message(body="w", durable=True))
        client.settle(take_one(client, "work"), Disposition.REJECTED)
        assert take_one(client, "graveyard").message.body == "w"
        client.close()
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"x-qpid-dlq-enabled": True, "alternate-exchange": "amq.fanout"}, "x-qpid-dlq-enabled"),
        ({"expiryPolicy": "KEEP"}, "expiryPolicy"),
        ({"maximumDeliveryAttempts": -1}, "maximumDeliveryAttempts"),
        ({"alternateBinding": {"arguments": {}}}, "alternateBinding"),
    ],
)
def test_bad_dead_letter_options_are_refused_naming_the_option(
    broker: RunningBroker, options: dict[str, Any], named: str
) -> None:
    client = broker.client()
    link = client.receiver("refused", credit=1, node_properties=options)
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert named in link.remote_condition.description
    assert "refused" not in broker.call(lambda: set(broker.broker.queues))
