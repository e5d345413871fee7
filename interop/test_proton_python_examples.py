"""Proton's Python examples, run from Debian's example sources with this environment's
Proton: request/reply, transactions, a selective receiver and a queue browser.

``queue_browser.py`` and ``server_tx.py`` know only ``localhost:5672``, so they get a broker
on the default port.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Timeout
from proton.utils import BlockingConnection

from interop.clients import PYTHON
from interop.examples import Running, python_example, run_to_end
from proton_broker.testing import BrokerProcess

REQUESTS = [
    "Twas brillig, and the slithy toves",
    "Did gire and gymble in the wabe.",
    "All mimsy were the borogroves,",
    "And the mome raths outgrabe.",
]
ANSWERS = [f"{r} => {r.upper()}" for r in REQUESTS]


@pytest.fixture
def default_broker() -> Iterator[BrokerProcess]:
    """A broker on localhost:5672, where the examples without options look."""
    try:
        process = BrokerProcess(port=5672).start()
    except RuntimeError as exc:
        pytest.fail(f"these examples need 127.0.0.1:5672 free: {exc}")
    yield process
    alive = process.alive()
    process.stop()
    assert alive, "".join(process.output)
    assert "Traceback" not in "".join(process.output)


def assert_empty(broker: BrokerProcess, queue: str) -> None:
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        with pytest.raises(Timeout):
            conn.create_receiver(queue, credit=1).receive(timeout=0.5)
    finally:
        conn.close()


def address(broker: BrokerProcess, queue: str) -> str:
    return f"{broker.host}:{broker.port}/{queue}"


def test_client_and_server_answer_requests_for_three_clients_in_a_row(
    broker: BrokerProcess, queue: str
) -> None:
    with Running([*python_example("server"), "-a", address(broker, queue)]) as server:
        for _ in range(3):
            out = run_to_end([*python_example("client"), "-a", address(broker, queue)])
            assert out.splitlines() == ANSWERS
        assert server.alive(), server.lines


def test_server_tx_answers_three_clients_in_a_row_through_the_relay(
    default_broker: BrokerProcess,
) -> None:
    """server_tx.py replies inside a transaction, through the anonymous relay the broker
    offers, to each client's temporary queue."""
    with Running(python_example("server_tx")) as server:
        for _ in range(3):
            out = run_to_end([*python_example("client"), "-a", "localhost:5672/examples"])
            assert out.splitlines() == ANSWERS
        assert server.lines.count("Request processed successfully") == 3 * len(REQUESTS)
        assert server.alive(), server.lines


def test_tx_send_and_tx_recv_move_messages_in_committed_batches(
    broker: BrokerProcess, queue: str
) -> None:
    out = run_to_end(
        [*python_example("tx_send"), "-a", address(broker, queue), "-m", "30", "-b", "10"]
    )
    assert out.strip() == "all messages committed"
    out = run_to_end(
        [*python_example("tx_recv"), "-a", address(broker, queue), "-m", "30", "-b", "10"]
    )
    assert out.splitlines() == [str({"sequence": n}) for n in range(1, 31)]
    assert_empty(broker, queue)  # committed: nothing is left


def test_selected_recv_gets_the_green_half_of_colour_send(
    broker: BrokerProcess, queue: str
) -> None:
    out = run_to_end([*python_example("colour_send"), "-a", address(broker, queue), "-m", "6"])
    assert out.strip() == "all messages confirmed"
    out = run_to_end([*python_example("selected_recv"), "-a", address(broker, queue), "-m", "3"])
    assert out.splitlines() == ["green 1", "green 3", "green 5"]


def test_queue_browser_prints_every_message_and_leaves_the_queue_as_it_was(
    default_broker: BrokerProcess,
) -> None:
    PYTHON.send(
        default_broker.url, "examples", [{"id": n, "body": f"message {n}"} for n in range(3)]
    )
    with Running(python_example("queue_browser")) as browser:
        lines = browser.wait_for_lines(3)
    assert all("message" in line for line in lines)
    got = PYTHON.receive(default_broker.url, "examples", 3, timeout=5)
    assert [m["body"] for m in got] == ["message 0", "message 1", "message 2"]
