"""Proton's C++ examples, built as Debian ships them, against the broker: send and receive,
browse, a selective receiver, and request/reply with a dynamic reply-to."""

from __future__ import annotations

from interop.clients import PYTHON
from interop.examples import CPP, Running, run_to_end
from proton_broker.testing import BrokerProcess

# What client.cpp sends, one request at a time, and server.cpp answers in upper case.
REQUESTS = [
    "Twas brillig, and the slithy toves",
    "Did gire and gymble in the wabe.",
    "All mimsy were the borogroves,",
    "And the mome raths outgrabe.",
]


def test_simple_send_and_simple_recv(broker: BrokerProcess, queue: str) -> None:
    url = f"{broker.url}/{queue}"
    assert (
        run_to_end([str(CPP / "simple_send"), "-a", url, "-m", "20"]).strip()
        == "all messages confirmed"
    )
    out = run_to_end([str(CPP / "simple_recv"), "-a", url, "-m", "20"])
    assert out.splitlines() == [f'{{"sequence"={n}}}' for n in range(1, 21)]


def test_queue_browser_sees_every_message_and_leaves_them_queued(
    broker: BrokerProcess, queue: str
) -> None:
    run_to_end([str(CPP / "simple_send"), "-a", f"{broker.url}/{queue}", "-m", "3"])
    with Running([str(CPP / "queue_browser"), broker.url, queue]) as browser:
        assert browser.wait_for_lines(3) == [f'{{"sequence"={n}}}' for n in range(1, 4)]
    # it accepted each browsed message; they are all still there, never redelivered
    got = PYTHON.receive(broker.url, queue, 3, timeout=5)
    assert [m["body"] for m in got] == [{"sequence": n} for n in range(1, 4)]


def test_selected_recv_gets_only_the_green_messages(broker: BrokerProcess, queue: str) -> None:
    colours = ["red", "green", "blue", "green"]
    PYTHON.send(
        broker.url,
        queue,
        [
            {"id": n, "body": f"{colour} {n}", "properties": {"colour": colour}}
            for n, colour in enumerate(colours)
        ],
    )
    with Running([str(CPP / "selected_recv"), broker.url, queue]) as receiver:
        assert receiver.wait_for_lines(2) == ["green 1", "green 3"]


def test_the_server_answers_three_clients_in_a_row(broker: BrokerProcess, queue: str) -> None:
    """The server keeps one sender per reply-to address; each client's temporary queue is
    deleted when it leaves, and the server must go on serving the next."""
    with Running([str(CPP / "server"), broker.url, queue]) as server:
        server.wait_for_lines(1)  # "Server connected to ..."
        for _ in range(3):
            out = run_to_end([str(CPP / "client"), "-a", f"{broker.url}/{queue}"])
            assert out.splitlines() == [f"{r} => {r.upper()}" for r in REQUESTS]
        assert server.alive(), server.lines
