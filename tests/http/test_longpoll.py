"""Send and long poll over HTTP: sequences, custom sequences, first/last, waiting, and the
"long poll without data loss" loop of docs/sequence-history.md."""

from __future__ import annotations

import random
import threading
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.http.conftest import Http, http_config


def later(delay: float, fn: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), fn()), daemon=True)
    thread.start()
    return thread


def test_a_send_answers_the_stored_message_with_its_sequence(http: Http) -> None:
    assert http.send("test", {"id": "1", "payload": {"message": "hello"}}) == (
        200,
        {"id": "1", "sequence": 1, "payload": {"message": "hello"}},
    )
    assert http.send("test", {"id": "1", "payload": {"message": "again"}})[1]["sequence"] == 2
    assert http.send("test", {"id": "10", "payload": None})[1]["sequence"] == 1  # keys whole
    assert http.send("test", {"id": 7, "payload": [1, 2]}) == (
        200,
        {"id": "7", "sequence": 1, "payload": [1, 2]},
    )  # an integer id, as text


def test_a_poll_answers_the_version_with_that_sequence_at_once(http: Http) -> None:
    for n in range(3):
        http.send("kept", {"id": "k", "payload": n})
    assert http.poll("kept", "sequence=2") == (200, {"id": "k", "sequence": 2, "payload": 1})
    assert http.poll("kept", "sequence=2", key="k")[1]["sequence"] == 2
    assert http.poll("kept", "sequence=first")[1]["sequence"] == 1
    assert http.poll("kept", "sequence=last")[1] == {"id": "k", "sequence": 3, "payload": 2}


def test_first_and_last_follow_the_kept_history(start_gateway: Callable[[Config], Http]) -> None:
    config = http_config()
    config.queues = {"fl": {"sequenceKey": "id", "max_key_updates": 2}}
    http = start_gateway(config)
    for value in "abcd":
        http.send("fl", {"id": "k", "payload": value})
    http.send("fl", {"id": "other", "payload": "z"})
    assert http.poll("fl", "sequence=first", key="k")[1]["payload"] == "c"  # 2 kept: c, d
    assert http.poll("fl", "sequence=last", key="k")[1]["payload"] == "d"
    assert http.poll("fl", "sequence=last")[1]["id"] == "other"  # the newest of all keys
    assert http.poll("fl", "sequence=1", key="k")[1]["sequence"] == 3  # 1 is gone: next kept


def test_a_poll_ahead_of_the_history_waits_for_the_next_message_of_its_key(http: Http) -> None:
    http.send("wait", {"id": "a", "payload": 1})
    later(
        0.3,
        lambda: (
            http.send("wait", {"id": "b", "payload": "other key"}),
            http.send("wait", {"id": "a", "payload": 2}),
        ),
    )
    assert http.poll("wait", "sequence=2", key="a") == (
        200,
        {"id": "a", "sequence": 2, "payload": 2},
    )
    later(0.3, lambda: http.send("wait", {"id": "c", "payload": 3}))
    assert http.poll("wait", "sequence=99")[1]["id"] == "c"  # any key: the next one
    later(0.3, lambda: http.send("fresh", {"id": "x", "payload": "first"}))
    assert http.poll("fresh", "sequence=first")[1]["sequence"] == 1  # empty queue: waits


def test_a_poll_that_times_out_answers_204_and_leaves_no_listener(http: Http) -> None:
    assert http.poll("quiet", "sequence=1&timeout=0.2") == (204, None)
    assert http.poll("quiet", "sequence=1&timeout=0") == (204, None)
    assert http.listeners() == 0


def test_the_default_timeout_comes_from_the_config(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config()
    config.http.longpoll_timeout = 0.2
    http = start_gateway(config)
    assert http.poll("q", "sequence=1") == (204, None)


def test_a_custom_sequence_is_kept_and_one_not_greater_is_refused_with_409(
    http: Http,
) -> None:
    assert http.send("custom", {"id": "1", "sequence": 999, "payload": {"m": "hello"}}) == (
        200,
        {"id": "1", "sequence": 999, "payload": {"m": "hello"}},
    )
    assert http.send("custom", {"id": "1", "payload": "next"})[1]["sequence"] == 1000
    for stale in (1000, 5, 0, -1):
        status, body = http.send("custom", {"id": "1", "sequence": stale, "payload": "x"})
        assert status == 409
        assert body["field"] == "sequence"
        assert "not greater than its current sequence 1000" in body["error"]
    assert http.send("custom", {"id": "2", "sequence": 5, "payload": "x"})[1]["sequence"] == 5
    assert http.poll("custom", "sequence=first", key="1")[1]["sequence"] == 999
    assert http.poll("custom", "sequence=last", key="1")[1]["sequence"] == 1000


def test_the_documented_long_poll_loop_sees_every_update_exactly_once(http: Http) -> None:
    """The documented JavaScript loop: poll with sequence = last + 1 on a new connection each
    time, while a producer posts updates; some polls are dropped by the client before an
    answer comes (it reconnects with the same sequence), some time out (204)."""
    total = 80
    http.send("loop", {"id": "cart", "payload": 0})  # sequence 1, seen by the loop too

    def produce() -> None:
        rng = random.Random(7)
        for value in range(1, total):
            time.sleep(rng.choice((0, 0, 0.001, 0.02, 0.06)))
            assert http.send("loop", {"id": "cart", "payload": value})[0] == 200

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    seen: list[tuple[int, object]] = []
    sequence, rng, drops = 1, random.Random(11), 0
    while len(seen) < total:
        query = f"sequence={sequence}"
        try:
            if rng.random() < 0.2:  # the client gives up and disconnects mid-wait
                status, data = http.poll("loop", query + "&timeout=5", key="cart", timeout=0.01)
            else:
                status, data = http.poll("loop", query + "&timeout=0.05", key="cart")
        except (TimeoutError, urllib.error.URLError):
            drops += 1
            continue
        if status == 204:
            continue
        assert status == 200
        seen.append((data["sequence"], data["payload"]))
        sequence = data["sequence"] + 1
    producer.join(10)
    assert drops > 0  # some polls really were dropped mid-wait
    assert seen == [(n, n - 1) for n in range(1, total + 1)]
    assert http.poll("loop", f"sequence={sequence}&timeout=0.1", key="cart") == (204, None)
    deadline = time.monotonic() + 5
    while http.listeners() and time.monotonic() < deadline:  # dropped polls are forgotten
        time.sleep(0.05)
    assert http.listeners() == 0


def test_a_waiting_poll_is_answered_503_when_the_broker_stops(tmp_path: Path) -> None:
    config = http_config()
    config.broker.data_dir = str(tmp_path / "data")
    running = RunningBroker(config)
    http = Http(running)
    answer: list[object] = []
    poll = threading.Thread(target=lambda: answer.append(http.poll("q", "sequence=1")))
    poll.start()
    deadline = time.monotonic() + 5
    while http.listeners() < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    running.stop()
    poll.join(10)
    assert not running.alive() and not running.app.http._thread.is_alive()
    assert answer == [(503, {"error": "the broker is shutting down", "status": 503})]
