"""The QIT pattern: the producer detaches before any consumer exists, and nothing is lost.

The Qpid interop suite sends to a ``qit.*`` address no one has declared, closes the sender,
and only then starts the receiver. The messages must wait on the queue made on demand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Timeout
from proton.utils import BlockingConnection

from interop.clients import ALL_CLIENTS, PYTHON, RHEA, Client
from proton_broker.testing import BrokerProcess

COUNT = 10
PACKED = 40


def queue_is_empty(url: str, address: str) -> bool:
    conn = BlockingConnection(url, timeout=5)
    try:
        receiver = conn.create_receiver(address, credit=1)
        try:
            receiver.receive(timeout=0.5)  # absence can only be shown by waiting a little
        except Timeout:
            return True
        receiver.release()
        return False
    finally:
        conn.close()


def messages(count: int) -> list[dict]:
    return [{"id": f"m{i}", "body": f"body {i}", "properties": {"seq": i}} for i in range(count)]


def assert_browsed_then_consumed(url: str, queue: str, sent: list[dict]) -> None:
    """Proton Python browses ``sent`` back and rhea consumes it, whole and in order."""
    browsed = PYTHON.receive(url, queue, len(sent), browse=True)
    consumed = RHEA.receive(url, queue, len(sent))

    assert [m["id"] for m in browsed] == [m["id"] for m in sent]
    assert [(m["id"], m["body"], m["properties"]) for m in consumed] == [
        (m["id"], m["body"], m["properties"]) for m in sent
    ]
    assert queue_is_empty(url, queue)


@pytest.mark.parametrize("sender", ALL_CLIENTS, ids=lambda c: c.name)
def test_messages_stay_queued_after_the_producer_detaches_until_a_consumer_comes(
    broker, queue, sender: Client
) -> None:
    sent = messages(COUNT)
    sender.send(broker.url, queue, sent)  # the sender has closed its connection on return
    assert_browsed_then_consumed(broker.url, queue, sent)


@pytest.fixture
def packing_broker() -> Iterator[BrokerProcess]:
    """A broker whose queues pack all but their first three messages (queue.pack_after)."""
    process = BrokerProcess(env={"PROTON_BROKER_QUEUE_PACK_AFTER": "3"}).start()
    yield process
    process.stop()
    assert "Traceback" not in "".join(process.output)


@pytest.mark.parametrize("sender", ALL_CLIENTS, ids=lambda c: c.name)
def test_a_queue_that_packs_its_messages_hands_every_client_what_it_was_sent(
    packing_broker: BrokerProcess, queue: str, sender: Client
) -> None:
    sent = messages(PACKED)
    sender.send(packing_broker.url, queue, sent)
    assert_browsed_then_consumed(packing_broker.url, queue, sent)
