"""Dead-lettering on the ``$management`` node: a queue's alternate and maximum delivery
attempts are created, read and changed as Broker-J's ``alternateBinding`` and
``maximumDeliveryAttempts``; an exchange takes an alternate too; what is someone's alternate
cannot be deleted; the counters say what was dead-lettered."""

from __future__ import annotations

from proton import Disposition, Message

from tests.amqp.test_durability import send_all
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

EXCHANGE = "org.apache.qpid.Exchange"
BINDING = "org.apache.qpid.Binding"


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def reject_one(broker: RunningBroker, client: EngineClient, queue: str, body: str) -> None:
    """Send ``body`` to ``queue`` and have a consumer reject it."""
    send_all(broker, queue, [Message(body=body)])
    link = client.receiver(queue, credit=1)
    (got,) = client.wait_received(link, 1)
    client.settle(got, Disposition.REJECTED)
    link.close()
    client.pump()


def test_a_queue_is_created_with_an_alternate_and_a_maximum_and_read_back(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    assert status(node.ask(entity("CREATE", "dlq")))[0] == 201
    made = node.ask(
        entity("CREATE", "orders"),
        {"alternateBinding": {"destination": "dlq"}, "maximumDeliveryAttempts": 4},
    )
    assert status(made)[0] == 201
    read = node.ask(entity("READ", "orders")).body
    assert read["alternateBinding"] == {"destination": "dlq"}
    assert read["maximumDeliveryAttempts"] == 4
    assert read["expiryPolicy"] == "DELETE"
    assert broker.call(lambda: broker.broker.queues["orders"].alternate) == "dlq"


def test_a_rejected_message_is_counted_as_dead_lettered(broker: RunningBroker) -> None:
    client = broker.client()
    node = Node(client)
    node.ask(entity("CREATE", "dlq"))
    node.ask(entity("CREATE", "orders"), {"alternateBinding": {"destination": "dlq"}})
    reject_one(broker, client, "orders", "poison")
    client.wait(lambda: depth(broker, "dlq") == 1)
    read = node.ask(entity("READ", "orders")).body
    assert (read["totalRejectedMessages"], read["totalDeadLetteredMessages"]) == (1, 1)
    assert read["totalDeliveryAttemptsExhausted"] == 0


def test_update_moves_the_alternate_of_a_live_queue_and_new_dead_letters_follow(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    node = Node(client)
    for name in ("old-dlq", "new-dlq"):
        node.ask(entity("CREATE", name))
    node.ask(entity("CREATE", "orders"), {"alternateBinding": {"destination": "old-dlq"}})
    reply = node.ask(entity("UPDATE", "orders"), {"alternateBinding": {"destination": "new-dlq"}})
    assert status(reply)[0] == 200
    assert reply.body["alternateBinding"] == {"destination": "new-dlq"}
    reject_one(broker, client, "orders", "poison")
    client.wait(lambda: depth(broker, "new-dlq") == 1)
    assert depth(broker, "old-dlq") == 0
    assert status(node.ask(entity("DELETE", "old-dlq")))[0] == 204  # no longer in use


def test_update_to_an_alternate_that_does_not_exist_is_a_404_and_changes_nothing(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "dlq"))
    node.ask(entity("CREATE", "orders"), {"alternateBinding": {"destination": "dlq"}})
    before = node.ask(entity("READ", "orders")).body
    refused = node.ask(
        entity("UPDATE", "orders"),
        {"alternateBinding": {"destination": "nowhere"}, "maximumDeliveryAttempts": 9},
    )
    code, description = status(refused)
    assert code == 404 and "'nowhere'" in description
    assert node.ask(entity("READ", "orders")).body == before
    assert status(node.ask(entity("DELETE", "dlq")))[0] == 403  # still the alternate


def test_a_read_map_sent_back_unchanged_is_accepted_with_or_without_an_alternate(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "dlq"))
    node.ask(
        entity("CREATE", "orders"),
        {"alternateBinding": {"destination": "dlq"}, "maximumDeliveryAttempts": 3},
    )
    for name in ("dlq", "orders"):  # alternateBinding None, then a map
        read = node.ask(entity("READ", name)).body
        reply = node.ask(entity("UPDATE", name), read)
        assert status(reply) == (200, "OK"), status(reply)
        assert reply.body == read
    assert broker.call(lambda: broker.broker.queues["orders"].alternate) == "dlq"


def test_an_exchange_created_with_an_alternate_sends_it_what_it_routes_nowhere(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "lost"))
    node.ask(entity("CREATE", "dlx", EXCHANGE), {"type": "fanout"})
    node.ask(entity("CREATE", "", BINDING, exchange="dlx", queue="lost"))
    made = node.ask(
        entity("CREATE", "events", EXCHANGE),
        {"type": "topic", "alternateBinding": {"destination": "dlx"}},
    )
    assert status(made)[0] == 201
    assert made.body["alternateBinding"] == {"destination": "dlx"}
    read = node.ask(entity("READ", "events", EXCHANGE)).body
    assert read["alternateBinding"] == {"destination": "dlx"}
    send_all(broker, "events", [Message(subject="no.binding", body="x")])
    assert depth(broker, "lost") == 1


def test_an_exchange_whose_alternate_does_not_exist_is_a_404_and_not_created(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    refused = node.ask(
        entity("CREATE", "events", EXCHANGE),
        {"type": "topic", "alternateBinding": {"destination": "nowhere"}},
    )
    assert status(refused)[0] == 404 and "'nowhere'" in status(refused)[1]
    assert status(node.ask(entity("READ", "events", EXCHANGE)))[0] == 404


def test_deleting_an_alternate_in_use_is_a_403_naming_its_user_as_broker_j_answers(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    node.ask(entity("CREATE", "dlq"))
    node.ask(entity("CREATE", "orders"), {"alternateBinding": {"destination": "dlq"}})
    node.ask(entity("CREATE", "dlx", EXCHANGE), {"type": "fanout"})
    node.ask(entity("CREATE", "events", EXCHANGE), {"type": "topic", "alternateExchange": "dlx"})
    queue = node.ask(entity("DELETE", "dlq"))
    assert status(queue) == (
        403,
        "cannot delete queue 'dlq': it is the alternate of queue 'orders'",
    )
    exchange = node.ask(entity("DELETE", "dlx", EXCHANGE))
    assert status(exchange) == (
        403,
        "cannot delete exchange 'dlx': it is the alternate of exchange 'events'",
    )
    assert status(node.ask(entity("READ", "dlq")))[0] == 200
    assert status(node.ask(entity("READ", "dlx", EXCHANGE)))[0] == 200
