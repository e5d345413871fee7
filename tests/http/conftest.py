"""Fixtures: a broker with its HTTP gateway on a free port, and a small urllib client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from proton_broker.config import Config
from tests.conftest import RunningBroker


class Http:
    """Requests to one broker's gateway; every call opens a new connection."""

    def __init__(self, running: RunningBroker) -> None:
        self.running = running
        host, port = running.app.http.address
        self.base = f"http://{host}:{port}"
        self.ws_base = f"ws://{host}:{port}"

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, Any]:
        """(status, decoded JSON body or None when empty)."""
        req = urllib.request.Request(
            self.base + path, data=body, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        return status, json.loads(raw) if raw else None

    def send(self, queue: str, body: Any) -> tuple[int, Any]:
        return self.request("POST", f"/queue/send/{queue}", json.dumps(body).encode())

    def poll(
        self, queue: str, query: str = "", key: str | None = None, timeout: float = 10.0
    ) -> tuple[int, Any]:
        path = f"/queue/listen/longpoll/{queue}" + (f"/{key}" if key is not None else "")
        return self.request("GET", path + (f"?{query}" if query else ""), timeout=timeout)

    def listeners(self) -> int:
        """Long polls and streams the gateway holds (read on the broker's loop)."""
        return self.running.call(self.running.app.http.listener_count)


def http_config(**broker: Any) -> Config:
    config = Config()
    config.http.enabled = True
    config.http.port = 0
    config.broker.store = "memory"
    for key, value in broker.items():
        setattr(config.broker, key, value)
    return config


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[[Config], Http]]:
    """Start brokers with the given configs; all stopped after the test."""
    started: list[RunningBroker] = []

    def start(config: Config) -> Http:
        config.broker.data_dir = str(tmp_path / f"data{len(started)}")
        running = RunningBroker(config)
        started.append(running)
        return Http(running)

    yield start
    dead = [r for r in started if not r.alive()]
    for running in started:
        running.stop()
    if dead:
        pytest.fail("the broker's event loop died during the test")


@pytest.fixture
def http(start_gateway: Callable[[Config], Http]) -> Http:
    return start_gateway(http_config())
