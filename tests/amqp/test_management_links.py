"""Broker-J's getConsumers and getPublishingLinks on ``$management``
(proton_broker/management_links.py), asked by a real management client while real clients
consume from, browse and send to the queue, and an exchange is bound to it."""

from __future__ import annotations

from proton.utils import BlockingConnection

from proton_broker.testing import BrokerProcess
from tests.amqp.test_acl import QUEUE, manage, secured  # noqa: F401 - fixture
from tests.amqp.test_management import NODE, Node, entity, status
from tests.conftest import RunningBroker

EXCHANGE = "org.apache.qpid.Exchange"


def consumers(node: Node, queue: str) -> list[list[str]]:
    """getConsumers' names, each split into its connection, session and name."""
    reply = node.ask(entity("getConsumers", queue))
    assert status(reply)[0] == 200
    return [name.split("|") for name in reply.body]


def test_get_consumers_names_each_consuming_or_browsing_link_as_broker_j_does(
    broker: RunningBroker,
) -> None:
    """``<connection>|<session>|<target address, or the link name>``, in attach order; a
    link that goes leaves the list."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "orders"))
    engine = broker.client()
    engine.receiver("orders", credit=10, name="reader")  # target address "orders"
    engine.session = engine.conn.session()  # a second session on the same connection
    engine.session.open()
    browser = engine.receiver("orders", browse=True, name="peek")
    blocking = BlockingConnection(broker.url)
    try:
        blocking.create_receiver("orders", name="blocking-reader")  # no target address
        listed = consumers(node, "orders")
        assert [name for _, _, name in listed] == ["orders", "orders", "blocking-reader"]
        (c1, s1, _), (c2, s2, _), (c3, s3, _) = listed
        assert c1 == c2 != c3 and all(c.isdigit() for c in (c1, c3))
        assert (s1, s2, s3) == ("0", "1", "0")
        browser.close()
        engine.pump(0.2)
        assert [name for _, _, name in consumers(node, "orders")] == ["orders", "blocking-reader"]
    finally:
        blocking.close()
    assert [name for _, _, name in consumers(node, "orders")] == ["orders"]


def test_get_consumers_of_a_queue_nobody_reads_is_empty_and_of_a_missing_one_404(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "quiet"))
    assert node.ask(entity("getConsumers", "quiet")).body == []
    assert status(node.ask(entity("getConsumers", "missing")))[0] == 404


def test_get_publishing_links_lists_senders_to_the_queue_and_exchange_bindings(
    broker: RunningBroker,
) -> None:
    """Broker-J's two kinds of PublishingLink: a link sending to the queue (``link``), and an
    exchange's binding to it (``binding``, as Broker-J's Binding value reads: no exchange).
    A link to an exchange is not the queue's: its binding is."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "orders"))
    engine = broker.client()
    engine.sender("orders", name="till")
    engine.sender("amq.direct/urgent", name="to-the-exchange")
    bound = node.ask(
        {
            "type": EXCHANGE,
            "name": "amq.direct",
            "operation": "bind",
            "destination": "orders",
            "bindingKey": "urgent",
        }
    )
    assert bound.body is True
    blocking = BlockingConnection(broker.url)
    try:
        blocking.create_sender("orders", name="blocking-till")
        reply = node.ask(entity("getPublishingLinks", "orders"))
        assert status(reply)[0] == 200
        assert reply.body == [
            {"name": "till", "type": "link", "destination": "orders"},
            {"name": "blocking-till", "type": "link", "destination": "orders"},
            {
                "name": "urgent",
                "type": "binding",
                "bindingKey": "urgent",
                "destination": "orders",
                "arguments": {},
            },
        ]
    finally:
        blocking.close()
    links = node.ask(entity("getPublishingLinks", "orders")).body
    assert [(link["name"], link["type"]) for link in links] == [
        ("till", "link"),
        ("urgent", "binding"),
    ]


def test_get_operations_lists_both_as_queue_operations(broker: RunningBroker) -> None:
    node = Node(broker.client())
    operations = node.ask({**NODE, "operation": "GET-OPERATIONS", "entityType": QUEUE}).body
    assert operations[QUEUE]["getConsumers"] == []
    assert operations[QUEUE]["getPublishingLinks"] == []


def test_both_need_access_to_the_queue(secured: BrokerProcess) -> None:  # noqa: F811 - fixture
    """The ACL asks ``access queue`` as READ does: bob may see app.in's links, not
    private's."""
    with manage(secured, "bob") as bob:
        for operation in ("getConsumers", "getPublishingLinks"):
            assert bob.request(operation, QUEUE, "app.in").status == 200
            assert bob.request(operation, QUEUE, "private").status == 403
