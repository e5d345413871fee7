"""Cross-site requests: a web page from another site cannot make a visitor's browser send
to or listen on the gateway (a send must be JSON, which a browser sends elsewhere only after
a preflight the gateway does not answer; an ``Origin`` that is not the gateway's own is a
403), while programs, which send no ``Origin``, and the gateway's own origin are served."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from http.client import HTTPConnection
from typing import Any

import aiohttp
import pytest

from proton_broker.config import Config
from tests.http.conftest import Http, http_config

FOREIGN = "http://evil.example"
SEND = json.dumps({"id": "k", "payload": "x"}).encode()


def ask(
    http: Http, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, Any]:
    """(status, JSON body or None) of one request with exactly ``headers`` (and Host)."""
    host, port = http.running.app.http.address
    conn = HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, body, {k.replace("_", "-"): v for k, v in headers.items()})
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def queues(http: Http) -> set[str]:
    return set(http.running.call(lambda: list(http.running.broker.queues)))


def test_a_send_whose_body_is_not_declared_json_is_refused_with_415_and_nothing_is_sent(
    http: Http,
) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, refusal = ask(http, "POST", "/queue/send/q", SEND, Content_Type=content_type)
        assert (status, refusal["status"]) == (415, 415), content_type
        assert "Content-Type: application/json" in refusal["error"]
    assert ask(http, "POST", "/queue/send/q", SEND)[0] == 415  # no Content-Type at all
    assert "q" not in queues(http)  # refused before the queue was made on demand
    status, sent = ask(
        http, "POST", "/queue/send/q", SEND, Content_Type="application/json; charset=utf-8"
    )
    assert (status, sent["sequence"]) == (200, 1)


def test_a_request_from_a_page_of_another_origin_is_refused_with_403_and_does_nothing(
    http: Http,
) -> None:
    json_type = "application/json"
    other_scheme = "https" + http.base.removeprefix("http")  # same host and port
    for origin in (FOREIGN, "null", other_scheme, http.base + "0"):
        status, refusal = ask(
            http, "POST", "/queue/send/q", SEND, Content_Type=json_type, Origin=origin
        )
        assert (status, refusal["status"]) == (403, 403), origin
        assert refusal["error"].startswith(f"cross-origin request refused: Origin {origin!r}")
    status, refusal = ask(http, "GET", "/queue/listen/longpoll/q?timeout=0", Origin=FOREIGN)
    assert status == 403 and "is not this gateway's origin" in refusal["error"]
    assert "q" not in queues(http)  # neither made on demand nor sent to
    # the gateway's own origin (a page it would serve) and a program (no Origin) are served
    sent = ask(http, "POST", "/queue/send/q", SEND, Content_Type=json_type, Origin=http.base)
    assert sent == (200, {"id": "k", "sequence": 1, "payload": "x"})
    status, version = ask(http, "GET", "/queue/listen/longpoll/q?sequence=1", Origin=http.base)
    assert (status, version["sequence"]) == (200, 1)
    assert http.poll("q", "sequence=1")[1]["payload"] == "x"


def test_a_websocket_from_another_origin_is_refused_before_the_upgrade(http: Http) -> None:
    http.send("ws", {"id": "k", "payload": 1})
    url = f"{http.ws_base}/queue/listen/ws/ws?sequence=1"

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(url, origin=FOREIGN)
            assert refused.value.status == 403
            for origin in (http.base, None):  # its own origin, and a program
                async with session.ws_connect(url, origin=origin) as ws:
                    assert (await asyncio.wait_for(ws.receive_json(), 5))["payload"] == 1

    asyncio.run(scenario())
    status, refusal = ask(
        http,
        "GET",
        "/queue/listen/ws/ws",
        Origin=FOREIGN,
        Connection="Upgrade",
        Upgrade="websocket",
        Sec_WebSocket_Key="dGhlIHNhbXBsZSBub25jZQ==",
        Sec_WebSocket_Version="13",
    )
    assert status == 403 and "cross-origin request refused" in refusal["error"]


def test_another_origin_is_refused_before_any_credentials_are_asked_for(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config()
    config.sasl.anonymous = "never"
    users_only = start_gateway(config)
    assert ask(users_only, "GET", "/queue/listen/longpoll/q?timeout=0")[0] == 401
    status, refusal = ask(users_only, "GET", "/queue/listen/longpoll/q?timeout=0", Origin=FOREIGN)
    assert status == 403 and "cross-origin" in refusal["error"]


def test_a_get_another_sites_page_makes_is_refused_by_its_fetch_metadata_and_makes_nothing(
    http: Http,
) -> None:
    poll = "/queue/listen/longpoll/orders?timeout=0"
    for site in ("cross-site", "same-site"):  # an <img> elsewhere: no Origin is sent
        status, refusal = ask(http, "GET", poll, Sec_Fetch_Site=site, Sec_Fetch_Mode="no-cors")
        assert status == 403 and "cross-site request refused" in refusal["error"], site
    assert "orders" not in queues(http)
    for site in ("same-origin", "none"):  # the gateway's own page, a typed-in URL
        assert ask(http, "GET", poll, Sec_Fetch_Site=site)[0] == 204, site
