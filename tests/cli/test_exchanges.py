"""``proton-broker-config``'s exchange and binding commands, in qpid-config's syntax, run as
a subprocess against a live broker; messages then route as the bindings say."""

from __future__ import annotations

import json

from proton import Disposition, Message

from tests.cli.test_config import tool
from tests.conftest import RunningBroker


def depth(broker: RunningBroker, name: str) -> int:
    return broker.call(lambda: broker.broker.queues[name].depth)


def publish(broker: RunningBroker, address: str, message: Message) -> None:
    client = broker.client()
    sender = client.sender(address)
    assert (
        client.wait_settled(client.send(sender, message, pump=False)).remote_state
        == Disposition.ACCEPTED
    )


def test_qpid_configs_bind_command_routes_a_topic_to_a_queue(broker: RunningBroker) -> None:
    assert tool(broker, "add", "queue", "uk-news").returncode == 0
    done = tool(broker, "bind", "amq.topic", "uk-news", "news.uk.#")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    publish(broker, "amq.topic", Message(subject="news.uk.sport", body="x"))
    publish(broker, "amq.topic", Message(subject="news.fr", body="y"))
    assert depth(broker, "uk-news") == 1


def test_an_exchange_is_added_listed_and_deleted(broker: RunningBroker) -> None:
    assert tool(broker, "add", "exchange", "fanout", "alerts", "--durable").returncode == 0
    listed = tool(broker, "exchanges")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["Exchange", "Type", "Dur", "Bindings", "Routed", "Dropped"]
    assert ["alerts", "fanout", "Y", "0", "0", "0"] in [line.split() for line in lines[2:]]
    assert tool(broker, "del", "exchange", "alerts").returncode == 0
    assert broker.call(lambda: "alerts" in broker.broker.exchanges) is False


def test_an_exchange_added_without_durable_is_not_durable_as_qpid_config_adds_it(
    broker: RunningBroker,
) -> None:
    assert tool(broker, "add", "exchange", "topic", "passing").returncode == 0
    assert broker.call(lambda: broker.broker.exchanges.named("passing").durable) is False


def test_a_headers_binding_is_made_with_all_or_any(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "red")
    done = tool(broker, "bind", "amq.match", "red", "red-key", "all", "colour=red", "kind=car")
    assert done.returncode == 0, done.stderr
    publish(broker, "amq.match", Message(properties={"colour": "red", "kind": "car"}, body=1))
    publish(broker, "amq.match", Message(properties={"colour": "red"}, body=2))
    assert depth(broker, "red") == 1
    shown = json.loads(tool(broker, "bindings", "amq.match", "--json").stdout)
    assert [(b["queue"], b["bindingKey"], b["arguments"]) for b in shown] == [
        ("red", "red-key", {"x-match": "all", "colour": "red", "kind": "car"})
    ]


def test_unbind_removes_the_binding(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "q")
    tool(broker, "bind", "amq.direct", "q", "k")
    assert tool(broker, "unbind", "amq.direct", "q", "k").returncode == 0
    publish(broker, "amq.direct", Message(subject="k", body=1))
    assert depth(broker, "q") == 0
    assert json.loads(tool(broker, "bindings", "--json").stdout) == []


def test_add_exchange_with_an_alternate_exchange_sends_it_what_it_routes_nowhere(
    broker: RunningBroker,
) -> None:
    tool(broker, "add", "queue", "lost")
    tool(broker, "add", "exchange", "fanout", "dlx")
    tool(broker, "bind", "dlx", "lost")
    done = tool(broker, "add", "exchange", "topic", "events", "--alternate-exchange", "dlx")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    arguments = broker.call(lambda: dict(broker.broker.exchanges.named("events").arguments))
    assert arguments == {"alternate-exchange": "dlx"}
    publish(broker, "events", Message(subject="nobody.listens", body="x"))
    assert depth(broker, "lost") == 1
    header, _, *rows = tool(broker, "exchanges").stdout.splitlines()
    assert header.split()[:4] == ["Exchange", "Type", "Alternate", "Dur"]
    assert ["events", "topic", "dlx"] in [row.split()[:3] for row in rows]


def test_an_exchanges_alternate_must_exist_and_cannot_be_deleted_while_in_use(
    broker: RunningBroker,
) -> None:
    missing = tool(broker, "add", "exchange", "topic", "events", "--alternate-exchange", "nowhere")
    assert missing.returncode == 1
    assert missing.stderr == (
        "Failed: 404 alternate 'nowhere' of exchange 'events' is neither a queue nor an exchange\n"
    )
    assert broker.call(lambda: "events" in broker.broker.exchanges) is False
    tool(broker, "add", "exchange", "fanout", "dlx")
    tool(broker, "add", "exchange", "topic", "events", "--alternate-exchange", "dlx")
    in_use = tool(broker, "del", "exchange", "dlx")
    assert in_use.returncode == 1
    assert in_use.stderr == (
        "Failed: 403 cannot delete exchange 'dlx': it is the alternate of exchange 'events'\n"
    )
    assert broker.call(lambda: "dlx" in broker.broker.exchanges) is True


def test_refusals_exit_1_and_bad_words_exit_2(broker: RunningBroker) -> None:
    missing = tool(broker, "bind", "amq.topic", "nowhere", "#")
    assert missing.returncode == 1 and missing.stderr.startswith("Failed: 404")
    reserved = tool(broker, "add", "exchange", "topic", "amq.mine")
    assert reserved.returncode == 1 and "reserved" in reserved.stderr
    assert tool(broker, "add", "exchange", "xml", "x").returncode == 2
    assert tool(broker, "bind", "amq.match", "q", "k", "some", "a=b").returncode == 2
    assert tool(broker, "unbind", "amq.topic").returncode == 2
    assert tool(broker, "add", "exchange", "topic", "t", "--priorities", "3").returncode == 2
    repeated = ("--alternate-exchange", "a", "--argument", "alternate-exchange=a")
    assert tool(broker, "add", "exchange", "topic", "t", *repeated).returncode == 2


def test_the_third_word_of_bind_is_always_the_key_as_qpid_config_reads_it(
    broker: RunningBroker,
) -> None:
    """``bind amq.topic q all`` binds the key "all", not a headers match."""
    tool(broker, "add", "queue", "everything")
    assert tool(broker, "bind", "amq.topic", "everything", "all").returncode == 0
    publish(broker, "amq.topic", Message(subject="all", body=1))
    publish(broker, "amq.topic", Message(subject="other", body=2))
    assert depth(broker, "everything") == 1
    no_conditions = tool(broker, "bind", "amq.match", "everything", "k", "all")
    assert no_conditions.returncode == 2 and "NAME=VALUE" in no_conditions.stderr


def test_an_exchange_durable_as_an_argument_is_durable_and_qpidds_unsupported_ones_are_refused(
    broker: RunningBroker,
) -> None:
    assert (
        tool(broker, "add", "exchange", "topic", "kept", "--argument", "durable=1").returncode == 0
    )
    assert broker.call(lambda: broker.broker.exchanges.named("kept").durable) is True
    for argument in ("qpid.msg_sequence=1", "qpid.ive=1"):
        refused = tool(broker, "add", "exchange", "topic", "seq", "--argument", argument)
        assert refused.returncode == 1 and "501" in refused.stderr, refused.stderr
        assert argument.split("=")[0] in refused.stderr
    assert broker.call(lambda: "seq" in broker.broker.exchanges) is False


def test_exchanges_take_qpid_configs_filter_and_r_tree(broker: RunningBroker) -> None:
    assert tool(broker, "add", "queue", "uk-news").returncode == 0
    assert tool(broker, "bind", "amq.topic", "uk-news", "news.uk.#").returncode == 0
    listed = tool(broker, "exchanges", "amq.t")
    assert [line.split()[:2] for line in listed.stdout.splitlines()[2:]] == [["amq.topic", "topic"]]
    tree = tool(broker, "exchanges", "-r", "topic")
    assert (tree.returncode, tree.stdout) == (
        0,
        "Exchange 'amq.topic' (topic)\n    bind [news.uk.#] => uk-news\n",
    )
    none = tool(broker, "exchanges", "nothing-like-it")
    assert (none.returncode, none.stdout) == (1, "")
