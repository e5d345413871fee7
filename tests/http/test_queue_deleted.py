"""A queue deleted while long polls and WebSocket streams wait on it: they are answered at
once (410, close code 4404) instead of waiting on a queue nothing will reach any more."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import aiohttp

from proton_broker.http.gateway import WS_QUEUE_DELETED
from tests.http.conftest import Http
from tests.http.test_websocket import wait_listeners


def delete(http: Http, name: str) -> int:
    broker = http.running.server.broker
    return http.running.call(lambda: broker.delete_queue(name, force=True))


def test_a_waiting_long_poll_gets_a_410_gone_when_its_queue_is_deleted(http: Http) -> None:
    assert http.send("gone", {"id": "a", "payload": 1})[0] == 200
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(http.poll, "gone", "sequence=2", "a", 30.0)
        asyncio.run(wait_listeners(http, 1))
        assert delete(http, "gone") == 1
        status, answer = poll.result(timeout=10)
    assert status == 410  # as sonya answers a poll whose queue was closed meanwhile
    assert "queue 'gone' was deleted" in answer["error"]
    assert http.listeners() == 0


def test_a_websocket_stream_closes_with_4404_when_its_queue_is_deleted(http: Http) -> None:
    assert http.send("gone", {"id": "a", "payload": 1})[0] == 200

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            url = f"{http.ws_base}/queue/listen/ws/gone?sequence=first"
            async with session.ws_connect(url) as ws:
                assert (await asyncio.wait_for(ws.receive_json(), 5))["payload"] == 1
                await wait_listeners(http, 1)
                await asyncio.to_thread(delete, http, "gone")
                closing = await asyncio.wait_for(ws.receive(), 5)
                assert closing.type == aiohttp.WSMsgType.CLOSE
                assert closing.data == WS_QUEUE_DELETED
                assert closing.extra == "queue deleted"
        await wait_listeners(http, 0)

    asyncio.run(scenario())


def test_a_queue_made_again_under_the_same_name_is_followed_afresh(http: Http) -> None:
    http.send("again", {"id": "a", "payload": "old"})
    delete(http, "again")
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(http.poll, "again", "sequence=first", "a", 30.0)
        asyncio.run(wait_listeners(http, 1))  # the poll made the queue again, and waits
        assert http.send("again", {"id": "a", "payload": "new"})[0] == 200
        status, answer = poll.result(timeout=10)
    assert status == 200
    assert (answer["sequence"], answer["payload"]) == (1, "new")
