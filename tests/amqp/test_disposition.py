"""Outcomes: accepted, released, modified, rejected, and consumers that go away."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Disposition, Link, Message, symbol, ulong

from tests.amqp.test_flow import fill
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def modified_and_taken_again(client: EngineClient, receiver: Link, **outcome: Any) -> Message:
    """The first message on ``receiver`` (credit 1), given back ``modified`` with
    ``outcome`` (failed, undeliverable, annotations) and received again."""
    (got,) = client.wait_received(receiver, 1)
    client.settle(got, Disposition.MODIFIED, **outcome)
    receiver.flow(1)
    return client.wait_received(receiver, 2)[1].message


def test_accepted_removes_the_message(broker: RunningBroker) -> None:
    fill(broker, "acc", 1)
    client = broker.client()
    receiver = client.receiver("acc", credit=1)
    (got,) = client.wait_received(receiver, 1)
    assert depth(broker, "acc") == 1  # acquired, not yet settled
    client.settle(got, Disposition.ACCEPTED)
    client.wait(lambda: depth(broker, "acc") == 0)


def test_released_puts_the_message_back_at_its_original_position(broker: RunningBroker) -> None:
    fill(broker, "rel", 3)
    client = broker.client()
    receiver = client.receiver("rel", credit=1)
    (first,) = client.wait_received(receiver, 1)
    client.settle(first, Disposition.RELEASED)
    receiver.flow(3)
    got = client.wait_received(receiver, 4)
    assert [r.message.body for r in got[1:]] == [0, 1, 2]
    assert got[1].message.delivery_count == 0  # released is not a failed delivery


def test_modified_delivery_failed_increments_the_delivery_count(broker: RunningBroker) -> None:
    fill(broker, "mod", 1)
    client = broker.client()
    receiver = client.receiver("mod", credit=1)
    again = modified_and_taken_again(client, receiver, failed=True)
    assert again.body == 0
    assert again.delivery_count == 1


@pytest.mark.parametrize("count_sent", [0, 1], ids=["count-0", "count-1-as-sent"])
def test_a_redelivery_after_a_failed_delivery_is_not_for_the_first_acquirer(
    broker: RunningBroker, count_sent: int
) -> None:
    """A producer's ``first-acquirer`` is passed on, but not on a delivery with a count
    above 0: another link acquired the message before (qpidd sends false then too), even
    where the producer's own header said that count."""
    client = broker.client()
    sender = client.sender("first")
    sent = Message(body=1, first_acquirer=True, delivery_count=count_sent)
    client.wait_settled(client.send(sender, sent, pump=False))
    receiver = client.receiver("first", credit=1)
    (got,) = client.wait_received(receiver, 1)
    assert got.message.first_acquirer is True
    client.settle(got, Disposition.MODIFIED, failed=True)
    receiver.flow(1)
    again = client.wait_received(receiver, 2)[1].message
    assert (again.delivery_count, again.first_acquirer) == (1, False)


def test_modified_undeliverable_here_keeps_the_message_from_that_consumer(
    broker: RunningBroker,
) -> None:
    fill(broker, "undeliv", 1)
    client = broker.client()
    picky = client.receiver("undeliv", credit=1)
    (got,) = client.wait_received(picky, 1)
    client.settle(got, Disposition.MODIFIED, failed=True, undeliverable=True)
    picky.flow(5)
    client.pump(0.3)
    assert len(client.received(picky)) == 1
    other = client.receiver("undeliv", credit=5)
    (redelivered,) = client.wait_received(other, 1)
    assert redelivered.message.body == 0
    assert redelivered.message.delivery_count == 1


def test_modified_merges_its_message_annotations_into_the_redelivered_message(
    broker: RunningBroker,
) -> None:
    """AMQP 1.0 3.4.5, as qpidd: a key the message has takes the new value, the others stay."""
    client = broker.client()
    sender = client.sender("annotated")
    note = {symbol("x-kept"): "as sent", symbol("x-replaced"): "old"}
    client.wait_settled(client.send(sender, Message(body=1, annotations=note), pump=False))
    receiver = client.receiver("annotated", credit=1)
    given = {symbol("x-replaced"): "new", symbol("x-added"): ulong(7)}
    again = modified_and_taken_again(client, receiver, failed=True, annotations=given)
    assert again.body == 1 and again.delivery_count == 1
    assert {k: v for k, v in again.annotations.items() if k != "x-opt-sequence-number"} == {
        "x-kept": "as sent",
        "x-replaced": "new",
        "x-added": 7,
    }
    assert type(again.annotations["x-added"]) is ulong  # its type as the consumer gave it


def test_modified_annotations_give_a_message_without_any_its_first(
    broker: RunningBroker,
) -> None:
    fill(broker, "bare", 2)
    client = broker.client()
    receiver = client.receiver("bare", credit=1)
    (got,) = client.wait_received(receiver, 1)
    client.settle(got, Disposition.MODIFIED, annotations={symbol("x-seen-by"): "worker-1"})
    receiver.flow(2)
    later = client.wait_received(receiver, 3)[1:]
    assert [r.message.body for r in later] == [0, 1]
    assert later[0].message.annotations["x-seen-by"] == "worker-1"
    assert later[0].message.delivery_count == 0  # not delivery-failed
    assert "x-seen-by" not in (later[1].message.annotations or {})
    client.settle_all(later)
    client.wait(lambda: depth(broker, "bare") == 0)
    # the queue counted the annotated message's new size, so its byte count comes back to 0
    assert broker.call(lambda: broker.broker.queues["bare"].bytes) == 0


def test_rejected_discards_the_message(broker: RunningBroker) -> None:
    fill(broker, "rej", 2)
    client = broker.client()
    receiver = client.receiver("rej", credit=1)
    (got,) = client.wait_received(receiver, 1)
    client.settle(got, Disposition.REJECTED)
    client.wait(lambda: depth(broker, "rej") == 1)
    receiver.flow(5)
    client.pump(0.2)
    assert [r.message.body for r in client.wait_received(receiver, 2)] == [0, 1]


def test_a_detached_consumers_unsettled_messages_return_in_order_counted(
    broker: RunningBroker,
) -> None:
    fill(broker, "detach", 4)
    client = broker.client()
    receiver = client.receiver("detach", credit=3)
    client.wait_received(receiver, 3)
    receiver.close()
    client.wait_closed(receiver)
    other = broker.client()
    again = other.receiver("detach", credit=10)
    got = other.wait_received(again, 4)
    assert [r.message.body for r in got] == [0, 1, 2, 3]
    assert [r.message.delivery_count for r in got] == [1, 1, 1, 0]


def test_a_dropped_connections_unsettled_messages_return_to_the_queue(
    broker: RunningBroker,
) -> None:
    fill(broker, "dropped", 3)
    client = broker.client()
    receiver = client.receiver("dropped", credit=2)
    client.wait_received(receiver, 2)
    client.drop()
    other = broker.client()
    again = other.receiver("dropped", credit=10)
    got = other.wait_received(again, 3)
    assert [r.message.body for r in got] == [0, 1, 2]
    assert [r.message.delivery_count for r in got] == [1, 1, 0]


def test_settling_without_an_outcome_counts_as_accepted(broker: RunningBroker) -> None:
    fill(broker, "bare-settle", 1)
    client = broker.client()
    receiver = client.receiver("bare-settle", credit=1)
    (got,) = client.wait_received(receiver, 1)
    got.delivery.settle()
    client.pump()
    client.wait(lambda: depth(broker, "bare-settle") == 0)


def test_a_message_sent_to_a_queue_is_accepted(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("accepted-in")
    delivery = client.wait_settled(client.send(sender, Message(body=1), pump=False))
    assert delivery.remote_state == Disposition.ACCEPTED
