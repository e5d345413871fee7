"""Two rhea consumers compete for a message-group queue, as two Qpid applications would."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from proton import Message, symbol
from proton.reactor import DynamicNodeProperties
from proton.utils import BlockingConnection

from interop.clients import NODE_DIR

GROUPS = ["A", "B", "C", "D"]
PER_GROUP = 5


def start_rhea_consumer(url: str, queue: str) -> subprocess.Popen[str]:
    """A rhea receiver with a prefetch of 10 that stops once idle; returns after attach."""
    proc = subprocess.Popen(
        [
            "node",
            str(NODE_DIR / "receive.js"),
            url,
            queue,
            "100",
            "--credit",
            "10",
            "--idle",
            "2",
            "--timeout",
            "30",
            "--print-attach",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the broker's answer to the attach
    assert first["attach"]["address"] == queue
    return proc


def finish(proc: subprocess.Popen[str]) -> list[dict[str, object]]:
    out, err = proc.communicate(timeout=40)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("shared", [False, True])
def test_two_rhea_consumers_share_a_group_queue_keeping_each_group_in_order(
    broker, queue, shared: bool
) -> None:
    options = {symbol("qpid.group_header_key"): "GROUP_KEY"}
    if shared:
        options[symbol("qpid.shared_msg_group")] = 1
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        sender = conn.create_sender(queue, options=DynamicNodeProperties(options))
        consumers = [start_rhea_consumer(broker.url, queue) for _ in range(2)]
        # rhea grants its credit once it has the broker's attach: give that flow frame time
        # to arrive, or standard groups may all be assigned to the first consumer.
        time.sleep(0.5)
        for n in range(PER_GROUP):
            for group in GROUPS:
                sender.send(Message(body=f"{group}-{n}", properties={"GROUP_KEY": group}))
    finally:
        conn.close()
    results = [[m["body"] for m in finish(proc)] for proc in consumers]
    assert all(results), "both consumers took part"
    assert sorted(results[0] + results[1]) == sorted(
        f"{g}-{n}" for g in GROUPS for n in range(PER_GROUP)
    )
    for got in results:
        for group in GROUPS:
            mine = [int(b.split("-")[1]) for b in got if b.startswith(group)]
            assert mine == sorted(mine)  # each consumer sees a group's messages in order
            if not shared:  # standard groups stick to one consumer for its lifetime
                assert mine in ([], list(range(PER_GROUP)))
