"""The WebSocket stream: the kept versions from a sequence, then every new one."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from proton import Message

from proton_broker.http.gateway import STREAM_BACKLOG
from tests.http.conftest import Http


async def receive(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[Any]:
    return [await asyncio.wait_for(ws.receive_json(), 5) for _ in range(count)]


async def wait_listeners(http: Http, count: int) -> None:
    deadline = time.monotonic() + 5
    while await asyncio.to_thread(http.listeners) != count:
        assert time.monotonic() < deadline, f"listeners never reached {count}"
        await asyncio.sleep(0.02)


def test_a_stream_replays_from_a_sequence_then_follows_new_versions(http: Http) -> None:
    for n in range(1, 4):
        http.send("ws", {"id": "a", "payload": n})
    http.send("ws", {"id": "b", "payload": "b1"})

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            url = f"{http.ws_base}/queue/listen/ws/ws/a?sequence=2"
            async with session.ws_connect(url) as ws:
                assert [(m["sequence"], m["payload"]) for m in await receive(ws, 2)] == [
                    (2, 2),
                    (3, 3),
                ]
                await wait_listeners(http, 1)
                await asyncio.to_thread(http.send, "ws", {"id": "b", "payload": "b2"})
                await asyncio.to_thread(http.send, "ws", {"id": "a", "payload": 4})
                assert await receive(ws, 1) == [{"id": "a", "sequence": 4, "payload": 4}]
            await wait_listeners(http, 0)  # the client closed: its listener is gone

            url = f"{http.ws_base}/queue/listen/ws/ws?sequence=first"
            async with session.ws_connect(url) as ws:  # every key, in arrival order
                got = await receive(ws, 6)
                assert [(m["id"], m["sequence"]) for m in got] == [
                    ("a", 1),
                    ("a", 2),
                    ("a", 3),
                    ("b", 1),
                    ("b", 2),
                    ("a", 4),
                ]

            url = f"{http.ws_base}/queue/listen/ws/ws/a"
            async with session.ws_connect(url) as ws:  # no sequence: new versions only
                await wait_listeners(http, 1)
                await asyncio.to_thread(http.send, "ws", {"id": "a", "payload": 5})
                assert (await receive(ws, 1))[0]["sequence"] == 5

    asyncio.run(scenario())


def test_a_stream_on_an_empty_queue_gets_the_first_version_when_it_comes(http: Http) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"{http.ws_base}/queue/listen/ws/empty?sequence=1") as ws:
                await wait_listeners(http, 1)
                for n in range(1, 4):
                    await asyncio.to_thread(http.send, "empty", {"id": "k", "payload": n})
                assert [m["sequence"] for m in await receive(ws, 3)] == [1, 2, 3]

    asyncio.run(scenario())


def test_a_refused_stream_answers_json_before_any_upgrade(http: Http) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            url = f"{http.base}/queue/listen/ws/q?sequence=soon"
            async with session.get(url) as response:
                assert response.status == 400
                assert (await response.json())["field"] == "sequence"
            async with session.get(f"{http.base}/queue/listen/ws/q") as response:
                assert response.status == 400  # a plain GET: no upgrade asked for
                assert "WebSocket" in (await response.json())["error"]

    asyncio.run(scenario())


def test_a_stream_replaying_more_than_its_backlog_follows_on_without_gap_or_repeat(
    http: Http,
) -> None:
    kept, keys, payload = 2 * STREAM_BACKLOG, 40, "x" * 2000  # more than sockets hold
    client = http.running.client()
    link = client.sender("long", node_properties={"sequenceKey": "id"})
    sent = 0
    while sent < kept:
        while link.credit > 0 and sent < kept:
            body = Message(body=payload, properties={"id": f"k{sent % keys}"})
            client.send(link, body, settled=True, pump=False)
            sent += 1
        client.pump(0.01)
    client.pump(0.2)
    expected = [(f"k{n % keys}", n // keys + 1) for n in range(kept)]
    new = [("k0", kept // keys + 1 + n) for n in range(5)]

    async def scenario() -> list[tuple[str, int]]:
        async with aiohttp.ClientSession() as session:
            url = f"{http.ws_base}/queue/listen/ws/long?sequence=first"
            async with session.ws_connect(url, max_msg_size=0) as ws:
                for _ in new:  # subscribed (before the upgrade): the replay is under way
                    await asyncio.to_thread(http.send, "long", {"id": "k0", "payload": "new"})
                got = await receive(ws, kept + len(new))
                return [(m["id"], m["sequence"]) for m in got]

    assert asyncio.run(scenario()) == expected + new
