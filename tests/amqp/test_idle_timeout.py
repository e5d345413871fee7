"""Idle time-outs work both ways (AMQP 1.0, 2.4.5): the broker keeps a quiet connection
alive for a peer that asked for heartbeats, and drops a peer that went silent past its own
``broker.idle_timeout``. Both run on the deadlines of the broker's socket wait."""

from __future__ import annotations

import time

import pytest
from proton import Endpoint

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient


@pytest.fixture
def broker_config() -> Config:
    config = Config()
    config.broker.idle_timeout = 1.0
    return config


def test_a_quiet_connection_gets_empty_frames_often_enough_for_the_peers_idle_timeout(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.transport.idle_timeout = 1.0  # asks the broker for a frame at least every second
    client.conn.open()
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)
    before = client.transport.frames_input
    talk(client, 3.0)  # only empty frames: what arrives are the broker's heartbeats
    assert client.transport.frames_input - before >= 3
    assert not client.closed and not client.conn.state & Endpoint.REMOTE_CLOSED


def test_a_peer_silent_past_the_brokers_idle_timeout_is_closed_with_resource_limit_exceeded(
    broker: RunningBroker,
) -> None:
    client = broker.client()  # never ticks its transport: sends no heartbeats
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)
    started = time.monotonic()
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_CLOSED or client.closed, 6.0)
    assert time.monotonic() - started >= 0.9
    condition = client.conn.remote_condition
    assert condition is not None and condition.name == "amqp:resource-limit-exceeded"


def test_a_peer_that_keeps_talking_outlives_the_idle_timeout(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)
    talk(client, 3.0)
    assert not client.closed and not client.conn.state & Endpoint.REMOTE_CLOSED


def talk(client: EngineClient, seconds: float) -> None:
    """Pump for ``seconds``, ticking the client's transport so that it sends the
    heartbeats the broker's idle time-out asks for."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        client.transport.tick(time.monotonic())
        client.pump(0.1)
