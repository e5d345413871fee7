"""Memory a broker gives back: the bytes of consumed messages leave the process, so a
broker that once held large messages does not keep their memory (measured as the broker
process's resident set, over real connections)."""

from __future__ import annotations

from pathlib import Path

from proton import Message
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from proton_broker.testing import BrokerProcess

MiB = 1024 * 1024
BODY = b"y" * (10 * MiB)


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def pass_through(sender: BlockingSender, receiver: BlockingReceiver, count: int) -> None:
    """Queue ``count`` large messages, then consume them all."""
    for _ in range(count):
        sender.send(Message(body=BODY))
    for _ in range(count):
        assert len(receiver.receive(timeout=30).body) == len(BODY)
        receiver.accept()


def test_the_memory_of_consumed_large_messages_goes_back_to_the_os() -> None:
    with BrokerProcess("--store", "memory") as broker:
        conn = BlockingConnection(broker.url)
        sender, receiver = conn.create_sender("big"), conn.create_receiver("big", credit=1)
        pass_through(sender, receiver, 1)  # the connection's buffers grow to their size once
        baseline = resident_mib(broker.pid)
        held = []
        for _ in range(3):  # 120 MiB queued, then consumed, each round
            for _ in range(12):
                sender.send(Message(body=BODY))
            held.append(resident_mib(broker.pid))
            for _ in range(12):
                assert len(receiver.receive(timeout=30).body) == len(BODY)
                receiver.accept()
            after = resident_mib(broker.pid)
            assert after < baseline + 30, (baseline, held, after)
        assert min(held) > baseline + 100  # the messages were really held meanwhile
        conn.close()
