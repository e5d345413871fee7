"""Durability with clients nobody here wrote: rhea sends durable messages to a durable queue
(or any message to one that keeps every message), the broker restarts on the same data
directory, and Proton C++ receives them."""

from __future__ import annotations

import json
from pathlib import Path

from interop.clients import CPP, RHEA
from proton_broker.testing import BrokerProcess


def test_durable_messages_from_rhea_survive_a_restart_and_reach_proton_cpp(tmp_path: Path) -> None:
    declare = ["--dynamic-node-properties", json.dumps({"durable": True})]
    messages = [{"body": f"order-{i}", "durable": True, "properties": {"n": i}} for i in range(3)]
    with BrokerProcess(data_dir=str(tmp_path)) as broker:
        RHEA.send(broker.url, "orders", messages, *declare)
    with BrokerProcess(data_dir=str(tmp_path)) as broker:
        got = CPP.receive(broker.url, "orders", 3)
    assert [m["body"] for m in got] == ["order-0", "order-1", "order-2"]
    assert [m["properties"]["n"] for m in got] == [0, 1, 2]


def test_a_queue_that_keeps_every_message_keeps_rheas_non_durable_ones_too(
    tmp_path: Path,
) -> None:
    """Broker-J's messageDurability ALWAYS, declared by rhea in its node properties."""
    kept = {"durable": True, "messageDurability": "ALWAYS"}
    declare = ["--dynamic-node-properties", json.dumps(kept)]
    messages = [{"body": f"event-{i}", "durable": False} for i in range(2)]
    with BrokerProcess(data_dir=str(tmp_path)) as broker:
        RHEA.send(broker.url, "audit", messages, *declare)
    with BrokerProcess(data_dir=str(tmp_path)) as broker:
        got = CPP.receive(broker.url, "audit", 2)
    assert [m["body"] for m in got] == ["event-0", "event-1"]
