"""HTTP and AMQP on the same queue: HTTP-sent messages are ordinary AMQP messages, and HTTP
listeners see AMQP-sent ones."""

from __future__ import annotations

import json
import threading
import time

from proton import Message, symbol

from tests.engine_client import EngineClient
from tests.http.conftest import Http

SEQUENCE = "x-opt-sequence"
LVQ = {"qpid.last_value_queue_key": "id"}


def amqp(http: Http) -> EngineClient:
    return http.running.client()


def test_an_amqp_consumer_gets_http_sent_messages(http: Http) -> None:
    http.send("cross", {"id": "1", "payload": {"message": "hello"}})
    http.send("cross", {"id": "1", "sequence": 50, "payload": [1, "two"]})
    client = amqp(http)
    receiver = client.receiver("cross", credit=10)
    got = client.wait_received(receiver, 2)
    first, second = (r.message for r in got)
    assert json.loads(first.body) == {"message": "hello"}
    assert first.content_type == "application/json"
    assert first.properties["id"] == "1"
    assert first.annotations[symbol(SEQUENCE)] == 1
    assert json.loads(second.body) == [1, "two"]
    assert second.annotations[symbol(SEQUENCE)] == 50  # the custom sequence, stamped


def test_an_amqp_replay_sees_http_sent_versions(http: Http) -> None:
    for n in range(1, 5):
        http.send("replay", {"id": "k", "payload": n})
    client = amqp(http)
    receiver = client.receiver(
        "replay", credit=10, filters={symbol(SEQUENCE): 3, symbol("x-opt-sequence-key"): "k"}
    )
    got = client.wait_received(receiver, 2)
    assert [(json.loads(r.message.body), r.message.annotations[symbol(SEQUENCE)]) for r in got] == [
        (3, 3),
        (4, 4),
    ]


def test_http_listeners_get_amqp_sent_messages(http: Http) -> None:
    client = amqp(http)
    sender = client.sender("prices", node_properties=LVQ)  # an LVQ keyed by 'id'
    for body in ({"price": 100}, {"price": 101}):
        client.wait_settled(
            client.send(sender, Message(body=body, properties={"id": "IBM"}), pump=False)
        )
    client.wait_settled(
        client.send(
            sender,
            Message(
                body='{"json": true}', content_type="application/json", properties={"id": "HPQ"}
            ),
            pump=False,
        )
    )
    client.wait_settled(
        client.send(sender, Message(body=b"raw", properties={"id": "RAW"}), pump=False)
    )
    assert http.poll("prices", "sequence=1", key="IBM") == (
        200,
        {"id": "IBM", "sequence": 1, "payload": {"price": 100}},
    )
    assert http.poll("prices", "sequence=last", key="IBM")[1]["payload"] == {"price": 101}
    assert http.poll("prices", "sequence=1", key="HPQ")[1]["payload"] == {"json": True}
    assert http.poll("prices", "sequence=1", key="RAW")[1]["payload"] == "raw"
    # a send over HTTP to the same LVQ is keyed by its own key property
    assert http.send("prices", {"id": "IBM", "payload": {"price": 102}})[1]["sequence"] == 3


def test_a_waiting_http_poll_is_answered_by_an_amqp_send(http: Http) -> None:
    http.send("wakeup", {"id": "k", "payload": "created over HTTP"})
    answer: list[object] = []
    poll = threading.Thread(
        target=lambda: answer.append(http.poll("wakeup", "sequence=2&timeout=10", key="k"))
    )
    poll.start()
    deadline = time.monotonic() + 5
    while http.listeners() < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    client = amqp(http)
    sender = client.sender("wakeup")
    client.wait_settled(
        client.send(sender, Message(body="from AMQP", properties={"id": "k"}), pump=False)
    )
    poll.join(10)
    assert answer == [(200, {"id": "k", "sequence": 2, "payload": "from AMQP"})]


def test_an_undecodable_amqp_body_gives_a_null_payload(http: Http) -> None:
    client = amqp(http)
    sender = client.sender("odd", node_properties=LVQ)
    # a map with a binary key: Proton Python 0.40 cannot decode it
    client.wait_settled(
        client.send(sender, Message(body={b"k": 1}, properties={"id": "x"}), pump=False)
    )
    status, body = http.poll("odd", "sequence=1")
    assert status == 200
    assert body["id"] == "x" and body["sequence"] == 1
    assert body["payload"] in (None, {"k": 1})
