"""Two more Node.js clients nobody here wrote: rhea-promise (the promise API over rhea) and
amqp10 (node-amqp10, its own AMQP 1.0 stack, no SASL). Each sends, browses and consumes."""

from __future__ import annotations

import pytest

from interop.clients import NODE_DIR, PYTHON, run
from proton_broker.testing import BrokerProcess


@pytest.mark.parametrize("script", ["rhea_promise_round_trip.js", "amqp10_round_trip.js"])
def test_a_node_client_sends_browses_and_consumes(
    broker: BrokerProcess, queue: str, script: str
) -> None:
    (result,) = run(["node", str(NODE_DIR / script), broker.url, queue, "5"], timeout=20)
    bodies = [f"message-{n}" for n in range(5)]
    assert result == {"sent": bodies, "browsed": bodies, "consumed": bodies}
    PYTHON.send(broker.url, queue, [{"id": 1, "body": "after"}])
    # the browse left everything for the consumer, and the consumer took all of it
    assert [m["body"] for m in PYTHON.receive(broker.url, queue, 1)] == ["after"]
