"""Queue sequence numbers over AMQP: every delivery carries x-opt-sequence-number (a ulong);
a source filter x-opt-sequence-number = N browses from N in number order, then follows, and
drain says where the end is; durable queues keep their numbers across a restart."""

from __future__ import annotations

import pytest
from proton import Described, Disposition, Message, Terminus, symbol, uint, ulong

from tests.amqp.test_durability import DURABLE, Restartable, brokers, send_all  # noqa: F401
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, terminus_map

NUMBER = "x-opt-sequence-number"


def number_of(received) -> int:  # type: ignore[no-untyped-def]
    value = received.message.annotations[symbol(NUMBER)]
    assert type(value) is ulong  # the contract's type, not just any integer
    return int(value)


def send(broker: RunningBroker, address: str, count: int, start: int = 0, **fields: object) -> None:
    send_all(broker, address, [Message(body=start + i, **fields) for i in range(count)])


def browse(
    client: EngineClient, address: str, start: object, credit: int = 100, browse_mode: bool = False
):  # type: ignore[no-untyped-def]
    return client.receiver(address, credit=credit, browse=browse_mode, filters={NUMBER: start})


def read_to_end(client: EngineClient, link, credit: int = 50) -> list:  # type: ignore[no-untyped-def]
    """Drain: the broker sends what it has up to the credit and answers the drain; credit
    left over means the end was reached."""
    link.drain(credit)
    client.wait(lambda: not link.draining())
    return [(number_of(r), r.message.body) for r in client.received(link)]


def test_consumers_and_browsers_get_the_number_as_a_ulong_annotation(broker: RunningBroker) -> None:
    send(broker, "numbered", 3)
    client = broker.client()
    browser = client.receiver("numbered", credit=10, browse=True)
    consumer = client.receiver("numbered", credit=10)
    assert [number_of(r) for r in client.wait_received(browser, 3)] == [1, 2, 3]
    assert [number_of(r) for r in client.wait_received(consumer, 3)] == [1, 2, 3]


def test_the_number_joins_annotations_the_message_already_has_and_replaces_a_forged_one(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("annotated")
    client.wait_settled(
        client.send(
            sender,
            Message(
                body="a", annotations={symbol("x-opt-custom"): "kept", symbol(NUMBER): ulong(999)}
            ),
            pump=False,
        )
    )
    client.wait_settled(
        client.send(
            sender, Message(body="b", instructions={symbol("x-opt-delivery"): "da"}), pump=False
        )
    )
    got = client.wait_received(client.receiver("annotated", credit=10), 2)
    assert [number_of(r) for r in got] == [1, 2]
    assert got[0].message.annotations[symbol("x-opt-custom")] == "kept"
    assert len(got[0].message.annotations) == 2
    assert got[1].message.body == "b"


def test_a_redelivered_message_keeps_its_number_with_the_new_delivery_count(
    broker: RunningBroker,
) -> None:
    send(broker, "again", 1)
    client = broker.client()
    first = client.receiver("again", credit=1)
    got = client.wait_received(first, 1)[0]
    client.settle(got, Disposition.MODIFIED, failed=True)
    second = client.receiver("again", credit=1)
    redelivered = client.wait_received(second, 1)[0]
    assert number_of(redelivered) == 1
    assert redelivered.message.delivery_count == 1


def test_browsing_from_n_gets_numbers_from_n_in_order_then_new_ones(broker: RunningBroker) -> None:
    send(broker, "from-n", 5)
    client = broker.client()
    link = browse(client, "from-n", ulong(3))
    assert link.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    got = client.wait_received(link, 3)
    assert [(number_of(r), r.message.body) for r in got] == [(3, 2), (4, 3), (5, 4)]
    send(broker, "from-n", 1, start=5)
    assert number_of(client.wait_received(link, 4)[3]) == 6
    assert broker.call(lambda: broker.broker.queues["from-n"].depth) == 6


def test_a_described_long_filter_is_accepted_and_echoed(broker: RunningBroker) -> None:
    send(broker, "described", 3)
    client = broker.client()
    filter_value = Described(symbol(NUMBER), 2)
    link = browse(client, "described", filter_value)
    assert [number_of(r) for r in client.wait_received(link, 2)] == [2, 3]
    echoed = terminus_map(link.remote_source.filter)
    assert echoed[NUMBER].descriptor == NUMBER and echoed[NUMBER].value == 2


def test_drain_answered_with_credit_left_over_marks_the_end(broker: RunningBroker) -> None:
    send(broker, "drain-end", 4)
    client = broker.client()
    link = browse(client, "drain-end", ulong(2), credit=0)
    assert read_to_end(client, link, credit=50) == [(2, 1), (3, 2), (4, 3)]
    assert link.credit == 0  # the broker used up what it could not fill: the end
    partial = browse(client, "drain-end", ulong(1), credit=0)
    partial.drain(2)
    client.wait(lambda: not partial.draining())
    assert [number_of(r) for r in client.received(partial)] == [1, 2]  # credit was the limit


def test_a_consumed_message_leaves_a_gap_a_browser_steps_over(broker: RunningBroker) -> None:
    send(broker, "gaps", 3)
    client = broker.client()
    consumer = client.receiver("gaps", credit=1)
    client.settle(client.wait_received(consumer, 1)[0])
    client.wait(lambda: broker.call(lambda: broker.broker.queues["gaps"].depth) == 2)
    link = browse(client, "gaps", ulong(1), credit=0)
    assert [n for n, _ in read_to_end(client, link)] == [2, 3]


def test_the_queue_reports_earliest_and_next_numbers(broker: RunningBroker) -> None:
    send(broker, "bounds", 3)
    queue = broker.broker.queues["bounds"]
    bounds = broker.call(lambda: (queue.earliest_sequence_number, queue.next_sequence_number))
    assert bounds == (1, 4)
    client = broker.client()
    consumer = client.receiver("bounds", credit=3)
    for received in client.wait_received(consumer, 3):
        client.settle(received)
    client.wait(lambda: broker.call(lambda: queue.depth) == 0)
    assert broker.call(lambda: (queue.earliest_sequence_number, queue.next_sequence_number)) == (
        4,
        4,
    )


def test_a_keyed_queue_stamps_both_the_key_sequence_and_the_queue_number(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("keyed", node_properties={"sequenceKey": "k"})
    for key in ("a", "b", "a"):
        client.wait_settled(
            client.send(sender, Message(body=key, properties={"k": key}), pump=False)
        )
    got = client.wait_received(client.receiver("keyed", credit=10, browse=True), 3)
    assert [number_of(r) for r in got] == [1, 2, 3]
    assert [r.message.annotations[symbol("x-opt-sequence")] for r in got] == [1, 1, 2]


@pytest.mark.parametrize("value", [-1, "5", Described(symbol(NUMBER), "first"), 2.5, True])
def test_a_filter_value_that_is_not_a_sequence_number_is_refused(
    broker: RunningBroker, value: object
) -> None:
    send(broker, "bad-filter", 1)
    client = broker.client()
    link = browse(client, "bad-filter", value)
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert NUMBER in link.remote_condition.description
    assert broker.call(lambda: broker.broker.queues["bad-filter"].consumer_count) == 0


def test_combining_it_with_a_history_replay_filter_is_refused(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver("both", credit=1, filters={NUMBER: ulong(1), "x-opt-sequence": "first"})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"


def test_a_refused_filter_does_not_create_the_queue(broker: RunningBroker) -> None:
    client = broker.client()
    link = browse(client, "never-made", -5)
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "never-made" not in broker.broker.queues


# ---- durable numbers -------------------------------------------------------------------


def test_durable_messages_keep_their_numbers_and_none_is_reused_after_a_restart(
    brokers: Restartable,  # noqa: F811
) -> None:
    broker = brokers.start()
    send_all(broker, "kept", [Message(body=i, durable=True) for i in range(3)], DURABLE)
    send(broker, "kept", 2, start=10)  # not durable: gone after the restart
    client = broker.client()
    consumer = client.receiver("kept", credit=1)
    client.settle(client.wait_received(consumer, 1)[0])  # number 1 is consumed
    client.wait(lambda: broker.call(lambda: broker.broker.queues["kept"].depth) == 4)
    broker = brokers.restart()
    client = broker.client()
    link = browse(client, "kept", ulong(0), credit=0)
    assert read_to_end(client, link) == [(2, 1), (3, 2)]
    queue = broker.broker.queues["kept"]
    assert broker.call(lambda: queue.earliest_sequence_number) == 2
    link.flow(10)  # follow what comes next
    send(broker, "kept", 1, start=20)
    assert number_of(client.wait_received(link, 3)[2]) > 5  # 4 and 5 were given out before


def test_a_durable_queue_with_nothing_left_still_does_not_reuse_numbers(
    brokers: Restartable,  # noqa: F811
) -> None:
    broker = brokers.start()
    send_all(broker, "emptied", [Message(body=i) for i in range(3)], DURABLE)
    broker = brokers.restart()
    queue = broker.broker.queues["emptied"]
    assert broker.call(lambda: queue.depth) == 0
    assert broker.call(lambda: queue.next_sequence_number) > 3


# ---- qpidd's qpid.queue_msg_sequence ---------------------------------------------------------

STAMPED = {"qpid.queue_msg_sequence": "qpid.seq"}


def stamp_of(received) -> int:  # type: ignore[no-untyped-def]
    value = received.message.annotations[symbol("qpid.seq")]
    assert type(value) is uint  # qpidd's uint32_t
    return int(value)


def test_qpid_queue_msg_sequence_stamps_each_delivery_with_the_queue_number_under_its_name(
    broker: RunningBroker,
) -> None:
    """qpidd's Queue::push: ``addAnnotation(sequenceKey, (uint32_t)sequence)``; here the
    number is the one x-opt-sequence-number carries, for consumers and browsers alike, and
    replaces one the producer set."""
    client = broker.client()
    sender = client.sender("stamped", node_properties=STAMPED)
    forged = Message(body="forged", annotations={symbol("qpid.seq"): uint(99), symbol("a"): 1})
    for message in (Message(body="plain"), forged, Message(body="ttl", ttl=60)):
        assert client.wait_settled(client.send(sender, message)).remote_state == (
            Disposition.ACCEPTED
        )
    browser = client.receiver("stamped", credit=10, browse=True)
    consumer = client.receiver("stamped", credit=10)
    for link in (browser, consumer):
        got = client.wait_received(link, 3)
        assert [stamp_of(r) for r in got] == [number_of(r) for r in got] == [1, 2, 3]
        assert got[1].message.annotations[symbol("a")] == 1  # the rest of its map kept
    assert [r.message.body for r in got] == ["plain", "forged", "ttl"]


def test_a_queue_without_it_stamps_nothing_more(broker: RunningBroker) -> None:
    send(broker, "plain-numbers", 1)
    client = broker.client()
    (got,) = client.wait_received(client.receiver("plain-numbers", credit=1), 1)
    assert set(got.message.annotations) == {symbol(NUMBER)}


@pytest.mark.parametrize("name", ["x-opt-sequence-number", "x-opt-sequence", "séq", 7])
def test_a_stamp_name_that_is_no_symbol_or_the_broker_s_own_is_refused(
    broker: RunningBroker, name: object
) -> None:
    client = broker.client()
    link = client.sender("bad-stamp", node_properties={"qpid.queue_msg_sequence": name})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "qpid.queue_msg_sequence" in link.remote_condition.description


def test_a_keyed_queue_stamps_its_key_number_beside_both(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("keyed-stamped", node_properties={**STAMPED, "sequenceKey": "k"})
    for key in ("a", "a"):
        client.wait_settled(client.send(sender, Message(body=key, properties={"k": key})))
    got = client.wait_received(client.receiver("keyed-stamped", credit=10), 2)
    assert [r.message.annotations[symbol("x-opt-sequence")] for r in got] == [1, 2]
    assert [stamp_of(r) for r in got] == [number_of(r) for r in got] == [1, 2]
