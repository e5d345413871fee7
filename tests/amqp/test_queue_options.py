"""Queue options on the attach, as Qpid clients send them, and the queue types they make.

qpid::messaging puts ``x-declare`` arguments in the terminus dynamic-node-properties (also
for a named, non-dynamic node) with the capabilities ``create-on-demand`` and ``queue``;
one capability alone goes as a bare symbol. The broker also reads link properties.
"""

from __future__ import annotations

import pytest
from proton import Disposition, Endpoint, Message, Terminus, float32

from proton_broker.config import Config
from tests.amqp.test_connection import symbols_of
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, terminus_map

MESSAGING_CAPS = ["create-on-demand", "queue"]


def send_all(client: EngineClient, address: str, messages: list[Message]) -> None:
    sender = client.sender(address)
    for message in messages:
        assert (
            client.wait_settled(client.send(sender, message, pump=False)).remote_state
            == Disposition.ACCEPTED
        )


def tickers(keys: list[str]) -> list[Message]:
    return [Message(body=f"v{i}", properties={"ticker": key}) for i, key in enumerate(keys)]


def queue_kind(broker: RunningBroker, name: str) -> str:
    return broker.call(lambda: broker.broker.queues[name].kind)


def test_a_qpid_messaging_lvq_address_creates_a_last_value_queue(broker: RunningBroker) -> None:
    # prices;{create:always, node:{type:queue, x-declare:{arguments:
    #   {'qpid.last_value_queue_key':'ticker'}}}}
    client = broker.client()
    props = {"supported-dist-modes": "move", "qpid.last_value_queue_key": "ticker"}
    client.sender("prices", capabilities=MESSAGING_CAPS, node_properties=props)
    assert queue_kind(broker, "prices") == "lvq"
    send_all(client, "prices", tickers(["1", "2", "3", "4", "2", "1"]))
    receiver = client.receiver("prices", credit=10)
    got = client.wait_received(receiver, 4)
    assert [r.message.properties["ticker"] for r in got] == ["3", "4", "2", "1"]
    assert [r.message.body for r in got] == ["v2", "v3", "v4", "v5"]


def test_the_reply_echoes_recognised_options_as_strings_and_honoured_capabilities(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    props = {
        "supported-dist-modes": "move",
        "qpid.last_value_queue_key": "ticker",
        "qpid.max_count": 100,
    }
    link = client.receiver(
        "echoed", credit=1, capabilities=[*MESSAGING_CAPS, "bogus"], node_properties=props
    )
    client.wait(lambda: link.remote_source.address)
    echoed = terminus_map(link.remote_source.properties)
    assert echoed == {
        "supported-dist-modes": "move",
        "qpid.last_value_queue_key": "ticker",
        "qpid.max_count": "100",
    }
    assert symbols_of(link.remote_source.capabilities) == MESSAGING_CAPS


def test_a_later_plain_attach_gets_the_queue_options_echoed_too(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("declared", node_properties={"qpid.priorities": 5})
    link = client.receiver("declared", credit=1)
    client.wait(lambda: link.remote_source.address)
    assert terminus_map(link.remote_source.properties) == {"qpid.priorities": "5"}


def test_a_single_capability_sent_as_a_bare_symbol_is_honoured(broker: RunningBroker) -> None:
    # MyMsgQueue;{create:always, node:{x-declare:{arguments:
    #   {'qpid.group_header_key':'GROUP_KEY','qpid.shared_msg_group':1}}}}
    client = broker.client()
    props = {"qpid.group_header_key": "GROUP_KEY", "qpid.shared_msg_group": 1}
    link = client.receiver(
        "MyMsgQueue", credit=1, capabilities=["create-on-demand"], node_properties=props
    )
    client.wait(lambda: link.remote_source.address)
    settings = broker.call(lambda: broker.broker.queues["MyMsgQueue"].settings)
    assert (settings.group_key, settings.group_mode) == ("GROUP_KEY", "shared")
    assert symbols_of(link.remote_source.capabilities) == ["create-on-demand"]
    assert terminus_map(link.remote_source.properties) == {
        "qpid.group_header_key": "GROUP_KEY",
        "qpid.shared_msg_group": "1",
    }


def test_a_priority_queue_delivers_higher_priorities_first(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("prio", node_properties={"x-qpid-priorities": 10})
    priorities = [1, 9, 4, 7, 4, 0, 9]
    send_all(client, "prio", [Message(body=i, priority=p) for i, p in enumerate(priorities)])
    receiver = client.receiver("prio", credit=10)
    got = client.wait_received(receiver, len(priorities))
    assert [r.message.priority for r in got] == [9, 9, 7, 4, 4, 1, 0]
    assert [r.message.body for r in got] == [1, 6, 3, 2, 4, 0, 5]  # FIFO within a level


def test_a_priority_queue_with_fair_shares_gives_lower_levels_their_turns(
    broker: RunningBroker,
) -> None:
    """qpidd's qpid.fairshare (every level) and qpid.fairshare-N (level N), from a
    qpid::messaging address's x-declare arguments: the top level hands out two in a row,
    then the next gets its turn."""
    client = broker.client()
    shares = {"qpid.priorities": 3, "qpid.fairshare": 1, "qpid.fairshare-2": 2}
    client.sender("fair", node_properties=shares)
    priorities = [9, 9, 9, 9, 4, 4, 0, 0]
    send_all(client, "fair", [Message(body=i, priority=p) for i, p in enumerate(priorities)])
    receiver = client.receiver("fair", credit=10)
    got = client.wait_received(receiver, len(priorities))
    assert [r.message.priority for r in got] == [9, 9, 4, 0, 9, 9, 4, 0]


def test_a_queue_with_qpidds_filter_takes_only_the_messages_it_selects(
    broker: RunningBroker,
) -> None:
    """qpidd's qpid.filter: the others are answered accepted and not taken (qpidd's
    Queue::accept), on a queue a producer sends to and on a subscription queue alike."""
    client = broker.client()
    red = {"qpid.filter": "colour = 'red'"}
    sender = client.sender("reds", node_properties=red)
    colours = ["red", "blue", "red", "green"]
    for n, colour in enumerate(colours):
        delivery = client.send(sender, Message(body=n, properties={"colour": colour}))
        assert client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
    assert broker.call(lambda: broker.broker.queues["reds"].depth) == 2
    receiver = client.receiver("reds", credit=10)
    assert [r.message.body for r in client.wait_received(receiver, 2)] == [0, 2]
    subscriber = client.receiver("amq.fanout", credit=10, link_properties=red)
    fanout = client.sender("amq.fanout")
    for n, colour in enumerate(colours):
        client.send(fanout, Message(body=n, properties={"colour": colour}))
    assert [r.message.body for r in client.wait_received(subscriber, 2)] == [0, 2]
    client.pump(0.2)
    assert len(client.received(subscriber)) == 2


def test_consumers_beyond_maximum_live_consumers_stand_by_until_a_live_one_goes(
    broker: RunningBroker,
) -> None:
    """Broker-J's maximumLiveConsumers: an exclusive consumer with a hot standby. The
    standby receiver takes nothing while the first is attached; when it goes, what it held
    comes back and the standby gets it."""
    client = broker.client()
    client.sender("jobs", node_properties={"maximumLiveConsumers": 1})
    send_all(client, "jobs", [Message(body=n) for n in range(3)])
    first = client.receiver("jobs", credit=10)
    standby = client.receiver("jobs", credit=10)
    assert [r.message.body for r in client.wait_received(first, 3)] == [0, 1, 2]
    client.pump(0.2)
    assert client.received(standby) == []
    assert broker.call(lambda: broker.broker.queues["jobs"].consumer_count) == 2
    first.close()  # nothing settled: all three go back
    assert [r.message.body for r in client.wait_received(standby, 3)] == [0, 1, 2]


def test_a_priority_queue_with_fewer_levels_groups_priorities_as_qpid_does(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("prio2", node_properties={"qpid.priorities": 2})
    # two levels: 0-4 share the lower level, 5-9 the higher; FIFO inside each
    priorities = [4, 5, 0, 9, 3]
    send_all(client, "prio2", [Message(body=i, priority=p) for i, p in enumerate(priorities)])
    receiver = client.receiver("prio2", credit=10)
    got = client.wait_received(receiver, 5)
    assert [r.message.body for r in got] == [1, 3, 0, 2, 4]


def test_a_sorted_queue_delivers_by_the_sort_key_and_keyless_messages_first(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("sorted", node_properties={"qpid.queue_sort_key": "rank"})
    ranks = ["c", "a", None, "b", "a"]
    messages = [
        Message(body=i, properties={} if r is None else {"rank": r}) for i, r in enumerate(ranks)
    ]
    send_all(client, "sorted", messages)
    receiver = client.receiver("sorted", credit=10)
    got = client.wait_received(receiver, 5)
    assert [r.message.body for r in got] == [2, 1, 4, 3, 0]


def test_queue_options_in_the_link_properties_are_read_too(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver(
        "via-link", credit=1, link_properties={"sortKey": "rank", "paired": True}
    )
    client.wait(lambda: link.remote_source.address)
    assert queue_kind(broker, "via-link") == "sorted"


def test_browsing_an_lvq_gives_current_values_then_updates(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("ticks", node_properties={"lvqKey": "ticker"})
    send_all(client, "ticks", tickers(["a", "b", "a"]))
    browser = client.receiver("ticks", credit=10, browse=True)
    got = client.wait_received(browser, 2)
    assert [(r.message.properties["ticker"], r.message.body) for r in got] == [
        ("b", "v1"),
        ("a", "v2"),
    ]
    send_all(client, "ticks", tickers(["b"]))
    got = client.wait_received(browser, 3)
    assert (got[2].message.properties["ticker"], got[2].message.body) == ("b", "v0")
    assert broker.call(lambda: broker.broker.queues["ticks"].depth) == 2


def test_an_lvq_keeps_messages_without_the_key(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("keyless", node_properties={"qpid.last_value_queue_key": "ticker"})
    send_all(
        client,
        "keyless",
        [Message(body=1), Message(body=2), Message(body=3, properties={"ticker": "k"})],
    )
    assert broker.call(lambda: broker.broker.queues["keyless"].depth) == 3


def test_an_lvq_key_sent_as_a_boolean_or_a_number_is_the_key_its_text_names(
    broker: RunningBroker,
) -> None:
    # As qpidd reads the key (docs/queues.md): true is "1", false "0", a double printed to
    # 17 digits, a float to 9, so the long 2 and the double 2.0 are one key.
    client = broker.client()
    client.sender("typed", node_properties={"qpid.last_value_queue_key": "ticker"})
    pairs = [
        (True, "1"),
        (False, "0"),
        (float32(0.1), "0.100000001"),
        (0.1, "0.10000000000000001"),
        (2.0, 2),
    ]
    first = [Message(body=f"typed {i}", properties={"ticker": k}) for i, (k, _) in enumerate(pairs)]
    then = [Message(body=f"then {i}", properties={"ticker": k}) for i, (_, k) in enumerate(pairs)]
    send_all(client, "typed", first + then)
    receiver = client.receiver("typed", credit=20)
    client.wait_received(receiver, len(pairs))
    client.pump(0.1)
    assert [r.message.body for r in client.received(receiver)] == [m.body for m in then]


def test_a_replaced_message_held_by_a_consumer_is_discarded_when_released(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("held", node_properties={"qpid.last_value_queue_key": "ticker"})
    send_all(client, "held", [Message(body="old", properties={"ticker": "k"})])
    consumer = client.receiver("held", credit=1)
    (old,) = client.wait_received(consumer, 1)
    send_all(client, "held", [Message(body="new", properties={"ticker": "k"})])
    client.settle(old, Disposition.RELEASED)
    consumer.flow(5)
    client.wait_received(consumer, 2)
    client.pump(0.2)
    assert [r.message.body for r in client.received(consumer)] == ["old", "new"]
    stats = broker.call(lambda: broker.broker.queues["held"].stats)
    assert stats.replaced == 1


def test_the_deprecated_lvq_mode_is_keyed_by_qpid_lvq_key(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    client = broker.client()
    client.sender("legacy", node_properties={"qpid.last_value_queue": 1})
    assert broker.call(lambda: broker.broker.queues["legacy"].settings.lvq_key) == "qpid.LVQ_key"
    send_all(
        client, "legacy", [Message(body=i, properties={"qpid.LVQ_key": "x"}) for i in range(3)]
    )
    assert broker.call(lambda: broker.broker.queues["legacy"].depth) == 1
    warned = [r for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(warned) == 1  # once, as the queue is made, however often its options are read
    assert '"legacy"' in warned[0].getMessage()


# ---- attaching to existing queues ---------------------------------------------------------


def test_attaching_with_the_same_or_no_options_to_an_existing_queue_works(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    client.sender("existing", node_properties={"qpid.priorities": 10})
    same = client.receiver("existing", credit=1, node_properties={"x-qpid-priorities": "10"})
    plain = client.receiver("existing", credit=1)
    client.wait(lambda: same.remote_source.address and plain.remote_source.address)
    assert same.remote_condition is None and plain.remote_condition is None


def test_attaching_with_different_options_to_an_existing_queue_gets_the_queue_as_it_is(
    broker: RunningBroker,
) -> None:
    """As both Qpid brokers: the attach succeeds and echoes the queue's real settings, so a
    client that asserts them (qpid::messaging's ``assert``) finds the difference."""
    client = broker.client()
    client.sender("fixed", node_properties={"qpid.priorities": 10})
    link = client.receiver("fixed", credit=1, node_properties={"qpid.priorities": 5})
    client.wait(lambda: link.state & Endpoint.REMOTE_ACTIVE)
    assert terminus_map(link.remote_source.properties)["qpid.priorities"] == "10"
    assert broker.call(lambda: broker.broker.queues["fixed"].settings.priorities) == 10


# ---- bad options: invalid-field, nothing created, the connection carries on ----------------


BAD_OPTIONS = [
    ({"qpid.no_such_option": 1}, "qpid.no_such_option"),
    ({"qpid.max_count": "ten"}, "ten"),
    ({"qpid.priorities": 11}, "qpid.priorities"),
    ({"qpid.policy_type": "explode"}, "explode"),
    ({"qpid.queue_sort_key": "a", "qpid.last_value_queue_key": "b"}, "sort key"),
    ({"qpid.last_value_queue_key": "k", "qpid.group_header_key": "g"}, "lvq"),
    ({"qpid.priorities": 10, "qpid.group_header_key": "g"}, "priority"),
    ({"qpid.priorities": 10, "x-qpid-priorities": 5}, "conflict"),
    ({"qpid.shared_msg_group": "maybe"}, "maybe"),
]


@pytest.mark.parametrize(("options", "named"), BAD_OPTIONS)
def test_bad_queue_options_are_refused_with_invalid_field_and_create_nothing(
    broker: RunningBroker, options: dict[str, object], named: str
) -> None:
    client = broker.client()
    good = client.sender("bystander")
    link = client.receiver("badopts", credit=1, node_properties=options)
    client.wait_closed(link)
    assert link.remote_source.type == Terminus.UNSPECIFIED
    assert link.remote_condition.name == "amqp:invalid-field"
    assert named in link.remote_condition.description
    assert not broker.call(lambda: "badopts" in broker.broker.queues)
    # the same connection and its other links carry on
    assert (
        client.wait_settled(client.send(good, Message(body="ok"), pump=False)).remote_state
        == Disposition.ACCEPTED
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"qpid.max_size": [1, 2]}, "qpid.max_size"),
        ({"qpid.filter": "colour = "}, "qpid.filter"),  # a queue's filter that is no selector
        ({"qpid.fairshare": 2}, "qpid.fairshare"),  # fair shares without priorities
        ({"qpid.priorities": 3, "qpid.fairshare-4": 1}, "qpid.fairshare-4"),  # no level 4
        ({"maximumLiveConsumers": -1}, "maximumLiveConsumers"),
        ({"no-local": "maybe"}, "no-local"),
        ({"messageDurability": "SOMETIMES"}, "messageDurability"),
    ],
)
def test_a_bad_option_on_a_sender_is_refused_with_a_null_target(
    broker: RunningBroker, options: dict[str, object], named: str
) -> None:
    client = broker.client()
    link = client.sender("badsend", node_properties=options)
    client.wait_closed(link)
    assert link.remote_target.type == Terminus.UNSPECIFIED
    assert link.remote_condition.name == "amqp:invalid-field"
    assert named in link.remote_condition.description
    assert not broker.call(lambda: "badsend" in broker.broker.queues)


def test_an_unsupported_option_is_refused_with_not_implemented(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver("fair", credit=1, node_properties={"exclusive": "SESSION"})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:not-implemented"
    assert "exclusive" in link.remote_condition.description
    assert not broker.call(lambda: "fair" in broker.broker.queues)


def test_qpidd_options_with_nothing_to_change_here_are_accepted_and_echoed(
    broker: RunningBroker,
) -> None:
    """Alerts, store sizing, paging and tracing: a qpid::messaging address written for
    qpidd attaches unchanged."""
    client = broker.client()
    options = {"qpid.alert_count": 5, "qpid.file_count": 8, "qpid.paging": True}
    link = client.receiver("alerted", credit=1, node_properties={**options, "qpid.max_count": 3})
    client.wait(lambda: link.state & Endpoint.REMOTE_ACTIVE)
    echoed = terminus_map(link.remote_source.properties)
    assert echoed["qpid.alert_count"] == "5" and echoed["qpid.max_count"] == "3"
    assert broker.call(lambda: broker.broker.queues["alerted"].settings.max_count) == 3


def test_an_alternate_that_names_nothing_is_refused_with_not_found(broker: RunningBroker) -> None:
    client = broker.client()
    link = client.receiver("dlq", credit=1, node_properties={"alternate-exchange": "dead"})
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:not-found"
    assert "alternate 'dead' of queue 'dlq'" in link.remote_condition.description
    assert "dlq" not in broker.broker.queues


# ---- the config file ----------------------------------------------------------------------


def declared(**queues: dict[str, object]) -> Config:
    config = Config()
    config.queues = queues
    return config


@pytest.mark.parametrize(
    "broker_config",
    [
        declared(
            prices={"qpid.last_value_queue_key": "ticker"},
            urgent={"priorities": 3},
            ordered={"sortKey": "rank"},
        )
    ],
)
def test_queues_declared_in_the_config_file_get_their_types(broker: RunningBroker) -> None:
    assert queue_kind(broker, "prices") == "lvq"
    assert queue_kind(broker, "urgent") == "priority"
    assert queue_kind(broker, "ordered") == "sorted"
    client = broker.client()
    link = client.receiver("prices", credit=1, node_properties={"lvqKey": "ticker"})
    client.wait(lambda: link.remote_source.address)
    assert link.remote_condition is None


def test_the_readme_lvq_example_with_the_blocking_client_works(broker: RunningBroker) -> None:
    from proton import symbol
    from proton.reactor import Copy, DynamicNodeProperties
    from proton.utils import BlockingConnection

    conn = BlockingConnection(broker.url)
    try:
        lvq = DynamicNodeProperties({symbol("qpid.last_value_queue_key"): "ticker"})
        sender = conn.create_sender("prices", options=lvq)
        for key in ["1", "2", "3", "4", "2", "1"]:
            sender.send(Message(body="price", properties={"ticker": key}))
        browser = conn.create_receiver("prices", credit=10, options=Copy())
        keys = [browser.receive(timeout=5).properties["ticker"] for _ in range(4)]
        assert keys == ["3", "4", "2", "1"]
    finally:
        conn.close()
