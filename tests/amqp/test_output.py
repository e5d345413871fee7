"""A client that grants credit and then does not read its socket is handed no more than its
connection's backlog may hold (``broker.max_connection_backlog``, amqp/output.py), not its
whole credit: the rest of the queue stays available to others, and it is served again once
it reads."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from proton import Message

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient

MESSAGES, SIZE = 300, 100_000  # 30 MB: more than the kernel's socket buffers hold


@pytest.fixture
def bounded() -> Iterator[RunningBroker]:
    config = Config()
    config.broker.max_connection_backlog = 65536  # the least it may be
    running = RunningBroker(config)
    yield running
    running.stop()


def fill(broker: RunningBroker, address: str) -> None:
    client = broker.client()
    sender = client.sender(address)
    for n in range(MESSAGES):
        client.send(sender, Message(body=b"x" * SIZE, properties={"n": n}), pump=False)
        client.pump(0.0)
    client.wait(lambda: depth(broker, address) == MESSAGES, timeout=30)
    client.close()


def depth(broker: RunningBroker, address: str) -> int:
    return broker.call(lambda: broker.broker.queues[address].depth)


def stuck_receiver(broker: RunningBroker, address: str, browse: bool = False) -> EngineClient:
    """A client that attaches a receiver with credit for the whole queue and from then on
    reads nothing (its socket takes little); it reads again once ``reads_again``."""
    client = broker.client(container="stuck")
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    client._read = lambda: False  # type: ignore[method-assign]
    client.link = client.receiver(address, credit=MESSAGES, browse=browse, wait=False)  # type: ignore[attr-defined]
    time.sleep(1)  # the broker sends what it will
    return client


def reads_again(client: EngineClient) -> None:
    del client._read  # the class's own again


def taken_by(broker: RunningBroker, container: str) -> int:
    """The deliveries the broker has given the links of ``container``'s connection."""

    def count() -> int:
        return sum(
            len(state.unsettled)
            for state in broker.server.links.values()
            if hasattr(state, "unsettled") and state.link.connection.remote_container == container
        )

    return int(broker.call(count))


def test_a_consumer_that_does_not_read_leaves_the_rest_of_the_queue_to_the_others(
    bounded: RunningBroker,
) -> None:
    fill(bounded, "unread")
    stuck = stuck_receiver(bounded, "unread")
    reader = bounded.client(container="reader")
    other = reader.receiver("unread", credit=MESSAGES)
    held_back = taken_by(bounded, "stuck")
    assert held_back < MESSAGES // 2  # its session's bound and the sockets' buffers
    got = reader.wait_received(other, MESSAGES - held_back, timeout=30)
    assert len(got) == MESSAGES - held_back
    stuck.close()


def test_a_consumer_held_for_its_session_is_served_again_once_it_reads(
    bounded: RunningBroker,
) -> None:
    fill(bounded, "slow")
    stuck = stuck_receiver(bounded, "slow")
    assert taken_by(bounded, "stuck") < MESSAGES // 2
    reads_again(stuck)
    got = stuck.wait_received(stuck.link, MESSAGES, timeout=60)  # type: ignore[attr-defined]
    assert [r.message.properties["n"] for r in got] == list(range(MESSAGES))
    stuck.close()


def test_a_browser_that_does_not_read_is_not_handed_the_whole_queue(
    bounded: RunningBroker,
) -> None:
    fill(bounded, "browsed")
    stuck = stuck_receiver(bounded, "browsed", browse=True)
    assert taken_by(bounded, "stuck") < MESSAGES // 2
    reads_again(stuck)
    got = stuck.wait_received(stuck.link, MESSAGES, timeout=60)  # type: ignore[attr-defined]
    assert len(got) == MESSAGES and depth(bounded, "browsed") == MESSAGES
    stuck.close()


# ---- drain while held ----------------------------------------------------------------------
# A drain means "send me everything you have, then tell me you are out" (JMS receiveNoWait,
# Proton's drain, the Spark connector's end of a range). A consumer held for its
# connection's backlog is not out: it is answered only once it has been let go and has
# sent everything it may take.

SMALL, SMALL_SIZE = 600, 1_000  # 600 kB: about ten times the backlog bound


def fill_small(broker: RunningBroker, address: str) -> None:
    client = broker.client()
    sender = client.sender(address)
    for n in range(SMALL):
        client.send(sender, Message(body=b"y" * SMALL_SIZE, properties={"n": n}), pump=False)
        client.pump(0.0)
    client.wait(lambda: depth(broker, address) == SMALL, timeout=30)
    client.close()


def drained(broker: RunningBroker, address: str, browse: bool) -> list[int]:
    """What a receiver that drains with credit for more than the queue gets before the
    broker answers the drain (its numbers)."""
    client = broker.client()
    link = client.receiver(address, browse=browse)
    link.drain(SMALL * 2)
    client.wait(lambda: not link.draining(), timeout=30)
    assert link.credit == 0
    return [r.message.properties["n"] for r in client.received(link)]


def test_a_drain_held_for_the_connections_backlog_is_answered_once_every_message_is_sent(
    bounded: RunningBroker,
) -> None:
    fill_small(bounded, "held-drain")
    assert drained(bounded, "held-drain", browse=False) == list(range(SMALL))
    assert depth(bounded, "held-drain") == SMALL  # unsettled: acquired, not yet consumed


def test_a_browser_drain_held_for_the_connections_backlog_is_answered_at_the_queues_end(
    bounded: RunningBroker,
) -> None:
    fill_small(bounded, "browse-drained")
    assert drained(bounded, "browse-drained", browse=True) == list(range(SMALL))
