"""Broker-J's getMessageContent on ``$management`` (proton_broker/management_messages.py):
a message's body sections as encoded, or its value as JSON text, cut at a limit, asked for
only where confidential operations may be (over TLS, or from where
``broker.confidential_without_tls`` allows)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message
from proton.utils import BlockingConnection

from proton_broker.cli.client import ManagementClient
from tests.amqp.test_durability import send_all
from tests.amqp.test_management import QUEUE, Node, entity, status
from tests.amqp.test_tls import amqps, client_domain, files, tls_config  # noqa: F401 - fixtures
from tests.conftest import RunningBroker


def content(node: Node, queue: str, position: int, **asked: Any) -> Message:
    return node.ask(entity("getMessageContent", queue, messageId=position, **asked))


def first_id(node: Node, queue: str) -> int:
    return node.ask(entity("getMessageInfo", queue)).body[0]["id"]


def test_the_content_is_the_body_as_encoded_cut_at_the_limit(broker: RunningBroker) -> None:
    node = Node(broker.client())
    send_all(broker, "texts", [Message(id="t", subject="greeting", body="hello")])
    position = first_id(node, "texts")
    whole = content(node, "texts", position)
    assert status(whole) == (200, "OK")
    assert whole.body == b"\x00\x53\x77\xa1\x05hello"  # amqp-value, a str8: no properties
    assert whole.inferred  # a data section, as Broker-J sends bytes
    assert content(node, "texts", position, limit=4).body == b"\x00\x53\x77\xa1"
    assert content(node, "texts", position, limit="-1").body == whole.body


def test_return_json_gives_the_value_as_broker_j_converts_it(broker: RunningBroker) -> None:
    node = Node(broker.client())
    send_all(
        broker,
        "values",
        [
            Message(body={"a": 1, "b": [1, 2]}),
            Message(body=b"\x01\xff", inferred=True),  # a data section
            Message(body="abcdefghij"),
        ],
    )
    infos = node.ask(entity("getMessageInfo", "values")).body
    mapped, binary, text = (info["id"] for info in infos)
    assert content(node, "values", mapped, returnJson=True).body == b'{"a":1,"b":[1,2]}'
    assert content(node, "values", binary, returnJson="true").body == b"[1,-1]"
    assert json.loads(bytes(content(node, "values", text, returnJson=True).body)) == "abcdefghij"
    assert content(node, "values", text, returnJson=True, limit=5).body == b'"abcde..."'


def test_decompress_before_limiting_cuts_a_gzip_body_once_decompressed(
    broker: RunningBroker,
) -> None:
    node = Node(broker.client())
    packed = gzip.compress(b"0123456789")
    send_all(
        broker,
        "packed",
        [
            Message(body=packed, inferred=True, content_encoding="gzip"),
            Message(body=b"x", inferred=True, content_encoding="br"),
        ],
    )
    infos = node.ask(entity("getMessageInfo", "packed")).body
    zipped, other = (info["id"] for info in infos)
    cut = content(node, "packed", zipped, limit=4, decompressBeforeLimiting=True)
    assert status(cut)[0] == 200 and gzip.decompress(bytes(cut.body)) == b"0123"
    refused = content(node, "packed", other, limit=4, decompressBeforeLimiting=True)
    assert status(refused)[0] == 400 and "'br'" in status(refused)[1]


def test_an_unknown_message_is_a_404_and_no_message_id_a_400(broker: RunningBroker) -> None:
    node = Node(broker.client())
    send_all(broker, "few", [Message(body="one")])
    assert status(content(node, "few", 99))[0] == 404
    missing = node.ask(entity("getMessageContent", "few"))
    assert status(missing)[0] == 400 and "messageId" in status(missing)[1]


@pytest.fixture
def tls_only(files: dict[str, str]) -> Iterator[RunningBroker]:  # noqa: F811 - fixture
    config = tls_config(files)
    config.broker.confidential_without_tls = "never"  # Broker-J's default
    running = RunningBroker(config)
    yield running
    running.stop()


def ask_over(connection: BlockingConnection, properties: dict[str, Any]) -> Message:
    """One management request on ``connection``, and its reply."""
    try:
        replies = connection.create_receiver(None, dynamic=True)
        requests = connection.create_sender("$management")
        address = replies.remote_source.address
        requests.send(Message(reply_to=address, correlation_id="c", properties=properties))
        reply = replies.receive(timeout=5)
        replies.accept()
        return reply
    finally:
        connection.close()


def test_content_is_confidential_only_tls_gets_it_where_plain_is_never_allowed(
    tls_only: RunningBroker,
    files: dict[str, str],  # noqa: F811 - fixture
) -> None:
    send_all(tls_only, "secret", [Message(body="the plans")])
    position = first_id(Node(tls_only.client()), "secret")
    asked = entity("getMessageContent", "secret", messageId=position)
    plain = ask_over(BlockingConnection(tls_only.url, timeout=5), asked)
    assert status(plain) == (
        403,
        "Operation 'getMessageContent' can only be performed over a secure (AMQPS) connection",
    )
    secure = ask_over(amqps(tls_only, client_domain(files["ca"])), asked)
    assert status(secure)[0] == 200 and bytes(secure.body).endswith(b"the plans")


def test_message_info_with_headers_is_confidential_too_as_broker_j_says(
    tls_only: RunningBroker,
    files: dict[str, str],  # noqa: F811 - fixture
) -> None:
    """Broker-J's ``paramRequiringSecure``: getMessageInfo with includeHeaders true, and
    getMessageInfoById, whose includeHeaders is true unless asked otherwise."""
    send_all(tls_only, "private", [Message(properties={"pin": "1234"}, body="x")])
    position = first_id(Node(tls_only.client()), "private")
    by_id = {"messageId": position}
    listed = ask_over(
        BlockingConnection(tls_only.url, timeout=5), entity("getMessageInfo", "private")
    )
    with_headers = ask_over(
        BlockingConnection(tls_only.url, timeout=5),
        entity("getMessageInfo", "private", includeHeaders=True),
    )
    one = ask_over(
        BlockingConnection(tls_only.url, timeout=5),
        entity("getMessageInfoById", "private", **by_id),
    )
    one_bare = ask_over(
        BlockingConnection(tls_only.url, timeout=5),
        entity("getMessageInfoById", "private", includeHeaders=False, **by_id),
    )
    assert [status(r)[0] for r in (listed, with_headers, one, one_bare)] == [200, 403, 403, 200]
    secure = ask_over(
        amqps(tls_only, client_domain(files["ca"])),
        entity("getMessageInfoById", "private", **by_id),
    )
    assert status(secure)[0] == 200 and secure.body["headers"] == {"pin": "1234"}


def test_the_management_client_keeps_a_binary_answer_after_the_reply_is_gone(
    broker: RunningBroker,
) -> None:
    """Proton's binary body is a view into its message; the CLI's client copies it."""
    send_all(broker, "kept", [Message(body="keep me")])
    with ManagementClient(broker.url) as client:
        position = client.request("getMessageInfo", QUEUE, "kept").body[0]["id"]
        shown = client.request("getMessageContent", QUEUE, "kept", messageId=position).body
        for _ in range(3):  # later replies reuse what the first one held
            assert client.request("getMessageInfo", QUEUE, "kept").ok
    assert shown == b"\x00\x53\x77\xa1\x07keep me"
