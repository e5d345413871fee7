"""The web console's JSON API against a real broker, with real AMQP clients beside it: a
session and its CSRF token guard every change, queues are read, made, changed and
deleted through the management layer (with its error texts), and what the console shows
is what AMQP clients see."""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Message
from proton.reactor import Container
from proton.utils import BlockingConnection

from proton_broker.cli.client import ManagementClient
from proton_broker.config import Config
from proton_broker.errors import InvalidField
from proton_broker.management import QUEUE_TYPE
from proton_broker.queues.settings import parse_options
from proton_broker.testing import server_certificates
from tests.conftest import RunningBroker
from tests.http.conftest import Http, http_config
from tests.http.console_client import ConsoleClient, queue_path


def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Wait for ``check()`` to be truthy (the console samples every 0.1 s here)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


@pytest.fixture
def started(start_gateway: Callable[[Config], Http]) -> Http:
    config = http_config()
    config.console.sample_interval = 0.1
    return start_gateway(config)


@pytest.fixture
def console(started: Http) -> ConsoleClient:
    client = ConsoleClient(started.base)
    status, body = client.login()
    assert status == 200 and body["user"] == "anonymous"
    return client


@pytest.fixture
def amqp(started: Http) -> Iterator[BlockingConnection]:
    running: RunningBroker = started.running
    conn = BlockingConnection(running.url, timeout=10)
    yield conn
    conn.close()


def send(conn: BlockingConnection, queue: str, *bodies: str, **properties: Any) -> None:
    sender = conn.create_sender(queue)
    for body in bodies:
        sender.send(Message(body=body, properties=properties or None))
    sender.close()


def depth_of(console: ConsoleClient, name: str) -> int:
    status, body = console.get(queue_path(name))
    assert status == 200, body
    return int(body["attributes"]["queueDepthMessages"])


# ---- pages and sessions ---------------------------------------------------------------------


def test_the_page_is_served_to_anyone_with_a_policy_that_allows_only_its_own_scripts(
    started: Http,
) -> None:
    client = ConsoleClient(started.base)
    status, body, headers = client.request("GET", "/console/")
    assert status == 200 and "<html" in body.lower()
    assert "script-src" not in headers["Content-Security-Policy"]  # default-src 'self' rules
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    status, _, headers = client.request("GET", "/console")
    assert status == 302 and headers["Location"] == "/console/"


def test_the_api_needs_a_session(started: Http) -> None:
    client = ConsoleClient(started.base)
    status, body = client.get("/console/api/overview")
    assert status == 401 and "log in" in body["error"]
    status, body = client.get("/console/api/session")
    assert status == 401 and body["anonymous"] is True  # loopback may stay anonymous


def test_a_session_gives_its_user_and_csrf_token_back_until_logout(console: ConsoleClient) -> None:
    status, body = console.get("/console/api/session")
    assert status == 200 and body == {"user": "anonymous", "csrf": console.csrf}
    assert console.change("POST", "/console/api/logout")[0] == 204
    assert console.get("/console/api/session")[0] == 401


def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(
    console: ConsoleClient,
) -> None:
    status, body = console.change(
        "POST", "/console/api/queues", {"name": "forged", "options": {}}, csrf=False
    )
    assert status == 403 and "X-CSRF-Token" in body["error"]
    assert console.get(queue_path("forged"))[0] == 404


def test_nothing_changes_over_get(console: ConsoleClient, amqp: BlockingConnection) -> None:
    send(amqp, "kept", "a")
    status, _ = console.get(queue_path("kept", "/purge"))
    assert status == 405
    assert depth_of(console, "kept") == 1


def test_a_body_must_be_json(console: ConsoleClient) -> None:
    form = b"name=from-a-form"
    status, body, _ = console.request(
        "POST", "/console/api/queues", form, content_type="text/plain"
    )
    assert status == 415 and "application/json" in body["error"]
    assert console.get(queue_path("from-a-form"))[0] == 404


# ---- queues -------------------------------------------------------------------------------


def test_a_queue_an_amqp_client_creates_is_listed_with_its_depth_and_rates(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "orders", "1", "2", "3")

    def listed() -> Any:
        body = console.get("/console/api/queues?filter=ord")[1]
        rows = [q for q in body["queues"] if q["name"] == "orders"]
        return rows and rows[0]["rate_in"] is not None and rows[0]

    row = until(listed)
    assert row["depth"] == 3 and row["type"] == "standard" and row["consumers"] == 0
    assert row["rate_in"] == 0.0  # the three arrived before the two samples compared
    assert console.get("/console/api/queues?filter=nothing")[1] == {"total": 0, "queues": []}


def test_a_queue_page_has_its_attributes_what_may_change_and_a_depth_plot(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "plotted", "a")
    console.get(queue_path("plotted"))  # looked at: plotted from now on
    send(amqp, "plotted", "b", "c")
    body = until(
        lambda: (b := console.get(queue_path("plotted"))[1])["series"]["depth"][-1:] == [3] and b
    )
    assert body["attributes"]["name"] == "plotted"
    assert "maximumDeliveryAttempts" in body["editable"] and "priorities" not in body["editable"]
    assert body["series"]["t"] == sorted(body["series"]["t"])


def test_creating_a_queue_takes_every_option_the_attach_takes(console: ConsoleClient) -> None:
    status, body = console.change(
        "POST", "/console/api/queues", {"name": "ranked", "options": {"priorities": 5}}
    )
    assert status == 201 and body["attributes"]["priorities"] == 5
    assert body["attributes"]["qpid-type"] == "priority"
    assert body["attributes"]["type"] == "org.apache.qpid.PriorityQueue"
    assert body["attributes"]["durable"] is False  # "durable" left unticked
    assert console.change("POST", "/console/api/queues", {"name": "ranked"})[0] == 409


def test_an_invalid_option_is_refused_with_the_words_an_attach_gets(console: ConsoleClient) -> None:
    with pytest.raises(InvalidField) as attach:
        parse_options({"priorities": "lots"})
    status, body = console.change(
        "POST", "/console/api/queues", {"name": "bad", "options": {"priorities": "lots"}}
    )
    assert status == 400 and attach.value.description in body["error"]
    assert console.get(queue_path("bad"))[0] == 404


def test_the_options_offered_are_those_the_parser_knows(console: ConsoleClient) -> None:
    status, body = console.get("/console/api/options")
    offered = {option["name"]: option for option in body["options"]}
    assert status == 200
    assert (
        offered["priorities"]["type"] == "int"
        and "x-qpid-priorities" in (offered["priorities"]["aliases"])
    )
    assert "RING" in offered["overflowPolicy"]["choices"]
    for option in body["options"]:  # every name offered is one the parser takes
        needs = {"qpid.priorities": 2} if "fairshare" in option["name"] else {}  # shares levels
        assert not parse_options({option["name"]: _sample(option), **needs}).unknown


def _sample(option: dict[str, Any]) -> Any:
    if option["choices"]:
        return option["choices"][0]
    return {"bool": True, "int": 1, "number": 1.0, "map": {}}.get(option["type"], "k")


def test_a_live_setting_changes_and_a_fixed_one_is_refused(console: ConsoleClient) -> None:
    console.change("POST", "/console/api/queues", {"name": "live", "options": {}})
    status, body = console.change(
        "PUT", queue_path("live"), {"options": {"maximumDeliveryAttempts": 3}}
    )
    assert status == 200 and body["attributes"]["maximumDeliveryAttempts"] == 3
    status, body = console.change("PUT", queue_path("live"), {"options": {"priorities": 3}})
    assert status == 400 and "priorities" in body["error"]


def test_browsing_shows_the_first_messages_and_takes_none(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    sender = amqp.create_sender("browsed")
    sender.send(Message(body="hello", properties={"colour": "red"}, content_type="text/plain"))
    sender.send(Message(body=b"\x00\x01\xff"))
    status, body = console.get(queue_path("browsed", "/messages?count=5"))
    first, second = body["messages"]
    assert status == 200 and first["body"] == "hello" and first["body_encoding"] == "text"
    assert first["application_properties"] == {"colour": "red"}
    assert first["content_type"] == "text/plain" and first["state"] == "available"
    assert second["body_encoding"] == "hex" and second["body"] == "00 01 ff"
    assert depth_of(console, "browsed") == 2
    assert amqp.create_receiver("browsed").receive(timeout=5).body == "hello"


def test_bodies_are_withheld_over_plain_http_where_management_holds_them_confidential(
    start_gateway: Callable[[Config], Http], tmp_path: Path
) -> None:
    """broker.confidential_without_tls decides for the console as for $management: from
    where it does not allow, a browsed message comes without its body and application
    properties (getMessageContent is a 403 there); over HTTPS they are shown."""
    files = server_certificates(tmp_path)
    plain = start_gateway(http_config(confidential_without_tls="never"))
    config = http_config(confidential_without_tls="never")
    config.http.tls = True
    config.tls.cert_file, config.tls.key_file = str(files["cert"]), str(files["key"])
    secured = start_gateway(config)
    message = Message(body="secret", properties={"pin": 1234}, content_type="text/plain")
    for gateway in (plain, secured):
        conn = BlockingConnection(gateway.running.url, timeout=10)
        conn.create_sender("private").send(message)
        conn.close()

    console = ConsoleClient(plain.base)
    assert console.login()[0] == 200
    status, body = console.get(queue_path("private", "/messages"))
    (shown,) = body["messages"]
    assert status == 200 and shown["body"] is None and shown["application_properties"] is None
    assert "broker.confidential_without_tls" in shown["withheld"]
    assert shown["content_type"] == "text/plain" and shown["body_size"] == len("secret")
    with ManagementClient(plain.running.url) as management:  # the same rule over AMQP
        reply = management.request(
            "getMessageContent", QUEUE_TYPE, "private", messageId=shown["sequence"]
        )
    assert reply.status == 403

    host, port = secured.running.app.http.address
    context = ssl.create_default_context(cafile=str(files["ca"]))
    over_https = ConsoleClient(f"https://localhost:{port}", context)
    assert over_https.login()[0] == 200
    (shown,) = over_https.get(queue_path("private", "/messages"))[1]["messages"]
    assert shown["body"] == "secret" and shown["application_properties"] == {"pin": 1234}
    assert "withheld" not in shown


def test_a_purge_removes_the_available_messages_and_leaves_a_consumers_own(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "purged", "held", "b", "c")
    receiver = amqp.create_receiver("purged", credit=1)
    held = receiver.receive(timeout=5)  # acquired, not settled
    status, body = console.change("POST", queue_path("purged", "/purge"))
    assert status == 200 and body == {"purged": 2}
    assert held.body == "held" and depth_of(console, "purged") == 1


def test_a_purge_of_stored_messages_is_answered_only_once_their_removals_are_on_disk(
    start_gateway: Callable[[Config], Http],
) -> None:
    started = start_gateway(http_config(store="sqlite"))
    console = ConsoleClient(started.base)
    assert console.login()[0] == 200
    made = {"name": "kept-purged", "options": {"durable": True}}
    assert console.change("POST", "/console/api/queues", made)[0] == 201
    amqp = BlockingConnection(started.running.url, timeout=10)
    sender = amqp.create_sender("kept-purged")
    for body in ("a", "b"):
        sender.send(Message(body=body, durable=True))  # answered once written
    amqp.close()
    store = started.running.broker.store
    writing = threading.Event()
    store._before_write = lambda: writing.wait(10)  # type: ignore[union-attr] # holds the writer
    answers: list[Any] = []
    purging = threading.Thread(
        target=lambda: answers.append(console.change("POST", queue_path("kept-purged", "/purge")))
    )
    try:
        purging.start()
        purging.join(0.5)
        assert answers == []  # not while the removals wait
    finally:
        writing.set()
    purging.join(10)
    assert answers == [(200, {"purged": 2})]


def test_a_queue_holding_messages_is_deleted_only_with_force(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "doomed", "a")
    status, body = console.change("DELETE", queue_path("doomed"))
    assert status == 409 and "force" in body["error"]
    status, body = console.change("DELETE", queue_path("doomed") + "?force=maybe")
    assert status == 400 and "'force' must be a boolean" in body["error"]
    assert console.change("DELETE", queue_path("doomed") + "?force=true")[0] == 204
    assert console.get(queue_path("doomed"))[0] == 404


def test_a_test_message_reaches_an_amqp_consumer(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    console.change("POST", "/console/api/queues", {"name": "tested", "options": {}})
    status, body = console.change(
        "POST",
        queue_path("tested", "/messages"),
        {"body": "ping", "content_type": "text/plain", "properties": {"n": 7}},
    )
    assert status == 201 and body["sequence"] >= 1
    message = amqp.create_receiver("tested").receive(timeout=5)
    assert (message.body, message.properties, message.content_type) == (
        "ping",
        {"n": 7},
        "text/plain",
    )


def test_a_test_message_with_a_field_it_does_not_know_is_refused(console: ConsoleClient) -> None:
    console.change("POST", "/console/api/queues", {"name": "strict", "options": {}})
    status, body = console.change("POST", queue_path("strict", "/messages"), {"bodee": "x"})
    assert status == 400 and "bodee" in body["error"]
    assert depth_of(console, "strict") == 0


# ---- the broker ---------------------------------------------------------------------------


def test_the_overview_counts_and_plots_the_broker(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "counted", "a", "b")
    body = until(
        lambda: (b := console.get("/console/api/overview")[1])["series"]["depth"][-1:] == [2] and b
    )
    assert body["queues"] == 1 and body["messages"] == 2 and body["connections"] == 1
    assert body["store"] == {"kind": "memory", "path": None, "size": None, "disk_free": None}
    assert body["memory"]["rss"] > 0 and body["uptime"] >= 0


def test_connections_are_listed_and_one_closed_by_the_console_ends_with_forced(
    console: ConsoleClient, started: Http
) -> None:
    conn = BlockingConnection(
        started.running.url, timeout=10, container=Container(container_id="the-client")
    )
    try:
        listed = console.get("/console/api/connections")[1]["connections"]
        (mine,) = [c for c in listed if c["container"] == "the-client"]
        assert mine["user"] == "anonymous" and mine["address"].startswith("127.0.0.1")
        receiver = conn.create_receiver("briefly")
        assert _links_of(console, "the-client") == 1
        receiver.close()
        assert until(lambda: _links_of(console, "the-client") == 0)  # closed links go
        assert console.change("DELETE", f"/console/api/connections/{mine['id']}")[0] == 204
        with pytest.raises(ConnectionException, match="connection:forced"):
            until(lambda: conn.create_sender("after") and False, timeout=5)
    finally:
        with contextlib.suppress(ConnectionException):
            conn.close()
    assert console.change("DELETE", "/console/api/connections/999999")[0] == 404


def test_a_connection_shows_the_messages_it_sent_and_their_rate(
    console: ConsoleClient, started: Http
) -> None:
    conn = BlockingConnection(
        started.running.url, timeout=10, container=Container(container_id="producer")
    )
    sender = conn.create_sender("rated")

    def sending() -> Any:
        for _ in range(10):
            sender.send(Message(body="m"))
        listed = console.get("/console/api/connections")[1]["connections"]
        mine = next(c for c in listed if c["container"] == "producer")
        return (mine["rate_in"] or 0) > 0 and mine

    try:
        mine = until(sending)
        assert mine and mine["messages_in"] >= 10 and mine["rate_out"] == 0.0
    finally:
        conn.close()


def _links_of(console: ConsoleClient, container: str) -> int:
    listed = console.get("/console/api/connections")[1]["connections"]
    return int(next(c["links"] for c in listed if c["container"] == container))


def test_the_logs_show_recent_records_by_operational_code(
    console: ConsoleClient, amqp: BlockingConnection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proton_broker")  # as the broker's own start sets it
    send(amqp, "logged", "a")
    records = console.get("/console/api/logs?code=QUE-1001")[1]["records"]
    assert any('"logged"' in r["message"] for r in records)
    assert all(r["code"] == "QUE-1001" for r in records)


def test_exchanges_and_bindings_are_listed(console: ConsoleClient) -> None:
    exchanges = console.get("/console/api/exchanges")[1]["exchanges"]
    assert {"amq.direct", "amq.topic", "amq.fanout", "amq.match"} <= {e["name"] for e in exchanges}
    assert console.get("/console/api/bindings")[1] == {"bindings": []}


def test_a_queue_page_lists_its_consumers_with_their_connection(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    send(amqp, "consumed", "a", "b")
    receiver = amqp.create_receiver("consumed", name="the-consumer", credit=5)
    receiver.receive(timeout=5)
    (consumer,) = console.get(queue_path("consumed"))[1]["consumers"]
    assert consumer["link"] == "the-consumer" and consumer["browse"] is False
    assert consumer["user"] == "anonymous" and consumer["delivered"] == 2
    assert consumer["unsettled"] == 2


def test_subscriptions_in_use_are_listed_with_their_exchange(
    console: ConsoleClient, amqp: BlockingConnection
) -> None:
    amqp.create_receiver("amq.topic", name="news-reader")
    (subscription,) = console.get("/console/api/subscriptions")[1]["subscriptions"]
    assert subscription["name"].endswith("_news-reader") and subscription["links"] == 1
    assert subscription["exchange"] == "amq.topic"


def test_with_many_queues_samples_are_taken_less_often(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config()
    config.console.sample_interval = 0.05
    running = start_gateway(config).running
    broker = running.broker
    running.call(lambda: [broker.declare(f"q{i}", {}) for i in range(20_000)])
    rates = running.app.http.console.rates
    first = running.call(lambda: len(rates.broker))
    time.sleep(1.0)  # 20 samples at the interval; a sample of 20,000 queues takes ~40 ms
    taken = running.call(lambda: len(rates.broker)) - first
    assert 1 <= taken <= 5


# ---- input no AMQP client could send ----------------------------------------------------------


def test_a_name_that_is_not_unicode_text_is_refused_and_every_listing_still_works(
    console: ConsoleClient, started: Http
) -> None:
    status, body = console.change("POST", "/console/api/queues", {"name": "a\ud800"})
    assert status == 400 and "lone surrogate" in body["error"]
    assert console.get("/console/api/queues")[0] == 200
    with ManagementClient(started.running.url) as management:
        assert management.node("QUERY", {}, entityType=QUEUE_TYPE).status == 200
    with urllib.request.urlopen(started.base + "/metrics", timeout=10) as metrics:
        assert metrics.status == 200


def test_an_option_beyond_64_bits_is_refused_and_management_still_answers(
    console: ConsoleClient, started: Http
) -> None:
    huge = 2**70
    status, body = console.change(
        "POST",
        "/console/api/queues",
        {"name": "big", "options": {"maximumQueueDepthMessages": huge}},
    )
    assert status == 400 and "fits in 64 bits" in body["error"]
    with ManagementClient(started.running.url) as management:
        as_text = {"name": "big", "maximumQueueDepthMessages": str(huge)}
        refused = management.request("CREATE", QUEUE_TYPE, "big", as_text)
        assert refused.status == 400 and "fits in 64 bits" in refused.description
        assert management.node("QUERY", {}, entityType=QUEUE_TYPE).status == 200
    status, body = console.change(
        "POST", queue_path("tested-big", "/messages"), {"body": "x", "properties": {"n": huge}}
    )
    assert status in (400, 404)  # the queue's existence is checked first
    console.change("POST", "/console/api/queues", {"name": "tested-big", "options": {}})
    status, body = console.change(
        "POST", queue_path("tested-big", "/messages"), {"body": "x", "properties": {"n": huge}}
    )
    assert status == 400 and "64-bit" in body["error"]


def test_a_test_message_the_queues_filter_does_not_select_is_refused_with_409(
    console: ConsoleClient,
) -> None:
    options = {"qpid.filter": "colour = 'red'"}
    assert console.change("POST", "/console/api/queues", {"name": "reds", "options": options})[0]
    status, body = console.change(
        "POST", queue_path("reds", "/messages"), {"body": "x", "properties": {"colour": "blue"}}
    )
    assert status == 409 and "does not select it" in body["error"]
    status, body = console.change(
        "POST", queue_path("reds", "/messages"), {"body": "x", "properties": {"colour": "red"}}
    )
    assert (status, body["sequence"]) == (201, 1)
    assert depth_of(console, "reds") == 1
