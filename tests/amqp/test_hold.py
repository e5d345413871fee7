"""Hold until valid over AMQP: a queue with holdOnPublishEnabled keeps a message carrying the
x-qpid-not-valid-before annotation from consumers until that time, then delivers it."""

from __future__ import annotations

import time

from proton import Message, symbol

from tests.conftest import RunningBroker


def test_a_held_message_reaches_the_consumer_once_it_is_valid(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("held", node_properties={"holdOnPublishEnabled": True})
    valid_from = int((time.time() + 1.0) * 1000)
    client.send(
        sender, Message(body="later", annotations={symbol("x-qpid-not-valid-before"): valid_from})
    )
    client.send(sender, Message(body="now"))
    consumer = client.receiver("held", credit=10)
    assert [r.message.body for r in client.wait_received(consumer, 1)] == ["now"]
    client.pump(0.3)
    assert len(client.received(consumer)) == 1
    got = client.wait_received(consumer, 2, timeout=5.0)
    assert got[1].message.body == "later"
    assert time.time() * 1000 >= valid_from


def test_without_hold_on_publish_the_annotation_changes_nothing(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("not-held")
    client.send(
        sender,
        Message(
            body="later",
            annotations={symbol("x-qpid-not-valid-before"): int((time.time() + 60) * 1000)},
        ),
    )
    consumer = client.receiver("not-held", credit=10)
    assert [r.message.body for r in client.wait_received(consumer, 1)] == ["later"]


def test_a_delivery_time_wins_over_not_valid_before_as_broker_j_reads_them(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("held-both", node_properties={"holdOnPublishEnabled": True})
    now_ms = int(time.time() * 1000)
    client.send(
        sender,
        Message(
            body="due",
            annotations={
                symbol("x-qpid-not-valid-before"): now_ms + 60_000,
                symbol("x-opt-delivery-time"): now_ms,
            },
        ),
    )
    consumer = client.receiver("held-both", credit=10)
    assert [r.message.body for r in client.wait_received(consumer, 1)] == ["due"]
