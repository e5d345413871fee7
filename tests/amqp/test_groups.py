"""Message groups over real connections: the examples of the Qpid documents.

Each consumer is its own connection, as competing consumers are in practice.
"""

from __future__ import annotations

import time

import pytest
from proton import Disposition, Message, Terminus

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, Received

SHARED = {"qpid.group_header_key": "GROUP_KEY", "qpid.shared_msg_group": 1}
STANDARD = {"qpid.group_header_key": "GROUP_KEY"}


def declare(broker: RunningBroker, name: str, options: dict[str, object]) -> EngineClient:
    producer = broker.client()
    producer.sender(name, node_properties=options)
    return producer


def send(producer: EngineClient, name: str, *items: tuple[object, str]) -> None:
    sender = producer.sender(name)
    for group, body in items:
        props = {} if group is None else {"GROUP_KEY": group}
        delivery = producer.send(sender, Message(body=body, properties=props), pump=False)
        assert producer.wait_settled(delivery).remote_state == Disposition.ACCEPTED


def bodies(client: EngineClient, link: object) -> list[str]:
    client.pump(0.1)
    return [r.message.body for r in client.received(link)]  # type: ignore[arg-type]


def settle(client: EngineClient, got: Received, outcome: int = Disposition.ACCEPTED) -> None:
    client.settle(got, outcome)


def test_a_shopping_cart_add_and_remove_go_to_the_same_consumer(broker: RunningBroker) -> None:
    producer = declare(broker, "carts", SHARED)
    c1, c2 = broker.client(), broker.client()
    r1, r2 = c1.receiver("carts", credit=10), c2.receiver("carts", credit=10)
    send(
        producer,
        "carts",
        ("cart-1", "add-1"),
        ("cart-2", "add-2"),
        ("cart-1", "remove-1"),
        ("cart-2", "remove-2"),
    )
    got1, got2 = bodies(c1, r1), bodies(c2, r2)
    assert sorted(got1 + got2) == ["add-1", "add-2", "remove-1", "remove-2"]
    for got in (got1, got2):
        for cart in ("1", "2"):
            mine = [b for b in got if b.endswith(cart)]
            assert mine in ([], [f"add-{cart}", f"remove-{cart}"])  # whole group, in order


def test_a_blocked_group_does_not_block_the_group_behind_it(broker: RunningBroker) -> None:
    producer = declare(broker, "ab", SHARED)
    send(producer, "ab", ("A", "A-1"), ("A", "A-2"), ("B", "B-1"), ("B", "B-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("ab", credit=1)
    assert c1.wait_received(r1, 1)[0].message.body == "A-1"
    r2 = c2.receiver("ab", credit=1)
    (b1,) = c2.wait_received(r2, 1)
    assert b1.message.body == "B-1"  # behind A, but A does not block it
    settle(c2, b1)
    r2.flow(1)
    assert [r.message.body for r in c2.wait_received(r2, 2)] == ["B-1", "B-2"]
    assert bodies(c1, r1) == ["A-1"]


def test_only_the_consumer_holding_a_group_gets_its_messages_until_it_settles_them(
    broker: RunningBroker,
) -> None:
    producer = declare(broker, "held", SHARED)
    send(producer, "held", ("A", "A-1"), ("A", "A-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("held", credit=1)
    (a1,) = c1.wait_received(r1, 1)
    r2 = c2.receiver("held", credit=5)
    assert bodies(c2, r2) == []  # A-2 waits: A is with c1
    settle(c1, a1)  # c1 has settled everything it held: the group is free
    assert [r.message.body for r in c2.wait_received(r2, 1)] == ["A-2"]


def test_a_group_id_sent_as_a_boolean_or_a_number_is_the_group_its_text_names(
    broker: RunningBroker,
) -> None:
    # As qpidd reads the key (docs/groups.md): true is "1", the double 2.0 and the long 2 "2".
    producer = declare(broker, "typed", SHARED)
    send(producer, "typed", (True, "true"), ("1", "one"), (2.0, "two"), (2, "2"), ("B", "B"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("typed", credit=1)
    assert [r.message.body for r in c1.wait_received(r1, 1)] == ["true"]
    r1b = c1.receiver("typed", credit=1)  # a second consumer, holding group "2"
    assert [r.message.body for r in c1.wait_received(r1b, 1)] == ["two"]
    r2 = c2.receiver("typed", credit=5)
    assert [r.message.body for r in c2.wait_received(r2, 1)] == ["B"]
    assert bodies(c2, r2) == ["B"]  # "one" and "2" wait for the groups c1 holds


def test_releasing_a_1_then_accepting_a_2_lets_another_consumer_take_a_1(
    broker: RunningBroker,
) -> None:
    # The "Be Advised" example of the C++ broker's documentation, exactly as written.
    producer = declare(broker, "advised", SHARED)
    send(producer, "advised", ("A", "A-1"), ("A", "A-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("advised", credit=2)
    a1, a2 = c1.wait_received(r1, 2)
    r2 = c2.receiver("advised", credit=5)
    settle(c1, a1, Disposition.RELEASED)
    assert bodies(c2, r2) == []  # c1 still holds A-2, so the group is still c1's
    settle(c1, a2)
    (again,) = c2.wait_received(r2, 1)
    assert again.message.body == "A-1"
    assert broker.call(lambda: broker.broker.queues["advised"].depth) == 1


@pytest.mark.parametrize("mode", [SHARED, STANDARD], ids=["shared", "standard"])
def test_a_consumer_refusing_a_groups_first_message_takes_nothing_more_of_that_group(
    broker: RunningBroker, mode: dict[str, object]
) -> None:
    # The group's order holds: A-2 waits behind A-1 for a consumer that may take A-1. (Both
    # Qpid brokers skip only the refused message and would hand c1 A-2 first.)
    producer = declare(broker, "refused", mode)
    send(producer, "refused", ("A", "A-1"), ("A", "A-2"), ("B", "B-1"))
    c1 = broker.client()
    r1 = c1.receiver("refused", credit=1)
    (a1,) = c1.wait_received(r1, 1)
    c1.settle(a1, Disposition.MODIFIED, undeliverable=True)
    r1.flow(2)
    assert c1.wait_received(r1, 2)[1].message.body == "B-1"
    assert bodies(c1, r1) == ["A-1", "B-1"]  # and not A-2
    c2 = broker.client()
    r2 = c2.receiver("refused", credit=5)
    assert [r.message.body for r in c2.wait_received(r2, 2)] == ["A-1", "A-2"]


def test_a_consumer_gets_no_more_of_a_group_than_its_credit(broker: RunningBroker) -> None:
    producer = declare(broker, "bounded", SHARED)
    send(producer, "bounded", *[("A", f"A-{i}") for i in range(5)])
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("bounded", credit=2)
    r2 = c2.receiver("bounded", credit=10)
    assert [r.message.body for r in c1.wait_received(r1, 2)] == ["A-0", "A-1"]
    assert bodies(c2, r2) == []
    assert bodies(c1, r1) == ["A-0", "A-1"]


@pytest.mark.parametrize("second", [None, ""])
def test_messages_without_a_group_share_the_default_group(
    broker: RunningBroker, second: str | None
) -> None:
    """An empty group id too, as qpidd (Broker-J makes "" a group of its own)."""
    producer = declare(broker, "nogroup", SHARED)
    send(producer, "nogroup", (None, "x-1"), (second, "x-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("nogroup", credit=1)
    c1.wait_received(r1, 1)
    r2 = c2.receiver("nogroup", credit=1)
    assert bodies(c2, r2) == []  # x-2 is in qpid.no-group, which c1 holds
    names = broker.call(lambda: [g.name for g in broker.broker.queues["nogroup"]._groups.groups()])
    assert names == ["qpid.no-group"]


def test_the_default_group_can_be_renamed_per_queue(broker: RunningBroker) -> None:
    producer = declare(broker, "renamed", {**SHARED, "qpid.default-message-group": "misc"})
    send(producer, "renamed", (None, "x"))
    names = broker.call(lambda: [g.name for g in broker.broker.queues["renamed"]._groups.groups()])
    assert names == ["misc"]


def group_config(name: str) -> Config:
    config = Config()
    config.broker.default_message_group = name
    return config


@pytest.mark.parametrize("broker_config", [group_config("leftovers")])
def test_the_broker_option_renames_the_default_group(broker: RunningBroker) -> None:
    producer = declare(broker, "brokerwide", SHARED)
    send(producer, "brokerwide", (None, "x"))
    names = broker.call(
        lambda: [g.name for g in broker.broker.queues["brokerwide"]._groups.groups()]
    )
    assert names == ["leftovers"]


def test_without_a_group_key_the_group_id_property_is_used(broker: RunningBroker) -> None:
    producer = broker.client()
    sender = producer.sender("jms", node_properties={"qpid.shared_msg_group": 1})
    for group, body in (("A", "A-1"), ("A", "A-2"), ("B", "B-1")):
        producer.wait_settled(producer.send(sender, Message(body=body, group_id=group), pump=False))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("jms", credit=1)
    assert c1.wait_received(r1, 1)[0].message.body == "A-1"
    r2 = c2.receiver("jms", credit=5)
    assert [r.message.body for r in c2.wait_received(r2, 1)] == ["B-1"]
    assert bodies(c2, r2) == ["B-1"]


def test_in_standard_mode_a_group_stays_with_its_consumer_for_its_lifetime(
    broker: RunningBroker,
) -> None:
    producer = declare(broker, "sticky", STANDARD)
    send(producer, "sticky", ("A", "A-1"), ("A", "A-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("sticky", credit=1)
    (a1,) = c1.wait_received(r1, 1)
    settle(c1, a1)  # settled, but A remains c1's while c1 is attached
    r2 = c2.receiver("sticky", credit=5)
    assert bodies(c2, r2) == []
    r1.flow(1)
    assert [r.message.body for r in c1.wait_received(r1, 2)] == ["A-1", "A-2"]


def test_in_standard_mode_messages_without_a_group_go_to_any_consumer(
    broker: RunningBroker,
) -> None:
    producer = declare(broker, "loose", STANDARD)
    send(producer, "loose", (None, "x-1"), (None, "x-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("loose", credit=1)
    c1.wait_received(r1, 1)
    r2 = c2.receiver("loose", credit=1)
    assert [r.message.body for r in c2.wait_received(r2, 1)] == ["x-2"]


def test_in_standard_mode_a_consumer_that_leaves_frees_its_groups(broker: RunningBroker) -> None:
    producer = declare(broker, "leaving", STANDARD)
    send(producer, "leaving", ("A", "A-1"), ("A", "A-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("leaving", credit=1)
    settle(c1, c1.wait_received(r1, 1)[0])
    r2 = c2.receiver("leaving", credit=5)
    assert bodies(c2, r2) == []
    c1.close()
    assert [r.message.body for r in c2.wait_received(r2, 1)] == ["A-2"]


def test_a_dropped_consumer_returns_its_group_messages_in_order_to_another(
    broker: RunningBroker,
) -> None:
    producer = declare(broker, "dropped", SHARED)
    send(producer, "dropped", ("A", "A-1"), ("A", "A-2"), ("A", "A-3"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("dropped", credit=2)
    c1.wait_received(r1, 2)
    r2 = c2.receiver("dropped", credit=5)
    assert bodies(c2, r2) == []
    c1.drop()  # vanishes holding unsettled
    got = c2.wait_received(r2, 3)
    assert [r.message.body for r in got] == ["A-1", "A-2", "A-3"]
    assert [r.message.delivery_count for r in got] == [1, 1, 0]


def test_browsers_ignore_groups(broker: RunningBroker) -> None:
    producer = declare(broker, "browsed", SHARED)
    send(producer, "browsed", ("A", "A-1"), ("A", "A-2"))
    c1, c2 = broker.client(), broker.client()
    r1 = c1.receiver("browsed", credit=1)
    c1.wait_received(r1, 1)
    browser = c2.receiver("browsed", credit=10, browse=True)
    # A-2 waits in the group c1 owns and is shown; A-1, which c1 holds, is not (qpidd and
    # Broker-J show a browser available messages only).
    assert [r.message.body for r in c2.wait_received(browser, 1)] == ["A-2"]
    c2.pump(0.1)
    assert [r.message.body for r in c2.received(browser)] == ["A-2"]


@pytest.mark.parametrize(
    "kind",
    [{"qpid.last_value_queue_key": "k"}, {"qpid.priorities": 10}, {"qpid.queue_sort_key": "k"}],
)
def test_groups_on_an_lvq_priority_or_sorted_queue_are_refused(
    broker: RunningBroker, kind: dict[str, object]
) -> None:
    client = broker.client()
    link = client.receiver("nogroups", credit=1, node_properties={**SHARED, **kind})
    client.wait_closed(link)
    assert link.remote_source.type == Terminus.UNSPECIFIED
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "message groups are not supported" in link.remote_condition.description
    assert not broker.call(lambda: "nogroups" in broker.broker.queues)


def test_many_groups_and_consumers_deliver_every_message_once_in_group_order(
    broker: RunningBroker,
) -> None:
    producer = declare(broker, "many", SHARED)
    items = [(f"g{i % 20}", f"g{i % 20}-{i // 20}") for i in range(200)]
    send(producer, "many", *items)
    consumers = [broker.client() for _ in range(4)]
    links = [c.receiver("many", credit=3) for c in consumers]
    seen: dict[str, list[int]] = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in seen.values()) < 200 and time.monotonic() < deadline:
        for client, link in zip(consumers, links, strict=True):
            client.pump(0.002)
            for got in list(client.received(link)):
                group, n = got.message.body.split("-")
                seen.setdefault(group, []).append(int(n))
                client.settle(got, pump=False)  # the next round pumps
                client.received(link).remove(got)
                link.flow(1)
    assert sum(len(v) for v in seen.values()) == 200
    assert all(v == sorted(v) == list(range(10)) for v in seen.values())
