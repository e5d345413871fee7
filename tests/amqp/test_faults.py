"""A fault inside a handler closes only what it concerns; the broker keeps serving."""

from __future__ import annotations

import pytest
from proton import Message

from proton_broker.broker import Broker
from tests.conftest import RunningBroker


def test_a_fault_while_storing_a_transfer_closes_only_that_link(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = broker.client()
    bad = client.sender("faulty")
    good = client.sender("healthy")
    queue = broker.call(lambda: broker.broker.queues["faulty"])

    def explode(message: object, now: object = None) -> None:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(queue, "enqueue", explode)
    client.send(bad, Message(body=1))
    client.wait_closed(bad)
    assert bad.remote_condition.name == "amqp:internal-error"
    assert "injected fault" in bad.remote_condition.description
    client.wait_settled(client.send(good, Message(body=2), pump=False))
    receiver = client.receiver("healthy", credit=1)
    assert client.wait_received(receiver, 1)[0].message.body == 2


def test_a_fault_while_attaching_closes_the_link_and_others_keep_working(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Broker.resolve

    def resolve(self: Broker, name: str | None, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "boom":
            raise RuntimeError("injected attach fault")
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(Broker, "resolve", resolve)
    client = broker.client()
    boom = client.receiver("boom", credit=1)
    client.wait_closed(boom)
    assert boom.remote_condition.name == "amqp:internal-error"
    other = broker.client()
    sender = other.sender("fine")
    other.wait_settled(other.send(sender, Message(body="ok"), pump=False))
    assert broker.alive()
