"""qpidd's queue options from a client that is not Python (rhea), in the node properties
where a qpid::messaging address's x-declare arguments go: a self-destruct queue, a queue's
own filter and its sequence stamp, each checked against what the broker then does."""

from __future__ import annotations

import json

from interop.clients import RHEA
from interop.test_management import QUEUE, manage, request
from proton_broker.testing import BrokerProcess


def declaring(options: dict) -> list[str]:
    return ["--capabilities", "create-on-demand", "--dynamic-node-properties", json.dumps(options)]


def test_a_self_destruct_queue_takes_the_message_over_its_limit_then_goes(
    broker: BrokerProcess, queue: str
) -> None:
    options = {"qpid.policy_type": "self-destruct", "qpid.max_count": 2}
    RHEA.send(broker.url, queue, [{"body": n} for n in range(3)], *declaring(options))
    (read,) = manage(broker, request("READ", QUEUE, queue))  # every one was accepted
    assert read["statusCode"] == 404


def test_a_queue_s_own_filter_keeps_what_it_selects(broker: BrokerProcess, queue: str) -> None:
    colours = ["red", "blue", "red"]
    messages = [{"body": n, "properties": {"colour": c}} for n, c in enumerate(colours)]
    RHEA.send(broker.url, queue, messages, *declaring({"qpid.filter": "colour = 'red'"}))
    assert [m["body"] for m in RHEA.receive(broker.url, queue, 2)] == [0, 2]
    (stats,) = manage(broker, request("getStatistics", QUEUE, queue))
    assert stats["body"]["queueDepthMessages"] == 0


def test_the_sequence_stamp_is_the_queue_number_under_its_name(
    broker: BrokerProcess, queue: str
) -> None:
    stamped = declaring({"qpid.queue_msg_sequence": "qpid.seq"})
    RHEA.send(broker.url, queue, [{"body": n} for n in range(2)], *stamped)
    got = RHEA.receive(broker.url, queue, 2, options=["--print-annotations"])
    stamps = [m["annotations"]["qpid.seq"] for m in got]
    assert stamps == [m["annotations"]["x-opt-sequence-number"] for m in got] == [1, 2]
