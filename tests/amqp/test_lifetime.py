"""Queue lifetime policies, exclusive queues and the idle sweep, over real sockets: the
lifetime policies as Qpid JMS (described values) and qpid::messaging (qpidd's
``auto-delete`` and ``qpid.auto_delete_timeout``) ask for them, Qpid JMS's temporary queue
for request/reply, and the sweep of queues made on demand."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Data, Described, Disposition, Link, Message, symbol, ulong

from proton_broker.config import Config
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, LinkLog

DELETE_ON_CLOSE = Described(ulong(0x2B), [])  # as Qpid JMS sends it
DELETE_ON_NO_LINKS = Described(ulong(0x2C), [])
DELETE_ON_NO_MESSAGES = Described(symbol("amqp:delete-on-no-messages:list"), [])
DELETE_ON_NO_LINKS_OR_MESSAGES = Described(ulong(0x2E), [])


@pytest.fixture
def broker_config() -> Config:
    config = Config()
    config.broker.expiry_interval = 0.05  # the periodic check, for the empty policies
    return config


def exists(broker: RunningBroker, name: str) -> bool:
    return bool(broker.call(lambda: name in broker.broker.queues))


def wait_gone(
    broker: RunningBroker, name: str, *clients: EngineClient, timeout: float = 2.0
) -> None:
    end = time.monotonic() + timeout
    while exists(broker, name):
        assert time.monotonic() < end, f"queue '{name}' was not deleted"
        for client in clients:
            client.pump(0.02)
        time.sleep(0.01)


def send(client: EngineClient, link: Link, body: str) -> None:
    delivery = client.wait_settled(client.send(link, Message(body=body), pump=False))
    assert delivery.remote_state == Disposition.ACCEPTED


def close(client: EngineClient, link: Link) -> None:
    link.close()
    client.wait_closed(link)


def refused_with(client: EngineClient, link: Link) -> str:
    client.wait_closed(link)
    return str(link.remote_condition.name)


def test_a_delete_on_close_queue_goes_when_the_link_that_created_it_closes(
    broker: RunningBroker,
) -> None:
    creator, other = broker.client(), broker.client()
    controlling = creator.receiver(
        "doc", credit=1, node_properties={"lifetime-policy": DELETE_ON_CLOSE}
    )
    follower = other.receiver("doc", credit=1)
    close(creator, controlling)
    wait_gone(broker, "doc", other)
    assert refused_with(other, follower) == "amqp:resource-deleted"


@pytest.mark.parametrize(
    ("asked", "policy"),
    [
        (DELETE_ON_NO_LINKS, "amqp:delete-on-no-links:list"),
        ("delete-if-unused", "amqp:delete-on-no-links:list"),  # qpid::messaging's x-declare
        (DELETE_ON_NO_MESSAGES, "amqp:delete-on-no-messages:list"),
    ],
)
def test_the_attach_echoes_the_lifetime_policy_as_amqps_described_value_as_qpidd_writes_it(
    broker: RunningBroker, asked: object, policy: str
) -> None:
    """qpid::messaging's assert reads a lifetime policy only as a described value."""
    client = broker.client()
    link = client.receiver("lp", credit=1, node_properties={"lifetime-policy": asked})
    link.remote_source.properties.rewind()
    link.remote_source.properties.next()
    echoed = link.remote_source.properties.get_object()[symbol("lifetime-policy")]
    assert (echoed.descriptor, echoed.value) == (symbol(policy), [])


def test_an_auto_delete_queue_goes_when_its_last_link_goes(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proton_broker.broker")
    client = broker.client()
    consumer = client.receiver("ad", credit=1, node_properties={"auto-delete": True})
    producer = client.sender("ad")
    send(client, producer, "left behind")
    close(client, consumer)
    assert exists(broker, "ad")  # the producer is a link too
    close(client, producer)
    wait_gone(broker, "ad", client)
    assert 'QUE-1010 Auto-delete : "ad" : delete-if-unused: no links attached' in caplog.text


def test_delete_on_no_links_as_a_described_value_is_honoured(broker: RunningBroker) -> None:
    client = broker.client()
    browser = client.receiver(
        "nolinks", credit=1, browse=True, node_properties={"lifetime-policy": DELETE_ON_NO_LINKS}
    )
    close(client, browser)
    wait_gone(broker, "nolinks", client)


def test_a_delete_on_no_messages_queue_goes_once_its_creator_left_and_it_is_empty(
    broker: RunningBroker,
) -> None:
    creator, reader = broker.client(), broker.client()
    producer = creator.sender("nomsg", node_properties={"lifetime-policy": DELETE_ON_NO_MESSAGES})
    send(creator, producer, "one")
    close(creator, producer)
    creator.pump(0.2)
    assert exists(broker, "nomsg")  # a message is on it
    consumer = reader.receiver("nomsg", credit=1)
    reader.settle(reader.wait_received(consumer, 1)[0])
    wait_gone(broker, "nomsg", reader)  # the periodic check
    assert refused_with(reader, consumer) == "amqp:resource-deleted"


def test_a_delete_on_no_links_or_messages_queue_needs_both(broker: RunningBroker) -> None:
    client = broker.client()
    options = {"lifetime-policy": DELETE_ON_NO_LINKS_OR_MESSAGES}
    producer = client.sender("both", node_properties=options)
    send(client, producer, "one")
    close(client, producer)
    client.pump(0.2)
    assert exists(broker, "both")
    consumer = client.receiver("both", credit=1)
    client.settle(client.wait_received(consumer, 1)[0])
    client.pump(0.2)
    assert exists(broker, "both")  # the consumer is attached
    close(client, consumer)
    wait_gone(broker, "both", client)


def test_an_auto_delete_timeout_keeps_the_queue_for_that_long(broker: RunningBroker) -> None:
    client = broker.client()
    options = {"auto-delete": True, "qpid.auto_delete_timeout": 1}
    close(client, client.receiver("later", credit=1, node_properties=options))
    gone_from = time.monotonic()
    client.pump(0.6)
    assert exists(broker, "later")
    wait_gone(broker, "later", client)
    assert time.monotonic() - gone_from >= 0.9


def test_a_link_attaching_within_the_timeout_cancels_the_deletion(broker: RunningBroker) -> None:
    client = broker.client()
    options = {"auto-delete": True, "qpid.auto_delete_timeout": 1}
    close(client, client.receiver("kept", credit=1, node_properties=options))
    client.pump(0.3)
    client.receiver("kept", credit=1)
    client.pump(1.0)
    assert exists(broker, "kept")


def test_an_exclusive_queue_refuses_consumers_from_another_connection_not_its_producers(
    broker: RunningBroker,
) -> None:
    """qpidd refuses only consuming subscriptions: a server answers on a client's
    exclusive reply queue, and a browser may look."""
    owner, other = broker.client(), broker.client()
    mine = owner.receiver("mine", credit=1, node_properties={"exclusive": True})
    owner.receiver("mine", credit=1, name="second")  # the owner's own links are welcome
    refused = other.receiver("mine", credit=1)
    assert refused_with(other, refused) == "amqp:resource-locked"
    assert "exclusive" in refused.remote_condition.description
    answer = other.sender("mine")
    assert other.wait_settled(other.send(answer, Message(body="reply"), pump=False))
    assert [r.message.body for r in owner.wait_received(mine, 1)] == ["reply"]
    browser = other.receiver("mine", credit=1, browse=True)
    other.pump(0.1)
    assert browser.remote_condition is None and browser.remote_source.address == "mine"


def test_exclusive_ownership_ends_when_the_owning_connection_closes(broker: RunningBroker) -> None:
    owner, other = broker.client(), broker.client()
    owner.receiver("held", credit=1, link_properties={"qpid.exclusive": True})
    owner.close()
    owner_gone = other.receiver("held", credit=1)
    other.pump(0.1)
    assert owner_gone.remote_condition is None and owner_gone.remote_source.address == "held"


def test_a_queue_made_exclusive_by_update_belongs_to_the_connection_using_it(
    broker: RunningBroker,
) -> None:
    """Broker-J's UPDATE of ``exclusive``: the connection whose links are attached owns the
    queue at once; with links from two connections the change is a 400 and nothing
    changes; made not exclusive again, anyone may attach."""
    node = Node(broker.client())
    node.ask(entity("CREATE", "shared-then-mine"))
    owner, other = broker.client(), broker.client()
    owner.receiver("shared-then-mine", credit=1)
    visitor = other.receiver("shared-then-mine", credit=1)
    other.pump(0.1)
    refused = node.ask(entity("UPDATE", "shared-then-mine"), {"exclusive": "CONNECTION"})
    assert status(refused)[0] == 400 and "CONNECTION" in status(refused)[1]
    assert node.ask(entity("READ", "shared-then-mine")).body["exclusive"] is False
    close(other, visitor)
    made = node.ask(entity("UPDATE", "shared-then-mine"), {"exclusive": True})
    assert status(made)[0] == 200 and made.body["exclusive"] is True
    locked_out = other.receiver("shared-then-mine", credit=1, name="locked-out")
    assert refused_with(other, locked_out) == "amqp:resource-locked"
    owner.receiver("shared-then-mine", credit=1, name="more")  # the owner's are welcome
    freed = node.ask(entity("UPDATE", "shared-then-mine"), {"exclusive": "NONE"})
    assert status(freed)[0] == 200
    welcome = other.receiver("shared-then-mine", credit=1, name="welcome")
    other.pump(0.1)
    assert welcome.remote_condition is None and welcome.remote_source.address


def jms_temporary_queue(client: EngineClient, kind: str = "temporary-queue") -> Link:
    """What Qpid JMS's Session.createTemporaryQueue() (``kind`` temporary-topic:
    createTemporaryTopic()) attaches: a sender with a dynamic target, the capability and
    lifetime-policy delete-on-close, held open for as long as the destination lives."""
    link = client.session.sender(f"qpid-jms:{kind}-creator:ID:1")
    link.target.dynamic = True
    link.target.expiry_policy = link.target.EXPIRE_WITH_LINK
    capabilities = link.target.capabilities
    capabilities.put_array(False, Data.SYMBOL)
    capabilities.enter()
    capabilities.put_symbol(symbol(kind))
    capabilities.exit()
    link.target.properties.put_dict({symbol("lifetime-policy"): DELETE_ON_CLOSE})
    link.open()
    client.logs[link.name] = LinkLog()
    client.wait(lambda: link.remote_target.address)
    return link


def test_a_jms_temporary_queue_takes_replies_and_goes_when_its_creator_link_closes(
    broker: RunningBroker,
) -> None:
    requester, responder = broker.client(), broker.client()
    creator = jms_temporary_queue(requester)
    address = creator.remote_target.address
    replies = requester.receiver(address, credit=1)
    send(responder, responder.sender(address), "the reply")
    assert requester.wait_received(replies, 1)[0].message.body == "the reply"
    close(requester, creator)
    wait_gone(broker, address, requester)
    assert refused_with(requester, replies) == "amqp:resource-deleted"


def test_a_jms_temporary_queue_is_its_connections_to_consume_and_anyones_to_reply_to(
    broker: RunningBroker,
) -> None:
    """Broker-J makes a temporary queue exclusive to the connection that made it: another
    connection's consumer is refused, a server's reply goes in."""
    requester, other = broker.client(), broker.client()
    address = jms_temporary_queue(requester).remote_target.address
    thief = other.receiver(address, credit=1)
    assert refused_with(other, thief) == "amqp:resource-locked"
    send(other, other.sender(address), "the reply")
    replies = requester.receiver(address, credit=1)
    assert requester.wait_received(replies, 1)[0].message.body == "the reply"


def test_a_reply_to_a_jms_temporary_queue_that_has_gone_does_not_make_it_again(
    broker: RunningBroker,
) -> None:
    requester, responder = broker.client(), broker.client()
    creator = jms_temporary_queue(requester)
    address = creator.remote_target.address
    close(requester, creator)
    wait_gone(broker, address, requester)
    late = responder.sender(address, capabilities=["temporary-queue"])  # as Qpid JMS sends it
    assert refused_with(responder, late) == "amqp:not-found"
    assert not exists(broker, address)


def test_a_jms_temporary_topic_is_made_and_goes_with_its_creator_link(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    creator = jms_temporary_queue(client, "temporary-topic")
    name = creator.remote_target.address
    assert name.startswith("TempTopic")
    assert broker.call(lambda: name in broker.broker.exchanges)
    close(client, creator)
    client.pump(0.2)
    assert broker.call(lambda: name in broker.broker.exchanges) is False


def test_a_dynamic_node_with_a_lifetime_policy_of_its_own_keeps_it(broker: RunningBroker) -> None:
    client = broker.client()
    dynamic = client.receiver(
        None, credit=1, dynamic=True, node_properties={"lifetime-policy": DELETE_ON_NO_LINKS}
    )
    address = client.wait(lambda: dynamic.remote_source.address)
    second = client.receiver(address, credit=1)
    close(client, dynamic)
    client.pump(0.2)
    assert exists(broker, address)  # not delete-on-close: a link is still attached
    close(client, second)
    wait_gone(broker, address, client)


def test_a_dynamic_node_without_a_policy_still_goes_with_its_link(broker: RunningBroker) -> None:
    client = broker.client()
    dynamic = client.receiver(None, credit=1, dynamic=True)
    address = client.wait(lambda: dynamic.remote_source.address)
    close(client, dynamic)
    wait_gone(broker, address, client)


# ---- the idle sweep ---------------------------------------------------------------------------


@pytest.fixture
def sweeping(tmp_path: Path) -> Iterator[RunningBroker]:
    config = Config()
    config.broker.data_dir = str(tmp_path / "data")
    config.broker.idle_queue_timeout = 0.3
    config.broker.expiry_interval = 0.05
    config.queues = {"configured": {}}
    running = RunningBroker(config)
    yield running
    alive = running.alive()
    running.stop()
    assert alive, "the broker's event loop died during the test"


def test_the_idle_sweep_deletes_a_queue_made_on_demand_and_left_idle(
    sweeping: RunningBroker,
) -> None:
    client = sweeping.client()
    close(client, client.receiver("passing", credit=1))
    left = time.monotonic()
    wait_gone(sweeping, "passing", client)
    assert time.monotonic() - left >= 0.25


def test_the_idle_sweep_never_deletes_a_configured_queue(sweeping: RunningBroker) -> None:
    client = sweeping.client()
    close(client, client.receiver("configured", credit=1))
    close(client, client.receiver("made", credit=1))
    wait_gone(sweeping, "made", client)
    client.pump(0.3)
    assert exists(sweeping, "configured")


def test_the_idle_sweep_spares_a_queue_made_on_demand_that_holds_messages(
    sweeping: RunningBroker,
) -> None:
    client = sweeping.client()
    producer = client.sender("full")
    send(client, producer, "waiting")
    close(client, producer)
    client.pump(0.6)
    assert exists(sweeping, "full")
