"""Replay period over AMQP: a source filter (described or plain) or a link property; default
filters; the applied filter echoed; bad values refused with amqp:invalid-field."""

from __future__ import annotations

import time

import pytest
from proton import Described, Message, symbol

from tests.amqp.test_flow import fill
from tests.conftest import RunningBroker
from tests.engine_client import terminus_map

DESCRIPTOR = symbol("apache.org:x-qpid-replay-period:string")


def bodies(client, link, count: int) -> list:  # type: ignore[no-untyped-def]
    return [r.message.body for r in client.wait_received(link, count)]


def test_a_described_replay_filter_of_zero_gives_a_browser_only_new_messages(
    broker: RunningBroker,
) -> None:
    fill(broker, "replay-zero", 2)
    client = broker.client()
    browser = client.receiver(
        "replay-zero",
        credit=10,
        browse=True,
        filters={"x-qpid-replay-period": Described(DESCRIPTOR, "0")},
    )
    client.pump(0.3)
    assert client.received(browser) == []
    client.send(client.sender("replay-zero"), Message(body="new"))
    assert bodies(client, browser, 1) == ["new"]


def test_the_reply_echoes_the_replay_filter_it_applied(broker: RunningBroker) -> None:
    client = broker.client()
    browser = client.receiver(
        "replay-echo",
        credit=1,
        browse=True,
        filters={
            "x-qpid-replay-period": Described(DESCRIPTOR, "3600"),
            "some-other-filter": "ignored",
        },
    )
    echoed = terminus_map(browser.remote_source.filter)
    assert list(echoed) == ["x-qpid-replay-period"]
    assert echoed["x-qpid-replay-period"].descriptor == DESCRIPTOR
    assert echoed["x-qpid-replay-period"].value == "3600"


def test_a_plain_replay_filter_keeps_what_arrived_within_the_period(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("replay-window")
    client.wait_settled(client.send(sender, Message(body="old"), pump=False))
    time.sleep(1.5)
    client.wait_settled(client.send(sender, Message(body="recent"), pump=False))
    browser = client.receiver(
        "replay-window", credit=10, browse=True, filters={"x-qpid-replay-period": 1}
    )
    assert bodies(client, browser, 1) == ["recent"]
    everything = client.receiver("replay-window", credit=10, browse=True)
    assert bodies(client, everything, 2) == ["old", "recent"]


def test_the_replay_period_may_come_in_the_link_properties(broker: RunningBroker) -> None:
    fill(broker, "replay-prop", 1)
    client = broker.client()
    consumer = client.receiver(
        "replay-prop", credit=10, link_properties={"x-qpid-replay-period": "0"}
    )
    client.send(client.sender("replay-prop"), Message(body="new"))
    got = client.wait_received(consumer, 1)
    assert [r.message.body for r in got] == ["new"]
    client.settle(got[0])
    client.wait(lambda: broker.call(lambda: broker.broker.queues["replay-prop"].depth) == 1)
    client.pump(0.2)
    assert len(client.received(consumer)) == 1  # the older message stays for others


def test_a_queue_default_filter_makes_consumers_topic_like(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender(
        "replay-default",
        node_properties={
            "ensureNondestructiveConsumers": True,
            "defaultFilters": {"x-qpid-replay-period": {"x-qpid-replay-period": ["0"]}},
        },
    )
    fill(broker, "replay-default", 2)
    late = client.receiver("replay-default", credit=10)
    history = client.receiver("replay-default", credit=10, filters={"x-qpid-replay-period": "3600"})
    assert bodies(client, history, 2) == [0, 1]
    client.pump(0.2)
    assert client.received(late) == []
    client.send(client.sender("replay-default"), Message(body="next"))
    assert bodies(client, late, 1) == ["next"]


@pytest.mark.parametrize("value", ["an hour", -5, Described(DESCRIPTOR, "soon")])
def test_a_replay_period_that_is_not_seconds_is_refused_naming_the_value(
    broker: RunningBroker, value: object
) -> None:
    client = broker.client()
    link = client.receiver("replay-bad", credit=1, filters={"x-qpid-replay-period": value})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "x-qpid-replay-period" in link.remote_condition.description
    shown = value.value if isinstance(value, Described) else value
    assert repr(shown) in link.remote_condition.description


def test_a_consumer_with_a_replay_period_of_zero_on_a_grouped_queue_takes_only_new_messages(
    broker: RunningBroker,
) -> None:
    """Broker-J's replay period is a filter of arrival times, on grouped queues too: the
    consumer takes what arrives after it; the older message waits for another consumer."""
    grouped = {"qpid.group_header_key": "JMSXGroupID", "qpid.shared_msg_group": 1}
    client = broker.client()
    sender = client.sender("replay-grouped", node_properties=grouped)
    client.wait_settled(client.send(sender, Message(body="old", group_id="A")))
    recent = client.receiver(
        "replay-grouped", credit=10, filters={"x-qpid-replay-period": Described(DESCRIPTOR, "0")}
    )
    client.wait_settled(client.send(sender, Message(body="new", group_id="B")))
    assert bodies(client, recent, 1) == ["new"]
    everyone = client.receiver("replay-grouped", credit=10)
    assert bodies(client, everyone, 1) == ["old"]
