"""Limits on what one client can take, on by default, each answered with the AMQP condition
a client can act on: connections (in all, and per client address), the AMQP handshake's
time, queues (in all, and created per connection) and the size of a message."""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import pytest
from proton import Data, Disposition, Endpoint, Link, Message, symbol

from proton_broker.config import Config
from tests.amqp.test_disposition import modified_and_taken_again
from tests.amqp.test_transfer import sent_behind
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient


@pytest.fixture
def broker_config() -> Config:
    config = Config()
    config.broker.store = "memory"
    config.broker.max_connections = 3
    config.broker.max_connections_per_address = 2
    config.broker.handshake_timeout = 0.5
    config.broker.max_queues = 5
    config.broker.max_queues_per_connection = 2
    config.broker.max_message_size = 10_000
    config.broker.max_memory = 100_000
    config.broker.max_transactions_per_connection = 2
    config.broker.max_sessions_per_connection = 3
    config.broker.max_links_per_connection = 4
    return config


def test_the_defaults_are_on() -> None:
    defaults = Config().broker
    assert defaults.max_connections == 10_000
    assert defaults.max_connections_per_address == 1_000
    assert defaults.max_connections_per_user == 1_000
    assert defaults.handshake_timeout == 10.0
    assert defaults.max_queues == 100_000
    assert defaults.max_queues_per_connection == 1_000
    assert defaults.max_message_size == 100 * 1024 * 1024
    assert defaults.max_memory == 1024 * 1024 * 1024
    assert defaults.max_history_memory == 1024 * 1024 * 1024
    assert defaults.max_transactions_per_connection == 1_000
    assert defaults.max_name_length == 1024


# ---- connections ----------------------------------------------------------------------------


def test_a_connection_over_the_per_address_limit_is_refused_with_resource_limit_exceeded(
    broker: RunningBroker,
) -> None:
    first, second = broker.client(), broker.client()
    for client in (first, second):
        client.wait(lambda c=client: c.conn.remote_container)
    third = broker.client()
    third.wait(lambda: third.conn.remote_condition is not None)
    assert third.conn.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "2 connections from 127.0.0.1 are open already" in (
        third.conn.remote_condition.description
    )
    assert "broker.max_connections_per_address" in third.conn.remote_condition.description
    first.close()  # a place comes free
    fourth = broker.client()
    fourth.wait_settled(fourth.send(fourth.sender("q"), Message(body="in"), pump=False))
    assert fourth.conn.remote_condition is None


def test_a_connection_over_the_per_user_limit_is_refused_naming_the_user(
    broker_config: Config,
) -> None:
    broker_config.broker.max_connections_per_user = 1
    running = RunningBroker(broker_config)
    try:
        first = running.client()
        first.wait(lambda: first.conn.remote_container)
        second = running.client()  # anonymous too: the same user
        second.wait(lambda: second.conn.remote_condition is not None)
        condition = second.conn.remote_condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert "user 'anonymous' has 1 connections open already" in condition.description
        assert "broker.max_connections_per_user" in condition.description
    finally:
        running.stop()


def test_connections_are_counted_from_their_accept_and_until_they_end(
    broker: RunningBroker,
) -> None:
    for _ in range(5):  # more than the limits, one after another: each closes first
        client = broker.client()
        client.wait_settled(client.send(client.sender("q"), Message(body="x"), pump=False))
        client.close()
    assert broker.call(lambda: broker.server.quotas.open_connections) == 0


def test_a_socket_that_never_opens_is_closed_after_the_handshake_timeout(
    broker: RunningBroker,
) -> None:
    idle = socket.create_connection((broker.host, broker.port))
    header = socket.create_connection((broker.host, broker.port))
    header.sendall(b"AMQP\x00\x01\x00\x00")  # the protocol header, then nothing
    started = time.monotonic()
    for sock in (idle, header):
        sock.settimeout(5)
        while sock.recv(4096):  # the broker's header, perhaps; then end of stream
            pass
    assert time.monotonic() - started < 3
    idle.close()
    header.close()
    client = broker.client()  # an honest client is served
    client.wait_settled(client.send(client.sender("q"), Message(body="in"), pump=False))


def test_sockets_that_never_open_hold_their_places_under_the_connection_limits(
    broker_config: Config,
) -> None:
    broker_config.broker.handshake_timeout = 10.0
    running = RunningBroker(broker_config)
    try:
        silent = [socket.create_connection((running.host, running.port)) for _ in range(2)]
        deadline = time.monotonic() + 5
        while running.call(lambda: running.server.quotas.open_connections) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        third = running.client()  # the address's limit is 2: refused at once, and told why
        third.wait(lambda: third.conn.remote_condition is not None)
        assert third.conn.remote_condition.name == "amqp:resource-limit-exceeded"
        assert "broker.max_connections_per_address" in third.conn.remote_condition.description
        silent[0].close()  # a place comes free
        fourth = running.client()
        fourth.wait_settled(fourth.send(fourth.sender("q"), Message(body="in"), pump=False))
        silent[1].close()
    finally:
        running.stop()


def test_a_frame_larger_than_a_few_kib_before_the_open_is_refused_at_once(
    broker_config: Config,
) -> None:
    broker_config.broker.handshake_timeout = 10.0
    running = RunningBroker(broker_config)
    try:
        sock = socket.create_connection((running.host, running.port))
        size = 1 << 20  # a frame the size of max_frame_size, announced before any open
        sock.sendall(b"AMQP\x00\x01\x00\x00" + size.to_bytes(4, "big") + b"\x02\x00\x00\x00")
        sock.sendall(b"\x00" * 8192)
        started = time.monotonic()
        sock.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while sock.recv(4096):  # the broker's header and its framing error, then the end
                pass
        assert time.monotonic() - started < 2  # not the handshake timeout's 10 s
        sock.close()
        client = running.client()  # once open, frames of max_frame_size are taken
        client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)  # its open read
        assert client.transport.remote_max_frame_size == broker_config.broker.max_frame_size
    finally:
        running.stop()


# ---- queues -------------------------------------------------------------------------------


def test_a_connection_may_create_only_so_many_queues(broker: RunningBroker) -> None:
    client = broker.client()
    client.sender("made-1")
    client.sender("made-2")
    third = client.sender("made-3")
    client.wait_closed(third)
    assert third.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "this connection created 2 queues already" in third.remote_condition.description
    assert "made-3" not in broker.broker.queues
    client.wait_settled(
        client.send(client.sender("made-1"), Message(body="existing is fine"), pump=False)
    )
    other = broker.client()  # another connection has its own quota
    other.wait_settled(other.send(other.sender("made-3"), Message(body="x"), pump=False))


def test_dynamic_temporary_queues_count_against_the_connection(broker: RunningBroker) -> None:
    client = broker.client()
    made = [client.receiver(None, dynamic=True) for _ in range(3)]
    client.wait_closed(made[2])
    assert made[2].remote_condition.name == "amqp:resource-limit-exceeded"


def test_the_broker_creates_at_most_max_queues(broker: RunningBroker) -> None:
    for n in range(3):
        client = broker.client()
        for m in range(2):
            link = client.sender(f"q-{n}-{m}")
        client.pump(0.1)
        if n == 2:
            client.wait_closed(link)
            assert link.remote_condition.name == "amqp:resource-limit-exceeded"
            assert "the broker has 5 queues" in link.remote_condition.description
        client.close()
    assert len(broker.broker.queues) == 5


# ---- sessions and links ---------------------------------------------------------------------


def test_a_connection_is_told_how_many_sessions_it_may_begin(broker: RunningBroker) -> None:
    client = broker.client()
    client.wait(lambda: client.conn.state & Endpoint.REMOTE_ACTIVE)  # its open read
    assert client.transport.remote_channel_max == 2  # three sessions: channels 0 to 2


def test_a_link_beyond_the_connections_limit_is_refused_and_the_others_go_on(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    links = [client.receiver(f"linked-{n % 2}", credit=1) for n in range(4)]
    assert all(link.state & Endpoint.REMOTE_ACTIVE for link in links)
    refused = client.sender("linked-0")
    client.wait_closed(refused)
    assert refused.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "broker.max_links_per_connection" in refused.remote_condition.description
    refused.close()  # a refused link counts until its client detaches it too
    links[0].close()  # a link that goes makes room for another
    client.pump()  # the detaches go out first (Proton's engine writes attaches before them)
    client.wait(lambda: links[0].state & Endpoint.REMOTE_CLOSED)
    sender = client.sender("linked-1")
    client.wait_settled(client.send(sender, Message(body="in"), pump=False))
    readers = (links[1], links[3])  # the two on linked-1 share it
    client.wait(lambda: sum(len(client.received(link)) for link in readers) == 1)
    assert [r.message.body for link in readers for r in client.received(link)] == ["in"]


def a_refused_sender(client: EngineClient, name: str) -> Link:
    """A sender the broker refuses (an unknown node option: amqp:invalid-field, or the
    link limit), its detach never answered."""
    link = client.session.sender(name)
    link.target.address = name
    properties = link.target.properties
    properties.put_map()
    properties.enter()
    properties.put_symbol("no-such-option")
    properties.put_int(1)
    properties.exit()
    link.open()
    client.wait_closed(link)
    return link


def test_refused_links_count_against_the_link_limit_until_the_client_detaches_them(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    refused = [a_refused_sender(client, f"refused-{n}") for n in range(4)]
    assert {link.remote_condition.name for link in refused} == {"amqp:invalid-field"}
    over = client.sender("fine")
    client.wait_closed(over)
    assert over.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "broker.max_links_per_connection" in over.remote_condition.description
    over.close()
    refused[0].close()  # detached by both sides now: it no longer counts
    client.pump()  # the detaches go out first (Proton's engine writes attaches before them)
    sender = client.sender("fine-again")
    client.wait_settled(client.send(sender, Message(body="in"), pump=False))


def test_a_connection_that_keeps_attaching_refused_links_is_closed_at_twice_the_limit(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    for n in range(7):  # four refused for their option, three for the limit: none detached
        a_refused_sender(client, f"refused-{n}")
    client.session.sender("one-more").open()
    client.wait(lambda: client.conn.remote_condition is not None)
    assert client.conn.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "without detaching" in client.conn.remote_condition.description


# ---- message size ----------------------------------------------------------------------------


def test_the_largest_message_is_advertised_on_the_attach(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("sized")
    client.wait(lambda: sender.remote_max_message_size)
    assert sender.remote_max_message_size == 10_000


@pytest.mark.parametrize("size", [20_000, 2_000_000])
def test_a_message_over_max_message_size_is_refused_with_message_size_exceeded(
    broker: RunningBroker, size: int
) -> None:
    client = broker.client()
    sender = client.sender("sized")
    delivery = client.send(sender, Message(body=b"x" * size))
    client.wait_closed(sender)
    assert sender.remote_condition.name == "amqp:link:message-size-exceeded"
    assert "larger than 10000 bytes" in sender.remote_condition.description
    assert delivery.remote.condition.name == "amqp:link:message-size-exceeded"
    assert broker.call(lambda: broker.broker.queues["sized"].depth) == 0
    fits = client.sender("sized", name="again")
    client.wait_settled(client.send(fits, Message(body=b"x" * 5_000), pump=False))
    assert broker.call(lambda: broker.broker.queues["sized"].depth) == 1


@pytest.mark.parametrize("size", [20_000, 2_000_000])
def test_messages_sent_behind_an_oversized_one_are_not_stored_once_the_link_is_detached(
    broker: RunningBroker, size: int
) -> None:
    client = broker.client()
    sender = client.sender("sized")
    client.wait(lambda: sender.remote_max_message_size)
    sent_behind(client, sender, Message(body=b"x" * size), "amqp:link:message-size-exceeded")
    assert broker.call(lambda: broker.broker.queues["sized"].depth) == 0


@pytest.mark.parametrize("size", [20_000, 2_000_000])
@pytest.mark.parametrize("node", ["coordinator", "$management"])
def test_a_request_over_max_message_size_is_refused_on_the_control_links_too(
    broker: RunningBroker, size: int, node: str
) -> None:
    """The transaction coordinator and the management node buffer no more than a queue's
    producer link does (Broker-J's coordinator is held to the same limit). The limit is
    advertised on the management node's attach; Proton's engine sends none on a
    coordinator's."""
    client = broker.client()
    if node == "coordinator":
        link = client.coordinator()
    else:
        link = client.sender("$management")
        client.wait(lambda: link.remote_max_message_size)
        assert link.remote_max_message_size == 10_000
    client.send(link, Message(body=b"x" * size))
    client.wait_closed(link)
    assert link.remote_condition.name == "amqp:link:message-size-exceeded"
    coordinator = client.coordinator(name="second")  # the connection goes on serving
    assert client.declare(coordinator)


def test_annotations_that_would_take_a_message_past_the_size_limit_are_not_merged(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A modified outcome's annotations grow the message they go into (see docs/behaviour.md):
    not past broker.max_message_size, or a consumer could grow one without end."""
    client = broker.client()
    sender = client.sender("grown")
    client.wait_settled(client.send(sender, Message(body=b"x" * 5_000), pump=False))
    receiver = client.receiver("grown", credit=1)
    big = {symbol("x-big"): "v" * 6_000}
    again = modified_and_taken_again(client, receiver, failed=True, annotations=big)
    assert again.delivery_count == 1  # the outcome itself applies
    assert "x-big" not in again.annotations
    assert "not merged" in caplog.text
    client.settle(
        client.received(receiver)[1], Disposition.MODIFIED, annotations={symbol("x-small"): 1}
    )
    receiver.flow(1)
    last = client.wait_received(receiver, 3)[2].message
    assert last.annotations["x-small"] == 1  # what fits is merged


# ---- memory -----------------------------------------------------------------------------------


def test_a_full_memory_budget_stops_every_producer_until_consumers_make_room(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    first, second = client.sender("mem-a"), client.sender("mem-b")
    client.wait(lambda: first.credit > 0 and second.credit > 0)
    sent = 0
    while first.credit > 0 and sent < 100:  # 5 KB each: the 100 KB budget fills at 21
        client.send(first, Message(body=b"m" * 5_000))
        sent += 1
        client.pump(0.01)
    client.wait(lambda: first.credit == 0 and second.credit == 0)  # both stopped
    used = broker.call(lambda: broker.broker.loop_hooks.budget.used)
    assert 100_000 < used < 120_000  # over by what was in flight, not by the window
    assert broker.call(lambda: broker.broker.queues["mem-a"].depth) == sent  # nothing lost
    receiver = client.receiver("mem-a", credit=sent)
    received = client.wait_received(receiver, sent)
    for item in received:
        item.delivery.update(item.delivery.ACCEPTED)
        item.delivery.settle()
    client.wait(lambda: first.credit > 0 and second.credit > 0)  # room again: both go on
    client.wait_settled(client.send(second, Message(body="after"), pump=False))


def test_messages_staged_in_a_transaction_fill_the_memory_budget_and_a_rollback_empties_it(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    staging, other = client.sender("txn-mem"), client.sender("txn-other")
    client.wait(lambda: staging.credit > 0 and other.credit > 0)
    sent = 0
    while staging.credit > 0 and sent < 100:  # 5 KB each: the 100 KB budget fills at 21
        client.send(staging, Message(body=b"t" * 5_000), txn=txn)
        sent += 1
        client.pump(0.01)
    client.wait(lambda: staging.credit == 0 and other.credit == 0)  # every producer stops
    assert broker.call(lambda: broker.broker.loop_hooks.budget.used) > 100_000
    assert broker.call(lambda: broker.broker.queues["txn-mem"].depth) == 0  # only staged
    # the coordinator is no producer: the client can still end its transaction
    assert client.discharge(coordinator, txn, fail=True).remote_state == Disposition.ACCEPTED
    client.wait(lambda: staging.credit > 0 and other.credit > 0)
    assert broker.call(lambda: broker.broker.loop_hooks.budget.used) == 0
    txn = client.declare(coordinator)  # a commit: the bytes count on the queue instead
    sends = [client.send(staging, Message(body=b"c" * 5_000), txn=txn) for _ in range(2)]
    client.wait(lambda: all(each.remote_state for each in sends))
    staged = broker.call(lambda: broker.broker.loop_hooks.budget.used)
    assert client.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    queued = broker.call(lambda: broker.broker.queues["txn-mem"].bytes)
    assert staged == queued > 10_000
    assert broker.call(lambda: broker.broker.loop_hooks.budget.used) == queued


def test_a_connection_may_have_only_so_many_transactions_open(broker: RunningBroker) -> None:
    client = broker.client()
    coordinator = client.coordinator()
    first, _second = client.declare(coordinator), client.declare(coordinator)
    third = client.control(coordinator, 0x31, [])
    assert third.remote_state == Disposition.REJECTED
    assert third.remote.condition.name == "amqp:resource-limit-exceeded"
    assert "broker.max_transactions_per_connection" in third.remote.condition.description
    other = broker.client()  # another connection has its own
    assert other.declare(other.coordinator())
    assert client.discharge(coordinator, first).remote_state == Disposition.ACCEPTED
    assert client.declare(coordinator)  # one ended: room for one more


def test_names_over_max_name_length_are_refused_with_invalid_field_and_nothing_is_made(
    broker_config: Config,
) -> None:
    broker_config.broker.max_name_length = 40
    running = RunningBroker(broker_config)
    try:
        client = running.client()
        long = "q" * 41
        for link in (client.receiver(long, credit=1), client.sender("short", name="n" * 41)):
            client.wait_closed(link)
            assert link.remote_condition.name == "amqp:invalid-field"
            assert "broker.max_name_length" in link.remote_condition.description
        assert not running.call(lambda: long in running.broker.queues)
        fits = client.receiver("q" * 40, credit=1, name="r")  # at the limit: served
        client.wait(lambda: fits.state & Endpoint.REMOTE_ACTIVE)
        named_long = running.client(container="c" * 41)
        named_long.wait(lambda: named_long.conn.state & Endpoint.REMOTE_CLOSED)
        condition = named_long.conn.remote_condition
        assert condition.name == "amqp:invalid-field"
        assert condition.info == {symbol("invalid-field"): symbol("container-id")}
    finally:
        running.stop()


def fill_the_budget(client: EngineClient, sender: Link) -> int:
    """Send 5 KB messages until the 100 KB budget takes ``sender``'s credit; how many."""
    client.wait(lambda: sender.credit > 0)
    sent = 0
    while sender.credit > 0 and sent < 100:  # the budget fills at 21
        client.send(sender, Message(body=b"m" * 5_000))
        sent += 1
        client.pump(0.01)
    client.wait(lambda: sender.credit == 0)
    return sent


def transfer_frame(delivery_id: int, payload: bytes) -> bytes:
    """A settled transfer on channel 0, handle 0, encoded by hand: what a client that
    ignores its credit sends (Proton's own sender never does)."""
    performative = Data()
    performative.put_described()
    performative.enter()
    performative.put_ulong(0x14)  # transfer
    performative.put_list()
    performative.enter()
    performative.put_uint(0)  # handle
    performative.put_uint(delivery_id)
    performative.put_binary(str(delivery_id).encode())  # delivery-tag
    performative.put_uint(0)  # message-format
    performative.put_bool(True)  # settled
    performative.exit()
    performative.exit()
    body = performative.encode() + payload
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body


def test_a_producer_sending_past_its_withdrawn_credit_is_detached_with_transfer_limit_exceeded(
    broker_config: Config, tmp_path: Path
) -> None:
    """Proton does not hold a client to its credit: the broker does, once it has withdrawn
    it (the budget is full), beyond the transfers in flight then."""
    window = 10
    broker_config.broker.producer_credit = window
    broker_config.broker.data_dir = str(tmp_path / "data")
    running = RunningBroker(broker_config)
    try:
        client = running.client()
        sender = client.sender("greedy")
        client.wait(lambda: sender.credit == window)
        payload = Message(body=b"g" * 5_000).encode()
        client.sock.setblocking(True)  # nothing more from the engine: raw frames from here
        for delivery_id in range(60):  # 300 KB, three times the budget
            client.sock.sendall(transfer_frame(delivery_id, payload))
        client.sock.setblocking(False)
        client.wait_closed(sender)
        assert sender.remote_condition.name == "amqp:link:transfer-limit-exceeded"
        assert "broker.max_memory 100000" in sender.remote_condition.description
        depth = running.call(lambda: running.broker.queues["greedy"].depth)
        assert 100_000 // 5_000 < depth <= 100_000 // 5_000 + 1 + window  # in flight only
        other = running.client()  # the broker goes on serving
        receiver = other.receiver("greedy", credit=depth)
        assert len(other.wait_received(receiver, depth)) == depth
    finally:
        running.stop()


def test_management_requests_stop_with_the_producers_while_the_memory_budget_is_full(
    broker: RunningBroker,
) -> None:
    """Each request's reply is a message on a queue: while the budget is full the
    ``$management`` link's credit is withdrawn as every producer's is, and given back with
    theirs."""
    client = broker.client()
    requests, producer = client.sender("$management"), client.sender("mem-m")
    client.wait(lambda: requests.credit > 0)
    sent = fill_the_budget(client, producer)
    client.wait(lambda: requests.credit == 0)
    receiver = client.receiver("mem-m", credit=sent)
    for item in client.wait_received(receiver, sent):
        item.delivery.update(item.delivery.ACCEPTED)
        item.delivery.settle()
    client.wait(lambda: requests.credit > 0 and producer.credit > 0)


def test_unfinished_multi_frame_messages_are_bounded_together_by_max_memory(
    broker_config: Config,
) -> None:
    # Each link's unfinished message is under max_message_size; together they would grow
    # the broker without bound. They are counted as their frames arrive, apart from the
    # queued messages (a full budget would stop the frames of messages begun), and a frame
    # that takes them past max_memory is refused.
    broker_config.broker.max_memory = 200_000
    broker_config.broker.max_message_size = 100_000
    broker_config.broker.max_links_per_connection = 10
    running = RunningBroker(broker_config)
    try:
        client = running.client()
        links = [client.sender("unfinished", name=f"p{i}") for i in range(5)]
        client.wait(lambda: all(link.credit > 0 for link in links))
        for i, link in enumerate(links):  # five messages of 90 KB begun, never finished
            link.delivery(f"t{i}")
            link.send(b"y" * 90_000)
            client.pump(0.3)
        refused = [link for link in links if link.state & Endpoint.REMOTE_CLOSED]
        assert [link.name for link in refused] == ["p2", "p3", "p4"]  # each past 200 KB
        condition = refused[0].remote_condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert "broker.max_memory" in condition.description
        budget = running.broker.loop_hooks.budget
        # the two let through still count; the queued messages' budget is not touched
        assert running.call(lambda: (budget.unfinished, budget.used)) == (180_000, 0)
        client.conn.close()  # the rest go with the connection, and stop counting
        client.pump(0.3)
        assert running.call(lambda: budget.unfinished) == 0
    finally:
        running.stop()


def test_a_message_finished_in_frames_stops_counting_and_is_stored_whole(
    broker_config: Config,
) -> None:
    broker_config.broker.max_message_size = 100_000
    running = RunningBroker(broker_config)
    try:
        client = running.client()
        link = client.sender("finished")
        client.wait(lambda: link.credit > 0)
        budget = running.broker.loop_hooks.budget
        body = Message(body=b"z" * 60_000).encode()
        delivery = link.delivery("whole")
        link.send(body[:30_000])  # the first frames; the rest later
        client.pump(0.3)
        assert running.call(lambda: budget.unfinished) >= 30_000
        link.send(body[30_000:])
        link.advance()
        client.wait_settled(delivery)
        assert running.call(lambda: budget.unfinished) == 0
        receiver = client.receiver("finished", credit=1)
        assert client.wait_received(receiver, 1)[0].message.body == b"z" * 60_000
    finally:
        running.stop()
