"""Transfers: messages go in, come out unchanged, and bad ones are refused without loss."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from proton import Disposition, Link, Message, symbol, ulong
from proton.utils import BlockingConnection

from tests.conftest import RunningBroker
from tests.engine_client import EngineClient


def test_a_message_sent_to_a_queue_is_received_unchanged(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("orders")
    sent = Message(
        body={"n": 1, "s": "x"},
        id="m-1",
        subject="subj",
        priority=7,
        properties={"colour": "red", "count": 3},
        durable=True,
    )
    delivery = client.wait_settled(client.send(sender, sent, pump=False))
    assert delivery.remote_state == Disposition.ACCEPTED
    receiver = client.receiver("orders", credit=10)
    (got,) = client.wait_received(receiver, 1)
    assert got.message.body == {"n": 1, "s": "x"}
    assert got.message.id == "m-1"
    assert got.message.subject == "subj"
    assert got.message.priority == 7
    assert got.message.durable is True
    assert got.message.properties == {"colour": "red", "count": 3}
    # forwarded byte for byte, but for one message-annotations section the broker inserted
    # after the header: the queue sequence number (38 bytes: x-opt-sequence-number, ulong)
    assert got.message.annotations == {symbol("x-opt-sequence-number"): ulong(1)}
    at = got.data.index(b"\x00\x53\x72")
    assert got.data[:at] + got.data[at + 38 :] == sent.encode()


def test_messages_are_received_in_the_order_they_were_sent(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("fifo")
    for i in range(50):
        client.send(sender, Message(body=i))
    receiver = client.receiver("fifo", credit=100)
    got = client.wait_received(receiver, 50)
    assert [r.message.body for r in got] == list(range(50))


def test_messages_stay_queued_after_the_producer_detaches(broker: RunningBroker) -> None:
    producer = broker.client()
    sender = producer.sender("kept")
    for i in range(3):
        producer.wait_settled(producer.send(sender, Message(body=i), pump=False))
    producer.close()
    consumer = broker.client()
    receiver = consumer.receiver("kept", credit=10)
    assert [r.message.body for r in consumer.wait_received(receiver, 3)] == [0, 1, 2]


def test_many_producers_and_consumers_share_a_queue_without_loss_or_duplicates(
    broker: RunningBroker,
) -> None:
    per_producer, producers, consumers = 200, 4, 3
    received: list[str] = []
    lock = threading.Lock()

    def produce(p: int) -> None:
        conn = BlockingConnection(broker.url)
        sender = conn.create_sender("shared")
        for i in range(per_producer):
            sender.send(Message(body=f"{p}-{i}"))
        conn.close()

    def consume() -> None:
        conn = BlockingConnection(broker.url)
        receiver = conn.create_receiver("shared", credit=20)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with lock:
                if len(received) >= per_producer * producers:
                    break
            try:
                message = receiver.receive(timeout=0.5)
            except Exception:  # timeout: check the total again
                continue
            receiver.accept()
            with lock:
                received.append(message.body)
        conn.close()

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    threads += [threading.Thread(target=consume) for _ in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    expected = {f"{p}-{i}" for p in range(producers) for i in range(per_producer)}
    assert sorted(received) == sorted(expected)
    for p in range(producers):  # each producer's messages arrive in its order per consumer
        assert len([b for b in received if b.startswith(f"{p}-")]) == per_producer


def test_a_garbage_transfer_detaches_the_link_with_decode_error_and_stores_nothing(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("strict")
    client.send(sender, b"\x00\x53\x77\xa1\x05hel")  # amqp-value string cut short
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:decode-error"
    assert "malformed" in sender.remote_condition.description
    assert broker.call(lambda: broker.broker.queues["strict"].depth) == 0
    # the connection survives, and the next valid message is the next one received
    sender2 = client.sender("strict")
    client.wait_settled(client.send(sender2, Message(body="good"), pump=False))
    receiver = client.receiver("strict", credit=5)
    assert [r.message.body for r in client.wait_received(receiver, 1)] == ["good"]


def test_transfers_sent_behind_a_garbage_one_are_not_stored_once_the_link_is_detached(
    broker: RunningBroker,
) -> None:
    """A client that sends before it reads the broker's detach: what follows the refused
    transfer on that link is dropped and left unsettled, as qpidd ignores a closed link's
    deliveries, so a client that sends again what the detach left unsettled stores it once."""
    client = broker.client()
    sender = client.sender("pipelined")
    sent_behind(client, sender, b"\x00\x53\x77\xa1\x05hel", "amqp:decode-error")  # cut short
    assert broker.call(lambda: broker.broker.queues["pipelined"].depth) == 0


def sent_behind(client: EngineClient, sender: Link, first: Message | bytes, refused: str) -> None:
    """Send ``first`` and three messages behind it before reading anything: the link is
    detached with ``refused`` and the three get no outcome."""
    client.send(sender, first, pump=False)
    behind = [client.send(sender, Message(body=n), pump=False) for n in range(3)]
    client.wait_closed(sender)
    assert sender.remote_condition.name == refused
    client.pump(0.2)
    assert [d.remote_state for d in behind] == [0, 0, 0]  # no outcome: never taken


def nested_lists(depth: int) -> bytes:
    value = b"\x40"
    for _ in range(depth):
        value = b"\xd0" + struct.pack(">II", len(value) + 4, 1) + value
    return value


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"\x00\x53\x77\xa1\x02\xff\xfe", "amqp-value section: string"),
        (
            b"\x00\x53\x74\xc1\x07\x02\xa0\x01k\xa1\x01v\x00\x53\x77\x40",
            "application-properties section: the key at offset 6 is a binary",
        ),
        (b"\x00\x53\x70\xc0\x05\x01\xa1\x02no\x00\x53\x77\x40", "header section: durable"),
        (
            b"\x00\x53\x77" + nested_lists(10_000),
            "amqp-value section: value at offset",
        ),
        (b"\x00\x53\x72\x45\x00\x53\x77\x40", "message-annotations section: the value"),
    ],
    ids=[
        "bad-utf8-body",
        "binary-property-key",
        "string-durable",
        "10000-levels-deep",
        "annotations-not-a-map",
    ],
)
def test_a_well_framed_message_no_client_could_read_is_rejected_with_decode_error(
    broker: RunningBroker, data: bytes, named: str
) -> None:
    client = broker.client()
    sender = client.sender("readable")
    delivery = client.send(sender, data)
    client.wait_closed(sender)
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition is not None
    assert delivery.remote.condition.name == "amqp:decode-error"
    assert named in delivery.remote.condition.description
    assert broker.call(lambda: broker.broker.queues["readable"].depth) == 0  # nothing stored
    sender2 = client.sender("readable")  # the connection and the broker go on
    client.wait_settled(client.send(sender2, Message(body="good"), pump=False))
    receiver = client.receiver("readable", credit=5)
    assert [r.message.body for r in client.wait_received(receiver, 1)] == ["good"]


# What rhea 3's message.encode writes for {body: 'with footer', footer: {'x-foot': 'f'}}:
# an empty header and properties, then the footer, then the body.
RHEA_FOOTER_FIRST = bytes.fromhex(
    "0053704500537345005378d10000000f00000002a106782d666f6f74a10166005377a10b7769746820666f6f746572"
)


def test_a_footer_before_the_body_is_refused_naming_the_footer_out_of_place(
    broker: RunningBroker,
) -> None:
    """rhea puts a message's footer before its body: the refusal says so, rather than
    blame the body, which is where it should be."""
    client = broker.client()
    sender = client.sender("footer-first")
    delivery = client.send(sender, RHEA_FOOTER_FIRST)
    client.wait_closed(sender)
    assert delivery.remote_state == Disposition.REJECTED
    assert delivery.remote.condition.name == "amqp:decode-error"
    assert (
        "footer section (0x78) at offset 8 comes before the amqp-value section (0x77) at "
        "offset 31 (the body)"
    ) in delivery.remote.condition.description
    assert broker.call(lambda: broker.broker.queues["footer-first"].depth) == 0


def test_random_bytes_as_a_message_are_refused_with_decode_error(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("strict2")
    client.send(sender, b"hello, this is not AMQP")
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:decode-error"


def test_a_large_message_spanning_many_frames_round_trips(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("big")
    body = b"x" * (3 * 1024 * 1024)
    client.wait_settled(client.send(sender, Message(body=body), pump=False), timeout=20)
    receiver = client.receiver("big", credit=1)
    (got,) = client.wait_received(receiver, 1, timeout=20)
    assert got.message.body == body


def test_presettled_sends_are_stored(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("fast")
    for i in range(5):
        client.send(sender, Message(body=i), settled=True)
    receiver = client.receiver("fast", credit=10)
    assert [r.message.body for r in client.wait_received(receiver, 5)] == list(range(5))


def test_a_presettled_consumer_gets_each_message_once(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("settled-out")
    for i in range(4):
        client.send(sender, Message(body=i))
    receiver = client.receiver("settled-out", credit=10, settled=True)
    got = client.wait_received(receiver, 4)
    assert all(r.delivery.remote_state is None or r.delivery.settled for r in got)
    assert broker.call(lambda: broker.broker.queues["settled-out"].depth) == 0
