"""Proton's C examples (``send``, ``receive``), built as Debian ships them, against the broker."""

from __future__ import annotations

from interop.examples import C, run_to_end
from proton_broker.testing import BrokerProcess


def test_the_c_send_example_has_every_message_acknowledged(
    broker: BrokerProcess, queue: str
) -> None:
    out = run_to_end([str(C / "send"), broker.host, str(broker.port), queue, "10"])
    assert out.strip() == "10 messages sent and acknowledged"


def test_the_c_receive_example_gets_what_the_send_example_sent_in_order(
    broker: BrokerProcess, queue: str
) -> None:
    run_to_end([str(C / "send"), broker.host, str(broker.port), queue, "5"])
    out = run_to_end([str(C / "receive"), broker.host, str(broker.port), queue, "5"])
    assert out.splitlines() == [
        *(f'{{"sequence"={n}}}' for n in range(1, 6)),
        "5 messages received",
    ]
