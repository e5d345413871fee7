"""The broker keeps serving when the process has more than 1,024 files open (FD_SETSIZE):
its sockets are waited on with poll, not select."""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator

import pytest
from proton import Message

from tests.conftest import RunningBroker

OPEN = 1100


@pytest.fixture
def many_open_files() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < OPEN * 2 + 200:
        pytest.skip(f"the hard open-file limit ({hard}) is too low for this test")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, OPEN * 2 + 200), hard))
    pairs = [socket.socketpair() for _ in range(OPEN // 2)]
    try:
        yield
    finally:
        for a, b in pairs:
            a.close()
            b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_connection_whose_socket_number_is_above_1024_is_served(
    broker: RunningBroker,
    many_open_files: None,
) -> None:
    client = broker.client()
    assert client.sock.fileno() > 1024  # the broker's end is numbered above it too
    sender = client.sender("manyfiles")
    client.wait_settled(client.send(sender, Message(body="through"), pump=False))
    receiver = client.receiver("manyfiles", credit=1)
    assert client.wait_received(receiver, 1)[0].message.body == "through"
