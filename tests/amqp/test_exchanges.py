"""Exchanges over AMQP: senders publish to an exchange (or through the relay), receivers
subscribe to it; each matching subscription gets its own copy, with qpidd's filters and
echoes."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Described, Disposition, Message, Terminus, symbol, ulong

from tests.amqp.test_connection import symbols_of
from tests.amqp.test_durability import Restartable
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, terminus_map

DIRECT = symbol("apache.org:legacy-amqp-direct-binding:string")
TOPIC = symbol("apache.org:legacy-amqp-topic-binding:string")
HEADERS = symbol("apache.org:legacy-amqp-headers-binding:map")
SELECTOR = symbol("apache.org:selector-filter:string")
_TAKEN: dict[int, object] = {}  # deliveries a test has settled already (kept: ids stay unique)
NO_LOCAL = ulong(0x0000468C00000003)


def bodies(client: EngineClient, link, expect: int, settle_wait: float = 0.2) -> list:
    got = client.wait_received(link, expect) if expect else []
    client.pump(settle_wait)
    got = [r for r in client.received(link) if id(r) not in _TAKEN]  # the new ones
    client.settle_all(got)
    _TAKEN.update((id(received), received) for received in got)
    return [r.message.body for r in got]


def publish(client: EngineClient, address: str | None, *messages: Message) -> list[Disposition]:
    sender = client.sender(address)
    deliveries = [client.send(sender, m, pump=False) for m in messages]
    return [client.wait_settled(d).remote_state for d in deliveries]


def subscriber(client: EngineClient, address: str, **kwargs) -> object:
    return client.receiver(address, credit=100, **kwargs)


# ---- fan-out --------------------------------------------------------------------------------


def test_every_matching_topic_subscriber_gets_its_own_copy(broker: RunningBroker) -> None:
    client = broker.client()
    everything = subscriber(client, "amq.topic", filters={"f": Described(TOPIC, "#")})
    uk = subscriber(client, "amq.topic", filters={"f": Described(TOPIC, "news.uk.*")})
    sport = subscriber(client, "amq.topic", filters={"f": Described(TOPIC, "*.*.sport")})
    weather = subscriber(client, "amq.topic", filters={"f": Described(TOPIC, "weather.#")})
    outcomes = publish(
        client,
        "amq.topic",
        Message(subject="news.uk.sport", body="a"),
        Message(subject="news.fr.sport", body="b"),
        Message(subject="news.uk.politics", body="c"),
    )
    assert outcomes == [Disposition.ACCEPTED] * 3
    assert bodies(client, everything, 3) == ["a", "b", "c"]
    assert bodies(client, uk, 2) == ["a", "c"]
    assert bodies(client, sport, 2) == ["a", "b"]
    assert bodies(client, weather, 0) == []


def test_a_subscription_is_echoed_with_distribution_mode_copy_as_broker_j_does(
    broker: RunningBroker,
) -> None:
    """Each subscriber gets a copy of what the exchange routes (Broker-J's
    ``Session_1_0.createExchangeDestination``; qpidd leaves the mode unset)."""
    client = broker.client()
    receiver = subscriber(client, "amq.topic", filters={"f": Described(TOPIC, "#")})
    assert receiver.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    publish(client, "amq.topic", Message(subject="x", body="taken"))
    assert bodies(client, receiver, 1) == ["taken"]
    assert broker.call(lambda: sum(q.depth for q in broker.broker.queues.values())) == 0


def test_the_key_in_an_address_is_the_binding_key_and_the_routing_key_as_broker_j_has_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    uk = subscriber(client, "amq.topic/news.uk")
    fr = subscriber(client, "amq.topic/news.fr")
    all_news = subscriber(client, "amq.topic/news.#")
    publish(client, "amq.topic/news.uk", Message(body="from the address"))
    # Qpid JMS sends JMSType as the subject: the address's key still wins
    publish(client, "amq.topic/news.uk", Message(subject="a-jms-type", body="typed"))
    publish(client, "amq.topic", Message(subject="news.fr", body="its own subject"))
    assert bodies(client, uk, 2) == ["from the address", "typed"]
    assert bodies(client, fr, 1) == ["its own subject"]
    assert bodies(client, all_news, 3) == ["from the address", "typed", "its own subject"]


def test_a_direct_exchange_routes_by_the_equal_key_and_echoes_a_topic_filter_as_direct(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    eu = subscriber(client, "amq.direct", filters={"k": Described(TOPIC, "eu")})
    echoed = terminus_map(eu.remote_source.filter)
    assert echoed["k"].descriptor == DIRECT and echoed["k"].value == "eu"
    us = subscriber(client, "amq.direct", filters={"k": Described(DIRECT, "us")})
    publish(client, "amq.direct", Message(subject="eu", body=1), Message(subject="us", body=2))
    assert bodies(client, eu, 1) == [1]
    assert bodies(client, us, 1) == [2]


def test_a_fanout_exchange_gives_every_subscriber_every_message(broker: RunningBroker) -> None:
    client = broker.client()
    first, second = subscriber(client, "amq.fanout"), subscriber(client, "amq.fanout")
    publish(client, "amq.fanout", Message(subject="whatever", body="x"), Message(body="y"))
    assert bodies(client, first, 2) == ["x", "y"]
    assert bodies(client, second, 2) == ["x", "y"]


def test_a_headers_exchange_matches_all_or_any_of_the_properties(broker: RunningBroker) -> None:
    client = broker.client()
    every = {"x-match": "all", "colour": "red", "size": "big"}
    either = {"x-match": "any", "colour": "red", "size": "big"}
    both = subscriber(client, "amq.match", filters={"h": Described(HEADERS, every)})
    one = subscriber(client, "amq.match", filters={"h": Described(HEADERS, either)})
    publish(
        client,
        "amq.match",
        Message(properties={"colour": "red", "size": "big"}, body="red and big"),
        Message(properties={"colour": "red", "size": "small"}, body="red"),
        Message(properties={"colour": "blue"}, body="blue"),
    )
    assert bodies(client, both, 1) == ["red and big"]
    assert bodies(client, one, 2) == ["red and big", "red"]


def test_a_subscription_without_a_filter_gets_qpidds_default_and_says_so(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    topic = subscriber(client, "amq.topic", capabilities=["topic", "shared-nothing"])
    filters = terminus_map(topic.remote_source.filter)
    assert filters["default-subject-filter"].value == "#"
    assert filters["default-subject-filter"].descriptor == TOPIC
    headers = subscriber(client, "amq.match")
    assert terminus_map(headers.remote_source.filter)["default-headers-filter"].value == {
        "x-match": "all"
    }
    assert topic.remote_source.address == "amq.topic"


def test_the_topic_capability_is_echoed_for_an_exchange_as_qpidd_does(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    receiver = subscriber(client, "amq.topic", capabilities=["topic", "queue", "durable"])
    # amq.topic is durable; it is not a queue
    assert set(symbols_of(receiver.remote_source.capabilities)) == {"topic", "durable"}


def test_a_selector_on_a_subscription_keeps_what_it_does_not_select_out_of_its_queue(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    red = subscriber(client, "amq.topic", filters={"s": Described(SELECTOR, "colour = 'red'")})
    assert terminus_map(red.remote_source.filter)["s"].value == "colour = 'red'"
    publish(
        client,
        "amq.topic",
        Message(properties={"colour": "blue"}, body="blue"),
        Message(properties={"colour": "red"}, body="red"),
    )
    assert bodies(client, red, 1) == ["red"]
    depths = broker.call(lambda: [q.depth for q in broker.broker.queues.values()])
    assert depths == [0]


def test_no_local_keeps_the_subscribers_own_messages_from_it(broker: RunningBroker) -> None:
    mine, other = broker.client(container="me"), broker.client(container="you")
    local = subscriber(mine, "amq.fanout", filters={"n": Described(NO_LOCAL, [])})
    publish(mine, "amq.fanout", Message(body="my own"))
    publish(other, "amq.fanout", Message(body="someone else's"))
    assert bodies(mine, local, 1) == ["someone else's"]


def test_a_message_only_a_no_local_subscriber_would_take_is_accepted_by_a_rejecting_exchange(
    broker: RunningBroker,
) -> None:
    """It was routed (Broker-J's no-local is a consumer's filter, the exchange found a
    queue): not the exchange's unknown destination."""
    broker.call(
        lambda: broker.broker.declare_exchange(
            "room", "fanout", arguments={"unroutableMessageBehaviour": "REJECT"}
        )
    )
    client = broker.client(container="me")
    subscriber(client, "room", filters={"n": Described(NO_LOCAL, [])})
    sender = client.sender("room")
    delivery = client.wait_settled(client.send(sender, Message(body="my own"), pump=False))
    assert delivery.remote_state == Disposition.ACCEPTED


def test_no_local_on_a_shared_subscription_keeps_out_what_any_of_its_receivers_publish(
    broker: RunningBroker,
) -> None:
    # As Broker-J's no-local filter: every consumer's connection, not the latest alone.
    a, b, c = (broker.client(container="app") for _ in range(3))
    shared = {"name": "snl", "capabilities": ["topic", "shared"]}
    no_local = {"n": Described(NO_LOCAL, [])}
    on_a = subscriber(a, "amq.fanout", filters=no_local, **shared)
    on_b = subscriber(b, "amq.fanout", filters=no_local, **shared)
    publish(a, "amq.fanout", Message(body="from a"))
    publish(b, "amq.fanout", Message(body="from b"))
    publish(c, "amq.fanout", Message(body="from c"))
    a.pump(0.2)
    b.pump(0.2)
    got = [r.message.body for r in a.received(on_a) + b.received(on_b)]
    assert got == ["from c"]
    on_b.close()
    b.pump(0.2)
    publish(b, "amq.fanout", Message(body="from b, gone"))  # b has no receiver there now
    # a has both now ("from c" too, had b taken it: what b held came back as it closed)
    assert sorted(r.message.body for r in a.wait_received(on_a, 2)) == ["from b, gone", "from c"]


# ---- routing rules --------------------------------------------------------------------------


def test_the_relay_routes_to_an_exchange_by_to_and_subject(broker: RunningBroker) -> None:
    client = broker.client()
    news = subscriber(client, "amq.topic/news.#")
    outcomes = publish(
        client,
        None,
        Message(address="amq.topic", subject="news.uk", body="by subject"),
        Message(address="amq.topic/news.fr", body="by address"),
        Message(address="amq.topic/news.de", subject="elsewhere", body="by address first"),
    )
    assert outcomes == [Disposition.ACCEPTED] * 3
    assert bodies(client, news, 3) == ["by subject", "by address", "by address first"]


def test_an_unroutable_message_is_accepted_dropped_and_counted(broker: RunningBroker) -> None:
    client = broker.client()
    assert publish(client, "amq.direct", Message(subject="nobody", body="x")) == [
        Disposition.ACCEPTED
    ]
    exchange = broker.broker.exchanges.named("amq.direct")
    assert broker.call(lambda: (exchange.routed, exchange.dropped)) == (0, 1)


def test_the_routing_key_property_comes_before_the_subject_as_broker_j_reads_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    eu = subscriber(client, "amq.direct/eu")
    publish(client, "amq.direct", Message(properties={"routing-key": "eu"}, body="by property"))
    both = Message(subject="us", properties={"routing_key": "eu"}, body="property first")
    publish(client, "amq.direct", both)
    assert bodies(client, eu, 2) == ["by property", "property first"]


def test_a_durable_message_reaches_every_durable_subscription_once_written(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    first = subscriber(client, "amq.fanout", name="first", durable=True, expiry_never=True)
    second = subscriber(client, "amq.fanout", name="second", durable=True, expiry_never=True)
    assert publish(client, "amq.fanout", Message(body="kept", durable=True)) == [
        Disposition.ACCEPTED
    ]
    assert bodies(client, first, 1) == ["kept"]
    assert bodies(client, second, 1) == ["kept"]


def test_a_full_subscription_refuses_the_message_for_every_subscription(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    full = client.receiver(
        "amq.fanout",
        name="full",
        link_properties={"qpid.max_count": 1, "qpid.policy_type": "reject"},
    )
    roomy = subscriber(client, "amq.fanout", name="roomy")
    assert publish(client, "amq.fanout", Message(body=1)) == [Disposition.ACCEPTED]
    assert publish(client, "amq.fanout", Message(body=2)) == [Disposition.REJECTED]
    assert bodies(client, roomy, 1) == [1]
    assert full.remote_source.address == "amq.fanout"


# ---- declaring at attach --------------------------------------------------------------------


def test_a_topic_capability_on_an_unknown_name_makes_a_topic_exchange(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    one = subscriber(client, "prices", capabilities=["topic"])
    two = subscriber(client, "prices", capabilities=["topic"])
    publish(client, "prices", Message(subject="x", body="both"))
    assert bodies(client, one, 1) == ["both"]
    assert bodies(client, two, 1) == ["both"]
    assert broker.call(lambda: broker.broker.exchanges.named("prices").kind) == "topic"


def test_supported_dist_modes_copy_and_an_exchange_type_make_that_exchange(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("events", node_properties={"supported-dist-modes": "copy"})
    client.sender("by-key", node_properties={"exchange-type": "direct"})
    kinds = broker.call(
        lambda: {n: broker.broker.exchanges.named(n).kind for n in ("events", "by-key")}
    )
    assert kinds == {"events": "topic", "by-key": "direct"}


def test_an_exchange_of_another_type_than_asked_answers_its_own_type_as_qpidd_does(
    broker: RunningBroker,
) -> None:
    """The client's own check (qpid::messaging's assert) compares the echo."""
    client = broker.client()
    asked = {"exchange-type": "fanout", "durable": True}
    link = client.sender("amq.topic", node_properties=asked)
    client.wait(lambda: link.remote_target.address is not None)
    echoed = terminus_map(link.remote_target.properties)
    assert echoed == {"supported-dist-modes": "copy", "durable": True, "exchange-type": "topic"}
    plain = client.sender("amq.topic")  # no node properties: none echoed
    client.wait(lambda: plain.remote_target.address is not None)
    assert terminus_map(plain.remote_target.properties) == {}


def test_create_on_demand_of_an_exchange_of_another_type_is_a_precondition_failure(
    broker: RunningBroker,
) -> None:
    """qpidd's Session::resolve, emulating 0-10's exchange-declare."""
    client = broker.client()
    link = client.sender(
        "amq.topic",
        node_properties={"exchange-type": "fanout"},
        capabilities=["topic", "create-on-demand"],
    )
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:precondition-failed"
    assert "Exchange of different type already exists" in link.remote_condition.description


def test_a_temporary_topic_lives_as_long_as_its_link(broker: RunningBroker) -> None:
    client = broker.client()
    temp = client.session.sender("temp-topic")
    temp.target.dynamic = True
    temp.target.capabilities.put_symbol(symbol("temporary-topic"))
    temp.open()
    client.wait(lambda: temp.remote_target.address)
    name = temp.remote_target.address
    assert name.startswith("TempTopic")
    listener = subscriber(client, name)
    delivery = client.send(temp, Message(body="to the temporary topic"))
    assert client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
    assert bodies(client, listener, 1) == ["to the temporary topic"]
    temp.close()
    client.pump(0.2)
    assert broker.call(lambda: name in broker.broker.exchanges) is False


@pytest.mark.parametrize("address", ["amq.topic", "amq.direct/eu"])
def test_queue_options_on_a_sender_to_an_existing_exchange_are_ignored_as_qpidd_does(
    broker: RunningBroker, address: str
) -> None:
    client = broker.client()
    link = client.sender(address, link_properties={"qpid.max_count": 5})
    client.pump(0.2)
    assert link.remote_condition is None and link.remote_target.address == address


def test_queue_options_on_a_sender_making_an_exchange_are_refused(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.sender(
        "new-topic",
        capabilities=["create-on-demand", "topic"],
        node_properties={"supported-dist-modes": "copy", "qpid.max_count": 5},
    )
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert broker.call(lambda: "new-topic" in broker.broker.exchanges) is False


def test_the_broker_offers_shared_subscriptions(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.remote_offered_capabilities)
    offered = {str(c) for c in client.conn.remote_offered_capabilities}
    assert {"ANONYMOUS-RELAY", "SHARED-SUBS"} <= offered


def test_an_exchange_declared_to_reject_unroutable_messages_tells_the_sender(
    broker: RunningBroker,
) -> None:
    broker.call(
        lambda: broker.broker.declare_exchange(
            "strict", "direct", arguments={"unroutableMessageBehaviour": "REJECT"}
        )
    )
    client = broker.client()
    sender = client.sender("strict")
    delivery = client.wait_settled(
        client.send(sender, Message(subject="nobody", body="x"), pump=False)
    )
    assert delivery.remote_state == Disposition.REJECTED
    condition = delivery.remote.condition
    assert (condition.name, condition.description) == (
        "amqp:not-found",
        "Unknown destination 'nobody'",
    )
    relaxed = client.sender("strict", name="relaxed", capabilities=["DISCARD_UNROUTABLE"])
    assert client.wait_settled(
        client.send(relaxed, Message(subject="nobody"), pump=False)
    ).remote_state == (Disposition.ACCEPTED)


def test_queue_options_on_a_subscription_make_it_a_last_value_subscription(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    latest = client.receiver(
        "amq.topic/prices.#",
        name="latest",
        link_properties={"qpid.last_value_queue_key": "ticker"},
    )
    sender = client.sender("amq.topic")
    for ticker, price in [("ACME", 1), ("INIT", 2), ("ACME", 3)]:
        message = Message(subject="prices.eu", properties={"ticker": ticker}, body=price)
        client.wait_settled(client.send(sender, message, pump=False))
    latest.flow(10)
    assert bodies(client, latest, 2) == [2, 3]
    assert broker.call(lambda: broker.broker.queues["test_latest"].kind) == "lvq"


def test_a_durable_exchange_and_its_bindings_to_durable_queues_survive_a_restart(
    tmp_path: Path,
) -> None:
    brokers = Restartable(tmp_path / "data")
    first = brokers.start()
    try:
        first.call(lambda: first.broker.declare_exchange("news", "topic", durable=True))
        first.call(lambda: first.broker.declare("uk", {"durable": True}))
        first.call(lambda: first.broker.declare("transient"))
        first.call(lambda: first.broker.bind("news", "uk", "uk.#"))
        first.call(lambda: first.broker.bind("news", "transient", "#"))
    finally:
        first.stop()
    second = brokers.start()
    try:
        bound = second.call(
            lambda: [(b.queue, b.key) for b in second.broker.exchanges.named("news").bindings()]
        )
        assert bound == [("uk", "uk.#")]  # the transient queue, and its binding, are gone
        client = second.client()
        publish(client, "news", Message(subject="uk.sport", body="kept", durable=True))
        assert second.call(lambda: second.broker.queues["uk"].depth) == 1
    finally:
        second.stop()


def test_a_transactional_publish_reaches_every_subscriber_at_commit_and_none_at_rollback(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    first, second = subscriber(client, "amq.fanout"), subscriber(client, "amq.fanout")
    coordinator = client.coordinator()
    sender = client.sender("amq.fanout")
    kept = client.declare(coordinator)
    client.wait_settled(client.send(sender, Message(body="committed"), txn=kept, pump=False))
    dropped = client.declare(coordinator)
    client.wait_settled(client.send(sender, Message(body="rolled back"), txn=dropped, pump=False))
    assert client.discharge(coordinator, dropped, fail=True).remote_state == Disposition.ACCEPTED
    assert bodies(client, first, 0) == []  # nothing before the commit
    assert client.discharge(coordinator, kept).remote_state == Disposition.ACCEPTED
    assert bodies(client, first, 1) == ["committed"]
    assert bodies(client, second, 1) == ["committed"]


@pytest.mark.parametrize(
    ("address", "filters", "says"),
    [
        ("amq.topic", {"k": Described(TOPIC, 5)}, "must be a string"),
        ("amq.match", {"h": Described(HEADERS, "all")}, "must be a map"),
        ("amq.topic", {"s": Described(SELECTOR, "colour = ")}, "invalid selector"),
        ("amq.match", {"h": Described(HEADERS, {"colour": "red"})}, "x-match"),
    ],
)
def test_a_filter_a_subscription_cannot_use_is_refused_and_nothing_is_left(
    broker: RunningBroker, address: str, filters: dict, says: str
) -> None:
    client = broker.client()
    link = client.receiver(address, credit=1, filters=filters)
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert says in link.remote_condition.description
    assert broker.call(
        lambda: (len(broker.broker.queues), broker.broker.exchanges.binding_count)
    ) == (
        0,
        0,
    )


def test_binding_filters_that_do_not_fit_are_passed_over_and_not_echoed_as_both_brokers_do(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    two_keys = {"a": Described(TOPIC, "a.#"), "b": Described(TOPIC, "b.#")}
    first = subscriber(client, "amq.topic", filters=two_keys)  # the first is kept (qpidd)
    headers_on_topic = subscriber(
        client, "amq.topic", filters={"h": Described(HEADERS, {"x-match": "all"})}
    )
    key_on_headers = subscriber(client, "amq.match", filters={"k": Described(DIRECT, "key")})
    subject_on_headers = subscriber(client, "amq.match/anything")  # qpid::messaging's address
    for link in (first, headers_on_topic, key_on_headers, subject_on_headers):
        client.wait(lambda link=link: link.remote_source.address is not None)
    assert list(terminus_map(first.remote_source.filter)) == ["a"]
    assert list(terminus_map(headers_on_topic.remote_source.filter)) == ["default-subject-filter"]
    assert list(terminus_map(key_on_headers.remote_source.filter)) == ["default-headers-filter"]
    publish(client, "amq.topic", Message(subject="b.1", body="b"), Message(subject="a.1", body="a"))
    publish(client, "amq.match", Message(properties={"colour": "red"}, body="any"))
    assert bodies(client, first, 1) == ["a"]
    assert bodies(client, headers_on_topic, 2) == ["b", "a"]  # binds "#"
    assert bodies(client, key_on_headers, 1) == ["any"]  # binds x-match all
    assert bodies(client, subject_on_headers, 1) == ["any"]


def test_an_exchange_made_by_an_attach_takes_its_alternate_from_the_node_properties(
    broker: RunningBroker,
) -> None:
    broker.call(lambda: broker.broker.declare("unrouted"))
    client = broker.client()
    options = {"exchange-type": "direct", "alternate-exchange": "unrouted"}
    sender = client.sender("events", node_properties=options)
    client.wait_settled(client.send(sender, Message(subject="nobody", body="lost"), pump=False))
    assert broker.call(lambda: broker.broker.exchanges.named("events").alternate) == "unrouted"
    receiver = client.receiver("unrouted", credit=1)
    assert [r.message.body for r in client.wait_received(receiver, 1)] == ["lost"]


def test_a_topic_node_asked_for_durable_by_qpid_messaging_is_a_durable_exchange(
    broker: RunningBroker,
) -> None:
    """``dx; {create: always, node: {type: topic, durable: True}}``: qpidd makes the
    exchange durable from the node, whatever the link's own durability, and its echo says
    ``durable`` so the client's assert holds."""
    client = broker.client()
    sender = client.sender(
        "dx",
        capabilities=["create-on-demand", "topic", "durable"],
        node_properties={"supported-dist-modes": "copy", "durable": True},
    )
    client.wait(lambda: sender.remote_target.address)
    assert broker.call(lambda: broker.broker.exchanges.named("dx").durable) is True
    assert "durable" in symbols_of(sender.remote_target.capabilities)


def test_a_senders_x_declare_for_a_topic_node_is_taken_as_qpidd_takes_it(
    broker: RunningBroker,
) -> None:
    """qpid::messaging's ``node: {type: topic, x-declare: {...}}`` on a sender: an existing
    exchange is used as it is (auto-delete echoed false, what it is), a new one keeps other
    arguments as its own, and an auto-delete one is refused as not implemented."""
    client = broker.client()
    topic = {"capabilities": ["topic"]}
    existing = client.sender(
        "amq.topic", node_properties={"supported-dist-modes": "copy", "auto-delete": False}, **topic
    )
    client.wait(lambda: existing.remote_target.address)
    assert terminus_map(existing.remote_target.properties)["auto-delete"] is False
    made = client.sender(
        "t5",
        node_properties={"supported-dist-modes": "copy", "my-arg": 1},
        capabilities=["create-on-demand", "topic"],
    )
    client.wait(lambda: made.remote_target.address)
    assert broker.call(lambda: broker.broker.exchanges.named("t5").arguments) == {"my-arg": 1}
    refused = client.sender(
        "t4",
        node_properties={"supported-dist-modes": "copy", "auto-delete": True},
        capabilities=["create-on-demand", "topic"],
    )
    client.wait_closed(refused)
    assert refused.remote_condition.name == "amqp:not-implemented"
    assert broker.call(lambda: "t4" in broker.broker.exchanges) is False


def test_a_name_both_a_queue_and_an_exchange_is_the_exchange_to_send_to_the_queue_to_read(
    broker: RunningBroker,
) -> None:
    """Broker-J's orders: a producer's target or the relay's ``to`` finds the exchange
    first, a consumer's source the queue."""

    def make() -> None:
        broker.broker.declare("both")
        broker.broker.declare("sink")
        broker.broker.declare_exchange("both", "fanout")
        broker.broker.bind("both", "sink", "")

    broker.call(make)
    client = broker.client()
    producer = client.sender("both")
    client.wait_settled(client.send(producer, Message(body="by target"), pump=False))
    relay = client.sender(None)
    client.wait_settled(client.send(relay, Message(address="both", body="by relay"), pump=False))
    depths = broker.call(
        lambda: (broker.broker.queues["both"].depth, broker.broker.queues["sink"].depth)
    )
    assert depths == (0, 2)
    broker.call(lambda: broker.broker.bind("both", "both", ""))  # now the queue gets some
    client.wait_settled(client.send(producer, Message(body="for the queue"), pump=False))
    reader = client.receiver("both", credit=1)
    assert client.wait_received(reader, 1)[0].message.body == "for the queue"


def test_a_link_asking_for_a_queue_or_a_topic_gets_that_node_where_a_name_is_both(
    broker: RunningBroker,
) -> None:
    """qpid::messaging's ``name; {node: {type: queue}}`` and ``{type: topic}`` (the
    ``queue`` and ``topic`` capabilities), as qpidd's Session::resolve reads them, for
    senders and receivers alike."""

    def make() -> None:
        broker.broker.declare("both")
        broker.broker.declare("sink")
        broker.broker.declare_exchange("both", "fanout")
        broker.broker.bind("both", "sink", "")

    broker.call(make)
    client = broker.client()
    to_topic = client.receiver("both", credit=5, capabilities=["topic"], name="on-topic")
    client.answered(to_topic)
    to_queue = client.sender("both", capabilities=["queue"], name="to-queue")
    client.wait_settled(client.send(to_queue, Message(body="for the queue"), pump=False))
    via_exchange = client.sender("both", capabilities=["topic"], name="to-topic")
    client.wait_settled(client.send(via_exchange, Message(body="routed"), pump=False))
    depths = broker.call(
        lambda: (broker.broker.queues["both"].depth, broker.broker.queues["sink"].depth)
    )
    assert depths == (1, 1)
    assert [r.message.body for r in client.wait_received(to_topic, 1)] == ["routed"]
    from_queue = client.receiver("both", credit=5, capabilities=["queue"], name="on-queue")
    assert [r.message.body for r in client.wait_received(from_queue, 1)] == ["for the queue"]
