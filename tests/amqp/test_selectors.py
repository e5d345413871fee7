"""JMS selectors on the wire (the apache.org:selector-filter:string filter): a source filter
found by its descriptor, numeric (Qpid JMS, key jms-selector) or symbolic (Proton Python,
key selector), applied to consumers and browsers, echoed in the attach reply; a selector
that does not parse is refused with amqp:invalid-field and the connection carries on."""

from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong
from proton.reactor import Selector
from proton.utils import BlockingConnection

from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, terminus_map

JMS_DESCRIPTOR = ulong(0x0000468C00000004)
SYMBOLIC = symbol("apache.org:selector-filter:string")


def jms_selector(text: str) -> dict[str, Described]:
    """The filter entry Qpid JMS sends."""
    return {"jms-selector": Described(JMS_DESCRIPTOR, text)}


def fill(client: EngineClient, address: str, colors: list[str]) -> None:
    sender = client.sender(address)
    for n, color in enumerate(colors):
        client.wait_settled(
            client.send(
                sender,
                Message(body=n, properties={"color": color}, priority=n, correlation_id=f"c{n}"),
            )
        )


def bodies(client: EngineClient, link, count: int) -> list:  # type: ignore[no-untyped-def]
    return [r.message.body for r in client.wait_received(link, count)]


def test_a_consumer_with_a_jms_selector_gets_matching_messages_and_leaves_the_rest(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    fill(client, "sel", ["red", "blue", "red", "green"])
    red = client.receiver("sel", credit=10, filters=jms_selector("color = 'red'"))
    assert bodies(client, red, 2) == [0, 2]
    client.pump(0.2)
    assert len(client.received(red)) == 2
    rest = client.receiver("sel", credit=10)
    assert bodies(client, rest, 2) == [1, 3]


def test_a_consumer_with_a_selector_on_a_priority_queue_takes_the_highest_priority_it_matches(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("sel-prio", node_properties={"qpid.priorities": 10})
    fill(client, "sel-prio", ["red", "blue", "red", "red"])  # priorities 0, 1, 2, 3
    red = client.receiver("sel-prio", credit=10, filters=jms_selector("color = 'red'"))
    assert bodies(client, red, 3) == [3, 2, 0]


def test_the_applied_selector_is_echoed_in_the_attach_reply_as_it_was_sent(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    link = client.receiver("sel-echo", credit=1, filters=jms_selector("color = 'red'"))
    client.wait(lambda: link.remote_source.address is not None)
    echoed = terminus_map(link.remote_source.filter)
    assert list(echoed) == ["jms-selector"]
    assert echoed["jms-selector"].descriptor == JMS_DESCRIPTOR
    assert echoed["jms-selector"].value == "color = 'red'"


def test_a_symbolic_descriptor_under_any_key_is_a_selector_too(broker: RunningBroker) -> None:
    client = broker.client()
    fill(client, "sel-sym", ["red", "blue"])
    link = client.receiver(
        "sel-sym", credit=10, filters={"whatever": Described(SYMBOLIC, "color = 'blue'")}
    )
    assert bodies(client, link, 1) == [1]


def test_selectors_see_the_jms_headers_of_amqp_fields(broker: RunningBroker) -> None:
    client = broker.client()
    fill(client, "sel-headers", ["red", "blue", "red", "blue"])
    link = client.receiver(
        "sel-headers",
        credit=10,
        filters=jms_selector(
            "JMSPriority >= 2 AND JMSCorrelationID <> 'c3' AND JMSDeliveryMode = 'NON_PERSISTENT'"
        ),
    )
    assert bodies(client, link, 1) == [2]


def test_a_browser_with_a_selector_sees_matching_messages_and_consumes_none(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    fill(client, "sel-browse", ["red", "blue", "red"])
    browser = client.receiver(
        "sel-browse", credit=10, browse=True, filters=jms_selector("color = 'red'")
    )
    assert bodies(client, browser, 2) == [0, 2]
    assert broker.call(lambda: broker.broker.queues["sel-browse"].depth) == 3


@pytest.mark.parametrize("text", ["color = ", "color LIKE 5", "(a = 1", "a = 'open"])
def test_a_selector_that_does_not_parse_is_refused_with_invalid_field(
    broker: RunningBroker, text: str
) -> None:
    client = broker.client()
    link = client.receiver("sel-bad", credit=1, filters=jms_selector(text))
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert text in link.remote_condition.description
    info = link.remote_condition.info  # as Broker-J's: symbols, not strings
    assert [(type(k), k, type(v), v) for k, v in info.items()] == [
        (symbol, "field", symbol, "filter")
    ]
    fill(client, "sel-bad", ["red"])  # the session and connection carry on
    assert bodies(client, client.receiver("sel-bad", credit=1), 1) == [0]


def test_a_selector_that_is_not_a_string_is_refused(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver(
        "sel-type", credit=1, filters={"jms-selector": Described(JMS_DESCRIPTOR, 42)}
    )
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:invalid-field"
    assert "must be a string" in link.remote_condition.description


def test_on_a_grouped_queue_a_selector_takes_what_it_matches_of_groups_free_or_its_own(
    broker: RunningBroker,
) -> None:
    """Groups by properties.group-id, where Qpid JMS puts JMSXGroupID: the consumer with a
    selector passes a match whose group another consumer holds, and takes it once that
    group is free."""
    grouped = {"qpid.group_header_key": "JMSXGroupID", "qpid.shared_msg_group": 1}
    producer = broker.client()
    sender = producer.sender("sel-grouped", node_properties=grouped)
    for n, (color, group) in enumerate([("blue", "B"), ("red", "A"), ("red", "B")]):
        message = Message(body=n, properties={"color": color}, group_id=group)
        producer.wait_settled(producer.send(sender, message))
    plain, picky = broker.client(), broker.client()
    anyone = plain.receiver("sel-grouped", credit=1)
    (held,) = plain.wait_received(anyone, 1)  # 0: group B is its
    reds = picky.receiver("sel-grouped", credit=5, filters=jms_selector("color = 'red'"))
    assert bodies(picky, reds, 1) == [1]  # 2 is B's: passed
    picky.pump(0.2)
    assert len(picky.received(reds)) == 1
    plain.settle(held)  # B goes free
    picky.wait_received(reds, 2)
    assert [r.message.body for r in picky.received(reds)] == [1, 2]


def test_proton_pythons_own_selector_option_selects(broker: RunningBroker) -> None:
    client = broker.client()
    fill(client, "sel-proton", ["red", "blue", "red"])
    connection = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = connection.create_receiver(
            "sel-proton", credit=10, options=Selector("color = 'red'")
        )
        got = []
        for _ in range(2):
            got.append(receiver.receive(timeout=10).body)
            receiver.accept()
        assert got == [0, 2]
    finally:
        connection.close()
    assert broker.call(lambda: broker.broker.queues["sel-proton"].depth) == 1


SUBJECT_FILTER = ulong(0x0000468C00000001)  # legacy-amqp-topic-binding, as qpid::messaging


def test_a_receiver_on_queue_slash_subject_takes_only_what_the_subject_matches(
    broker: RunningBroker,
) -> None:
    """qpid::messaging sends ``fq/a.*`` as a subject filter; qpidd delivers only what it
    matches (exactly, or as a topic pattern) and leaves the rest for other consumers."""
    client = broker.client()
    sender = client.sender("fq")
    for subject in ("a.b", "x.y", "a.c"):
        client.wait_settled(client.send(sender, Message(subject=subject, body=subject), pump=False))
    picky = client.receiver(
        "fq", credit=10, filters={"subject-filter": Described(SUBJECT_FILTER, "a.*")}
    )
    assert bodies(client, picky, 2) == ["a.b", "a.c"]
    assert terminus_map(picky.remote_source.filter)["subject-filter"].value == "a.*"
    rest = client.receiver("fq", credit=10, name="rest")
    assert bodies(client, rest, 1) == ["x.y"]
