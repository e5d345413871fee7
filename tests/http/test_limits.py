"""The gateway's limits (``http.max_body_size``, ``read_timeout``, ``max_long_polls``) and
deeply nested JSON: each refusal is a JSON answer (413, 408, 503, 400) or, for headers that
never finish, a closed connection, and the broker goes on serving everyone else. Run over
real sockets against a broker configured with small limits."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPConnection
from typing import Any

import aiohttp
import pytest

from proton_broker import config
from proton_broker.config import Config
from tests.http.conftest import Http, http_config
from tests.http.console_client import ConsoleClient, queue_path
from tests.http.test_queue_deleted import delete

MAX_BODY = 1000
READ_TIMEOUT = 1.0
MAX_POLLS = 2
LATE = 1.5  # seconds past a deadline a cut-off may come (a loaded test machine)


@pytest.fixture
def limited(start_gateway: Callable[[Config], Http]) -> Http:
    config = http_config()
    config.http.max_body_size = MAX_BODY
    config.http.read_timeout = READ_TIMEOUT
    config.http.max_long_polls = MAX_POLLS
    return start_gateway(config)


def connect(http: Http) -> socket.socket:
    return socket.create_connection(http.running.app.http.address, timeout=5)


@dataclass
class Trickled:
    received: bytes  # all the server sent
    answered_after: float | None  # seconds until its first byte came, None: nothing came
    closed_after: float  # seconds until it closed the connection

    def answer(self) -> tuple[int, dict[str, str], Any]:
        """(status, headers in lower case, the JSON body) of the response received."""
        head, _, body = self.received.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines)
        return int(status_line.split()[1]), headers, json.loads(body)


def trickle(
    sock: socket.socket, byte: bytes = b"x", every: float = 0.1, give_up: float = 10.0
) -> Trickled:
    """Send ``byte`` every ``every`` seconds (``b""``: just wait) and collect what comes
    back, until the server closes the connection."""
    start = time.monotonic()
    received, answered_after = b"", None
    sock.settimeout(every)
    while time.monotonic() - start < give_up:
        try:
            sock.sendall(byte)
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        if answered_after is None:
            answered_after = time.monotonic() - start
        received += chunk
    return Trickled(received, answered_after, time.monotonic() - start)


def hold_poll(http: Http, queue: str, query: str = "sequence=99&timeout=30") -> HTTPConnection:
    """A long poll sent on a connection of its own; its answer is read with ``answer``."""
    host, port = http.running.app.http.address
    connection = HTTPConnection(host, port, timeout=10)
    connection.request("GET", f"/queue/listen/longpoll/{queue}?{query}")
    return connection


def answer(connection: HTTPConnection) -> tuple[int, Any]:
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    return response.status, json.loads(raw) if raw else None


def eventually(condition: Callable[[], bool], what: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {within} s"
        time.sleep(0.02)


def a_poll_is_accepted(http: Http) -> bool:
    """A poll that would not wait (timeout=0) is taken (204) rather than refused (503)."""
    status, _ = http.poll("probe", "timeout=0")
    assert status in (204, 503)
    return status == 204


def still_serves(http: Http) -> None:
    status, stored = http.send("after", {"id": "k", "payload": "fine"})
    assert status == 200 and stored["payload"] == "fine"
    assert http.poll("after", "sequence=last", key="k")[1] == stored


# ---- defaults -------------------------------------------------------------------------------


def test_the_limits_are_on_by_default() -> None:
    http = config.load(None, environ={}).http
    assert (http.max_body_size, http.read_timeout, http.max_long_polls) == (
        1048576,
        10.0,
        10000,
    )


# ---- max_body_size ----------------------------------------------------------------------------


def test_a_body_over_max_body_size_is_refused_with_413(limited: Http) -> None:
    body = json.dumps({"id": "big", "payload": "x" * (MAX_BODY * 5)}).encode()
    status, refusal = limited.request("POST", "/queue/send/sized", body)
    assert (status, refusal["status"]) == (413, 413)
    assert "max_body_size (1000 bytes)" in refusal["error"]
    just_fits = json.dumps({"id": "ok", "payload": "x" * (MAX_BODY - 40)}).encode()
    assert len(just_fits) <= MAX_BODY
    assert limited.request("POST", "/queue/send/sized", just_fits)[0] == 200
    assert limited.poll("sized", "sequence=first")[1]["id"] == "ok"  # the big one not stored
    still_serves(limited)


def test_a_chunked_body_is_refused_with_413_as_soon_as_it_grows_past_the_limit(
    limited: Http,
) -> None:
    with connect(limited) as sock:
        sock.sendall(
            b"POST /queue/send/sized HTTP/1.1\r\nHost: test\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % (MAX_BODY * 2)
            + b"x" * (MAX_BODY * 2)
            + b"\r\n"
        )  # no size declared and no last chunk: the body never ends
        got = trickle(sock, b"")
    assert got.answered_after is not None and got.answered_after < 1.0
    status, _, refusal = got.answer()
    assert status == 413 and "max_body_size" in refusal["error"]
    still_serves(limited)


# ---- read_timeout -----------------------------------------------------------------------------


def test_a_client_that_trickles_its_headers_is_cut_off_after_read_timeout(
    limited: Http,
) -> None:
    with connect(limited) as sock:
        sock.sendall(b"POST /queue/send/slow HTTP/1.1\r\nX-Slow: ")
        got = trickle(sock)  # a header that never ends
    assert got.received == b""  # no request yet to answer: the connection is just closed
    assert READ_TIMEOUT - 0.1 < got.closed_after < READ_TIMEOUT + LATE
    still_serves(limited)


def test_a_connection_that_sends_nothing_is_closed_after_read_timeout(limited: Http) -> None:
    with connect(limited) as sock:
        start = time.monotonic()
        sock.settimeout(READ_TIMEOUT + 5)
        assert sock.recv(1) == b""
        assert READ_TIMEOUT - 0.1 < time.monotonic() - start < READ_TIMEOUT + LATE
    still_serves(limited)


def test_a_client_that_trickles_its_body_is_answered_408_after_read_timeout(
    limited: Http,
) -> None:
    with connect(limited) as sock:
        sock.sendall(
            b"POST /queue/send/slow HTTP/1.1\r\nHost: test\r\nContent-Length: 500\r\n"
            b"Content-Type: application/json\r\n\r\n"
            b'{"id": "1", "payload": "'
        )
        got = trickle(sock)  # the body's bytes, one at a time
    assert got.answered_after is not None
    assert READ_TIMEOUT - 0.1 < got.answered_after < READ_TIMEOUT + LATE
    status, headers, refusal = got.answer()
    assert (status, refusal["status"]) == (408, 408)
    assert "read_timeout" in refusal["error"]
    assert headers["connection"] == "close"
    # the rest of the body is read and dropped for at most read_timeout more, then closed
    assert got.closed_after < 2 * READ_TIMEOUT + LATE
    assert limited.poll("slow", "sequence=first&timeout=0") == (204, None)  # nothing stored
    still_serves(limited)


# ---- max_long_polls ---------------------------------------------------------------------------


def test_a_long_poll_past_max_long_polls_is_refused_with_503_until_one_ends(
    limited: Http,
) -> None:
    held = [hold_poll(limited, "busy") for _ in range(MAX_POLLS)]
    eventually(lambda: limited.listeners() == MAX_POLLS, "two polls waiting")
    start = time.monotonic()
    status, refusal = limited.poll("busy", "sequence=99&timeout=30")
    assert time.monotonic() - start < 1.0  # at once, not after a wait
    assert (status, refusal["status"]) == (503, 503)
    assert "too many waiting long polls" in refusal["error"]
    assert "max_long_polls" in refusal["error"] and str(MAX_POLLS) in refusal["error"]
    status, refusal = limited.request("GET", "/queue/listen/ws/busy")  # a stream too
    assert status == 503 and "too many waiting long polls" in refusal["error"]
    assert limited.send("busy", {"id": "k", "payload": "still taken"})[0] == 200

    assert [answer(poll)[0] for poll in held] == [200, 200]  # the send answered both
    eventually(lambda: a_poll_is_accepted(limited), "a new poll accepted")
    assert limited.listeners() == 0
    still_serves(limited)


def test_a_place_is_given_back_however_a_poll_or_stream_ends(limited: Http) -> None:
    def full() -> bool:
        return not a_poll_is_accepted(limited)

    # timed out
    held = [hold_poll(limited, "ends", "sequence=99&timeout=0.3") for _ in range(MAX_POLLS)]
    eventually(lambda: limited.listeners() == MAX_POLLS, "two polls waiting")
    assert full()
    assert [answer(poll) for poll in held] == [(204, None), (204, None)]
    eventually(lambda: a_poll_is_accepted(limited), "a place after time-outs")

    # the client goes away
    held = [hold_poll(limited, "ends") for _ in range(MAX_POLLS)]
    eventually(lambda: limited.listeners() == MAX_POLLS, "two polls waiting")
    assert full()
    held[0].close()
    eventually(lambda: a_poll_is_accepted(limited), "a place after a client left")
    held[1].close()

    # the queue is deleted
    eventually(lambda: limited.listeners() == 0, "the polls forgotten")
    held = [hold_poll(limited, "doomed") for _ in range(MAX_POLLS)]
    eventually(lambda: limited.listeners() == MAX_POLLS, "two polls waiting")
    assert full()
    delete(limited, "doomed")
    assert [answer(poll)[0] for poll in held] == [410, 410]
    eventually(lambda: a_poll_is_accepted(limited), "a place after the queue went")

    # a WebSocket stream holds a place until it closes
    async def streams() -> None:
        async with aiohttp.ClientSession() as session:
            url = f"{limited.ws_base}/queue/listen/ws/streamed"
            async with session.ws_connect(url), session.ws_connect(url):
                await asyncio.to_thread(
                    eventually, lambda: limited.listeners() == MAX_POLLS, "two streams"
                )
                assert await asyncio.to_thread(full)
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await session.ws_connect(url)
                assert refused.value.status == 503

    asyncio.run(streams())
    eventually(lambda: a_poll_is_accepted(limited), "a place after the streams closed")
    eventually(lambda: limited.listeners() == 0, "the streams forgotten")
    still_serves(limited)


# ---- deeply nested JSON ---------------------------------------------------------------------


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_a_deeply_nested_body_is_refused_with_400(http: Http, depth: int) -> None:
    body = b'{"id": "deep", "payload": ' + b"[" * depth + b"]" * depth + b"}"
    status, refusal = http.request("POST", "/queue/send/deep", body)
    assert (status, refusal["status"]) == (400, 400)
    assert "nested too deeply" in refusal["error"]
    assert http.poll("deep", "sequence=first&timeout=0") == (204, None)  # nothing stored
    nested: Any = "bottom"
    for _ in range(100):
        nested = [nested]
    assert http.send("deep", {"id": "fine", "payload": nested}) == (
        200,
        {"id": "fine", "sequence": 1, "payload": nested},
    )  # ordinary nesting is kept as it is
    still_serves(http)


def test_an_unclosed_deep_body_is_refused_with_400_too(http: Http) -> None:
    status, refusal = http.request("POST", "/queue/send/deep", b"[" * 100_000)
    assert status == 400 and refusal["error"]
    still_serves(http)


def test_sends_while_the_memory_budget_is_full_are_answered_503_and_nothing_is_enqueued(
    start_gateway: Callable[[Config], Http],
) -> None:
    """HTTP has no credit to withdraw, so its producers are told to come back later (the
    console's test message too), where an AMQP producer's credit would be withdrawn."""
    http = start_gateway(http_config(max_memory=20_000))
    statuses = [http.send("full", {"id": f"k{i}", "payload": "f" * 8_000})[0] for i in range(4)]
    assert statuses == [200, 200, 200, 503]  # the third took the budget over its limit
    status, body = http.send("full", {"id": "more", "payload": "small"})
    assert status == 503 and "broker.max_memory 20000" in body["error"]
    console = ConsoleClient(http.base)
    assert console.login()[0] == 200
    status, body = console.change("POST", queue_path("full", "/messages"), {"body": "test"})
    assert status == 503 and "broker.max_memory" in body["error"]
    running = http.running
    assert running.call(lambda: running.broker.queues["full"].depth) == 3
