"""A small, synchronous AMQP client for tests, driving Proton's engine over a real socket.

Tests need exact control that the blocking client hides: the credit granted, drain, which
outcome to send, raw (even malformed) transfer bytes, and what the broker put in its
attach, flow and detach frames. This client runs the Proton engine (``Connection``,
``Transport``, ``Collector``) on a blocking socket in the test's own thread, so a test can
do one step, pump, and look.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proton import (
    Collector,
    Condition,
    Connection,
    Data,
    DataException,
    Delivery,
    Described,
    Disposition,
    Endpoint,
    Event,
    Link,
    Message,
    SymbolList,
    Terminus,
    Transport,
    symbol,
    ulong,
)

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34


@dataclass
class Received:
    delivery: Delivery
    data: bytes
    message: Message


@dataclass
class LinkLog:
    received: list[Received] = field(default_factory=list)
    flows: int = 0


class EngineClient:
    def __init__(
        self,
        host: str,
        port: int,
        sasl: bool = False,
        container: str = "test",
        user: str | None = None,
        password: str | None = None,
        desired_capabilities: list[str] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        """``desired_capabilities`` and ``properties`` go into the open frame (as Qpid JMS
        desires ``sole-connection-for-container`` for a program that sets a client ID)."""
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setblocking(False)
        self.conn = Connection()
        self.conn.container = container
        self.transport = Transport()
        if user is not None:  # SASL PLAIN (the broker takes it on loopback)
            self.conn.user, self.conn.password = user, password
            self.transport.sasl().allowed_mechs("PLAIN")
            self.transport.sasl().allow_insecure_mechs = True
        elif sasl:
            self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport.bind(self.conn)
        if desired_capabilities:
            self.conn.desired_capabilities = SymbolList([symbol(c) for c in desired_capabilities])
        if properties:
            self.conn.properties = {symbol(k): v for k, v in properties.items()}
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        self.logs: dict[str, LinkLog] = {}
        self.closed = False
        self._tag = 0
        # Rewrites the bytes on their way out (same length: frames keep their sizes), to
        # send what Proton itself would never encode.
        self.outgoing: Callable[[bytes], bytes] | None = None
        # Sees the bytes the broker sent, as they arrive (to read a frame Proton's engine
        # would decode with a loss, e.g. a source with no address).
        self.incoming: Callable[[bytes], None] | None = None

    # ---- links --------------------------------------------------------------------------

    def receiver(
        self,
        address: str | None,
        credit: int = 0,
        browse: bool = False,
        name: str | None = None,
        settled: bool = False,
        capabilities: list[str] | None = None,
        dynamic: bool = False,
        node_properties: dict[str, Any] | None = None,
        link_properties: dict[str, Any] | None = None,
        filters: dict[str, Any] | None = None,
        durable: bool = False,
        expiry_never: bool = False,
        null_source: bool = False,
        rcv_settle_second: bool = False,
        timeout: int = 0,
        wait: bool = True,
    ) -> Link:
        """Attach a receiving link. ``node_properties`` go into the source's
        dynamic-node-properties, as qpid::messaging puts ``x-declare`` arguments there;
        ``filters`` into its filter set (values as given, e.g. ``proton.Described``).
        ``durable`` and ``expiry_never`` as Qpid JMS asks for a durable subscription
        (terminus durability unsettled-state, expiry policy never); ``null_source`` as it
        looks one up to unsubscribe; ``rcv_settle_second`` as a client in receiver settle
        mode second; ``timeout`` the source's (qpid::messaging's link timeout); ``wait``
        false: the attach is sent and its answer not waited for."""
        link = self.session.receiver(name or f"recv-{address}-{len(self.logs)}")
        if null_source:
            link.source.type = Terminus.UNSPECIFIED
        link.source.address = address
        link.source.dynamic = dynamic
        if durable:
            link.source.durability = Terminus.DELIVERIES
        if expiry_never:
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
        link.source.timeout = timeout
        if browse:
            link.source.distribution_mode = Terminus.DIST_MODE_COPY
        if settled:
            link.snd_settle_mode = Link.SND_SETTLED
        if rcv_settle_second:  # the client settles after the broker has
            link.rcv_settle_mode = Link.RCV_SECOND
        if capabilities:
            _put_symbols(link.source, capabilities)
        _put_map(link.source.properties, node_properties)
        _put_map(link.source.filter, filters)
        if link_properties:
            link.properties = {symbol(k): v for k, v in link_properties.items()}
        link.target.address = address
        link.open()
        self.logs[link.name] = LinkLog()
        if credit:
            link.flow(credit)
        if wait:
            self.answered(link)
        else:  # sent, the answer not waited for
            self.pump(0.0)
        return link

    def sender(
        self,
        address: str | None,
        name: str | None = None,
        capabilities: list[str] | None = None,
        node_properties: dict[str, Any] | None = None,
        link_properties: dict[str, Any] | None = None,
        rcv_settle_second: bool = False,
        null_target: bool = False,
    ) -> Link:
        """Attach a sending link; ``rcv_settle_second`` asks the broker to settle only
        after the client has (receiver settle mode second, as rhea lets a sender ask);
        ``null_target`` sends no target at all (AMQP's way to ask for a link to be
        recovered), not a target with no address."""
        link = self.session.sender(name or f"send-{address}-{len(self.logs)}")
        if rcv_settle_second:
            link.rcv_settle_mode = Link.RCV_SECOND
        if null_target:
            link.target.type = Terminus.UNSPECIFIED
        link.target.address = address
        if capabilities:
            _put_symbols(link.target, capabilities)
        _put_map(link.target.properties, node_properties)
        if link_properties:
            link.properties = {symbol(k): v for k, v in link_properties.items()}
        link.source.address = address
        link.open()
        self.logs[link.name] = LinkLog()
        self.answered(link)
        return link

    def answered(self, link: Link, timeout: float = 5.0) -> None:
        """Pump until the broker has answered ``link``'s attach (with its own attach, or a
        detach refusing it), and a little longer, as a fixed short pump did: a loaded
        machine can take longer than that to answer, and the tests read the answer."""
        replied = Endpoint.REMOTE_ACTIVE | Endpoint.REMOTE_CLOSED
        end = time.monotonic() + timeout
        self.pump()
        while not link.state & replied and time.monotonic() < end:
            self.pump(0.01)

    def send(
        self,
        link: Link,
        message: Message | bytes,
        settled: bool = False,
        pump: bool = True,
        txn: bytes | None = None,
    ) -> Delivery:
        """Send one transfer; ``pump=False`` leaves it buffered (for bursts: pump once);
        ``txn``: under that transaction (``transactional-state`` on the transfer)."""
        self._tag += 1
        delivery = link.delivery(str(self._tag))
        if txn is not None:
            delivery.local.data = [txn]
            delivery.update(TRANSACTIONAL_STATE)
        data = message if isinstance(message, bytes) else message.encode()
        link.send(data)
        link.advance()
        if settled:
            delivery.settle()
        if pump:
            self.pump()
        return delivery

    def received(self, link: Link) -> list[Received]:
        return self.logs[link.name].received

    def settle(
        self,
        received: Received,
        outcome: int = Disposition.ACCEPTED,
        failed: bool = False,
        undeliverable: bool = False,
        txn: bytes | None = None,
        settle: bool = True,
        pump: bool = True,
        annotations: dict[Any, Any] | None = None,
        error: Condition | None = None,
    ) -> None:
        """Give ``outcome``; ``txn``: under that transaction, as ``transactional-state``
        (``settle=False`` leaves the delivery unsettled, as most clients do until discharge);
        ``annotations``: a modified outcome's message-annotations; ``error``: a rejected
        outcome's error.
        Then pump about 50 ms, so that the broker has mostly taken it by the time this
        returns; ``pump=False`` leaves it buffered (for many: :meth:`settle_all`)."""
        delivery = received.delivery
        if txn is not None:
            fields: list[Any] = []
            if outcome == Disposition.MODIFIED:
                fields = [failed, undeliverable] + ([annotations] if annotations else [])
            elif outcome == Disposition.REJECTED and error is not None:
                fields = [Described(ulong(0x1D), [symbol(error.name), error.description])]
            delivery.local.data = [txn, Described(ulong(outcome), fields)]
            delivery.update(TRANSACTIONAL_STATE)
            if settle:
                delivery.settle()
        else:
            if outcome == Disposition.MODIFIED:
                delivery.local.failed = failed
                delivery.local.undeliverable = undeliverable
                if annotations:
                    delivery.local.annotations = annotations
            if error is not None:
                delivery.local.condition = error
            delivery.update(outcome)
            delivery.settle()
        if pump:
            self.pump()

    def settle_all(
        self, received: Iterable[Received], outcome: int = Disposition.ACCEPTED, **given: Any
    ) -> None:
        """:meth:`settle` each of ``received`` alike, then pump once, as it does after one."""
        for each in received:
            self.settle(each, outcome, pump=False, **given)
        self.pump()

    # ---- transactions ------------------------------------------------------------------------

    def coordinator(self, name: str = "txn-ctrl", outcomes: list[str] | None = None) -> Link:
        """Attach a sending link to the broker's transaction coordinator; ``outcomes``: the
        outcomes its source says it supports (none said: any)."""
        link = self.session.sender(name)
        link.target.type = Terminus.COORDINATOR
        _put_symbols(link.target, ["amqp:local-transactions"])
        if outcomes is not None:
            data = link.source.outcomes
            data.put_array(False, Data.SYMBOL)
            data.enter()
            for outcome in outcomes:
                data.put_symbol(symbol(outcome))
            data.exit()
        link.open()
        self.logs[link.name] = LinkLog()
        self.pump()
        return link

    def control(self, coordinator: Link, descriptor: int, fields: list[Any]) -> Delivery:
        """Send a declare (0x31) or discharge (0x32) and wait for the broker's answer."""
        delivery = self.send(coordinator, Message(body=Described(ulong(descriptor), fields)))
        return self.wait_settled(delivery)

    def declare(self, coordinator: Link) -> bytes:
        delivery = self.control(coordinator, 0x31, [None])
        assert delivery.remote_state == DECLARED, delivery.remote_state
        return bytes(delivery.remote.data[0])

    def discharge(self, coordinator: Link, txn: bytes, fail: bool = False) -> Delivery:
        return self.control(coordinator, 0x32, [txn, fail])

    # ---- the engine loop ------------------------------------------------------------------

    def pump(self, duration: float = 0.05) -> None:
        """Move bytes both ways and handle events for about ``duration`` seconds, pausing
        only when nothing moved (so a large message is not read a buffer per pause)."""
        end = time.monotonic() + duration
        while True:
            moved = self._write()
            moved = self._read() or moved
            self._events()
            if time.monotonic() >= end:
                return
            if not moved:
                time.sleep(0.002)

    def wait(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Pump until ``predicate`` holds (its value), asking again every 2 ms or so."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.002)
            value = predicate()
            if value:
                return value
        raise TimeoutError("condition not reached in time")

    def wait_received(self, link: Link, count: int, timeout: float = 5.0) -> list[Received]:
        self.wait(lambda: len(self.received(link)) >= count, timeout)
        return self.received(link)

    def wait_settled(self, delivery: Delivery, timeout: float = 5.0) -> Delivery:
        self.wait(lambda: delivery.remote_state or delivery.settled, timeout)
        return delivery

    def wait_closed(self, link: Link, timeout: float = 5.0) -> Link:
        self.wait(lambda: link.state & Endpoint.REMOTE_CLOSED, timeout)
        return link

    def _write(self) -> bool:
        """Send what the engine has to send (as much as the socket takes): whether any."""
        pending = self.transport.pending()
        if pending <= 0:
            return False
        try:
            out = self.transport.peek(pending)
            if self.outgoing is not None:
                out = self.outgoing(out)
            sent = self.sock.send(out)
            self.transport.pop(sent)
            return sent > 0
        except BlockingIOError:
            return False
        except OSError:
            self.transport.close_head()
            self.closed = True
            return True

    def _read(self) -> bool:
        """Hand the engine what the socket has (up to its capacity): whether anything."""
        capacity = self.transport.capacity()
        if capacity <= 0:
            return False
        try:
            data = self.sock.recv(capacity)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if data:
            if self.incoming is not None:
                self.incoming(data)
            self.transport.push(data)
        else:
            self.transport.close_tail()
            self.closed = True
        return True

    def _events(self) -> None:
        while True:
            event = self.collector.peek()
            if event is None:
                return
            if event.type == Event.DELIVERY:
                self._on_delivery(event.delivery)
            elif event.type == Event.LINK_FLOW and _name(event.link) in self.logs:
                self.logs[event.link.name].flows += 1
            self.collector.pop()

    def _on_delivery(self, delivery: Delivery) -> None:
        link = delivery.link
        if not link.is_receiver or not delivery.readable or delivery.partial:
            return
        data = link.recv(delivery.pending)
        link.advance()
        message = Message()
        try:
            message.decode(data)
        except DataException:  # over the 65,535 values Proton's Data holds: read .data
            message = Message()
        self.logs[link.name].received.append(Received(delivery, bytes(data), message))

    def close(self) -> None:
        """Close the connection and wait up to 50 ms for the broker's close (a broker that
        answers sooner is not waited for)."""
        if not self.closed:
            self.conn.close()
            end = time.monotonic() + 0.05
            try:
                self.pump(0.002)
                while not self.conn.state & Endpoint.REMOTE_CLOSED and time.monotonic() < end:
                    self.pump(0.002)
            finally:
                self.sock.close()
                self.closed = True

    def drop(self) -> None:
        """Vanish: close the socket without any AMQP close."""
        self.sock.close()
        self.closed = True


def _put_symbols(terminus: Terminus, values: list[str]) -> None:
    """Capabilities as qpid::messaging sends them: one bare symbol, or an array of two+."""
    caps = terminus.capabilities
    if len(values) == 1:
        caps.put_symbol(symbol(values[0]))
        return
    caps.put_array(False, Data.SYMBOL)
    caps.enter()
    for value in values:
        caps.put_symbol(symbol(value))
    caps.exit()


def _put_map(data: Data, values: dict[str, Any] | None) -> None:
    """A map with symbol keys (node properties), values as given (str, int, ...)."""
    if values:
        data.put_dict({symbol(k): v for k, v in values.items()})


def terminus_map(data: Data) -> dict[str, Any]:
    """The map in a terminus field of the broker's reply (e.g. its node properties)."""
    data.rewind()
    if not data.next():
        return {}
    return {str(k): v for k, v in data.get_dict().items()}


def _name(link: Link) -> str | None:
    """The link's name, or None for a name that is not UTF-8 (a test sent it on purpose)."""
    try:
        return link.name
    except UnicodeDecodeError:
        return None
