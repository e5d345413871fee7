"""Attach: queues on demand, refusals in the shape Qpid clients expect, the echoed terminus."""

from __future__ import annotations

import pytest
from proton import Data, Described, Disposition, Link, Message, Terminus

from proton_broker.config import Config
from tests.amqp.test_connection import symbols_of
from tests.conftest import RunningBroker


def closed_config(**broker: object) -> Config:
    config = Config()
    for key, value in broker.items():
        setattr(config.broker, key, value)
    return config


def test_attaching_to_a_new_address_creates_the_queue(broker: RunningBroker) -> None:
    client = broker.client()
    client.receiver("qit.test.new", credit=1)
    assert broker.call(lambda: "qit.test.new" in broker.broker.queues)


def test_an_accepted_attach_echoes_address_mode_and_honoured_capabilities(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    link = client.receiver("echo", credit=1, capabilities=["queue", "unknown-cap"])
    client.wait(lambda: link.remote_source.address)
    assert link.remote_source.address == "echo"
    assert link.remote_source.distribution_mode == Terminus.DIST_MODE_MOVE
    assert symbols_of(link.remote_source.capabilities) == ["queue"]


def test_a_producer_asking_for_receiver_settle_mode_second_is_answered_first(
    broker: RunningBroker,
) -> None:
    """The broker settles each transfer as it gives the outcome, so its attach says
    ``first`` (as qpidd's does) rather than promising to wait for the producer."""
    client = broker.client()
    sender = client.sender("second-mode", rcv_settle_second=True)
    assert sender.remote_rcv_settle_mode == Link.RCV_FIRST
    delivery = client.wait_settled(client.send(sender, Message(body=1), pump=False))
    assert delivery.remote_state == Disposition.ACCEPTED


def test_a_consumer_keeps_the_receiver_settle_mode_it_asked_for(broker: RunningBroker) -> None:
    """A receiving client in mode second gives its outcome unsettled and settles after
    the broker has: the broker's attach echoes that mode, and the message is taken."""
    client = broker.client()
    sender = client.sender("second-consumer")
    client.wait_settled(client.send(sender, Message(body="once"), pump=False))
    receiver = client.receiver("second-consumer", credit=1, rcv_settle_second=True)
    assert receiver.remote_rcv_settle_mode == Link.RCV_SECOND
    (received,) = client.wait_received(receiver, 1)
    delivery = received.delivery
    delivery.update(Disposition.ACCEPTED)  # not settled: the broker settles first
    client.wait(lambda: delivery.settled)  # the broker settled its side
    delivery.settle()
    client.wait(lambda: broker.call(lambda: broker.broker.queues["second-consumer"].depth) == 0)


@pytest.mark.parametrize("broker_config", [closed_config(auto_create=False)])
def test_attach_to_a_missing_queue_without_auto_create_is_refused_with_not_found(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    link = client.receiver("missing", credit=1)
    client.wait_closed(link)
    assert link.remote_source.type == Terminus.UNSPECIFIED  # null source in the reply attach
    assert link.remote_condition.name == "amqp:not-found"
    assert "missing" in link.remote_condition.description
    sender = client.sender("missing")
    client.wait_closed(sender)
    assert sender.remote_target.type == Terminus.UNSPECIFIED
    assert sender.remote_condition.name == "amqp:not-found"


@pytest.mark.parametrize("broker_config", [closed_config(auto_create_patterns=["qit.*", "test.*"])])
def test_only_names_matching_the_auto_create_patterns_are_created(broker: RunningBroker) -> None:
    client = broker.client()
    ok = client.receiver("qit.allowed", credit=1)
    refused = client.receiver("other", credit=1)
    client.wait_closed(refused)
    assert refused.remote_condition.name == "amqp:not-found"
    assert ok.remote_source.address == "qit.allowed"


def test_the_anonymous_relay_routes_each_message_by_its_to_address(broker: RunningBroker) -> None:
    client = broker.client()
    a = client.receiver("relay-a", credit=5)  # the relay sends only to queues that exist
    b = client.receiver("relay-b", credit=5)
    relay = client.sender(None)
    for address in ("relay-a", "relay-b", "relay-a"):
        client.wait_settled(client.send(relay, Message(address=address, body=address), pump=False))
    assert [r.message.body for r in client.wait_received(a, 2)] == ["relay-a", "relay-a"]
    assert [r.message.body for r in client.wait_received(b, 1)] == ["relay-b"]


def test_a_sender_with_no_target_at_all_is_refused_with_not_found_naming_its_link(
    broker: RunningBroker,
) -> None:
    """No target (not a target with no address, the relay) asks AMQP 1.0 to recover a link;
    Broker-J answers that the link is not found (qpidd refuses it too), and so does this
    broker, which keeps no links to recover."""
    client = broker.client()
    sender = client.sender(None, name="recover-me", null_target=True)
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:not-found"
    assert "Link 'recover-me' not found" in sender.remote_condition.description
    relay = client.sender(None)  # the same session: the relay is still there
    client.receiver("after-recovery", credit=1)
    sent = client.send(relay, Message(address="after-recovery", body=1), pump=False)
    assert client.wait_settled(sent).remote_state == Disposition.ACCEPTED


def test_the_connection_offers_anonymous_relay(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.remote_offered_capabilities)
    assert "ANONYMOUS-RELAY" in [str(c) for c in client.conn.remote_offered_capabilities]


@pytest.mark.parametrize("broker_config", [closed_config(auto_create=False)])
def test_the_anonymous_relay_rejects_a_message_for_an_unknown_address(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    relay = client.sender(None)
    delivery = client.wait_settled(
        client.send(relay, Message(address="nowhere", body=1), pump=False)
    )
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition.name == "amqp:not-found"
    # the relay link stays usable
    broker.call(lambda: broker.broker.declare("somewhere"))
    ok = client.wait_settled(client.send(relay, Message(address="somewhere", body=2), pump=False))
    assert ok.remote_state == Disposition.ACCEPTED


def test_a_relay_sender_asking_to_discard_unroutable_messages_has_them_accepted_and_dropped(
    broker: RunningBroker,
) -> None:
    """Broker-J's ``DISCARD_UNROUTABLE`` target capability, on the anonymous relay."""
    client = broker.client()
    relay = client.sender(None, capabilities=["DISCARD_UNROUTABLE"])
    lost = client.wait_settled(client.send(relay, Message(address="nowhere", body=1), pump=False))
    assert lost.remote_state == Disposition.ACCEPTED
    assert broker.call(lambda: "nowhere" not in broker.broker.queues)
    broker.call(lambda: broker.broker.declare("somewhere"))
    kept = client.wait_settled(client.send(relay, Message(address="somewhere", body=2), pump=False))
    assert kept.remote_state == Disposition.ACCEPTED
    assert broker.call(lambda: broker.broker.queues["somewhere"].depth) == 1


def test_the_anonymous_relay_does_not_make_a_queue_of_the_management_node(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    relay = client.sender(None)
    delivery = client.wait_settled(
        client.send(relay, Message(address="$management", body=1), pump=False)
    )
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition.name == "amqp:not-found"
    assert "management node" in delivery.remote.condition.description
    assert broker.call(lambda: "$management" not in broker.broker.queues)


def test_a_dynamic_source_gets_a_new_temporary_queue(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver(None, credit=1, dynamic=True)
    client.wait(lambda: link.remote_source.address)
    address = link.remote_source.address
    assert address.startswith("TempQueue")
    assert broker.call(lambda: address in broker.broker.queues)


@pytest.mark.parametrize("address", ["", "  "], ids=["empty", "blank"])
def test_a_sender_with_an_empty_or_blank_target_address_is_the_anonymous_relay(
    broker: RunningBroker, address: str
) -> None:
    """Proton C++'s ``open_sender("")`` and rhea's ``{target: {address: ''}}`` ask for the
    relay so, as Broker-J reads a blank address; a receiver still needs a source address."""
    client = broker.client()
    receiver = client.receiver("relayed-to", credit=1)
    relay = client.sender(address, name="blank-relay")
    assert relay.remote_condition is None
    assert relay.remote_target.address is None  # answered as for a null address
    sent = client.send(relay, Message(address="relayed-to", body="via blank"), pump=False)
    assert client.wait_settled(sent).remote_state == Disposition.ACCEPTED
    assert [r.message.body for r in client.wait_received(receiver, 1)] == ["via blank"]
    nowhere = client.receiver("", name="blank-source")
    client.wait_closed(nowhere)
    assert nowhere.remote_condition.name == "amqp:not-found"


def test_a_dynamic_node_is_answered_dynamic(broker: RunningBroker) -> None:
    """AMQP 1.0 3.5.3: the node was made for the link, and the answer says so (Broker-J
    echoes the flag), for a consumer's source and a producer's target alike."""
    client = broker.client()
    receiver = client.receiver(None, credit=1, dynamic=True)
    assert receiver.remote_source.address.startswith("TempQueue")
    assert receiver.remote_source.dynamic
    sender = client.session.sender("dynamic-target")
    sender.target.dynamic = True
    sender.open()
    client.answered(sender)
    assert sender.remote_target.address.startswith("TempQueue")
    assert sender.remote_target.dynamic


def test_a_producers_source_with_no_address_is_answered_with_a_source(
    broker: RunningBroker,
) -> None:
    """The relay's source has no address; Proton's engine reads it as none, so the
    broker's answer must still carry a source (Broker-J echoes the client's): the raw
    attach frame is read, as the client's engine would decode it with the same loss."""
    client = broker.client()
    client.pump(0.1)
    seen: list[bytes] = []
    client.incoming = seen.append
    client.sender(None, name="sourced-relay")
    attach = next(p for p in performatives(b"".join(seen)) if p.descriptor == 0x12)
    source = attach.value[5]
    assert isinstance(source, Described) and source.descriptor == 0x28, source


def performatives(raw: bytes) -> list[Described]:
    """The AMQP performatives in ``raw``, whole frames as the broker sent them."""
    found, pos = [], 0
    while pos + 8 <= len(raw):
        size, offset = int.from_bytes(raw[pos : pos + 4], "big"), raw[pos + 4] * 4
        if size > 8:  # not an empty (heartbeat) frame
            data = Data()
            data.decode(raw[pos + offset : pos + size])
            data.rewind()
            data.next()
            found.append(data.get_object())
        pos += size
    return found


def test_a_consumer_is_not_attached_to_a_node_of_the_other_kind_than_it_asked_for(
    broker: RunningBroker,
) -> None:
    """qpidd's reading: ``topic`` looks up an exchange only, ``queue`` a queue only (a Qpid
    JMS Topic subscriber must not drain a queue, nor a Queue consumer get a copy of what an
    exchange routes). A producer is attached whatever it asks, as Broker-J attaches it."""
    client = broker.client()
    client.receiver("kinds", credit=1)
    topic_on_queue = client.receiver("kinds", credit=1, capabilities=["topic"], name="t")
    client.wait_closed(topic_on_queue)
    assert topic_on_queue.remote_condition.name == "amqp:not-found"
    assert "capability 'topic'" in topic_on_queue.remote_condition.description
    queue_on_exchange = client.receiver("amq.topic", credit=1, capabilities=["queue"], name="q")
    client.wait_closed(queue_on_exchange)
    assert queue_on_exchange.remote_condition.name == "amqp:not-found"
    assert "capability 'queue'" in queue_on_exchange.remote_condition.description
    assert broker.call(lambda: "amq.topic" not in broker.broker.queues)  # nothing made
    sender = client.sender("kinds", capabilities=["topic"], name="p")
    sent = client.send(sender, Message(body="to the queue"), pump=False)
    assert client.wait_settled(sent).remote_state == Disposition.ACCEPTED
