"""The terminus options a Qpid user sets from rhea: capabilities, dynamic node properties,
and the receiver's prefetch window."""

from __future__ import annotations

import json

import pytest

from interop.clients import PYTHON, RHEA, ClientError


def test_the_broker_echoes_the_capabilities_it_honours_and_leaves_out_unknown_ones(
    broker, queue
) -> None:
    options = ["--capabilities", "queue,create-on-demand,x-unknown", "--print-attach"]
    sent = RHEA.send(broker.url, queue, [{"body": "one"}], *options)
    got = RHEA.receive(broker.url, queue, 1, options=options)
    assert sorted(sent[0]["attach"]["capabilities"]) == ["create-on-demand", "queue"]
    assert sorted(got[0]["attach"]["capabilities"]) == ["create-on-demand", "queue"]
    assert got[1]["body"] == "one"


def test_a_rhea_receiver_with_a_prefetch_of_one_still_gets_every_message_in_order(
    broker, queue
) -> None:
    PYTHON.send(broker.url, queue, [{"body": i} for i in range(20)])
    got = RHEA.receive(broker.url, queue, 20, options=["--credit", "1"])
    assert [m["body"] for m in got] == list(range(20))


def test_rhea_creates_and_browses_a_last_value_queue(broker, queue) -> None:
    options = [
        "--capabilities",
        "create-on-demand",
        "--print-attach",
        "--dynamic-node-properties",
        json.dumps({"qpid.last_value_queue_key": "ticker"}),
    ]
    updates = [("ACME", 1.5), ("BETA", 9.5), ("ACME", 2.5), ("ACME", 3.5)]
    sent = RHEA.send(
        broker.url,
        queue,
        [{"body": price, "properties": {"ticker": ticker}} for ticker, price in updates],
        *options,
    )
    assert sent[0]["attach"]["dynamic_node_properties"] == {"qpid.last_value_queue_key": "ticker"}
    got = RHEA.receive(broker.url, queue, 2, browse=True)
    assert [(m["properties"]["ticker"], m["body"]) for m in got] == [("BETA", 9.5), ("ACME", 3.5)]
    with pytest.raises(ClientError):  # only the two current values are kept
        RHEA.receive(broker.url, queue, 3, browse=True, timeout=1)


def test_rhea_browses_with_a_replay_period_filter_that_the_broker_echoes(broker, queue) -> None:
    PYTHON.send(broker.url, queue, [{"body": "kept"}, {"body": "also kept"}])
    got = RHEA.receive(
        broker.url, queue, 2, browse=True, options=["--replay-period", "3600", "--print-attach"]
    )
    assert got[0]["attach"]["filter"] == ["x-qpid-replay-period"]
    assert [m["body"] for m in got[1:]] == ["kept", "also kept"]
    with pytest.raises(ClientError):  # a period of 0: only messages newer than the attach
        RHEA.receive(broker.url, queue, 1, browse=True, timeout=1, options=["--replay-period", "0"])


def test_a_rhea_receiver_with_a_jms_selector_gets_only_matching_messages(broker, queue) -> None:
    PYTHON.send(
        broker.url,
        queue,
        [
            {"body": n, "properties": {"color": color}}
            for n, color in enumerate(["red", "blue", "red"])
        ],
    )
    got = RHEA.receive(
        broker.url, queue, 2, options=["--selector", "color = 'red'", "--print-attach"]
    )
    assert got[0]["attach"]["filter"] == ["jms-selector"]
    assert [m["body"] for m in got[1:]] == [0, 2]
    assert [m["body"] for m in RHEA.receive(broker.url, queue, 1)] == [1]
