"""Refusals: a 4xx status with a JSON body naming the problem."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proton_broker.config import Config
from tests.http.conftest import Http, http_config


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"\xff\xfe", None, "not valid JSON"),
        (b"", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object, got an array"),
        (b'{"payload": 1}', "id", "missing field 'id'"),
        (b'{"id": null, "payload": 1}', "id", "got null"),
        (b'{"id": true, "payload": 1}', "id", "got a boolean"),
        (b'{"id": ["a"], "payload": 1}', "id", "got an array"),
        (b'{"id": "", "payload": 1}', "id", "non-empty string or an integer"),
        (b'{"id": 1.5, "payload": 1}', "id", "got a number"),
        (b'{"id": "1", "sequence": "5", "payload": 1}', "sequence", "must be an integer"),
        (b'{"id": "1", "sequence": 2.0, "payload": 1}', "sequence", "must be an integer"),
        (b'{"id": "1"}', "payload", "missing field 'payload'"),
        (b'{"id": "1", "payload": 1, "seqence": 3}', "seqence", "unknown field 'seqence'"),
        (b'{"id": "1", "sequence": 9223372036854775808, "payload": 1}', "sequence", "64-bit"),
        (b'{"id": "a\\ud800", "payload": 1}', None, "lone surrogate"),
        (b'{"id": "1", "payload": {"\\udc00": 1}}', None, "lone surrogate"),
    ],
)
def test_a_bad_send_body_is_refused_with_400(
    http: Http, body: bytes, field: str | None, words: str
) -> None:
    status, answer = http.request("POST", "/queue/send/test", body)
    assert status == 400
    assert words in answer["error"]
    assert answer.get("field") == field
    assert http.poll("test", "sequence=first&timeout=0") == (204, None)  # nothing stored


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("sequence=soon", "sequence"),
        ("sequence=-1", "sequence"),
        ("sequence=1.5", "sequence"),
        ("sequence=1&timeout=never", "timeout"),
        ("sequence=1&timeout=-1", "timeout"),
        ("sequence=1&timeout=inf", "timeout"),
    ],
)
def test_a_bad_poll_query_is_refused_with_400(http: Http, query: str, field: str) -> None:
    status, answer = http.poll("test", query)
    assert status == 400
    assert answer["field"] == field
    assert field in answer["error"]


def test_an_unknown_queue_is_404_when_auto_create_is_off(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config(auto_create=False)
    config.queues = {"known": {"sequenceKey": "id"}}
    http = start_gateway(config)
    for status, answer in (
        http.send("nosuch", {"id": "1", "payload": 1}),
        http.poll("nosuch", "sequence=1"),
        http.request("GET", "/queue/listen/ws/nosuch?sequence=1"),
    ):
        assert status == 404
        assert "queue 'nosuch' not found" in answer["error"]
    assert http.send("known", {"id": "1", "payload": 1})[0] == 200


def test_a_queue_without_a_sequence_key_is_refused_with_409(
    start_gateway: Callable[[Config], Http],
) -> None:
    config = http_config()
    config.queues = {"plain": {}}
    http = start_gateway(config)
    status, answer = http.send("plain", {"id": "1", "payload": 1})
    assert status == 409
    assert "has no sequence key" in answer["error"]
    assert http.poll("plain", "sequence=1")[0] == 409


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nowhere", 404),
        ("GET", "/queue/send/test", 405),
        ("POST", "/queue/listen/longpoll/test", 405),
    ],
)
def test_other_requests_get_json_errors_too(
    http: Http, method: str, path: str, status: int
) -> None:
    got, answer = http.request(method, path, b"{}" if method == "POST" else None)
    assert got == status
    assert answer["status"] == status and answer["error"]


def test_a_body_over_the_size_limit_is_refused_with_413(http: Http) -> None:
    body = json.dumps({"id": "1", "payload": "x" * (2 * 1024 * 1024)}).encode()
    status, answer = http.request("POST", "/queue/send/test", body)
    assert status == 413
    assert answer["status"] == 413


def test_the_broker_still_serves_after_bad_requests(http: Http) -> None:
    http.request("POST", "/queue/send/test", b"{")
    ok: Any = http.send("test", {"id": "1", "payload": "fine"})
    assert ok == (200, {"id": "1", "sequence": 1, "payload": "fine"})


def test_a_send_the_queues_filter_does_not_select_is_refused_with_409(http: Http) -> None:
    options = {"qpid.filter": "id = 'wanted'", "sequenceKey": "id"}
    http.running.call(lambda: http.running.broker.declare("picky", options))
    status, answer = http.send("picky", {"id": "other", "payload": 1})
    assert status == 409 and "does not select it" in answer["error"]
    assert http.send("picky", {"id": "wanted", "payload": 1}) == (
        200,
        {"id": "wanted", "sequence": 1, "payload": 1},
    )
