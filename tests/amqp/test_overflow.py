"""Overflow policies over AMQP: reject outcomes, detach, ring, producer flow control.

Queue limits arrive as node properties on the attach, as qpid::messaging sends
``x-declare`` arguments (see test_queue_options.py). What the client sees is what counts:
the outcome and error of its transfers, its link credit, its link's detach.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from proton import Data, Delivery, Disposition, Link, Message, Terminus, Timeout, symbol
from proton.utils import BlockingConnection

from tests.amqp.test_durability import Restartable, brokers, send_all  # noqa: F401 - fixture
from tests.amqp.test_management import Node, entity, status
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, LinkLog

LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
JMS_OUTCOMES = [
    "amqp:accepted:list",
    "amqp:rejected:list",
    "amqp:released:list",
    "amqp:modified:list",
]


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def sender_with_outcomes(
    client: EngineClient,
    address: str | None,
    outcomes: list[str],
    node_properties: dict[str, Any] | None = None,
) -> Link:
    """A sender whose source lists ``outcomes``, as Qpid JMS producers send it, once the
    broker has given it credit."""
    link = client.session.sender(f"send-{address}-{len(client.logs)}")
    link.target.address = address
    if node_properties:
        link.target.properties.put_dict({symbol(k): v for k, v in node_properties.items()})
    link.source.address = None
    link.source.outcomes.put_array(False, Data.SYMBOL)
    link.source.outcomes.enter()
    for outcome in outcomes:
        link.source.outcomes.put_symbol(symbol(outcome))
    link.source.outcomes.exit()
    link.open()
    client.logs[link.name] = LinkLog()
    client.wait(lambda: link.credit > 0)
    return link


def pending(delivery: Delivery) -> bool:
    """The broker has neither settled nor answered this transfer yet."""
    return not delivery.settled and not delivery.remote_state


def write_only(client: EngineClient, sender: Link, bodies: range) -> list[Delivery]:
    """Send without reading anything the broker says (its flow frames included)."""
    deliveries = []
    for i in bodies:
        deliveries.append(sender.delivery(f"w-{i}"))
        sender.send(Message(body=i).encode())
        sender.advance()
    client._write()
    return deliveries


def wait_for_depth(broker: RunningBroker, name: str, count: int, client: EngineClient) -> None:
    end = time.monotonic() + 5
    while depth(broker, name) != count:
        assert time.monotonic() < end, f"depth of {name} is {depth(broker, name)}"
        client._write()
        time.sleep(0.01)


def settled_outcome(client: EngineClient, delivery: Delivery) -> Any:
    return client.wait_settled(delivery).remote_state


def drain_queue(broker: RunningBroker, name: str, count: int) -> list[Any]:
    """Consume ``count`` messages with another connection, accepting each."""
    consumer = broker.client()
    receiver = consumer.receiver(name, credit=count)
    got = consumer.wait_received(receiver, count)
    consumer.settle_all(got)
    return [r.message.body for r in got]


# ---- reject ------------------------------------------------------------------------------

REJECT_5 = {"overflowPolicy": "reject", "maximumQueueDepthMessages": 5}  # no flow control


def test_a_qpidd_limit_alone_rejects_at_the_limit_and_holds_producers_from_80_percent(
    broker: RunningBroker,
) -> None:
    """qpid-cpp's defaults for qpid.max_count: policy reject, flow stopped above 80% of the
    limit (4 of 5) and resumed below 70% (3): the producer waits, nothing is lost."""
    client = broker.client()
    sender = client.sender("qpidd-limit", node_properties={"qpid.max_count": 5})
    client.wait(lambda: sender.credit > 0)
    deliveries = [client.send(sender, Message(body=i), pump=False) for i in range(5)]
    client.wait(lambda: sender.credit == 0)
    client.pump(0.2)
    assert [d.remote_state for d in deliveries[:4]] == [Disposition.ACCEPTED] * 4
    assert pending(deliveries[4])  # over the stop threshold: held back
    assert drain_queue(broker, "qpidd-limit", 3) == [0, 1, 2]  # depth 2, below 3: resume
    client.wait(lambda: sender.credit > 0)
    assert settled_outcome(client, deliveries[4]) == Disposition.ACCEPTED
    limits = broker.call(lambda: broker.broker.queues["qpidd-limit"].settings)
    assert (limits.overflow_policy, limits.flow_stop_count, limits.flow_resume_count) == (
        "reject",
        4,
        3,
    )


def test_a_full_reject_queue_settles_the_transfer_rejected_with_resource_limit_exceeded(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("full", node_properties=REJECT_5)
    for i in range(5):
        assert settled_outcome(client, client.send(sender, Message(body=i))) == Disposition.ACCEPTED
    refused = client.wait_settled(client.send(sender, Message(body=5), pump=False))
    assert refused.remote_state == Disposition.REJECTED
    condition = refused.remote.condition
    assert condition.name == LIMIT_EXCEEDED
    assert condition.description == "Maximum depth exceeded on 'full': 5 messages (limit 5)"
    assert depth(broker, "full") == 5
    # the link stays open and takes messages again once there is room
    assert drain_queue(broker, "full", 1) == [0]
    assert settled_outcome(client, client.send(sender, Message(body=6))) == Disposition.ACCEPTED


def test_a_byte_limit_rejection_names_the_queue_and_the_limit(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender(
        "bytes", node_properties={"overflowPolicy": "reject", "maximumQueueDepthBytes": 200}
    )
    big = Message(body="x" * 150)
    assert settled_outcome(client, client.send(sender, big)) == Disposition.ACCEPTED
    refused = client.wait_settled(client.send(sender, big, pump=False))
    assert refused.remote_state == Disposition.REJECTED
    assert refused.remote.condition.name == LIMIT_EXCEEDED
    assert "'bytes'" in refused.remote.condition.description
    assert "limit 200 bytes" in refused.remote.condition.description


def test_a_producer_whose_source_lists_rejected_gets_the_rejected_outcome(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = sender_with_outcomes(
        client, "jms-full", JMS_OUTCOMES, {"qpid.policy_type": "reject", "qpid.max_count": 1}
    )
    client.send(sender, Message(body=0))
    refused = client.wait_settled(client.send(sender, Message(body=1), pump=False))
    assert refused.remote_state == Disposition.REJECTED
    assert refused.remote.condition.name == LIMIT_EXCEEDED
    assert not sender.state & Link.REMOTE_CLOSED


def test_a_producer_whose_source_lacks_the_rejected_outcome_is_detached_instead(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = sender_with_outcomes(
        client,
        "strict",
        ["amqp:accepted:list"],
        {"qpid.policy_type": "reject", "qpid.max_count": 1},
    )
    first = client.send(sender, Message(body=0))
    second = client.send(sender, Message(body=1))
    client.wait_closed(sender)
    assert sender.remote_condition.name == LIMIT_EXCEEDED
    assert "Maximum depth exceeded on 'strict'" in sender.remote_condition.description
    assert first.remote_state == Disposition.ACCEPTED
    assert pending(second)  # never "rejected": the source does not allow it
    assert depth(broker, "strict") == 1
    # the connection carries on
    other = client.sender("strict-bystander")
    assert settled_outcome(client, client.send(other, Message(body="ok"))) == Disposition.ACCEPTED


def test_transfers_after_such_a_detach_are_not_stored_even_when_they_would_fit(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = sender_with_outcomes(
        client,
        "strict-burst",
        ["amqp:accepted:list"],
        {"qpid.policy_type": "reject", "qpid.max_size": 300},
    )
    # all on the wire before the detach comes back: small, too big, then small ones that fit
    write_only(client, sender, range(1))
    sender.delivery("too-big")
    sender.send(Message(body="x" * 400).encode())
    sender.advance()
    write_only(client, sender, range(2, 5))
    client.wait_closed(sender)
    assert sender.remote_condition.name == LIMIT_EXCEEDED
    client.pump(0.2)
    assert depth(broker, "strict-burst") == 1


def test_the_anonymous_relay_rejects_a_message_for_a_full_queue_too(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("relayed", node_properties={"qpid.policy_type": "reject", "qpid.max_count": 1})
    relay = client.sender(None)
    client.wait(lambda: relay.credit > 0)
    ok = client.send(relay, Message(address="relayed", body=0))
    refused = client.wait_settled(
        client.send(relay, Message(address="relayed", body=1), pump=False)
    )
    assert ok.remote_state == Disposition.ACCEPTED
    assert refused.remote_state == Disposition.REJECTED
    assert refused.remote.condition.name == LIMIT_EXCEEDED
    assert "'relayed'" in refused.remote.condition.description


def test_the_anonymous_relay_detaches_a_producer_that_cannot_be_told_rejected(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender(
        "relayed-strict", node_properties={"qpid.policy_type": "reject", "qpid.max_count": 1}
    )
    relay = sender_with_outcomes(client, None, ["amqp:accepted:list"])
    client.send(relay, Message(address="relayed-strict", body=0))
    client.send(relay, Message(address="relayed-strict", body=1))
    client.wait_closed(relay)
    assert relay.remote_condition.name == LIMIT_EXCEEDED


# ---- ring --------------------------------------------------------------------------------


def test_a_consumer_of_a_priority_ring_sees_the_most_important_newest_messages(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    options = {"qpid.policy_type": "ring", "qpid.max_count": 4, "qpid.priorities": 10}
    sender = client.sender("alerts", node_properties=options)
    for body, priority in [("a", 1), ("b", 9), ("c", 1), ("d", 5), ("e", 1), ("f", 7), ("g", 0)]:
        assert (
            settled_outcome(client, client.send(sender, Message(body=body, priority=priority)))
            == Disposition.ACCEPTED
        )  # a ring never refuses
    assert depth(broker, "alerts") == 4
    assert drain_queue(broker, "alerts", 4) == ["b", "f", "d", "e"]
    assert broker.call(lambda: broker.broker.queues["alerts"].stats.evicted) == 3


def test_a_ring_leaves_a_consumer_s_unsettled_messages_alone(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender(
        "ring-held", node_properties={"overflowPolicy": "ring", "maximumQueueDepthMessages": 2}
    )
    for i in range(2):
        client.send(sender, Message(body=i))
    receiver = client.receiver("ring-held", credit=2)
    held = client.wait_received(receiver, 2)
    for i in range(2, 6):
        client.wait_settled(client.send(sender, Message(body=i), pump=False))
    client.settle_all(held)
    assert [r.message.body for r in held] == [0, 1]
    receiver.flow(10)
    assert [r.message.body for r in client.wait_received(receiver, 3)[2:]] == [5]


# ---- producer flow control -----------------------------------------------------------------

PFC_5 = {"overflowPolicy": "producer_flow_control", "maximumQueueDepthMessages": 5}


def test_producer_flow_control_shows_as_zero_credit_then_credit_again_once_drained(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("pfc", node_properties=PFC_5)
    client.wait(lambda: sender.credit > 0)
    deliveries = [client.send(sender, Message(body=i)) for i in range(6)]
    client.wait(lambda: sender.credit == 0)
    assert sender.drain_mode  # flow(link-credit=0, drain=true), as Broker-J sends it
    assert [d.remote_state for d in deliveries[:5]] == [Disposition.ACCEPTED] * 5
    client.pump(0.2)
    assert pending(deliveries[5])  # the one that went over: held back
    assert drain_queue(broker, "pfc", 2) == [0, 1]  # depth 4 = 80% of 5: resume
    client.wait(lambda: sender.credit > 0)
    assert not sender.drain_mode
    assert settled_outcome(client, deliveries[5]) == Disposition.ACCEPTED
    assert sender.credit == broker.config.broker.producer_credit


def test_producers_resume_at_the_resume_limit_rounded_up_as_broker_j_rounds_it(
    broker: RunningBroker,
) -> None:
    """80% of 7 is 5.6: Broker-J resumes at 6 (ProducerFlowControlOverflowPolicyHandler)."""
    client = broker.client()
    options = {"overflowPolicy": "producer_flow_control", "maximumQueueDepthMessages": 7}
    sender = client.sender("pfc-7", node_properties=options)
    client.wait(lambda: sender.credit > 0)
    deliveries = [client.send(sender, Message(body=i), pump=False) for i in range(8)]
    client.wait(lambda: sender.credit == 0)
    client.pump(0.2)
    assert pending(deliveries[7])
    assert drain_queue(broker, "pfc-7", 2) == [0, 1]  # depth 6: resume
    client.wait(lambda: sender.credit > 0)
    assert settled_outcome(client, deliveries[7]) == Disposition.ACCEPTED


def test_a_sender_that_ignores_credit_has_its_settlements_held_and_loses_nothing(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("pfc-ignored", node_properties=PFC_5)
    client.wait(lambda: sender.credit > 0)
    # From here on the client writes and never reads, so it never hears the broker's
    # flow(link-credit=0): from the broker's side it ignores its credit.
    deliveries = write_only(client, sender, range(6))
    wait_for_depth(broker, "pfc-ignored", 6, client)
    deliveries += write_only(client, sender, range(6, 16))
    wait_for_depth(broker, "pfc-ignored", 16, client)  # stored, none refused
    client.pump(0.3)
    assert sender.credit <= 0
    assert [d.remote_state for d in deliveries[:5]] == [Disposition.ACCEPTED] * 5
    assert all(pending(d) for d in deliveries[5:])  # held, not refused
    assert drain_queue(broker, "pfc-ignored", 16) == list(range(16))  # nothing lost
    client.wait(lambda: all(d.remote_state == Disposition.ACCEPTED for d in deliveries))
    client.wait(lambda: sender.credit > 0)


def test_a_producer_attaching_to_a_stopped_queue_gets_no_credit_until_it_resumes(
    broker: RunningBroker,
) -> None:
    first = broker.client()
    sender = first.sender("pfc-late", node_properties=PFC_5)
    for i in range(6):
        first.send(sender, Message(body=i))
    first.wait(lambda: sender.credit == 0)
    second = broker.client()
    late = second.sender("pfc-late")
    second.pump(0.3)
    assert late.state & Link.REMOTE_ACTIVE and late.credit == 0
    drain_queue(broker, "pfc-late", 6)
    second.wait(lambda: late.credit > 0)
    first.wait(lambda: sender.credit > 0)


def test_the_anonymous_relay_holds_settlements_for_a_stopped_queue(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender(
        "pfc-relayed", node_properties={"qpid.flow_stop_count": 2, "qpid.flow_resume_count": 1}
    )
    client.sender("pfc-relay-other")  # the relay sends only to queues that exist
    relay = client.sender(None)
    client.wait(lambda: relay.credit > 0)
    deliveries = [client.send(relay, Message(address="pfc-relayed", body=i)) for i in range(3)]
    other = client.send(relay, Message(address="pfc-relay-other", body="x"))
    client.pump(0.2)
    assert [d.remote_state for d in deliveries[:2]] == [Disposition.ACCEPTED] * 2
    assert pending(deliveries[2])
    assert other.remote_state == Disposition.ACCEPTED  # other queues are not held up
    assert relay.credit > 0  # the relay's credit serves every queue
    assert drain_queue(broker, "pfc-relayed", 3) == [0, 1, 2]
    assert settled_outcome(client, deliveries[2]) == Disposition.ACCEPTED


def test_a_blocking_sender_waits_while_the_queue_is_full_and_goes_on_after_it_drains(
    broker: RunningBroker,
) -> None:
    broker.call(lambda: broker.broker.declare("pfc-blocking", PFC_5))
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        receiver_conn = BlockingConnection(broker.url, timeout=5)
        sender = conn.create_sender("pfc-blocking")
        for i in range(5):
            sender.send(Message(body=i))
        with pytest.raises(Timeout):
            sender.send(Message(body=5), timeout=0.5)  # stored; its settlement is held
        assert sender.link.credit == 0
        receiver = receiver_conn.create_receiver("pfc-blocking", credit=10)
        got = []
        for _ in range(6):
            got.append(receiver.receive(timeout=5).body)
            receiver.accept()
        receiver_conn.close()
        assert got == [0, 1, 2, 3, 4, 5]
        conn.wait(lambda: sender.link.credit > 0, timeout=5)
        sender.send(Message(body=6))
    finally:
        conn.close()


# ---- bad input on the attach ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"qpid.policy_type": "overflow-ish"}, "overflow-ish"),
        ({"overflowPolicy": 3}, "overflowPolicy"),
        ({"qpid.max_count": "ten"}, "ten"),
        ({"maximumQueueDepthBytes": "lots"}, "lots"),
        ({"qpid.max_size": 1.5}, "1.5"),
        ({"qpid.flow_stop_count": -5}, "-5"),
        ({"qpid.flow_resume_size": "-1"}, "-1"),
        ({"queueFlowResumeLimit": 150}, "150"),
        ({"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 20}, "qpid.flow_resume_count"),
    ],
)
def test_bad_overflow_options_are_refused_with_invalid_field_naming_the_value(
    broker: RunningBroker, options: dict[str, Any], named: str
) -> None:
    client = broker.client()
    link = client.sender("bad-overflow", node_properties=options)
    client.wait_closed(link)
    assert link.remote_target.type == Terminus.UNSPECIFIED
    assert link.remote_condition.name == "amqp:invalid-field"
    assert named in link.remote_condition.description
    assert not broker.call(lambda: "bad-overflow" in broker.broker.queues)


@pytest.mark.parametrize(
    "options",
    [
        {"qpid.policy_type": "reject", "qpid.max_count": -1},
        {"qpid.policy_type": "reject", "qpid.max_count": "-1"},
        {"qpid.policy_type": "reject", "qpid.max_count": 0},  # qpid-cpp: 0 is no limit
    ],
)
def test_negative_and_zero_qpid_limits_leave_the_queue_unbounded(
    broker: RunningBroker, options: dict[str, Any]
) -> None:
    client = broker.client()
    sender = client.sender("unbounded", node_properties=options)
    for i in range(6):
        assert settled_outcome(client, client.send(sender, Message(body=i))) == Disposition.ACCEPTED


def test_a_zero_broker_j_limit_refuses_every_message(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender(
        "nothing", node_properties={"overflowPolicy": "reject", "maximumQueueDepthMessages": 0}
    )
    refused = client.wait_settled(client.send(sender, Message(body=0), pump=False))
    assert refused.remote_state == Disposition.REJECTED
    assert (
        refused.remote.condition.description
        == "Maximum depth exceeded on 'nothing': 0 messages (limit 0)"
    )


# ---- self-destruct (qpidd's) ----------------------------------------------------------------


def test_a_self_destruct_subscription_ends_and_the_others_get_every_message(
    broker: RunningBroker,
) -> None:
    """qpidd's testSelfDestructQueue: a subscription queue with ``qpid.policy_type:
    self-destruct`` deletes itself when a message takes it over its limit, which detaches
    its receiver (``amqp:resource-deleted``); every message is accepted, and a subscriber
    without a limit gets them all."""
    client = broker.client()
    slow = client.receiver(
        "amq.fanout",
        name="slow",
        link_properties={"qpid.max_count": 10, "qpid.policy_type": "self-destruct"},
    )
    fast = client.receiver("amq.fanout", name="fast", credit=100)
    sender = client.sender("amq.fanout")
    deliveries = [client.send(sender, Message(body=f"m{n}"), pump=False) for n in range(20)]
    outcomes = [client.wait_settled(d).remote_state for d in deliveries]
    assert outcomes == [Disposition.ACCEPTED] * 20
    client.wait_closed(slow)
    assert slow.remote_condition.name == "amqp:resource-deleted"
    got = client.wait_received(fast, 20)
    assert [r.message.body for r in got] == [f"m{n}" for n in range(20)]
    queues = broker.call(lambda: sorted(broker.broker.queues))
    assert not any("slow" in name for name in queues) and any("fast" in name for name in queues)


def test_a_self_destruct_queue_holds_its_limit_then_goes_with_its_messages(
    broker: RunningBroker,
) -> None:
    """The message that takes it over joins it and is accepted; then the queue is gone, as
    a forced delete (its messages discarded, a sender's next transfer detached)."""
    client = broker.client()
    options = {"qpid.max_count": 3, "qpid.policy_type": "self-destruct"}
    sender = client.sender("doomed", node_properties=options)
    for n in range(3):
        assert client.wait_settled(client.send(sender, Message(body=n))).remote_state == (
            Disposition.ACCEPTED
        )
    assert depth(broker, "doomed") == 3
    over = client.send(sender, Message(body=3))
    assert client.wait_settled(over).remote_state == Disposition.ACCEPTED
    client.wait(lambda: not broker.call(lambda: "doomed" in broker.broker.queues))
    after = client.send(sender, Message(body=4))
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:resource-deleted"
    assert after.remote_state != Disposition.ACCEPTED


def test_a_self_destruct_queue_recovered_over_its_limit_goes_at_the_next_arrival(
    brokers: Restartable,  # noqa: F811 - fixture
) -> None:
    """Messages recovered from the store do not set it off (qpidd recovers them without
    the check); the next message that arrives does."""
    broker = brokers.start()
    node = Node(broker.client())
    limit = {"overflowPolicy": "SELF_DESTRUCT", "maximumQueueDepthMessages": 5}
    assert status(node.ask(entity("CREATE", "kept"), limit))[0] == 201
    send_all(broker, "kept", [Message(body=n, durable=True) for n in range(4)])
    lowered = node.ask(entity("UPDATE", "kept"), {"maximumQueueDepthMessages": 2})
    assert status(lowered)[0] == 200
    broker = brokers.restart()
    assert depth(broker, "kept") == 4
    client = broker.client()
    client.send(client.sender("kept"), Message(body=4, durable=True))
    client.wait(lambda: not broker.call(lambda: "kept" in broker.broker.queues))
