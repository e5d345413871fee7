"""The Prometheus endpoint: a known workload over AMQP, then ``/metrics`` scraped over HTTP
and parsed with prometheus_client's own parser, every figure checked exactly.

Also the endpoint on its own port with the gateway off (in-process and with the
``--metrics-port`` flag), and the operational log codes the workload produces.
"""

from __future__ import annotations

import logging
import re
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from proton import Disposition, Endpoint, Message

from proton_broker.config import Config
from proton_broker.testing import BrokerProcess
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient
from tests.http.conftest import Http, http_config

RING_2 = {"qpid.policy_type": "ring", "qpid.max_count": 2}
REJECT_1 = {"qpid.policy_type": "reject", "qpid.max_count": 1}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> tuple[str, Samples]:
    """(content type, {(sample name, sorted labels): value}) of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        content_type, text = resp.headers["Content-Type"], resp.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return content_type, samples


def queue_figures(samples: Samples, queue: str) -> dict[str, float]:
    """The per-queue samples of ``queue``, by name without the ``proton_broker_`` prefix."""
    return {
        name.removeprefix("proton_broker_"): value
        for (name, labels), value in samples.items()
        if labels == (("queue", queue),)
    }


def broker_figure(samples: Samples, name: str) -> float:
    return samples[("proton_broker_" + name, ())]


def accepted(client: EngineClient, sender: object, message: Message) -> None:
    delivery = client.wait_settled(client.send(sender, message, pump=False))  # type: ignore[arg-type]
    assert delivery.remote_state == Disposition.ACCEPTED


def workload(running: RunningBroker) -> tuple[EngineClient, int]:
    """Sends, receives, a ring eviction, a reject-policy refusal, an expiry, a consumer's
    reject and a durable send; returns the client still open (with its consumer) and the
    byte size of the one message left on ``work``."""
    client = running.client()
    work = client.sender("work")
    bodies = [Message(body=f"job-{i}") for i in range(4)]
    for message in bodies:
        accepted(client, work, message)
    receiver = client.receiver("work", credit=3)
    got = client.wait_received(receiver, 3)
    client.settle(got[0])
    client.settle(got[1])
    client.settle(got[2], Disposition.REJECTED)

    ring = client.sender("ring", node_properties=RING_2)
    for i in range(3):
        accepted(client, ring, Message(body=i))
    reject = client.sender("full", node_properties=REJECT_1)
    accepted(client, reject, Message(body="fits"))
    refused = client.wait_settled(client.send(reject, Message(body="over"), pump=False))
    assert refused.remote_state == Disposition.REJECTED

    ttl = client.sender("ttl")
    accepted(client, ttl, Message(body="short", ttl=0.05))
    client.wait(lambda: running.call(lambda: running.broker.queues["ttl"].depth) == 0)

    durable = client.sender("kept", node_properties={"durable": True})
    accepted(client, durable, Message(body="on disk", durable=True))

    other = running.client()  # a second connection that comes and goes
    other.close()
    client.wait(lambda: running.call(lambda: figures_seen(running)) == (2, 1, 2, 1))
    return client, len(bodies[3].encode())


def figures_seen(running: RunningBroker) -> tuple[int, int, int, int]:
    """Connections opened and open, and messages dequeued and rejected on ``work``: once
    they match the workload, the broker has read every frame it was sent."""
    server, stats = running.server, running.broker.queues["work"].stats
    return server.connections_opened, len(server.connections), stats.dequeued, stats.rejected


def gateway_config() -> Config:
    config = http_config(expiry_interval=0.05)
    config.broker.store = "sqlite"  # the durable send is committed and timed
    return config


def test_metrics_after_a_known_workload_have_exact_values(
    start_gateway: Callable[[Config], Http],
) -> None:
    http = start_gateway(gateway_config())
    client, left_bytes = workload(http.running)
    content_type, samples = scrape(http.base + "/metrics")
    assert content_type.startswith("text/plain; version=")

    assert queue_figures(samples, "work") == {
        "queue_depth_messages": 1,
        "queue_depth_bytes": left_bytes,
        "queue_consumers": 1,
        "queue_enqueued_total": 4,
        "queue_dequeued_total": 2,
        "queue_rejected_total": 1,
        "queue_expired_total": 0,
        "queue_evicted_total": 0,
        "queue_refused_total": 0,
        "queue_released_total": 0,
        "queue_redelivered_total": 0,
        "queue_replaced_total": 0,
        "queue_paged_out_total": 0,
        "queue_duplicates_total": 0,
        "queue_dead_lettered_total": 0,
        "queue_delivery_attempts_exhausted_total": 0,
        "queue_dead_letters_discarded_total": 0,
    }
    ring = queue_figures(samples, "ring")
    assert (
        ring["queue_depth_messages"],
        ring["queue_enqueued_total"],
        ring["queue_evicted_total"],
    ) == (2, 3, 1)
    full = queue_figures(samples, "full")
    assert (
        full["queue_depth_messages"],
        full["queue_enqueued_total"],
        full["queue_refused_total"],
    ) == (1, 1, 1)
    ttl = queue_figures(samples, "ttl")
    assert (ttl["queue_depth_messages"], ttl["queue_depth_bytes"], ttl["queue_expired_total"]) == (
        0,
        0,
        1,
    )
    kept = queue_figures(samples, "kept")
    assert (kept["queue_depth_messages"], kept["queue_consumers"]) == (1, 0)

    assert broker_figure(samples, "queues") == 5
    assert broker_figure(samples, "connections") == 1
    assert broker_figure(samples, "connections_opened_total") == 2
    assert broker_figure(samples, "store_commit_failures_total") == 0


def test_store_commit_latency_is_a_histogram_of_the_durable_commits(
    start_gateway: Callable[[Config], Http],
) -> None:
    http = start_gateway(gateway_config())
    client = http.running.client()
    sender = client.sender("kept", node_properties={"durable": True})
    for i in range(3):  # one at a time: each is its own commit
        accepted(client, sender, Message(body=i, durable=True))
    accepted(client, client.sender("transient"), Message(body="not written"))
    _, samples = scrape(http.base + "/metrics")
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in samples.items()
        if name == "proton_broker_store_commit_seconds_bucket"
    )
    # Each send is a commit of its own, the message with the queue sequence number it got
    # as it joined the queue (the first also with the block of numbers the queue reserves),
    # and nothing for the transient one.
    commits = broker_figure(samples, "store_commit_seconds_count")
    assert commits == 3
    assert buckets[-1] == (float("inf"), commits)
    assert [value for _, value in buckets] == sorted(value for _, value in buckets)
    assert 0 < broker_figure(samples, "store_commit_seconds_sum") < 30


def test_each_exchange_reports_its_bindings_and_what_it_routed_and_dropped(
    start_gateway: Callable[[Config], Http],
) -> None:
    http = start_gateway(http_config())
    client = http.running.client()
    subscription = client.receiver("amq.topic/news.#", credit=10, name="news")
    sender = client.sender("amq.topic")
    accepted(client, sender, Message(subject="news.uk", body="routed"))
    accepted(client, sender, Message(subject="sport", body="dropped"))
    client.wait_received(subscription, 1)
    _, samples = scrape(http.base + "/metrics")
    topic = (("exchange", "amq.topic"), ("type", "topic"))
    assert samples[("proton_broker_exchange_bindings", topic)] == 1
    assert samples[("proton_broker_exchange_routed_total", topic)] == 1
    assert samples[("proton_broker_exchange_dropped_total", topic)] == 1
    fanout = (("exchange", "amq.fanout"), ("type", "fanout"))
    assert samples[("proton_broker_exchange_routed_total", fanout)] == 0
    assert queue_figures(samples, "test_news")["queue_enqueued_total"] == 1  # subscription


def test_history_memory_and_forgotten_keys_are_reported(
    start_gateway: Callable[[Config], Http],
) -> None:
    http = start_gateway(http_config(max_history_memory=4000))
    client = http.running.client()
    lvq = {"qpid.last_value_queue_key": "id"}
    sender = client.sender("prices", node_properties=lvq)
    for i in range(20):
        accepted(client, sender, Message(body="x" * 100, properties={"id": f"k{i}"}))
    _, samples = scrape(http.base + "/metrics")
    assert broker_figure(samples, "history_bytes") == 0  # every value is on its queue
    receiver = client.receiver("prices", credit=20, node_properties=lvq)
    client.settle_all(client.wait_received(receiver, 20))
    client.wait(lambda: http.running.call(lambda: http.running.broker.queues["prices"].depth) == 0)
    _, samples = scrape(http.base + "/metrics")
    held = broker_figure(samples, "history_bytes")
    assert 0 < held <= 4000
    assert broker_figure(samples, "history_keys_forgotten_total") > 0


def test_a_memory_store_reports_no_commits(start_gateway: Callable[[Config], Http]) -> None:
    http = start_gateway(http_config())
    client = http.running.client()
    accepted(
        client,
        client.sender("kept", node_properties={"durable": True}),
        Message(body="x", durable=True),
    )
    _, samples = scrape(http.base + "/metrics")
    assert broker_figure(samples, "store_commit_seconds_count") == 0
    assert queue_figures(samples, "kept")["queue_enqueued_total"] == 1


def test_metrics_have_their_own_port_when_the_gateway_is_off(tmp_path: Path) -> None:
    config = Config()
    config.broker.data_dir = str(tmp_path / "data")
    config.metrics.enabled = True
    config.metrics.port = 0
    running = RunningBroker(config)
    try:
        assert running.app.http is None
        host, port = running.app.metrics.address
        client = running.client()
        accepted(client, client.sender("solo"), Message(body="x"))
        _, samples = scrape(f"http://{host}:{port}/metrics")
        assert queue_figures(samples, "solo")["queue_depth_messages"] == 1
        assert broker_figure(samples, "connections") == 1
        assert running.alive()
    finally:
        running.stop()


def test_the_metrics_port_flag_serves_metrics_from_a_broker_process() -> None:
    with BrokerProcess("--metrics-port", "0", "--store", "memory") as process:
        found = None
        deadline = time.monotonic() + 10
        while found is None and time.monotonic() < deadline:
            found = re.search(r"metrics on (http://\S+/metrics)", "".join(process.output))
            time.sleep(0.05)
        assert found is not None, "".join(process.output)
        _, samples = scrape(found.group(1))
        assert broker_figure(samples, "queues") == 0
        assert broker_figure(samples, "connections_opened_total") == 0


def test_a_metrics_port_in_use_stops_start_up_with_a_message_naming_it() -> None:
    with BrokerProcess("--metrics-port", "0", "--store", "memory") as first:
        port = re.search(r"metrics on http://\S+:(\d+)/", "".join(first.output))
        assert port is not None
        second = BrokerProcess("--metrics-port", port.group(1), "--store", "memory")
        with pytest.raises(RuntimeError) as failed:
            second.start()
        assert f"cannot listen on 127.0.0.1:{port.group(1)} (metrics)" in str(failed.value)


def test_connections_and_the_store_log_their_codes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "proton_broker")
    config = Config()
    config.broker.data_dir = str(tmp_path / "data")
    running = RunningBroker(config)
    try:
        client = running.client(container="metrics-test")
        accepted(
            client,
            client.sender("kept", node_properties={"durable": True}),
            Message(body="x", durable=True),
        )
        client.close()
        client.wait(lambda: running.call(lambda: len(running.server.connections)) == 0)
    finally:
        running.stop()
    again = RunningBroker(config)  # recovery of the durable queue and its message
    again.stop()
    lines = [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    codes = [line.split(" :")[0] for line in lines if re.match(r"[A-Z]{3}-\d{4}", line)]
    assert codes[:3] == ["MST-1001", "MST-1002", "MST-1004"]
    assert [c for c in codes if c.startswith("CON")] == ["CON-1001", "CON-1002"]
    assert codes.count("MST-1003") == 2
    opened = next(line for line in lines if line.startswith("CON-1001"))
    assert "Client ID : metrics-test : User : anonymous" in opened
    assert "MST-1005 : Recovered 1 messages for queue 'kept'" in lines
    assert "MST-1006 : Recovery Complete : 1 durable queues, 1 messages" in lines


def test_many_evictions_and_refusals_log_one_pair_of_lines_and_count_every_message(
    start_gateway: Callable[[Config], Http], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "proton_broker.queues")
    http = start_gateway(http_config())
    client = http.running.client()
    ring = client.sender("ring", node_properties=RING_2)
    for i in range(10):
        accepted(client, ring, Message(body=i))
    full = client.sender("full", node_properties=REJECT_1)
    accepted(client, full, Message(body="fits"))
    for i in range(4):
        refused = client.wait_settled(client.send(full, Message(body=i), pump=False))
        assert refused.remote_state == Disposition.REJECTED
    _, samples = scrape(http.base + "/metrics")
    assert queue_figures(samples, "ring")["queue_evicted_total"] == 8
    assert queue_figures(samples, "full")["queue_refused_total"] == 4
    for name in ("ring", "full"):  # one message taken: each is back at its resume level
        receiver = client.receiver(name, credit=1)
        client.settle(client.wait_received(receiver, 1)[0])
    client.wait(lambda: len(limit_lines(caplog)) == 4)
    over, back = limit_lines(caplog, "QUE-1003"), limit_lines(caplog, "QUE-1004")
    assert "'ring'" in over[0] and "deleting the oldest messages" in over[0]
    assert "'full'" in over[1] and "rejecting new messages" in over[1]
    assert "'ring'" in back[0] and back[0].endswith(" : 8 messages deleted while over")
    assert "'full'" in back[1] and back[1].endswith(" : 4 messages refused while over")


def limit_lines(caplog: pytest.LogCaptureFixture, code: str = "QUE-100") -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(code) and r.getMessage()[:8] in ("QUE-1003", "QUE-1004")
    ]


def test_a_socket_that_never_opens_a_connection_is_counted_but_not_logged(
    start_gateway: Callable[[Config], Http], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "proton_broker.amqp")
    http = start_gateway(http_config())
    running = http.running
    with socket.create_connection((running.host, running.port), timeout=5):
        pass  # a port probe: connects and goes without a word of AMQP
    client = running.client()
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)  # the broker's open
    server = running.server
    client.wait(
        lambda: running.call(lambda: (server.connections_opened, len(server.connections))) == (2, 1)
    )
    _, samples = scrape(http.base + "/metrics")
    assert broker_figure(samples, "connections_opened_total") == 2
    assert broker_figure(samples, "connections") == 1
    assert [r.getMessage()[:8] for r in caplog.records if r.getMessage().startswith("CON-")] == [
        "CON-1001"
    ]
