"""The ACL file over HTTP: the gateway's sends are publishes, its listens are browses, and
``/metrics`` is ``access broker``; a refusal is a 403 and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from proton_broker.testing import BrokerProcess
from tests.amqp.test_acl import PASSWORD, TEMPORARY, depth, start_secured
from tests.http.test_auth import call

RULES = (
    TEMPORARY
    + """\
acl allow alice all
acl allow all access queue name=hist.*
acl allow bob create queue name=hist.*
acl allow bob publish exchange name=amq.default routingkey=hist.bob
acl allow carol browse queue name=hist.*
acl allow carol access broker
acl deny all all
"""
)
SEND = {"id": "k", "payload": "v"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_secured(
        tmp_path_factory.mktemp("http-acl"), RULES, "--http-port", "0", "--metrics-port", "0"
    )
    yield process
    process.stop()


def test_a_send_is_a_publish_to_the_queue(gateway: BrokerProcess) -> None:
    sent = call(f"{gateway.http_base}/queue/send/hist.bob", SEND, user="bob", password=PASSWORD)
    assert sent[0] == 200
    status, _, body = call(
        f"{gateway.http_base}/queue/send/hist.carol", SEND, user="bob", password=PASSWORD
    )
    assert status == 403 and "bob" in body
    assert depth(gateway, "hist.carol") is None  # refused before anything was created


def test_a_listen_is_a_browse(gateway: BrokerProcess) -> None:
    call(f"{gateway.http_base}/queue/send/hist.bob", SEND, user="bob", password=PASSWORD)
    poll = f"{gateway.http_base}/queue/listen/longpoll/hist.bob/k?sequence=1&timeout=1"
    status, _, body = call(poll, user="carol", password=PASSWORD)
    assert status == 200 and json.loads(body)["payload"] == "v"
    assert call(poll, user="bob", password=PASSWORD)[0] == 403  # bob may not receive


def test_the_metrics_need_access_broker_on_both_listeners(gateway: BrokerProcess) -> None:
    for base in (gateway.http_base, f"http://127.0.0.1:{gateway.metrics_port}"):
        assert call(f"{base}/metrics", user="carol", password=PASSWORD)[0] == 200
        status, _, body = call(f"{base}/metrics", user="bob", password=PASSWORD)
        assert status == 403 and "metrics" in body


def test_the_gateway_refuses_a_user_the_file_does_not_name(gateway: BrokerProcess) -> None:
    url = f"{gateway.http_base}/queue/send/hist.bob"
    status, _, body = call(url, SEND, user="erin", password=PASSWORD)
    assert status == 403 and "erin" in body
