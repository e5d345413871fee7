"""The hot path's engine calls (amqp/engine.py) answer as documented, the Python reference
and its compiled copy alike, over real links: two Proton engines whose transports exchange
their frames in memory."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from cproton_ffi import ffi, lib
from proton import Collector, Connection, Delivery, Endpoint, Link, Transport

from proton_broker.amqp import engine

PYTHON = SimpleNamespace(
    event_type=lib.pn_event_type,
    pop=lib.pn_collector_pop,
    remote_state=lib.pn_delivery_remote_state,
    settled=lib.pn_delivery_settled,
    settle=lib.pn_delivery_settle,
    transfer_size=engine.transfer_size_python,
    take=engine.take_python,
    accept=engine.accept_python,
    send_with=engine.send_with_python,
    Tally=engine.TallyPython,
)
STEPS = [pytest.param(PYTHON, id="python")]
if engine.COMPILED is not None:
    STEPS.append(pytest.param(engine.COMPILED, id="compiled"))


class Pair:
    """A client connection with a sender and a server connection with its receiver, their
    transports joined in memory."""

    def __init__(self) -> None:
        self.client, self.server = Connection(), Connection()
        self.collector = Collector()
        self.server.collect(self.collector)
        self.client_transport = Transport()
        self.server_transport = Transport(Transport.SERVER)
        self.client_transport.bind(self.client)
        self.server_transport.bind(self.server)
        self.client.open()
        session = self.client.session()
        session.open()
        self.sender = session.sender("out")
        self.sender.open()
        self.pump()
        self.server.open()
        remote = Endpoint.LOCAL_UNINIT | Endpoint.REMOTE_ACTIVE
        self.server.session_head(remote).open()
        self.receiver: Link = self.server.link_head(remote)
        self.receiver.open()
        self.receiver.flow(10)
        self.pump()

    def pump(self) -> None:
        """Move every pending frame across, both ways, until neither side has output."""
        moved = True
        while moved:
            moved = False
            for out, into in (
                (self.client_transport, self.server_transport),
                (self.server_transport, self.client_transport),
            ):
                size = min(out.pending(), into.capacity())
                if size > 0:
                    into.push(out.peek(size))
                    out.pop(size)
                    moved = True

    def transfer(
        self, data: bytes, tag: bytes, complete: bool = True, settled: bool = False
    ) -> Delivery:
        """The client sends ``data`` (all of a transfer, or its first frames)."""
        delivery = self.sender.delivery(tag)
        self.sender.send(data)
        if settled:
            delivery.settle()
        if complete:
            self.sender.advance()
        self.pump()
        return delivery

    def arrived(self) -> Any:
        """The engine pointer of the transfer the receiver reads now."""
        current = self.receiver.current
        assert current is not None
        return current._impl


@pytest.fixture
def pair() -> Iterator[Pair]:
    yield Pair()


@pytest.mark.parametrize("steps", STEPS)
def test_a_complete_transfer_is_its_size_and_taking_it_reads_its_bytes(
    pair: Pair, steps: Any
) -> None:
    sent = pair.transfer(b"a message's bytes", b"1")
    dlv = pair.arrived()
    assert steps.transfer_size(dlv) == len(b"a message's bytes")
    assert steps.take(pair.receiver._impl, len(b"a message's bytes")) == b"a message's bytes"
    assert steps.transfer_size(dlv) == engine.NOT_READABLE  # the link moved on
    steps.accept(dlv)
    pair.pump()
    assert sent.remote_state == Delivery.ACCEPTED and sent.settled


@pytest.mark.parametrize("steps", STEPS)
def test_a_large_transfer_is_read_whole(pair: Pair, steps: Any) -> None:
    body = bytes(range(256)) * 100  # beyond one frame and the reused buffer
    pair.transfer(body, b"1")
    dlv = pair.arrived()
    assert steps.transfer_size(dlv) == len(body)
    assert steps.take(pair.receiver._impl, len(body)) == body


@pytest.mark.parametrize("steps", STEPS)
def test_a_transfer_still_arriving_is_partial(pair: Pair, steps: Any) -> None:
    pair.transfer(b"first frames", b"1", complete=False)
    assert steps.transfer_size(pair.arrived()) == engine.PARTIAL


@pytest.mark.parametrize("steps", STEPS)
def test_an_aborted_transfer_says_so(pair: Pair, steps: Any) -> None:
    sent = pair.transfer(b"first frames", b"1", complete=False)
    sent.abort()
    pair.pump()
    assert steps.transfer_size(pair.arrived()) == engine.ABORTED


@pytest.mark.parametrize("steps", STEPS)
def test_accepting_a_transfer_the_producer_settled_only_settles_it(pair: Pair, steps: Any) -> None:
    pair.transfer(b"pre-settled", b"1", settled=True)
    dlv = pair.arrived()
    assert steps.take(pair.receiver._impl, steps.transfer_size(dlv)) == b"pre-settled"
    steps.accept(dlv)
    assert pair.receiver.unsettled == 0


def consumer_link(pair: Pair) -> tuple[Link, Link]:
    """A sender on the server and the client's receiver of it, with credit for three."""
    out = pair.server.session_head(Endpoint.LOCAL_ACTIVE).sender("back")
    out.open()
    pair.pump()
    into = pair.client.link_head(Endpoint.LOCAL_UNINIT | Endpoint.REMOTE_ACTIVE)
    into.open()
    into.flow(3)
    pair.pump()
    return out, into


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (2, b"a [section]delivery's bytes"),
        (0, b"[section]a delivery's bytes"),
        (18, b"a delivery's bytes[section]"),
    ],
)
def test_a_delivery_is_sent_whole_with_its_section_inserted(
    pair: Pair, steps: Any, at: int, expected: bytes
) -> None:
    out, into = consumer_link(pair)
    out.delivery(b"t")
    tally = steps.Tally(30)
    assert steps.send_with(out._impl, b"a delivery's bytes", at, b"[section]", tally) is False
    assert tally.handed == 27  # the message and the section
    assert out.current is None  # the link moved on
    pair.pump()
    arrived = into.current
    assert arrived is not None and not arrived.partial
    assert into.recv(arrived.pending) == expected
    out.delivery(b"u")
    assert steps.send_with(out._impl, b"0123", 0, b"", tally) is True  # 31: its due reached


@pytest.mark.parametrize("steps", STEPS)
def test_a_section_outside_the_message_is_refused_and_nothing_sent(pair: Pair, steps: Any) -> None:
    out, _ = consumer_link(pair)
    out.delivery(b"t")
    for at in (-1, 19):
        with pytest.raises(ValueError, match="outside the message"):
            steps.send_with(out._impl, b"a delivery's bytes", at, b"[section]", steps.Tally(1))
    assert out.current is not None and out.current.pending == 0


def event_types(pair: Pair, steps: Any) -> list[int]:
    """The types of the events the server's collector holds, each read and popped."""
    collector = pair.collector._impl
    seen: list[int] = []
    while lib.pn_collector_peek(collector) != ffi.NULL and len(seen) < 100:
        seen.append(steps.event_type(lib.pn_collector_peek(collector)))
        steps.pop(collector)
    return seen


@pytest.mark.parametrize("steps", STEPS)
def test_events_are_read_by_type_and_popped(steps: Any) -> None:
    pair = Pair()
    pair.transfer(b"bytes", b"1")
    seen = event_types(pair, steps)
    assert seen[0] == lib.PN_CONNECTION_INIT and seen[-1] == lib.PN_DELIVERY
    assert lib.PN_LINK_REMOTE_OPEN in seen and len(seen) < 100  # each popped once
    reference = Pair()
    reference.transfer(b"bytes", b"1")
    assert seen == event_types(reference, PYTHON)


@pytest.mark.parametrize("steps", STEPS)
def test_a_delivery_s_outcome_and_settlement_are_read_and_given(pair: Pair, steps: Any) -> None:
    sent = pair.transfer(b"bytes", b"1")
    received = pair.receiver.current
    assert received is not None
    assert steps.remote_state(sent._impl) == 0 and not steps.settled(received._impl)
    received.update(Delivery.REJECTED)
    received.settle()
    pair.pump()
    assert steps.remote_state(sent._impl) == Delivery.REJECTED
    assert steps.settled(sent._impl)
    steps.settle(sent._impl)
    assert pair.sender.unsettled == 0


@pytest.mark.skipif(engine.COMPILED is None, reason="the compiled steps were not built")
def test_the_compiled_steps_refuse_what_is_not_an_engine_pointer() -> None:
    compiled: Any = engine.COMPILED
    for wrong in (None, 7, b"bytes"):
        with pytest.raises(TypeError):
            compiled.transfer_size(wrong)
    with pytest.raises(ValueError):
        compiled.accept(engine.ffi.NULL)
