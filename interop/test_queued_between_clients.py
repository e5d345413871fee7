"""The QIT pattern: the producer detaches before any consumer exists, and nothing is lost.

The Qpid interop suite sends to a ``qit.*`` address no one has declared, closes the sender,
and only then starts the receiver. The messages must wait on the queue made on demand.
"""

from __future__ import annotations

import pytest
from proton import Timeout
from proton.utils import BlockingConnection

from interop.clients import ALL_CLIENTS, PYTHON, RHEA, Client

COUNT = 10


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


@pytest.mark.parametrize("sender", ALL_CLIENTS, ids=lambda c: c.name)
def test_messages_stay_queued_after_the_producer_detaches_until_a_consumer_comes(
    broker, queue, sender: Client
) -> None:
    sent = [{"id": f"m{i}", "body": f"body {i}", "properties": {"seq": i}} for i in range(COUNT)]
    sender.send(broker.url, queue, sent)  # the sender has closed its connection on return

    browsed = PYTHON.receive(broker.url, queue, COUNT, browse=True)
    consumed = RHEA.receive(broker.url, queue, COUNT)

    assert [m["id"] for m in browsed] == [m["id"] for m in sent]
    assert [(m["id"], m["body"], m["properties"]) for m in consumed] == [
        (m["id"], m["body"], m["properties"]) for m in sent
    ]
    assert queue_is_empty(broker.url, queue)
