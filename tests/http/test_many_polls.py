"""1,000 idle long polls held at once (no thread each), all answered by one send."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp

from tests.http.conftest import Http

POLLS = 1000


def test_a_thousand_waiting_polls_are_all_answered_by_one_send(http: Http) -> None:
    http.send("crowd", {"id": "k", "payload": "before"})  # sequence 1: the polls want 2

    async def scenario() -> list[tuple[int, object]]:
        connector = aiohttp.TCPConnector(limit=0)  # one connection per poll
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def poll(i: int) -> tuple[int, object]:
                key = "/k" if i % 2 else ""  # half follow the key, half the whole queue
                url = f"{http.base}/queue/listen/longpoll/crowd{key}?sequence=2&timeout=60"
                async with session.get(url) as response:
                    return response.status, await response.json()

            polls = [asyncio.ensure_future(poll(i)) for i in range(POLLS)]
            deadline = time.monotonic() + 15
            while await asyncio.to_thread(http.listeners) < POLLS:
                assert time.monotonic() < deadline, "the polls were not all held"
                assert not any(p.done() for p in polls), "a poll ended early"
                await asyncio.sleep(0.05)
            assert threading.active_count() < 50  # held as futures, not a thread each
            status, _ = await asyncio.to_thread(
                http.send, "crowd", {"id": "k", "payload": "for everyone"}
            )
            assert status == 200
            return await asyncio.gather(*polls)

    answers = asyncio.run(scenario())
    assert len(answers) == POLLS
    assert all(a == (200, {"id": "k", "sequence": 2, "payload": "for everyone"}) for a in answers)
    assert http.listeners() == 0
