"""Exchanges and bindings on the ``$management`` node: create, read, query, delete, with
Broker-J's type names and qpid-config's refusals."""

from __future__ import annotations

from proton import Message, uint, ulong

from tests.amqp.test_durability import Restartable, brokers, drain, send_all  # noqa: F401 - fixture
from tests.amqp.test_management import Node, assert_named_as_broker_j_names_it, entity, status
from tests.conftest import RunningBroker

EXCHANGE = "org.apache.qpid.Exchange"
TOPIC_EXCHANGE = "org.apache.qpid.TopicExchange"
FANOUT_EXCHANGE = "org.apache.qpid.FanoutExchange"
BINDING = "org.apache.qpid.Binding"
NODE = {"type": "org.amqp.management", "name": "self"}


def test_an_exchange_is_created_read_and_deleted(broker: RunningBroker) -> None:
    node = Node(broker.client())
    made = node.ask(entity("CREATE", "news", EXCHANGE), {"type": "topic", "durable": True})
    assert status(made) == (201, "Created")
    assert made.body["qpid-type"] == "topic" and made.body["durable"] is True
    plain = node.ask(entity("CREATE", "plain-news", EXCHANGE), {"type": "topic"})
    assert plain.body["durable"] is True  # Broker-J's default
    passing = node.ask(entity("CREATE", "passing", EXCHANGE), {"type": "fanout", "durable": False})
    assert passing.body["durable"] is False
    read = node.ask(entity("READ", "news", EXCHANGE))
    assert read.body["name"] == "news" and read.body["bindingCount"] == 0
    assert read.body["messagesIn"] == read.body["messagesRouted"] == 0  # Broker-J's name too
    assert status(node.ask(entity("DELETE", "news", EXCHANGE)))[0] == 204
    assert status(node.ask(entity("READ", "news", EXCHANGE)))[0] == 404


def test_a_kind_names_the_type_and_must_agree_with_it(broker: RunningBroker) -> None:
    node = Node(broker.client())
    assert node.ask(entity("CREATE", "t", TOPIC_EXCHANGE)).body["qpid-type"] == "topic"
    clash = node.ask(entity("CREATE", "f", TOPIC_EXCHANGE), {"type": "fanout"})
    assert status(clash) == (
        400,
        "type org.apache.qpid.TopicExchange is a topic exchange, not fanout",
    )
    assert status(node.ask(entity("READ", "t", "org.apache.qpid.FanoutExchange")))[0] == 404


def test_creating_what_cannot_be_is_refused_and_changes_nothing(broker: RunningBroker) -> None:
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "x", EXCHANGE), {"type": "xml"}))[0] == 400
    assert status(node.ask(entity("CREATE", "amq.mine", EXCHANGE), {"type": "topic"}))[0] == 400
    assert status(node.ask(entity("CREATE", "amq.topic", EXCHANGE), {"type": "topic"}))[0] == 409
    assert (
        status(node.ask(entity("DELETE", "amq.topic", EXCHANGE)))[0] == 403
    )  # Broker-J: RequiredExchangeException
    assert status(node.ask(entity("UPDATE", "amq.topic", EXCHANGE), {"durable": False}))[0] == 400
    names = {e.name for e in broker.call(lambda: list(broker.broker.exchanges))}
    assert names == {"amq.direct", "amq.topic", "amq.fanout", "amq.match"}


def test_an_exchange_argument_the_broker_does_not_know_is_refused_and_nothing_is_made(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    misspelt = {"type": "direct", "arguments": {"unroutableMessageBehavior": "REJECT"}}
    refused = node.ask(entity("CREATE", "strict", EXCHANGE), misspelt)
    assert status(refused)[0] == 400
    assert "unknown exchange argument 'unroutableMessageBehavior'" in status(refused)[1]
    assert status(node.ask(entity("READ", "strict", EXCHANGE)))[0] == 404
    known = {"type": "direct", "arguments": {"unroutableMessageBehaviour": "REJECT"}}
    assert status(node.ask(entity("CREATE", "strict", EXCHANGE), known))[0] == 201


def test_a_binding_named_by_a_number_of_an_amqp_type_has_its_decimal_text_as_key(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("orders"))
    made = node.ask(entity("CREATE", uint(5), BINDING, exchange="amq.direct", queue="orders"))
    assert status(made)[0] == 201 and made.body["bindingKey"] == "5"


def test_a_binding_is_created_listed_and_deleted(broker: RunningBroker) -> None:
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("orders"))
    made = node.ask(entity("CREATE", "orders.#", BINDING, exchange="amq.topic", queue="orders"))
    assert status(made)[0] == 201
    assert made.body["bindingKey"] == "orders.#" and made.body["queue"] == "orders"
    again = node.ask(entity("CREATE", "orders.#", BINDING, exchange="amq.topic", queue="orders"))
    assert status(again)[0] == 409
    listed = node.ask({**NODE, "operation": "QUERY", "entityType": BINDING}, {})
    assert listed.body["attributeNames"][2:5] == ["exchange", "queue", "bindingKey"]
    assert [row[2:5] for row in listed.body["results"]] == [["amq.topic", "orders", "orders.#"]]
    gone = node.ask(entity("DELETE", "orders.#", BINDING, exchange="amq.topic", queue="orders"))
    assert status(gone)[0] == 204
    assert (
        status(node.ask(entity("READ", "orders.#", BINDING, exchange="amq.topic", queue="orders")))[
            0
        ]
        == 404
    )


def test_an_exchange_binds_and_unbinds_with_broker_js_operations(broker: RunningBroker) -> None:
    """Broker-J has no binding entities: ``bind`` and ``unbind`` are operations on the
    exchange, named by ``index``=``object-path``, their parameters application properties."""
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("shipping"))
    topic = {"type": EXCHANGE, "index": "object-path", "key": "amq.topic"}
    bind = {**topic, "operation": "bind", "destination": "shipping", "bindingKey": "ship.#"}
    made = node.ask(bind)
    assert status(made)[0] == 200 and made.body is True
    assert node.ask(bind).body is False  # there already; its arguments left alone
    bound = broker.call(lambda: broker.broker.exchanges.named("amq.topic").bindings_of("shipping"))
    assert [b.key for b in bound] == ["ship.#"]
    unbind = {**topic, "operation": "unbind", "destination": "shipping", "bindingKey": "ship.#"}
    assert node.ask(unbind).body is True and node.ask(unbind).body is False
    matched = {"type": EXCHANGE, "name": "amq.match", "operation": "bind"}
    headers = node.ask(
        {**matched, "destination": "shipping", "bindingKey": "", "arguments": '{"x-match": "all"}'}
    )
    assert headers.body is True  # a map parameter as JSON text, as JMS clients send it
    operations = node.ask({**NODE, "operation": "GET-OPERATIONS", "entityType": EXCHANGE}).body
    assert "bind" in operations[EXCHANGE] and "unbind" in operations[FANOUT_EXCHANGE]


def test_bind_and_unbind_need_a_binding_key_as_in_broker_j(broker: RunningBroker) -> None:
    """Broker-J's ``bindingKey`` parameter is mandatory (an empty one binds with no key): a
    request without it is refused naming it, and nothing is bound or unbound."""
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("shipping"))
    topic = {"type": EXCHANGE, "name": "amq.topic", "destination": "shipping"}
    for operation in ("bind", "unbind"):
        refused = node.ask({**topic, "operation": operation})
        assert status(refused)[0] == 400 and "bindingKey" in status(refused)[1]
    bound = broker.call(lambda: broker.broker.exchanges.named("amq.topic").bindings_of("shipping"))
    assert bound == []
    direct = {"type": EXCHANGE, "name": "amq.direct", "destination": "shipping"}
    for key in (7, uint(8), ulong(9)):  # rhea and qpid::messaging send numbers as uint, ulong
        assert node.ask({**direct, "operation": "bind", "bindingKey": key}).body is True
    keys = broker.call(lambda: broker.broker.exchanges.named("amq.direct").bindings_of("shipping"))
    assert sorted(b.key for b in keys) == ["7", "8", "9"]  # a value of another type, as text


def test_a_headers_binding_takes_its_arguments_and_refuses_bad_ones(broker: RunningBroker) -> None:
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("red"))
    bad = node.ask(entity("CREATE", "r", BINDING, exchange="amq.match", queue="red"), {})
    assert status(bad)[0] == 400 and "x-match" in status(bad)[1]
    good = node.ask(
        entity("CREATE", "r", BINDING, exchange="amq.match", queue="red"),
        {"arguments": {"x-match": "all", "colour": "red"}},
    )
    assert good.body["arguments"] == {"x-match": "all", "colour": "red"}
    client = broker.client()
    sender = client.sender("amq.match")
    client.wait_settled(
        client.send(sender, Message(properties={"colour": "red"}, body=1), pump=False)
    )
    assert broker.call(lambda: broker.broker.queues["red"].depth) == 1


def test_binding_a_queue_or_exchange_that_does_not_exist_is_not_found(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    no_queue = node.ask(entity("CREATE", "k", BINDING, exchange="amq.direct", queue="none"))
    no_exchange = node.ask(entity("CREATE", "k", BINDING, exchange="none", queue="none"))
    assert status(no_queue)[0] == 404 and status(no_exchange)[0] == 404


def test_query_lists_exchanges_with_their_counters(broker: RunningBroker) -> None:
    node = Node(broker.client())
    listed = node.ask(
        {**NODE, "operation": "QUERY", "entityType": EXCHANGE},
        {"attributeNames": ["name", "qpid-type", "messagesDropped"]},
    )
    assert listed.body["results"] == [
        ["amq.direct", "direct", 0],
        ["amq.fanout", "fanout", 0],
        ["amq.match", "headers", 0],
        ["amq.topic", "topic", 0],
    ]


def test_read_and_query_give_the_type_class_as_type_and_the_kind_as_qpid_type(
    broker: RunningBroker,
) -> None:
    """As Broker-J answers: ``type`` is the AMQP name of the exchange's type class,
    ``qpid-type`` its kind."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "news", EXCHANGE), {"type": "topic"})
    read = node.ask(entity("READ", "news", EXCHANGE)).body
    assert (read["type"], read["qpid-type"]) == (TOPIC_EXCHANGE, "topic")
    listed = node.ask(
        {**NODE, "operation": "QUERY", "entityType": EXCHANGE},
        {"attributeNames": ["name", "type", "qpid-type"]},
    )
    assert ["news", TOPIC_EXCHANGE, "topic"] in listed.body["results"]
    assert ["amq.match", "org.apache.qpid.HeadersExchange", "headers"] in listed.body["results"]
    every = node.ask({**NODE, "operation": "QUERY", "entityType": EXCHANGE}, {}).body
    rows = [dict(zip(every["attributeNames"], row, strict=True)) for row in every["results"]]
    news = next(row for row in rows if row["name"] == "news")
    assert (news["type"], news["qpid-type"]) == (TOPIC_EXCHANGE, "topic")


def test_create_takes_type_and_qpid_type_as_the_kind_or_the_class(broker: RunningBroker) -> None:
    node = Node(broker.client())
    given = [{"type": "fanout"}, {"qpid-type": "fanout"}, {"type": FANOUT_EXCHANGE}]
    given += [{"qpid-type": FANOUT_EXCHANGE, "type": "fanout"}]
    for n, body in enumerate(given):
        made = node.ask(entity("CREATE", f"f{n}", EXCHANGE), body)
        assert status(made)[0] == 201, status(made)
        assert made.body["qpid-type"] == "fanout"
    read = node.ask(entity("READ", "f0", EXCHANGE)).body
    again = {k: read[k] for k in ("type", "qpid-type", "durable", "arguments")}
    assert status(node.ask(entity("CREATE", "copy", EXCHANGE), again))[0] == 201
    clash = node.ask(entity("CREATE", "x", EXCHANGE), {"type": "topic", "qpid-type": "fanout"})
    assert status(clash)[0] == 400 and "qpid-type" in status(clash)[1]
    assert status(node.ask(entity("READ", "x", EXCHANGE)))[0] == 404


def test_the_types_include_exchanges_and_bindings(broker: RunningBroker) -> None:
    node = Node(broker.client())
    types = node.ask({**NODE, "operation": "GET-TYPES"}).body
    assert types[TOPIC_EXCHANGE] == [EXCHANGE] and types[BINDING] == []
    attributes = node.ask({**NODE, "operation": "GET-ATTRIBUTES", "entityType": BINDING}).body
    assert attributes[BINDING] == ["name", "id", "exchange", "queue", "bindingKey", "arguments"]


def test_an_exchange_answers_with_the_identity_and_object_path_broker_j_gives(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    created = node.ask(entity("CREATE", "named", EXCHANGE), {"type": "fanout"}).body
    assert created["name"] == "named"
    assert_named_as_broker_j_names_it(node, EXCHANGE, created)


def test_query_without_an_entity_type_lists_every_entity_as_broker_j_does(
    broker: RunningBroker,
) -> None:
    """Broker-J's QUERY without ``entityType``: bindings, exchanges, then queues (its
    categories by name), with every kind's attributes, ``offset`` and ``count`` over them
    all."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "orders"))
    node.ask(entity("CREATE", "orders.#", BINDING, exchange="amq.topic", queue="orders"))
    every = node.ask({**NODE, "operation": "QUERY"}, {}).body
    names = every["attributeNames"]
    assert names[:4] == ["identity", "type", "qpid-type", "object-path"]
    assert {"queueDepthMessages", "messagesDropped", "bindingKey"} <= set(names)
    rows = [dict(zip(names, row, strict=True)) for row in every["results"]]
    listed = [(row["type"], row["name"]) for row in rows if not row["name"].startswith("Temp")]
    assert listed == [
        (None, "orders.#"),  # a binding (Broker-J's Binding has no type class)
        ("org.apache.qpid.DirectExchange", "amq.direct"),
        ("org.apache.qpid.FanoutExchange", "amq.fanout"),
        ("org.apache.qpid.HeadersExchange", "amq.match"),
        (TOPIC_EXCHANGE, "amq.topic"),
        ("org.apache.qpid.StandardQueue", "orders"),
    ]
    assert rows[0]["bindingKey"] == "orders.#" and rows[-1]["queueDepthMessages"] == 0
    window = node.ask({**NODE, "operation": "QUERY", "offset": 1, "count": 2}, {})
    at = names.index("name")
    assert [row[at] for row in window.body["results"]] == ["amq.direct", "amq.fanout"]
    named = node.ask({**NODE, "operation": "QUERY", "count": 1}, {"attributeNames": ["name"]})
    assert named.body == {"attributeNames": ["name"], "results": [["orders.#"]]}


def test_get_statistics_answers_broker_js_exchange_statistics(broker: RunningBroker) -> None:
    node = Node(broker.client())
    broker.call(lambda: broker.broker.declare("routed"))
    node.ask(entity("CREATE", "routed", BINDING, exchange="amq.direct", queue="routed"))
    send_all(broker, "amq.direct/routed", [Message(body="r" * 10) for _ in range(2)])
    send_all(broker, "amq.direct/nowhere", [Message(body="d" * 10)])  # dropped
    reply = node.ask(entity("getStatistics", "amq.direct", EXCHANGE))
    assert status(reply)[0] == 200
    figures = reply.body
    assert (figures["messagesIn"], figures["messagesDropped"], figures["bindingCount"]) == (3, 1, 1)
    assert figures["bytesIn"] > figures["bytesDropped"] > 10
    assert figures["messagesRouted"] == 2  # this broker's own
    read = node.ask(entity("READ", "amq.direct", EXCHANGE)).body
    assert read["messagesIn"] == 3 and read["bytesIn"] == figures["bytesIn"]
    wanted = node.ask(entity("getStatistics", "amq.direct", EXCHANGE, statistics=["bytesIn"]))
    assert wanted.body == {"bytesIn": figures["bytesIn"]}
    assert status(node.ask(entity("resetStatistics", "amq.direct", EXCHANGE)))[0] == 200
    after = node.ask(entity("getStatistics", "amq.direct", EXCHANGE)).body
    assert (after["messagesIn"], after["bytesIn"], after["bindingCount"]) == (0, 0, 1)
    operations = node.ask({**NODE, "operation": "GET-OPERATIONS", "entityType": EXCHANGE}).body
    assert {"getStatistics", "resetStatistics"} <= set(operations[EXCHANGE])


def test_create_takes_broker_js_other_exchange_attributes(broker: RunningBroker) -> None:
    node = Node(broker.client())
    made = node.ask(
        entity("CREATE", "strict", EXCHANGE),
        {
            "type": "direct",
            "description": "no silent drops",
            "context": {"owner": "ops"},
            "unroutableMessageBehaviour": "REJECT",
            "lifetimePolicy": "PERMANENT",
        },
    )
    assert status(made)[0] == 201
    assert made.body["description"] == "no silent drops"
    assert made.body["context"] == {"owner": "ops"}
    assert made.body["unroutableMessageBehaviour"] == "REJECT"
    assert made.body["lifetimePolicy"] == "PERMANENT"
    assert broker.call(lambda: broker.broker.exchanges.named("strict").rejects_unroutable)
    plain = node.ask(entity("CREATE", "lenient", EXCHANGE), {"type": "direct"}).body
    assert plain["unroutableMessageBehaviour"] == "DISCARD" and plain["description"] is None
    passing = {"type": "direct", "lifetimePolicy": "DELETE_ON_NO_OUTBOUND_LINKS"}
    refused = node.ask(entity("CREATE", "passing", EXCHANGE), passing)
    assert status(refused)[0] == 400 and "lifetimePolicy" in status(refused)[1]
    unknown = node.ask(entity("CREATE", "odd", EXCHANGE), {"type": "direct", "colour": "red"})
    assert status(unknown) == (400, "unknown exchange attribute 'colour'")


def test_update_changes_an_exchanges_alternate_and_unroutable_behaviour(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    for name in ("first-dlq", "second-dlq"):
        broker.call(lambda name=name: broker.broker.declare(name))
    made = node.ask(
        entity("CREATE", "sorting", EXCHANGE),
        {"type": "direct", "alternateBinding": {"destination": "first-dlq"}},
    )
    assert status(made)[0] == 201
    moved = {**made.body, "alternateBinding": {"destination": "second-dlq"}, "bytesIn": 7}
    reply = node.ask(entity("UPDATE", "sorting", EXCHANGE), moved)  # a READ map sent back
    assert status(reply)[0] == 200, status(reply)
    assert reply.body["alternateBinding"] == {"destination": "second-dlq"}
    send_all(broker, "sorting/nowhere", [Message(body="lost?")])
    assert drain(broker, "second-dlq", 1) == ["lost?"]
    assert status(node.ask(entity("DELETE", "first-dlq")))[0] == 204  # no longer in use
    strict = node.ask(
        entity("UPDATE", "sorting", EXCHANGE), {"unroutableMessageBehaviour": "REJECT"}
    )
    assert strict.body["unroutableMessageBehaviour"] == "REJECT"
    assert broker.call(lambda: broker.broker.exchanges.named("sorting").rejects_unroutable)
    cleared = node.ask(entity("UPDATE", "sorting", EXCHANGE), {"alternateBinding": None})
    assert cleared.body["alternateBinding"] is None


def test_update_of_what_an_exchange_cannot_change_is_refused_and_changes_nothing(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "fixed", EXCHANGE), {"type": "direct"})
    nowhere = node.ask(
        entity("UPDATE", "fixed", EXCHANGE), {"alternateBinding": {"destination": "nowhere"}}
    )
    assert status(nowhere)[0] == 404
    retyped = node.ask(entity("UPDATE", "fixed", EXCHANGE), {"type": "topic"})
    assert status(retyped)[0] == 400 and "'type'" in status(retyped)[1]
    odd = node.ask(entity("UPDATE", "fixed", EXCHANGE), {"unroutableMessageBehaviour": "BOUNCE"})
    assert status(odd)[0] == 400
    read = node.ask(entity("READ", "fixed", EXCHANGE)).body
    assert read["alternateBinding"] is None and read["unroutableMessageBehaviour"] == "DISCARD"
    assert read["qpid-type"] == "direct"


def test_a_durable_exchanges_update_survives_a_restart(
    brokers: Restartable,  # noqa: F811 - the fixture
) -> None:
    node = Node(brokers.start().client())
    node.ask(entity("CREATE", "kept", EXCHANGE), {"type": "fanout", "durable": True})
    changes = {"description": "audit trail", "unroutableMessageBehaviour": "REJECT"}
    assert status(node.ask(entity("UPDATE", "kept", EXCHANGE), changes))[0] == 200
    node = Node(brokers.restart().client())
    read = node.ask(entity("READ", "kept", EXCHANGE)).body
    assert read["description"] == "audit trail"
    assert read["unroutableMessageBehaviour"] == "REJECT"


def test_an_exchange_name_that_is_not_text_is_refused_not_made_into_text(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    made = node.ask({"operation": "CREATE", "type": EXCHANGE, "name": ["a"]}, {"type": "topic"})
    assert status(made)[0] == 400
    assert status(node.ask({"operation": "READ", "type": EXCHANGE, "name": "['a']"}))[0] == 404
