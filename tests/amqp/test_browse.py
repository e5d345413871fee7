"""Distribution modes: copy (browse) sees everything and removes nothing; move consumes."""

from __future__ import annotations

from proton import Message, Terminus

from tests.amqp.test_disposition import depth
from tests.amqp.test_flow import fill
from tests.conftest import RunningBroker


def test_a_browser_sees_every_message_and_removes_none(broker: RunningBroker) -> None:
    fill(broker, "browse", 3)
    client = broker.client()
    browser = client.receiver("browse", credit=10, browse=True)
    got = client.wait_received(browser, 3)
    assert [r.message.body for r in got] == [0, 1, 2]
    assert browser.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    assert depth(broker, "browse") == 3
    consumer = client.receiver("browse", credit=10)
    assert [r.message.body for r in client.wait_received(consumer, 3)] == [0, 1, 2]


def test_a_browser_that_stays_attached_receives_new_messages(broker: RunningBroker) -> None:
    client = broker.client()
    browser = client.receiver("browse-live", credit=10, browse=True)
    sender = client.sender("browse-live")
    client.send(sender, Message(body="later"))
    assert [r.message.body for r in client.wait_received(browser, 1)] == ["later"]


def test_two_browsers_each_see_all_messages(broker: RunningBroker) -> None:
    fill(broker, "browse-two", 2)
    client = broker.client()
    a = client.receiver("browse-two", credit=10, browse=True)
    b = client.receiver("browse-two", credit=10, browse=True)
    assert len(client.wait_received(a, 2)) == 2
    assert len(client.wait_received(b, 2)) == 2


def test_a_browser_respects_its_credit(broker: RunningBroker) -> None:
    fill(broker, "browse-credit", 5)
    client = broker.client()
    browser = client.receiver("browse-credit", credit=2, browse=True)
    client.wait_received(browser, 2)
    client.pump(0.3)
    assert len(client.received(browser)) == 2
    browser.flow(3)
    assert [r.message.body for r in client.wait_received(browser, 5)] == [0, 1, 2, 3, 4]


def test_move_consumers_and_browsers_coexist(broker: RunningBroker) -> None:
    client = broker.client()
    browser = client.receiver("mixed", credit=10, browse=True)
    consumer = client.receiver("mixed", credit=10)
    sender = client.sender("mixed")
    for i in range(3):
        client.send(sender, Message(body=i))
    assert len(client.wait_received(browser, 3)) == 3
    assert len(client.wait_received(consumer, 3)) == 3
