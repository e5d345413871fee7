"""The connector's connection: timeouts against a peer that never answers, and the broker's
refusals as errors (real sockets; no mocks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from proton_broker.spark import connection
from proton_broker.spark.client import browse_range, queue_bounds, send_all
from proton_broker.spark.connection import AmqpConnection, BrokerRequestError, ClientTimeout


@pytest.fixture
def silent_peer() -> Iterator[str]:
    """A listening socket that accepts connections, reads and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"amqp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda url: queue_bounds(url, ["q"], timeout=0.5),
        lambda url: list(browse_range(url, "q", 1, 10, timeout=0.5)),
        lambda url: send_all(url, "q", [b"\x00\x53\x77\x40"], timeout=0.5),
    ],
    ids=["bounds", "browse", "send"],
)
def test_a_broker_that_never_answers_times_out(silent_peer: str, call: object) -> None:
    started = time.monotonic()
    with pytest.raises(ClientTimeout, match=r"no answer from the broker within 0.5s while"):
        call(silent_peer)  # type: ignore[operator]
    assert time.monotonic() - started < 5


def test_a_timeout_is_also_a_broker_request_error_and_a_timeout_error() -> None:
    assert issubclass(ClientTimeout, BrokerRequestError)
    assert issubclass(ClientTimeout, TimeoutError)


def test_no_listener_is_an_os_error_at_once() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(OSError):
        AmqpConnection(f"amqp://127.0.0.1:{port}", timeout=2)


def test_a_refused_attach_carries_the_brokers_condition(strict_broker_url: str) -> None:
    conn = AmqpConnection(strict_broker_url, timeout=10)
    try:
        with pytest.raises(BrokerRequestError, match=r"link to 'no\.such\.queue'.*amqp:not-found"):
            conn.receiver("no.such.queue", browse=True)
            conn.wait(lambda: False, "waiting for the refusal")
    finally:
        conn.close()


def test_a_connection_opens_attaches_and_closes_cleanly(broker_url: str, queue_name: str) -> None:
    conn = AmqpConnection(broker_url, timeout=10)
    link = conn.sender(queue_name)
    assert link.remote_target.address == queue_name
    conn.close()
    assert conn.sock.fileno() == -1


def test_an_error_names_the_url_with_its_password_masked(broker_url: str) -> None:
    url = broker_url.replace("amqp://", "amqp://alice:s3cretPW@")
    with pytest.raises(BrokerRequestError) as failure:
        send_all(url, "q", [b"\x00\x53\x77\x40"], timeout=5)
    assert "s3cretPW" not in str(failure.value)
    assert broker_url.replace("amqp://", "amqp://alice:***@") in str(failure.value)
    assert (
        connection.safe_url("amqps://bob:pw@[::1]:5671/vhost") == "amqps://bob:***@[::1]:5671/vhost"
    )
    assert connection.safe_url("amqp://bob@h") == "amqp://bob@h:5672"


def test_a_flow_stopped_queue_is_named_as_giving_no_credit(
    broker_url: str, queue_name: str
) -> None:
    messages = [b"\x00\x53\x77\xa1\x01x"] * 10
    with pytest.raises(ClientTimeout, match=rf"the broker gives no credit on '{queue_name}'"):
        send_all(broker_url, queue_name, messages, timeout=1, node_options={"qpid.max_count": 5})
