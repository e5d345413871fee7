"""Fixtures: a real broker on a real socket, and a check that it survived the test."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proton_broker.app import App
from proton_broker.config import Config
from tests.engine_client import EngineClient


class RunningBroker:
    """A broker serving on 127.0.0.1 from a thread of the test process."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.config.broker.host, self.config.broker.port = "127.0.0.1", 0
        self.app = App(self.config)
        self.broker = self.app.broker
        self.server = self.app.server
        self.host, self.port = self.app.listen()
        self.thread = threading.Thread(target=self.app.run, name="broker", daemon=True)
        self.thread.start()
        self.clients: list[EngineClient] = []

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def client(self, **kwargs: object) -> EngineClient:
        client = EngineClient(self.host, self.port, **kwargs)  # type: ignore[arg-type]
        self.clients.append(client)
        return client

    def call(self, fn):  # type: ignore[no-untyped-def]
        """Run ``fn`` on the broker's loop thread and return its result."""
        done = threading.Event()
        result: list[object] = []
        self.server.call_soon(lambda: (result.append(fn()), done.set()))
        assert done.wait(5), "broker loop did not answer"
        return result[0]

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        for client in self.clients:
            with contextlib.suppress(OSError):
                client.close()
        self.app.stop()
        self.thread.join(10)


@pytest.fixture
def broker_config() -> Config:
    return Config()


@pytest.fixture
def broker(broker_config: Config, tmp_path: Path) -> Iterator[RunningBroker]:
    broker_config.broker.data_dir = str(tmp_path / "data")  # each test its own store
    running = RunningBroker(broker_config)
    yield running
    alive = running.alive()
    running.stop()
    if not alive:
        pytest.fail("the broker's event loop died during the test")
