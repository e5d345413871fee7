"""Connections: what the broker announces in its open, with and without SASL."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proton import Array, Connection, Data, Endpoint, Message, Transport

from proton_broker.config import Config, ListenerConfig
from tests.amqp.test_authentication import read_until_closed
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient


def symbols_of(data: Data) -> list[str]:
    data.rewind()
    if not data.next():
        return []
    value: Any = data.get_object()
    if isinstance(value, Array):
        return [str(v) for v in value.elements]
    return [str(value)]


def test_the_open_names_the_product_and_version(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.remote_properties)
    props = {str(k): v for k, v in client.conn.remote_properties.items()}
    assert props["product"] == "proton-broker"
    assert props["version"]
    assert client.conn.remote_container == "proton-broker"


def test_clients_are_served_with_sasl_anonymous_and_without_sasl(broker: RunningBroker) -> None:
    for sasl in (True, False):
        client = broker.client(sasl=sasl)
        sender = client.sender("sasl-or-not")
        client.wait_settled(client.send(sender, Message(body=sasl), pump=False))
        receiver = client.receiver("sasl-or-not", credit=1)
        assert client.wait_received(receiver, 1)[0].message.body is sasl


# ---- text that is not UTF-8 ------------------------------------------------------------------


def not_utf8(marker: bytes) -> Callable[[bytes], bytes]:
    """Rewrite ``marker`` in the outgoing frames so that it starts with bytes that are not
    UTF-8 (the frame keeps its size), which Proton itself would never send."""
    return lambda out: out.replace(marker, b"\xff\xfe" + marker[2:])


def test_a_container_id_that_is_not_utf8_closes_that_connection_with_invalid_field(
    broker: RunningBroker,
) -> None:
    bad = broker.client(container="cccccccc")
    bad.outgoing = not_utf8(b"cccccccc")
    bad.wait(lambda: bad.conn.remote_condition is not None)
    assert bad.conn.remote_condition.name == "amqp:invalid-field"
    assert "not valid UTF-8 (byte 0xff at position 0)" in bad.conn.remote_condition.description
    good = broker.client()  # everyone else is served
    good.wait_settled(good.send(good.sender("q"), Message(body="fine"), pump=False))


def test_a_link_name_that_is_not_utf8_detaches_that_link_with_invalid_field(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.outgoing = not_utf8(b"llllllll")
    client.sender("q", name="llllllll")

    def refused() -> Any:
        return next((link for link in _links(client) if link.remote_condition), None)

    link = client.wait(refused)
    assert link.remote_condition.name == "amqp:invalid-field"
    client.wait_settled(
        client.send(client.sender("q"), Message(body="the rest carry on"), pump=False)
    )


def test_an_address_that_is_not_utf8_detaches_that_link_with_invalid_field(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.outgoing = not_utf8(b"aaaaaaaa")
    sender = client.sender("aaaaaaaa", name="plain-name")
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:invalid-field"
    assert "aaaaaaaa" not in broker.call(lambda: list(broker.broker.queues))


def _links(client: Any) -> list[Any]:
    links, link = [], client.conn.link_head(0)
    while link is not None:
        links.append(link)
        link = link.next(0)
    return links


def test_a_broker_that_stops_closes_every_connection_with_connection_forced_first(
    tmp_path: Path,
) -> None:
    """Each client is told why, also one that reads only once the broker has gone."""
    config = Config()
    config.broker.data_dir = str(tmp_path)
    broker = RunningBroker(config)
    clients = [broker.client() for _ in range(3)]
    for client in clients:
        client.wait(lambda client=client: client.conn.remote_container)
    broker.app.stop()
    broker.thread.join(10)
    assert not broker.thread.is_alive()
    for client in clients:
        client.wait(lambda client=client: client.conn.remote_condition)
        assert client.conn.remote_condition.name == "amqp:connection:forced"
        assert client.conn.remote_condition.description == "broker shutting down"


def opened_twice(broker: RunningBroker) -> bytes:
    """A raw client that sends its open frame, waits for the broker's, and sends the same
    open frame again: what the broker answered until it closed the socket."""
    client = Connection()
    client.container = "opens-twice"
    transport = Transport()
    transport.bind(client)
    client.open()
    header_and_open = bytes(transport.peek(transport.pending()))
    with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
        sock.sendall(header_and_open)
        first, _ = read_until_closed(sock, 0.3)
        assert b"\x00\x53\x10" in first  # the broker's open
        sock.sendall(header_and_open[8:])  # the open frame again
        rest, closed = read_until_closed(sock)
    assert closed
    return rest


def test_a_second_open_frame_closes_the_connection_with_illegal_state_and_counts_nothing() -> None:
    """AMQP opens a connection once: a second open is answered with a close naming
    amqp:illegal-state, and does not count the connection twice against its quotas."""
    config = Config()
    config.broker.max_connections_per_address = 2
    running = RunningBroker(config)
    try:
        answer = opened_twice(running)
        assert b"amqp:illegal-state" in answer and b"open already" in answer
        assert b"\x00\x53\x10" not in answer  # not opened again
        first, second = running.client(), running.client()  # both fit within the quota
        first.wait(lambda: first.conn.remote_container)
        second.wait(lambda: second.conn.remote_container)
        assert first.conn.remote_condition is None and second.conn.remote_condition is None
    finally:
        running.stop()


def test_another_listener_tells_its_own_largest_frame_and_takes_messages_larger_than_it(
    broker_config: Config,
) -> None:
    broker_config.listeners = [ListenerConfig(0, None, 4096)]  # port 0: a free one
    running = RunningBroker(broker_config)
    try:
        host, port = running.server.other_addresses[0]
        small = EngineClient(host, port)
        small.wait(lambda: small.conn.state & Endpoint.REMOTE_ACTIVE)
        assert small.transport.remote_max_frame_size == 4096
        body = "x" * 100_000  # some 25 frames there
        small.wait_settled(small.send(small.sender("framed"), Message(body=body), pump=False))
        main = running.client()
        main.wait(lambda: main.conn.state & Endpoint.REMOTE_ACTIVE)
        assert main.transport.remote_max_frame_size == broker_config.broker.max_frame_size
        receiver = main.receiver("framed", credit=1)
        assert main.wait_received(receiver, 1)[0].message.body == body
        small.close()
    finally:
        running.stop()
