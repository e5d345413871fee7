"""Clients nobody here wrote subscribe to exchanges: rhea and Proton C++ receivers on
``amq.topic`` with wildcards each get their own copy of what matches and nothing else, and
rhea's headers-binding filter selects on ``amq.match`` with ``x-match`` all and any."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from interop.clients import CPP, RHEA, _ExternalClient
from proton_broker.cli.client import ManagementClient
from proton_broker.testing import BrokerProcess


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    process = BrokerProcess("--store", "memory", data_dir=str(tmp_path)).start()
    yield process
    process.stop()
    assert "Traceback" not in "".join(process.output)


class Subscriber:
    """A client's receiver running in the background until it has ``count`` messages (or,
    with ``idle``, until none has come for that long)."""

    def __init__(
        self, client: _ExternalClient, url: str, address: str, count: int, *options: str
    ) -> None:
        cmd = [*client.command("receive"), url, address, str(count), "--timeout", "20", *options]
        self.process = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def bodies(self) -> list[object]:
        out, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        return [json.loads(line)["body"] for line in out.splitlines() if '"body"' in line]


def wait_for_bindings(broker: BrokerProcess, exchange: str, count: int) -> None:
    """Until ``count`` subscriptions are bound to ``exchange`` (the receivers attached)."""
    deadline = time.monotonic() + 20
    with ManagementClient(broker.url) as management:
        while time.monotonic() < deadline:
            reply = management.request("READ", "org.apache.qpid.Exchange", exchange)
            if reply.ok and reply.body["bindingCount"] >= count:
                return
            time.sleep(0.1)
    raise AssertionError(f"{count} subscribers did not attach to {exchange}")


def test_rhea_and_cpp_topic_subscribers_each_get_what_their_pattern_matches(
    broker: BrokerProcess,
) -> None:
    url = broker.url
    all_news = Subscriber(RHEA, url, "amq.topic/news.#", 3)
    uk = Subscriber(CPP, url, "amq.topic/news.uk.*", 2)
    sport = Subscriber(RHEA, url, "amq.topic/*.*.sport", 2)
    weather = Subscriber(RHEA, url, "amq.topic/weather.#", 1, "--idle", "5")  # none come
    wait_for_bindings(broker, "amq.topic", 4)
    RHEA.send(
        url,
        "amq.topic",
        [
            {"subject": "news.uk.sport", "body": "uk sport"},
            {"subject": "news.fr.sport", "body": "fr sport"},
            {"subject": "news.uk.politics", "body": "uk politics"},
        ],
    )
    assert all_news.bodies() == ["uk sport", "fr sport", "uk politics"]
    assert uk.bodies() == ["uk sport", "uk politics"]
    assert sport.bodies() == ["uk sport", "fr sport"]
    assert weather.bodies() == []


def test_cpp_publishes_to_an_exchange_subject_in_its_address(broker: BrokerProcess) -> None:
    url = broker.url
    orders = Subscriber(RHEA, url, "amq.direct/orders", 1)
    wait_for_bindings(broker, "amq.direct", 1)
    CPP.send(url, "amq.direct/orders", [{"body": "by the address' subject"}])
    assert orders.bodies() == ["by the address' subject"]


def test_rhea_headers_subscribers_match_all_or_any(broker: BrokerProcess) -> None:
    url = broker.url
    every = {"x-match": "all", "colour": "red", "size": "big"}
    either = {"x-match": "any", "colour": "red", "size": "big"}
    both = Subscriber(RHEA, url, "amq.match", 1, "--headers-filter", json.dumps(every))
    one = Subscriber(RHEA, url, "amq.match", 2, "--headers-filter", json.dumps(either))
    wait_for_bindings(broker, "amq.match", 2)
    CPP.send(
        url,
        "amq.match",
        [
            {"body": "red and big", "properties": {"colour": "red", "size": "big"}},
            {"body": "red", "properties": {"colour": "red", "size": "small"}},
            {"body": "blue", "properties": {"colour": "blue"}},
        ],
    )
    assert both.bodies() == ["red and big"]
    assert one.bodies() == ["red and big", "red"]
