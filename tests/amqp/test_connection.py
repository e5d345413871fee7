"""Connections: what the broker announces in its open, with and without SASL."""

from __future__ import annotations

from typing import Any

from proton import Array, Data, Message

from tests.conftest import RunningBroker


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
        client.wait_settled(client.send(sender, Message(body=sasl)))
        receiver = client.receiver("sasl-or-not", credit=1)
        assert client.wait_received(receiver, 1)[0].message.body is sasl
