"""Browsing (source distribution-mode ``copy``) from rhea and Proton C++ removes nothing, and
sees a priority or sorted queue in the queue's order."""

from __future__ import annotations

import pytest
from proton import Message, symbol
from proton.reactor import DynamicNodeProperties
from proton.utils import BlockingConnection

from interop.clients import CPP, PYTHON, RHEA, Client, run

COUNT = 5


def messages(n: int) -> list[dict]:
    return [{"id": f"b{i}", "body": {"n": i}, "properties": {"i": i}} for i in range(n)]


@pytest.mark.parametrize("browser", [RHEA, CPP], ids=lambda c: c.name)
def test_a_browser_sees_every_message_and_a_later_consumer_still_gets_them_all(
    broker, queue, browser: Client
) -> None:
    PYTHON.send(broker.url, queue, messages(COUNT))

    first = browser.receive(broker.url, queue, COUNT, browse=True)
    second = browser.receive(broker.url, queue, COUNT, browse=True)
    consumed = RHEA.receive(broker.url, queue, COUNT)

    ids = [f"b{i}" for i in range(COUNT)]
    assert [m["id"] for m in first] == ids
    assert [m["id"] for m in second] == ids, "a browser accepting must not remove messages"
    assert [m["body"] for m in consumed] == [{"n": i} for i in range(COUNT)]


def test_a_rhea_browse_attach_is_answered_with_distribution_mode_copy(broker, queue) -> None:
    PYTHON.send(broker.url, queue, messages(1))
    lines = RHEA.receive(broker.url, queue, 1, browse=True, options=["--print-attach"])
    attach = lines[0]["attach"]
    assert attach["address"] == queue
    assert attach["distribution_mode"] == "copy"
    assert lines[1]["id"] == "b0"


def test_a_rhea_browser_cannot_see_more_messages_than_the_queue_holds(broker, queue) -> None:
    PYTHON.send(broker.url, queue, messages(2))
    cmd = RHEA.command("receive") + [broker.url, queue, "3", "--browse", "--timeout", "1"]
    with pytest.raises(AssertionError, match="timed out after 2 of 3"):
        run(cmd, timeout=15)
    assert [m["id"] for m in RHEA.receive(broker.url, queue, 2)] == ["b0", "b1"]


@pytest.mark.parametrize("browser", [RHEA, CPP], ids=lambda c: c.name)
def test_a_browser_of_a_priority_queue_sees_the_highest_priority_first(
    broker, queue, browser: Client
) -> None:
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        options = DynamicNodeProperties({symbol("qpid.priorities"): 10})
        sender = conn.create_sender(queue, options=options)
        for n, priority in enumerate([1, 9, 5, 9, 0]):
            sender.send(Message(id=f"p{n}", body=n, priority=priority))
    finally:
        conn.close()
    got = browser.receive(broker.url, queue, 5, browse=True)
    assert [m["id"] for m in got] == ["p1", "p3", "p2", "p0", "p4"]
    consumed = RHEA.receive(broker.url, queue, 5)  # the browser took nothing
    assert [m["id"] for m in consumed] == ["p1", "p3", "p2", "p0", "p4"]
