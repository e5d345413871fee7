"""Subscriptions as Qpid JMS makes them (link names, capabilities, terminus fields emulated
exactly with Proton's engine): link-scoped, durable (detach, re-attach, unsubscribe by a
null-source lookup, across a restart), shared, and replaced when the selector changes."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Described, Disposition, Message, Terminus, symbol

from proton_broker.config import Config
from proton_broker.testing import BrokerProcess
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

SELECTOR = symbol("apache.org:selector-filter:string")
_TAKEN: dict[int, object] = {}  # deliveries a test has settled already (kept: ids stay unique)
CLIENT_ID = "jms-client-id"  # Qpid JMS's container id is the JMS client id when one is set


def durable_subscriber(
    client: EngineClient,
    name: str,
    selector: str | None = None,
    topic: str = "amq.topic",
    credit: int = 100,
):
    """createDurableSubscriber(topic, name): link name = subscription name, source durable
    (unsettled-state) with expiry policy never, capability topic."""
    filters = {"jms-selector": Described(SELECTOR, selector)} if selector else None
    return client.receiver(
        topic,
        credit=credit,
        name=name,
        capabilities=["topic"],
        durable=True,
        expiry_never=True,
        filters=filters,
    )


def shared_subscriber(client: EngineClient, link_name: str, global_: bool = False):
    """createSharedConsumer(topic, name): capabilities shared (and global without a client
    id); Qpid JMS names the links name|volatile1, name|volatile2..."""
    capabilities = ["topic", "shared", "global"] if global_ else ["topic", "shared"]
    return client.receiver("amq.topic", credit=100, name=link_name, capabilities=capabilities)


def shared_durable_subscriber(client: EngineClient, link_name: str):
    """createSharedDurableConsumer(topic, name): capability shared, source durable with
    expiry policy never; Qpid JMS names the links name, name|2..."""
    return client.receiver(
        "amq.topic",
        credit=10,
        name=link_name,
        capabilities=["topic", "shared"],
        durable=True,
        expiry_never=True,
    )


def publish(client: EngineClient, *bodies: object, durable: bool = False) -> None:
    sender = client.sender("amq.topic")
    for body in bodies:
        delivery = client.send(sender, Message(subject="t", body=body, durable=durable))
        assert client.wait_settled(delivery).remote_state == Disposition.ACCEPTED


def take(client: EngineClient, link, expect: int) -> list:
    got = client.wait_received(link, expect) if expect else []
    client.pump(0.2)
    got = [r for r in client.received(link) if id(r) not in _TAKEN]  # the new ones
    client.settle_all(got)
    _TAKEN.update((id(received), received) for received in got)
    return [r.message.body for r in got]


def queues(broker: RunningBroker) -> list[str]:
    return broker.call(lambda: sorted(broker.broker.queues))


# ---- link-scoped --------------------------------------------------------------------------


def test_a_plain_subscription_is_named_for_its_container_and_link_and_ends_with_it(
    broker: RunningBroker,
) -> None:
    client = broker.client(container="app")
    receiver = client.receiver("amq.topic", credit=10, name="news")
    assert queues(broker) == ["app_news"]
    publish(client, "one")
    assert take(client, receiver, 1) == ["one"]
    receiver.detach()
    client.pump(0.2)
    assert queues(broker) == []


def test_a_subscription_with_a_source_timeout_outlives_its_link_that_long_as_qpidd_keeps_it(
    broker: RunningBroker,
) -> None:
    client = broker.client(container="app")
    receiver = client.receiver("amq.topic", credit=10, name="news", durable=True, timeout=1)
    assert receiver.remote_source.timeout == 1
    receiver.close()  # qpid::messaging closes its receiver (closed=true)
    client.pump(0.2)
    publish(client, "while away")
    assert queues(broker) == ["app_news"]
    again = client.receiver("amq.topic", credit=10, name="news", durable=True, timeout=1)
    assert take(client, again, 1) == ["while away"]  # nothing published meanwhile was lost
    again.close()
    client.pump(0.5)
    assert queues(broker) == ["app_news"]  # a new wait started when the second link went
    client.wait(lambda: not queues(broker), timeout=5)


def test_a_subscription_that_is_not_shared_is_taken_over_by_a_second_link_of_its_name(
    broker: RunningBroker,
) -> None:
    """Broker-J's link stealing: the older link is detached with amqp:link:stolen and what
    it held unsettled goes to the new one; the subscription itself stays."""
    first, second = broker.client(container="app"), broker.client(container="app")
    older = first.receiver("amq.topic", credit=10, name="news")
    publish(first, "held by the first")
    assert first.wait_received(older, 1)[0].message.body == "held by the first"  # unsettled
    newer = second.receiver("amq.topic", credit=10, name="news")
    first.wait_closed(older)
    assert older.remote_condition.name == "amqp:link:stolen"
    assert "stolen by connection" in older.remote_condition.description
    assert take(second, newer, 1) == ["held by the first"]
    publish(second, "after")
    assert take(second, newer, 1) == ["after"]
    assert queues(broker) == ["app_news"]


def test_a_subscription_ends_when_its_connection_drops(broker: RunningBroker) -> None:
    client = broker.client(container="app")
    client.receiver("amq.topic", credit=10, name="news")
    client.drop()
    broker.client().pump(0.3)
    assert queues(broker) == []


# ---- durable --------------------------------------------------------------------------------


def test_a_durable_subscription_keeps_messages_while_its_subscriber_is_away(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    receiver = durable_subscriber(client, "sub1")
    publish(client, "before")
    assert take(client, receiver, 1) == ["before"]
    receiver.detach()  # consumer.close(): closed=false, the subscription stays
    client.pump(0.2)
    publish(client, "while away")
    assert queues(broker) == [f"{CLIENT_ID}_sub1"]
    again = durable_subscriber(client, "sub1")
    assert take(client, again, 1) == ["while away"]


def test_a_durable_subscriber_failing_over_takes_its_subscription_from_the_old_connection(
    broker: RunningBroker,
) -> None:
    """Qpid JMS reconnects on a new connection while the broker still holds the old one
    (its idle time-out not yet seen): the new link steals the subscription, as Broker-J
    lets it, and nothing published to it is lost."""
    old = broker.client(container=CLIENT_ID)
    before = durable_subscriber(old, "sub1")
    publish(old, "one", "two")
    assert [r.message.body for r in old.wait_received(before, 2)] == ["one", "two"]
    old.settle_all(old.received(before)[:1])  # "one" acknowledged, "two" not yet
    old.pump(0.2)
    new = broker.client(container=CLIENT_ID)
    after = durable_subscriber(new, "sub1")
    old.wait_closed(before)
    assert before.remote_condition.name == "amqp:link:stolen"
    assert take(new, after, 1) == ["two"]
    assert queues(broker) == [f"{CLIENT_ID}_sub1"]


def test_unsubscribing_from_a_new_connection_steals_the_subscription_and_ends_it(
    broker: RunningBroker,
) -> None:
    old = broker.client(container=CLIENT_ID)
    held = durable_subscriber(old, "sub1")
    new = broker.client(container=CLIENT_ID)
    lookup = new.receiver(None, name="sub1", null_source=True)
    new.wait(lambda: lookup.remote_source.address)
    old.wait_closed(held)
    assert held.remote_condition.name == "amqp:link:stolen"
    lookup.close()  # closed=true: unsubscribe, nobody else holds it now
    new.pump(0.2)
    assert queues(broker) == []


def test_a_held_subscription_queue_is_not_consumed_by_its_address_but_may_be_browsed(
    broker: RunningBroker,
) -> None:
    """qpidd makes the subscriber the queue's exclusive owner, Broker-J gives it LINK
    exclusivity: another link consuming the queue by name is refused while it is held."""
    client = broker.client(container=CLIENT_ID)
    subscriber = durable_subscriber(client, "sub1", credit=0)  # nothing taken yet
    publish(client, "for the subscriber")
    intruder = broker.client(container="other")
    taking = intruder.receiver(f"{CLIENT_ID}_sub1", credit=10)
    intruder.wait_closed(taking)
    assert taking.remote_condition.name == "amqp:resource-locked"
    browser = intruder.receiver(f"{CLIENT_ID}_sub1", credit=10, browse=True)
    assert [r.message.body for r in intruder.wait_received(browser, 1)] == ["for the subscriber"]
    subscriber.flow(1)
    assert take(client, subscriber, 1) == ["for the subscriber"]


def test_a_subscription_whose_exchange_was_deleted_is_found_and_unsubscribed(
    broker: RunningBroker,
) -> None:
    broker.call(lambda: broker.broker.declare_exchange("news", "topic"))
    client = broker.client(container=CLIENT_ID)
    durable_subscriber(client, "sub1", topic="news").detach()
    client.pump(0.2)
    broker.call(lambda: broker.broker.delete_exchange("news"))
    lookup = client.receiver(None, name="sub1", null_source=True)
    client.pump(0.3)
    assert lookup.remote_condition is None  # found, though it names no exchange now
    assert lookup.remote_source.address == f"{CLIENT_ID}_sub1"  # its queue
    lookup.close()
    client.pump(0.2)
    assert queues(broker) == []


def test_unsubscribe_looks_the_subscription_up_with_a_null_source_and_closes_it(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    durable_subscriber(client, "sub1").detach()
    client.pump(0.2)
    lookup = client.receiver(None, name="sub1", null_source=True)
    client.wait(lambda: lookup.remote_source.address)
    assert lookup.remote_source.address == "amq.topic"  # found: Qpid JMS sees a source
    lookup.close()  # closed=true: unsubscribe
    client.pump(0.2)
    assert queues(broker) == []


def test_a_durable_subscription_is_answered_with_configuration_durability_not_unsettled_state(
    broker: RunningBroker,
) -> None:
    """Broker-J answers at most configuration: the subscription outlives a restart, the
    link's unsettled deliveries do not."""
    client = broker.client(container=CLIENT_ID)
    link = durable_subscriber(client, "sub1")
    assert link.remote_source.durability == Terminus.CONFIGURATION
    link.detach()
    client.pump(0.2)
    lookup = client.receiver(None, name="sub1", null_source=True)
    client.wait(lambda: lookup.remote_source.address)
    assert lookup.remote_source.durability == Terminus.CONFIGURATION


def test_unsubscribing_what_does_not_exist_gets_a_null_source_and_not_found(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    lookup = client.receiver(None, name="nothing", null_source=True)
    client.wait_closed(lookup)
    assert lookup.remote_source.address is None
    assert lookup.remote_condition.name == "amqp:not-found"


def test_a_durable_subscription_with_another_selector_replaces_the_old_one(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    durable_subscriber(client, "sub1", selector="n < 5").detach()
    client.pump(0.2)
    sender = client.sender("amq.topic")
    client.wait_settled(
        client.send(sender, Message(subject="t", body="old", properties={"n": 1}), pump=False)
    )
    again = durable_subscriber(client, "sub1", selector="n > 5")
    client.wait_settled(
        client.send(sender, Message(subject="t", body="new", properties={"n": 9}), pump=False)
    )
    assert take(client, again, 1) == ["new"]  # the old subscription and its message went


# ---- shared ---------------------------------------------------------------------------------


def test_shared_subscribers_compete_for_the_messages_of_one_queue(broker: RunningBroker) -> None:
    client = broker.client(container=CLIENT_ID)
    one = shared_subscriber(client, "prices|volatile1")
    two = shared_subscriber(client, "prices|volatile2")
    assert queues(broker) == [f"{CLIENT_ID}_prices|volatile"]
    publish(client, *range(10))
    client.pump(0.3)
    got_one, got_two = take(client, one, 0), take(client, two, 0)
    assert sorted(got_one + got_two) == list(range(10))
    assert got_one and got_two


def test_a_global_shared_subscription_is_the_same_across_containers(
    broker: RunningBroker,
) -> None:
    first, second = broker.client(container="a"), broker.client(container="b")
    shared_subscriber(first, "prices|global-volatile1", global_=True)
    shared_subscriber(second, "prices|global-volatile1", global_=True)
    assert queues(broker) == ["prices|volatile"]


def test_a_shared_subscription_ends_with_its_last_receiver(broker: RunningBroker) -> None:
    client = broker.client(container=CLIENT_ID)
    one = shared_subscriber(client, "prices|volatile1")
    two = shared_subscriber(client, "prices|volatile2")
    one.close()
    client.pump(0.2)
    assert queues(broker) == [f"{CLIENT_ID}_prices|volatile"]
    two.close()
    client.pump(0.2)
    assert queues(broker) == []


def test_a_global_shared_durable_subscription_is_unsubscribed_by_its_global_link_name(
    broker: RunningBroker,
) -> None:
    """Qpid JMS without a client id: createSharedDurableConsumer names the link
    'prices|global' (capabilities shared, global); unsubscribe looks it up by that name."""
    client = broker.client(container="no-client-id-1")
    link = client.receiver(
        "amq.topic",
        credit=10,
        name="prices|global",
        capabilities=["topic", "shared", "global"],
        durable=True,
        expiry_never=True,
    )
    link.detach()
    client.pump(0.2)
    assert queues(broker) == ["prices"]
    other = broker.client(container="no-client-id-2")  # another connection, as JMS would
    lookup = other.receiver(None, name="prices|global", null_source=True)
    other.wait(lambda: lookup.remote_source.address)
    lookup.close()
    other.pump(0.2)
    assert queues(broker) == []


def refused_condition(client: EngineClient, link) -> tuple[str, str]:
    client.wait_closed(link)
    return link.remote_condition.name, link.remote_condition.description


def test_a_shared_durable_and_a_shared_volatile_subscription_of_one_name_are_apart(
    broker: RunningBroker,
) -> None:
    # JMS keeps the two namespaces apart (Broker-J: _/durable and _/nondurable).
    client = broker.client(container=CLIENT_ID)
    durable = shared_durable_subscriber(client, "sub")
    volatile = shared_subscriber(client, "sub|volatile1")
    assert queues(broker) == [f"{CLIENT_ID}_sub", f"{CLIENT_ID}_sub|volatile"]
    publish(client, "m1", "m2")
    assert take(client, durable, 2) == ["m1", "m2"]
    assert take(client, volatile, 2) == ["m1", "m2"]
    volatile.close()
    durable.detach()
    client.pump(0.2)
    publish(client, "while away")
    again = shared_durable_subscriber(client, "sub")
    assert take(client, again, 1) == ["while away"]


def test_a_link_that_did_not_ask_for_a_kept_subscription_does_not_end_it_by_closing(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    durable_subscriber(client, "ds").detach()
    client.pump(0.2)
    publish(client, "kept-1")
    passer_by = client.receiver("amq.topic", credit=10, name="ds")  # same name, not kept
    assert take(client, passer_by, 1) == ["kept-1"]  # it reads the queue, as in qpidd
    passer_by.close()
    client.pump(0.2)
    publish(client, "kept-2")
    assert queues(broker) == [f"{CLIENT_ID}_ds"]
    assert take(client, durable_subscriber(client, "ds"), 1) == ["kept-2"]


def test_a_shared_receiver_cannot_join_an_exclusive_subscription_nor_the_reverse(
    broker: RunningBroker,
) -> None:
    client = broker.client(container=CLIENT_ID)
    durable_subscriber(client, "d1")  # exclusive, in use
    joining = shared_durable_subscriber(client, "d1|2")
    name, description = refused_condition(client, joining)
    assert name == "amqp:resource-locked"
    assert "in use as an exclusive subscription" in description
    shared = shared_durable_subscriber(client, "s1")
    shared.detach()  # idle now
    client.pump(0.2)
    exclusive = durable_subscriber(client, "s1")
    name, description = refused_condition(client, exclusive)
    assert name == "amqp:resource-locked"
    assert "in use as a shared subscription" in description


def test_unsubscribing_while_others_consume_is_refused_and_the_subscription_stays(
    broker: RunningBroker,
) -> None:
    consumer = broker.client(container=CLIENT_ID)
    reading = shared_durable_subscriber(consumer, "ss")
    other = broker.client(container=CLIENT_ID)
    lookup = other.receiver(None, name="ss", null_source=True)
    other.wait(lambda: lookup.remote_source.address)
    lookup.close()
    name, description = refused_condition(other, lookup)
    assert name == "amqp:resource-locked"
    assert "active consumers" in description
    publish(other, "still subscribed")
    assert take(consumer, reading, 1) == ["still subscribed"]


@pytest.mark.parametrize("global_", [True, False], ids=["global", "scoped"])
def test_a_subscription_never_takes_over_an_ordinary_queue_of_its_name(
    broker: RunningBroker, global_: bool
) -> None:
    client = broker.client(container=CLIENT_ID)
    name = "orders" if global_ else f"{CLIENT_ID}_orders"
    sender = client.sender(name)
    for body in ("order-1", "order-2"):
        assert client.wait_settled(client.send(sender, Message(body=body), pump=False))
    capabilities = ["topic", "shared", "global"] if global_ else ["topic", "shared"]
    link = client.receiver(
        "amq.topic",
        credit=10,
        name="orders|global" if global_ else "orders",
        capabilities=capabilities,
        durable=True,
        expiry_never=True,
    )
    condition, description = refused_condition(client, link)
    assert condition == "amqp:resource-locked"
    assert f"queue '{name}' exists and is not a subscription" in description
    assert broker.call(lambda: broker.broker.queues[name].depth) == 2
    assert broker.call(lambda: broker.broker.exchanges.bindings_of(name)) == []


# ---- management ------------------------------------------------------------------------


def test_management_reads_a_subscription_queue_as_exclusive_or_shared_and_kept_or_not(
    broker: RunningBroker,
) -> None:
    # As qpidd (exclusive owner, auto-delete) and Broker-J (LINK or SHARED_SUBSCRIPTION;
    # PERMANENT or deleted with its links) make them, in this node's words (docs/management.md).
    client = broker.client(container="app")
    client.receiver("amq.topic", credit=10, name="news")
    durable_subscriber(client, "kept")
    shared_subscriber(client, "crowd|volatile1")
    shared_durable_subscriber(client, "club")
    node = Node(broker.client())
    read = {
        name: node.ask(entity("READ", name)).body
        for name in ("app_news", "app_kept", "app_crowd|volatile", "app_club")
    }
    assert {name: (a["exclusive"], a["lifetimePolicy"]) for name, a in read.items()} == {
        "app_news": (True, "delete-if-unused"),
        "app_kept": (True, "permanent"),
        "app_crowd|volatile": (False, "delete-if-unused"),
        "app_club": (False, "permanent"),
    }
    for name, attributes in read.items():  # READ, UPDATE unchanged: nothing to refuse
        assert status(node.ask(entity("UPDATE", name), attributes))[0] == 200


# ---- across a restart --------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def start(data_dir: Path) -> RunningBroker:
    config = Config()
    config.broker.data_dir = str(data_dir)
    return RunningBroker(config)


def test_a_durable_subscription_and_its_persistent_messages_survive_a_restart(
    data_dir: Path,
) -> None:
    broker = start(data_dir)
    try:
        client = broker.client(container=CLIENT_ID)
        durable_subscriber(client, "sub1").detach()
        client.pump(0.2)
        publish(client, "persistent", durable=True)
        publish(client, "transient")
    finally:
        broker.stop()
    broker = start(data_dir)
    try:
        client = broker.client(container=CLIENT_ID)
        bindings = broker.call(lambda: broker.broker.exchanges.bindings_of(f"{CLIENT_ID}_sub1"))
        assert [(b.exchange, b.key) for b in bindings] == [("amq.topic", "#")]
        again = durable_subscriber(client, "sub1")
        assert take(client, again, 1) == ["persistent"]
        publish(client, "after the restart")
        assert take(client, again, 1) == ["after the restart"]
        again.detach()
        client.pump(0.2)
        lookup = client.receiver(None, name="sub1", null_source=True)  # still a subscription
        client.wait(lambda: lookup.remote_source.address)
        lookup.close()
        client.pump(0.2)
        assert queues(broker) == []
    finally:
        broker.stop()


def test_a_durable_subscription_to_a_topic_made_on_demand_keeps_its_messages_across_a_restart(
    data_dir: Path,
) -> None:
    """Qpid JMS's producer makes the topic (capability topic, a non-durable terminus), so
    the exchange and the binding are not stored; the subscription's queue and persistent
    messages are, and the subscriber's next attach binds it again (qpidd), not anew."""
    broker = start(data_dir)
    try:
        client = broker.client(container=CLIENT_ID)
        producer = client.sender("prices", capabilities=["topic"])
        durable_subscriber(client, "sub1", topic="prices").detach()
        client.pump(0.2)
        sent = client.send(producer, Message(subject="t", body="kept", durable=True), pump=False)
        assert client.wait_settled(sent).remote_state == Disposition.ACCEPTED
    finally:
        broker.stop()
    broker = start(data_dir)
    try:
        client = broker.client(container=CLIENT_ID)
        client.sender("prices", capabilities=["topic"])  # the producer makes the topic again
        again = durable_subscriber(client, "sub1", topic="prices")
        assert take(client, again, 1) == ["kept"]
    finally:
        broker.stop()


def test_every_accepted_persistent_message_of_a_durable_subscription_survives_kill_9(
    tmp_path: Path,
) -> None:
    """Two durable subscriptions to one fanout: each accepted durable message is on both
    after the broker is killed (SIGKILL) mid-stream, none twice."""
    data = str(tmp_path / "data")
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port, container=CLIENT_ID)
        for name in ("first", "second"):
            durable_subscriber(client, name, topic="amq.fanout").detach()
        client.pump(0.2)
        sender = client.sender("amq.fanout")
        deliveries = [
            client.send(sender, Message(body=i, durable=True), pump=False) for i in range(200)
        ]
        client.wait(lambda: deliveries[50].remote_state)  # some are accepted, more in flight
        os.kill(process.pid, signal.SIGKILL)
        process.proc.wait()  # type: ignore[union-attr]
        accepted = {i for i, d in enumerate(deliveries) if d.remote_state == Disposition.ACCEPTED}
    assert len(accepted) >= 50
    with BrokerProcess(data_dir=data) as process:
        client = EngineClient(process.host, process.port, container=CLIENT_ID)
        for name in ("first", "second"):
            link = durable_subscriber(client, name, topic="amq.fanout", credit=500)
            client.pump(1.0)
            got = [r.message.body for r in client.received(link)]
            assert accepted <= set(got), f"{name} lost accepted messages"
            assert len(got) == len(set(got)), f"{name} has duplicates"
        client.close()
