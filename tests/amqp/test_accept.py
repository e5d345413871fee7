"""A storm of clients connecting at once (a broker restart, a network blip) is accepted in
bursts, not one connection per pass of the loop: every client gets its AMQP header back
well within the handshake time-out, and the broker keeps serving those already connected."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest
from proton import Message

from proton_broker.config import Config
from tests.conftest import RunningBroker

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
CLIENTS = 400


@pytest.fixture
def broker_config() -> Config:
    config = Config()
    config.broker.handshake_timeout = 5.0
    return config


def test_hundreds_of_clients_connecting_at_once_all_get_the_amqp_header_back(
    broker: RunningBroker,
) -> None:
    client = broker.client()  # one already connected, with traffic
    sender = client.sender("storm")
    socks = []
    try:
        for _ in range(CLIENTS):
            sock = socket.create_connection((broker.host, broker.port), timeout=10)
            sock.sendall(AMQP_HEADER)
            socks.append(sock)
        started = time.monotonic()
        for sock in socks:
            assert _read_exactly(sock, len(AMQP_HEADER)) == AMQP_HEADER
        assert time.monotonic() - started < 5.0
        delivery = client.send(sender, Message(body="still served"))
        assert client.wait_settled(delivery).remote_state is not None
    finally:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data
