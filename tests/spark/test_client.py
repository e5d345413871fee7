"""The connector's AMQP client against the real broker (a subprocess, real sockets): browsing
a range and its edges, management bounds, sends that must all be accepted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Message
from proton.reactor import Selector
from proton.utils import BlockingConnection

from proton_broker.spark import encoding
from proton_broker.spark.client import (
    BrokerRequestError,
    browse_range,
    queue_bounds,
    send_all,
    sequence_number,
)
from proton_broker.testing import BrokerProcess


def _fill(url: str, queue: str, count: int, options: dict | None = None) -> tuple[int, int]:
    send_all(
        url,
        queue,
        (encoding.message(None, {"n": n}, content=f"m{n}") for n in range(count)),
        node_options=options,
    )
    bounds = queue_bounds(url, [queue])[queue]
    return bounds.earliest, bounds.next


def _numbers(url: str, queue: str, start: int, end: int, window: int = 10_000) -> list[int]:
    return [seq for seq, _ in browse_range(url, queue, start, end, window, timeout=10)]


def test_bounds_follow_what_the_queue_holds(broker_url: str, queue_name: str) -> None:
    earliest, after = _fill(broker_url, queue_name, 5)
    assert after - earliest == 5
    assert queue_bounds(broker_url, [queue_name])[queue_name].key is None


def test_a_range_gives_exactly_its_numbers_in_order_with_the_messages_bytes(
    broker_url: str, queue_name: str
) -> None:
    earliest, _ = _fill(broker_url, queue_name, 10)
    got = list(browse_range(broker_url, queue_name, earliest + 2, earliest + 6, timeout=10))
    assert [seq for seq, _ in got] == list(range(earliest + 2, earliest + 6))
    for seq, data in got:
        message = Message()
        message.decode(data)
        assert message.body == f"m{seq - earliest}"
        assert sequence_number(data) == seq


def test_an_empty_range_reads_nothing(broker_url: str, queue_name: str) -> None:
    earliest, _ = _fill(broker_url, queue_name, 3)
    assert _numbers(broker_url, queue_name, earliest + 1, earliest + 1) == []
    assert _numbers(broker_url, queue_name, earliest + 2, earliest) == []


def test_a_range_past_the_end_of_the_queue_stops_at_the_end(
    broker_url: str, queue_name: str
) -> None:
    earliest, after = _fill(broker_url, queue_name, 4)
    assert _numbers(broker_url, queue_name, earliest, after + 1000) == list(range(earliest, after))
    assert _numbers(broker_url, queue_name, after, after + 10) == []  # nothing there yet


def test_a_small_window_is_topped_up_until_the_range_is_read(
    broker_url: str, queue_name: str
) -> None:
    earliest, after = _fill(broker_url, queue_name, 50)
    assert _numbers(broker_url, queue_name, earliest, after, window=3) == list(
        range(earliest, after)
    )
    assert _numbers(broker_url, queue_name, earliest + 7, earliest + 20, window=4) == list(
        range(earliest + 7, earliest + 20)
    )


@pytest.fixture(scope="module")
def backlogged_broker_url() -> Iterator[str]:
    """A broker whose connections may hold little output (broker.max_connection_backlog at
    its least, 64 KiB): a browser of a larger range is held and let go many times."""
    env = {"PROTON_BROKER_BROKER_MAX_CONNECTION_BACKLOG": "65536"}
    with BrokerProcess("--store", "memory", env=env) as process:
        yield process.url


def test_a_range_larger_than_the_connections_backlog_is_read_to_its_end(
    backlogged_broker_url: str, queue_name: str
) -> None:
    url = backlogged_broker_url
    send_all(url, queue_name, (encoding.message(None, {"n": n}, "z" * 1000) for n in range(600)))
    bounds = queue_bounds(url, [queue_name])[queue_name]
    assert bounds.next - bounds.earliest == 600
    assert _numbers(url, queue_name, bounds.earliest, bounds.next) == list(
        range(bounds.earliest, bounds.next)
    )


def test_browsing_takes_nothing_off_the_queue(broker_url: str, queue_name: str) -> None:
    earliest, after = _fill(broker_url, queue_name, 6)
    first = _numbers(broker_url, queue_name, earliest, after)
    assert _numbers(broker_url, queue_name, earliest, after) == first
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    assert (bounds.earliest, bounds.next) == (earliest, after)


def test_messages_removed_from_the_middle_of_a_range_are_skipped(
    broker_url: str, queue_name: str
) -> None:
    earliest, after = _fill(broker_url, queue_name, 10)
    conn = BlockingConnection(broker_url, timeout=10)
    try:  # consume n = 3 and n = 4 (numbers earliest+3, earliest+4)
        receiver = conn.create_receiver(queue_name, credit=10, options=Selector("n in (3, 4)"))
        for _ in range(2):
            receiver.receive(timeout=5)
            receiver.accept()
    finally:
        conn.close()
    expected = [n for n in range(earliest, after) if n - earliest not in (3, 4)]
    assert _numbers(broker_url, queue_name, earliest, after) == expected
    assert _numbers(broker_url, queue_name, earliest + 3, earliest + 5) == []


def test_a_missing_queue_is_an_error_with_the_brokers_reason(strict_broker_url: str) -> None:
    with pytest.raises(BrokerRequestError, match=r"amqp:not-found.*no-such-queue"):
        list(browse_range(strict_broker_url, "no-such-queue", 1, 10, timeout=10))
    with pytest.raises(BrokerRequestError, match=r"READ of queue 'no-such-queue' failed with 404"):
        queue_bounds(strict_broker_url, ["no-such-queue"], timeout=10)


def test_a_refused_send_is_an_error_naming_the_outcome_and_the_condition(
    broker_url: str, queue_name: str
) -> None:
    full = {"qpid.max_count": 2, "qpid.policy_type": "reject"}
    _fill(broker_url, queue_name, 2, full)
    with pytest.raises(
        BrokerRequestError,
        match=rf"queue '{queue_name}' did not accept a message: rejected \(amqp:resource-limit",
    ):
        send_all(broker_url, queue_name, [encoding.message(None, None, "one too many")])
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    assert bounds.next - bounds.earliest == 2  # full, nothing more


def test_many_sends_in_flight_all_come_back_accepted(broker_url: str, queue_name: str) -> None:
    count = send_all(
        broker_url,
        queue_name,
        (encoding.message(None, None, bytes([n % 256]) * 10) for n in range(3000)),
        window=500,
    )
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    assert count == 3000 == bounds.next - bounds.earliest


def test_proton_messages_are_still_accepted_and_arrive_unchanged(
    broker_url: str, queue_name: str
) -> None:
    sent = Message(body={"a": [1, 2]}, subject="s", properties={"k": "v"})
    send_all(broker_url, queue_name, [sent])
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    [(_, data)] = browse_range(broker_url, queue_name, bounds.earliest, bounds.next)
    got = Message()
    got.decode(data)
    assert (got.body, got.subject, got.properties) == ({"a": [1, 2]}, "s", {"k": "v"})


def test_a_message_without_its_sequence_number_is_refused() -> None:
    with pytest.raises(BrokerRequestError, match="no x-opt-sequence-number"):
        sequence_number(encoding.message(None, {"n": 1}, "body"))
