"""1,000 idle long polls held at once (no thread each), all answered by one send; long polls
that ask again as soon as they are answered, on a large history, leave the broker's loop
free to serve AMQP clients."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import aiohttp
from proton import Message

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.http.conftest import Http, http_config

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


VERSIONS, KEYS = 50_000, 500  # a large history: 100 versions of each key


def fill(running: RunningBroker, queue: str) -> None:
    """VERSIONS versions over KEYS keys, sent settled over AMQP as fast as credit allows."""
    client = running.client()
    link = client.sender(queue)
    sent = 0
    while sent < VERSIONS:
        while link.credit > 0 and sent < VERSIONS:
            message = Message(body=sent, properties={"id": f"k{sent % KEYS}"})
            client.send(link, message, settled=True, pump=False)
            sent += 1
        client.pump(0.01)
    client.pump(0.2)


def test_an_amqp_client_is_served_promptly_while_long_polls_hammer_a_large_history(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config()
    config.queues = {"big": {"sequenceKey": "id"}}
    http = start_gateway(config)
    fill(http.running, "big")
    newest = VERSIONS // KEYS
    deadline = time.monotonic() + 30
    while http.poll("big", "sequence=last&timeout=0", key=f"k{KEYS - 1}")[1]["sequence"] < newest:
        assert time.monotonic() < deadline, "the history was not filled"
    stop = threading.Event()
    answered: list[tuple[int, object]] = []

    def hammer(query: str) -> None:  # each poll asks again as soon as it is answered
        while not stop.is_set():
            answered.append(http.poll("big", query, timeout=60))

    queries = ["sequence=first&timeout=0", "sequence=last&timeout=0", f"sequence={newest}"]
    hammers = [threading.Thread(target=hammer, args=(q,)) for q in [*queries, queries[0]]]
    for thread in hammers:
        thread.start()
    try:
        time.sleep(0.5)
        started = time.monotonic()
        client = http.running.client()  # a new connection, a sender, one transfer settled
        link = client.sender("other")
        client.wait_settled(client.send(link, Message(body="served")), timeout=10)
        assert time.monotonic() - started < 10
    finally:
        stop.set()
        for thread in hammers:
            thread.join(60)
    assert answered and all(status == 200 for status, _ in answered)
    assert answered[0][1] is not None
