"""The management client's requests, as another broker's node would read them."""

from __future__ import annotations

import pytest
from proton import Timeout

from proton_broker.cli.client import ManagementClient
from tests.conftest import RunningBroker


def sent_properties(broker: RunningBroker, operation: str, name: str) -> dict:
    """The application properties of the request the client sends for ``operation`` on
    queue ``name``, caught on a plain queue instead of the management node."""
    with ManagementClient(broker.url, timeout=0.5) as client:
        client.sender = client.connection.create_sender("caught")
        with pytest.raises(Timeout):
            client.request(operation, "org.apache.qpid.Queue", name)
        receiver = client.connection.create_receiver("caught")
        request = receiver.receive(5)
        receiver.accept()
        return dict(request.properties)


def test_an_existing_entity_is_named_by_object_path_too_as_broker_j_finds_it(
    broker: RunningBroker,
) -> None:
    """Broker-J finds an existing entity by identity or ``index``=``object-path`` only."""
    read = sent_properties(broker, "READ", "orders")
    assert (read["name"], read["index"], read["key"]) == ("orders", "object-path", "orders")
    created = sent_properties(broker, "CREATE", "orders")
    assert created["name"] == "orders" and "index" not in created
    slashed = sent_properties(broker, "READ", "eu/orders")
    assert slashed["key"] == "eu\\/orders"  # Broker-J's object path escapes a '/'
