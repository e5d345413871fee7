"""Distribution modes: copy (browse) sees what is available and removes nothing; move
consumes."""

from __future__ import annotations

import pytest
from proton import Disposition, Message, Terminus
from proton.reactor import Copy
from proton.utils import BlockingConnection

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


def test_a_browser_sees_what_waits_and_a_consumer_then_takes_it_all(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    browser = client.receiver("mixed", credit=10, browse=True)
    consumer = client.receiver("mixed", credit=0)
    sender = client.sender("mixed")
    for i in range(3):
        client.send(sender, Message(body=i))
    assert [r.message.body for r in client.wait_received(browser, 3)] == [0, 1, 2]
    consumer.flow(10)
    assert [r.message.body for r in client.wait_received(consumer, 3)] == [0, 1, 2]


def test_a_browser_is_not_shown_what_a_consumer_holds(broker: RunningBroker) -> None:
    """qpidd's browser cursor passes acquired messages (QueueCursor::check) and Broker-J's
    browsers skip entries that are not available and do not see requeues: a message a
    consumer holds is not shown, nor shown later to a browser that passed it."""
    fill(broker, "held", 3)
    client = broker.client()
    consumer = client.receiver("held", credit=1)
    (taken,) = client.wait_received(consumer, 1)
    assert taken.message.body == 0
    early = client.receiver("held", credit=10, browse=True)
    assert [r.message.body for r in client.wait_received(early, 2)] == [1, 2]
    client.settle(taken, Disposition.RELEASED)
    late = client.receiver("held", credit=10, browse=True)
    assert [r.message.body for r in client.wait_received(late, 3)] == [0, 1, 2]
    client.pump(0.1)
    assert [r.message.body for r in client.received(early)] == [1, 2]  # it had passed 0
    assert depth(broker, "held") == 3


def test_a_message_a_waiting_consumer_takes_as_it_arrives_is_not_browsed(
    broker: RunningBroker,
) -> None:
    """Browsers are fed after the consumers' turn: with a consumer waiting, what arrives is
    taken before a browser could see it (in qpidd and Broker-J it is a race)."""
    client = broker.client()
    browser = client.receiver("taken", credit=10, browse=True)
    consumer = client.receiver("taken", credit=10)
    sender = client.sender("taken")
    client.send(sender, Message(body="gone at once"))
    assert [r.message.body for r in client.wait_received(consumer, 1)] == ["gone at once"]
    client.pump(0.1)
    assert client.received(browser) == []


# ---- settlement of browsed messages (qpidd Outgoing.cpp, Broker-J ConsumerTarget_1_0) ------


def test_a_browser_in_mixed_mode_receives_unsettled_deliveries(broker: RunningBroker) -> None:
    fill(broker, "browse-mixed", 2)
    client = broker.client()
    browser = client.receiver("browse-mixed", credit=10, browse=True)
    got = client.wait_received(browser, 2)
    assert [r.delivery.settled for r in got] == [False, False]


def test_a_browser_that_asks_for_settled_receives_settled_deliveries(broker: RunningBroker) -> None:
    fill(broker, "browse-settled", 2)
    client = broker.client()
    browser = client.receiver("browse-settled", credit=10, browse=True, settled=True)
    got = client.wait_received(browser, 2)
    assert [r.delivery.settled for r in got] == [True, True]
    assert depth(broker, "browse-settled") == 2


@pytest.mark.parametrize(
    "outcome",
    [Disposition.ACCEPTED, Disposition.REJECTED, Disposition.RELEASED, Disposition.MODIFIED],
)
def test_any_outcome_for_a_browsed_message_settles_it_and_changes_nothing(
    broker: RunningBroker, outcome: int
) -> None:
    fill(broker, "browse-outcome", 2)
    client = broker.client()
    browser = client.receiver("browse-outcome", credit=10, browse=True)
    got = client.wait_received(browser, 2)
    client.settle_all(got, outcome, failed=True, undeliverable=True)
    # the consumer attaches on the same connection, so the broker has handled the
    # dispositions before it
    assert depth(broker, "browse-outcome") == 2
    consumer = client.receiver("browse-outcome", credit=10)
    taken = client.wait_received(consumer, 2)
    assert [r.message.body for r in taken] == [0, 1]
    # not counted as redelivered: a browser never acquired them
    assert [r.message.delivery_count for r in taken] == [0, 0]


def test_a_browser_leaving_with_unsettled_deliveries_changes_nothing(broker: RunningBroker) -> None:
    fill(broker, "browse-leave", 2)
    client = broker.client()
    browser = client.receiver("browse-leave", credit=10, browse=True)
    client.wait_received(browser, 2)
    browser.close()
    client.wait_closed(browser)
    consumer = client.receiver("browse-leave", credit=10)
    taken = client.wait_received(consumer, 2)
    assert [(r.message.body, r.message.delivery_count) for r in taken] == [(0, 0), (1, 0)]


def test_a_blocking_receiver_can_browse_and_accept(broker: RunningBroker) -> None:
    """Proton's BlockingReceiver accepts what it receives; with pre-settled browsed
    deliveries its accept() raised IndexError."""
    fill(broker, "browse-blocking", 3)
    conn = BlockingConnection(broker.url)
    try:
        browser = conn.create_receiver("browse-blocking", credit=10, options=Copy())
        bodies = []
        for _ in range(3):
            bodies.append(browser.receive(timeout=5).body)
            browser.accept()
        assert bodies == [0, 1, 2]
    finally:
        conn.close()
    assert depth(broker, "browse-blocking") == 3


def test_a_browser_of_a_priority_queue_sees_the_highest_priority_first_as_qpidd_browses(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("browse-prio", node_properties={"qpid.priorities": 10})
    for n, priority in enumerate([1, 9, 5, 9, 0]):
        client.wait_settled(client.send(sender, Message(body=n, priority=priority)))
    browser = client.receiver("browse-prio", credit=10, browse=True)
    assert [r.message.body for r in client.wait_received(browser, 5)] == [1, 3, 2, 0, 4]
    client.wait_settled(client.send(sender, Message(body="new", priority=7)))
    assert client.wait_received(browser, 6)[-1].message.body == "new"
    assert depth(broker, "browse-prio") == 6


def test_a_browser_of_a_sorted_queue_sees_the_sort_order_as_broker_j_browses(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("browse-sorted", node_properties={"qpid.queue_sort_key": "k"})
    for key in ["m", "c", "x"]:
        client.wait_settled(client.send(sender, Message(body=key, properties={"k": key})))
    browser = client.receiver("browse-sorted", credit=10, browse=True)
    assert [r.message.body for r in client.wait_received(browser, 3)] == ["c", "m", "x"]
    client.wait_settled(client.send(sender, Message(body="a", properties={"k": "a"})))
    assert client.wait_received(browser, 4)[-1].message.body == "a"  # shown next, once
    client.pump(0.2)
    assert len(client.received(browser)) == 4
