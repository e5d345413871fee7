"""The loop that runs the broker: Proton's reactor ``Container`` with a fast lane, and every
private Proton API the broker relies on, kept here so that a Proton upgrade is checked in
one place.

The ``Container`` stays the shell Proton users know (listeners, SASL, TLS, timers,
``EventInjector`` for other threads). What changes is how events reach the handler:
:meth:`BrokerContainer.process` is the reactor's own loop with one difference, a table of
hot event types (transfers and dispositions, link credit, transport output) that are
handled straight from the C event pointer by :mod:`proton_broker.amqp.links`, skipping the
generic per-event wrapping and dispatch. Transport updates are coalesced: a connection that
produced output many times in one pass has its socket interest updated once. Sockets are
waited on with one long-lived ``epoll`` object (:mod:`proton_broker.amqp.poller`) instead
of Proton's selector, whose cost grows with the number of connections on every socket
event.

As it reads and writes a connection's socket the loop counts the bytes and notes the time
on the socket's selectable, once a system call, not a message (:func:`socket_figures`:
Broker-J's ``bytesIn``, ``bytesOut`` and ``lastIoTime`` of a connection).

A connection to the TLS listener has its first bytes looked at before Proton sees them
(:meth:`BrokerContainer.expect_tls`): Proton's server transport sniffs the protocol, and on
an SSL transport it serves a client that sends a plain AMQP or SASL header too, SASL
exchange and all, refusing only the AMQP open. The loop closes such a connection unread,
as qpidd's and Broker-J's TLS ports, where the bytes go to the TLS engine and fail the
handshake. The other way round, a TLS handshake on the plain listener, Proton's sniffing
recognises as TLS and closes without a word; the loop answers it as Proton answers any
other protocol there, with AMQP's header and a close carrying
``amqp:connection:framing-error`` (:func:`proton_broker.amqp.tls.refusal`).

Private APIs used here: ``proton._selectable`` and its
``_delegate`` socket and ``_deadline``, ``IOHandler._selector`` (replaced) and
``IOHandler.update``, the transport's
``_selectable``, and the reactor's ``_collector``, ``_yield``, ``_stop``, ``_timers``,
``_selectables``, ``_selectable`` and ``_previous``. Elsewhere the broker uses only
Proton's public API and the engine's C functions through ``cproton_ffi``; engine objects
are told apart by their ``_impl`` pointer.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from cproton_ffi import ffi, lib
from proton import Event, Transport
from proton._selectable import Selectable
from proton.handlers import IOHandler
from proton.reactor import Container

from proton_broker.amqp import engine
from proton_broker.amqp.lingering import Lingerer
from proton_broker.amqp.poller import PollSelector, readable_now
from proton_broker.amqp.tls import FRAMING_ERROR, TLS_ON_PLAIN_PORT, refusal, starts_handshake
from proton_broker.queues.queue import Queue

if TYPE_CHECKING:
    from proton_broker.amqp.server import Server

log = logging.getLogger("proton_broker.amqp")

PN_DELIVERY = lib.PN_DELIVERY
PN_LINK_FLOW = lib.PN_LINK_FLOW
PN_TRANSPORT = lib.PN_TRANSPORT
PN_EOS = lib.PN_EOS
BACKLOG = 1024  # connections the kernel keeps waiting for a listener (Proton asks for 10)
ACCEPT_BURST = BACKLOG  # connections a listener accepts at most between two selects
ACCEPT_RETRY_DELAY = 0.1  # seconds a listener rests when accepting fails for want of files
OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


# ---- the reactor with a fast lane -----------------------------------------------------------


class Callback:
    """A timer handler that calls a function."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def on_timer_task(self, event: Event) -> None:
        self.fn()


class BrokerContainer(Container):
    """The reactor ``Container`` with a fast lane for hot engine events (see module doc)."""

    def __init__(self, server: Server, **kwargs: Any) -> None:
        super().__init__(server, **kwargs)
        self._server = server
        io: IOHandler = self.global_handler.base  # type: ignore[attr-defined]
        assert not io._selector.selectables, "the selector is replaced before any socket"
        self._selector = io._selector = PollSelector()  # type: ignore[assignment]
        self._io_final = io.on_selectable_final
        self._lingerer = Lingerer(self._selector)  # closed connections end in order
        io.on_selectable_final = self._on_selectable_final  # type: ignore[method-assign]
        self._dirty_transports: dict[Any, None] = {}
        # Queues that received messages this pass; dispatched once the pass's events are
        # handled, so a burst of transfers goes out to consumers as a burst (and the engine
        # events for the two connections do not interleave one message at a time).
        self._to_dispatch: dict[Queue, None] = {}
        server.broker.set_queue_hooks(
            defer=self._to_dispatch.setdefault, wake_at=self._wake_queue_at, soon=server.call_soon
        )
        self._fast = {
            PN_LINK_FLOW: server.on_raw_link_flow,
        }
        self._out = ffi.new("char[]", 65536)  # reused to copy transport output to sockets
        self._output = server.output  # consumers held for their backlogs (amqp/output.py)
        self._listeners: set[Any] = set()  # the acceptors' selectables
        self._accepting: dict[Any, int] = {}  # listener -> accepts left in this burst
        # Sockets not read from yet -> (whether their listener is the TLS one, what to call
        # if their first bytes are the other listener's: see expect_tls, expect_plain).
        self._first_reads: dict[Selectable, tuple[bool, Callable[[], None]]] = {}

    def listening(self, acceptor: Any) -> tuple[str, int]:
        """The address a Proton acceptor listens on, after giving its socket a real backlog
        (Proton's default of 10 drops bursts of clients) and having it accept in bursts
        (see :meth:`_accept_more`)."""
        selectable = acceptor._selectable
        sock = selectable._delegate  # the listening socket Proton made
        sock.listen(BACKLOG)
        self._listeners.add(selectable)
        accept = acceptor.on_selectable_readable

        def on_readable(event: Event) -> None:
            try:
                accept(event)
            except OSError as exc:
                if exc.errno not in OUT_OF_FILES:
                    raise
                self._rest(selectable, exc)

        acceptor.on_selectable_readable = on_readable
        return sock.getsockname()[:2]

    def _rest(self, listener: Selectable, exc: OSError) -> None:
        """Accepting failed for want of a file descriptor (or kernel memory): the waiting
        connection stays in the kernel's backlog and the listener stays readable, so
        accepting again at once would spin. The listener is left out of the select for
        ACCEPT_RETRY_DELAY seconds, with one line logged for the pause (qpidd logs "Could
        not accept socket" and watches again; asyncio waits ACCEPT_RETRY_DELAY), then
        accepts again: the connections waited for come in as descriptors free up."""
        self._accepting.pop(listener, None)
        if not listener.reading:
            return
        log.warning(
            "BRK-1011 : Could not accept a connection : %s : not accepting for %g s",
            exc.strerror or exc,
            ACCEPT_RETRY_DELAY,
        )
        listener.reading = False
        self._selector.update(listener)

        def resume() -> None:
            if not listener.is_terminal:
                listener.reading = True
                self._selector.update(listener)

        self.schedule(ACCEPT_RETRY_DELAY, Callback(resume))

    def expect_tls(self, transport: Transport, refused: Callable[[], None]) -> None:
        """``transport``'s connection came to the TLS listener: unless the first bytes its
        client sends open a TLS handshake, its socket is closed before Proton reads them (no
        SASL, no AMQP: see the module doc), and ``refused`` is called to say so."""
        selectable = getattr(transport, "_selectable", None)
        if selectable is not None:
            self._first_reads[selectable] = (True, refused)

    def expect_plain(self, transport: Transport, refused: Callable[[], None]) -> None:
        """``transport``'s connection came to the plain listener: if its client starts a
        TLS handshake, it is answered with a framing error, not silence (see the module
        doc), and ``refused`` is called to say so."""
        selectable = getattr(transport, "_selectable", None)
        if selectable is not None:
            self._first_reads[selectable] = (False, refused)

    def refuse_now(self, transport: Transport, frames: bytes) -> None:
        """Write ``frames`` to ``transport``'s socket straight away, before Proton reads
        or writes a byte of it (what the socket takes at once: a few hundred bytes), and
        close the transport; its socket then ends in order (amqp/lingering.py)."""
        selectable = getattr(transport, "_selectable", None)
        if selectable is not None:
            self._first_reads.pop(selectable, None)
            _send_now(selectable, frames)
        transport.close_tail()
        transport.close_head()

    def _on_selectable_final(self, event: Event) -> None:
        """``IOHandler.on_selectable_final`` (the socket is closed), the connection ending
        in order first (amqp/lingering.py)."""
        self._first_reads.pop(event.selectable, None)
        self._lingerer.close(event.selectable._delegate)  # type: ignore[union-attr]
        self._io_final(event)

    def close_lingering(self) -> None:
        """Close the sockets still lingering (the broker is stopping)."""
        for lingering in list(self._lingerer.sockets):
            self._lingerer.done(lingering)

    def _accept_more(self) -> None:
        """Proton's acceptor takes one connection each time its socket is reported
        readable, once per select: under load, with thousands of connections to serve in
        each pass, a storm of reconnecting clients then waited seconds to be accepted (past
        the handshake time-out). After each accept the listener is polled again, and while
        connections wait up to ACCEPT_BURST are accepted before the next select."""
        for listener, left in list(self._accepting.items()):
            del self._accepting[listener]
            if (
                left > 0
                and listener.reading
                and not listener._terminal
                and readable_now(listener.fileno())
            ):
                self._accepting[listener] = left - 1
                listener.readable()

    # ---- socket I/O for AMQP connections --------------------------------------------------
    # The stock loop reaches the sockets through Python events: REACTOR_QUIESCED runs the
    # select, each ready socket gets a SELECTABLE_READABLE/WRITABLE event, and every change
    # of interest a SELECTABLE_UPDATED event, each wrapped and dispatched through the handler
    # chain to ``IOHandler``. Here the select runs when the collector is empty, the sockets
    # of connections are read and written directly (the same steps as ``IOHandler``), and
    # the selector's interest is updated only when it changes. Output is written through
    # once per pass instead of waiting for the next select. Other selectables (the
    # listener, the injector, timers) and every error or closing case keep the stock path.

    def _io_cycle(self) -> None:
        """One select and the I/O it allows (``IOHandler.on_reactor_quiesced``)."""
        self.timer_deadline  # noqa: B018 - drops cancelled timers, as the stock loop does
        readable, writable, expired = self._selector.select(self.timeout)
        now = self.mark()
        for s in readable:
            transport = getattr(s, "_transport", None)
            if transport is None or type(s) is not Selectable:
                s.readable()
                if s in self._listeners:
                    self._accepting[s] = ACCEPT_BURST - 1
            else:
                self._read(s, transport, now)
        for s in writable:
            transport = getattr(s, "_transport", None)
            if transport is None or type(s) is not Selectable:
                s.writable()
            else:
                self._write(s, transport, now)
        for s in expired:
            s.expired()

    def _read(self, s: Selectable, transport: Transport, now: float) -> None:
        """``IOHandler.on_selectable_readable`` for a connection's socket."""
        impl = transport._impl
        capacity = lib.pn_transport_capacity(impl)
        if capacity > 0:
            try:
                data = s._delegate.recv(capacity)
            except OSError as exc:
                log.error("Couldn't recv: %r", exc)
                transport.close_tail()
            else:
                if not data:  # EOF: the stock handler's on_selectable_error
                    self._end(s, transport, now)
                    return
                if self._first_reads and not self._first_read(s, data):
                    self._end(s, transport, now)  # refused (see expect_tls, expect_plain)
                    return
                transport.push(data)
                s.bytes_in = getattr(s, "bytes_in", 0) + len(data)  # see socket_figures
                s.last_io = now
        self._update_interest(s, transport, now)

    def _first_read(self, s: Selectable, data: bytes) -> bool:
        """False if ``data`` is the first read of a socket and speaks the other listener's
        protocol (the refusal is reported; a TLS handshake on the plain listener is
        answered with a framing error first); True otherwise."""
        expected = self._first_reads.pop(s, None)
        if expected is None:
            return True
        tls_listener, refused = expected
        if starts_handshake(data) == tls_listener:
            return True
        if not tls_listener:
            _send_now(s, refusal(FRAMING_ERROR, TLS_ON_PLAIN_PORT))
        refused()
        return False

    def _end(self, s: Selectable, transport: Transport, now: float) -> None:
        """Close a connection's socket and both ends of its transport (the stock
        ``IOHandler.on_selectable_error``)."""
        transport.close_head()
        transport.close_tail()
        s.terminate()
        s._transport = None
        transport._selectable = None
        s.update()
        IOHandler.update(transport, s, now)

    def _write(self, s: Selectable, transport: Transport, now: float) -> None:
        """``IOHandler.on_selectable_writable`` for a connection's socket."""
        impl = transport._impl
        pending = lib.pn_transport_pending(impl)
        if pending > 0:
            out = self._out
            if pending > len(out):
                out = self._out = ffi.new("char[]", pending)
            lib.pn_transport_peek(impl, out, pending)
            try:
                sent = s._delegate.send(ffi.buffer(out, pending))
            except BlockingIOError:
                pass  # the socket is full: the select will say when it drains
            except OSError as exc:
                log.error("Couldn't send: %r", exc)
                transport.close_head()
            else:
                lib.pn_transport_pop(impl, sent)
                s.bytes_out = getattr(s, "bytes_out", 0) + sent  # see socket_figures
                s.last_io = now
                if self._output.held:  # its consumers may be held (amqp/output.py)
                    self._output.written(lib.pn_transport_connection(impl), s.bytes_out)
        self._update_interest(s, transport, now)

    def _update_interest(self, s: Selectable, transport: Transport, now: float) -> None:
        """``IOHandler.update`` without the SELECTABLE_UPDATED event, and only on change."""
        impl = transport._impl
        capacity = lib.pn_transport_capacity(impl)
        pending = lib.pn_transport_pending(impl)
        if capacity < PN_EOS or pending < PN_EOS or s._terminal:
            IOHandler.update(transport, s, now)  # errors and closing: the stock path
            return
        reading, writing = capacity > 0, pending > 0
        deadline = lib.pn_transport_tick(impl, int(now * 1000)) / 1000.0
        if reading is not s.reading or writing is not s.writing or deadline != s._deadline:
            s.reading, s.writing, s.deadline = reading, writing, deadline
            self._selector.update(s)

    def _flush_transports(self) -> None:
        """Write each connection that produced output this pass, then update its interest."""
        dirty, self._dirty_transports = self._dirty_transports, {}
        now = self.now
        for impl in dirty:
            transport = Transport.wrap(impl)
            selectable = getattr(transport, "_selectable", None)
            if selectable is not None and not selectable.is_terminal:
                if type(selectable) is Selectable:
                    self._write(selectable, transport, now)  # write through, no select first
                else:
                    IOHandler.update(transport, selectable, now)
            lib.pn_decref(impl)

    # ---- the loop ----------------------------------------------------------------------------

    def process(self) -> bool:  # noqa: C901 - mirrors Reactor.process, plus the fast lane
        self.mark()
        collector = self._collector._impl
        peek, pop, event_type = lib.pn_collector_peek, engine.pop, engine.event_type
        event_link, event_delivery = lib.pn_event_link, lib.pn_event_delivery
        event_transport, incref = lib.pn_event_transport, lib.pn_incref
        links = self._server.links
        store = self._server.broker.store
        dirty = self._dirty_transports
        fast = self._fast
        while True:
            if self._yield:
                self._yield = False
                return True
            raw = peek(collector)
            if raw:
                etype = event_type(raw)
                if etype == PN_DELIVERY:
                    # A transfer arrived or a consumer's disposition changed: straight to
                    # the link's state object (links.py), no wrappers.
                    state = links.get(event_link(raw))
                    if state is not None:
                        try:
                            state.on_delivery(event_delivery(raw))
                        except Exception as exc:  # contained
                            self._server.contain_fault(
                                exc, event_link(raw), lib.pn_event_connection(raw)
                            )
                    pop(collector)
                    continue
                if etype == PN_TRANSPORT:
                    # The engine has output: note the connection, write it once per pass.
                    impl = event_transport(raw)
                    if impl not in dirty:
                        incref(impl)  # the event's reference ends when it is popped
                        dirty[impl] = None
                    pop(collector)
                    continue
                handler = fast.get(etype)
                if handler is not None:
                    try:
                        handler(raw)
                    except Exception as exc:  # contained, see contain_fault
                        self._server.contain_fault(
                            exc, lib.pn_event_link(raw), lib.pn_event_connection(raw)
                        )
                    pop(collector)
                    continue
                event = Event.wrap(raw)
                self._dispatch(event, raw)
                self._previous = event.type
                pop(collector)
            elif self._to_dispatch:
                self._dispatch_queues()
            elif store is not None and store.outbox:
                store.flush()  # the pass's store writes go to the writer thread together
            elif dirty:
                self._flush_transports()
                dirty = self._dirty_transports
            elif self._accepting:
                self._accept_more()
            elif not self._stop and (self._timers > 0 or self._selectables > 1):
                self._io_cycle()  # instead of REACTOR_QUIESCED and IOHandler's select
                dirty = self._dirty_transports
            elif self._selectable:
                self._selectable.terminate()
                self._selectable.update()
                self._selectable = None
            else:
                if self._previous is not Event.REACTOR_FINAL:
                    self.push_event(self, Event.REACTOR_FINAL)
                return False

    def _wake_queue_at(self, when: float, queue: Queue) -> None:
        """A queue holds messages until ``when``: release them then (hold until valid)."""
        self.schedule(max(0.0, when - time.time()), Callback(queue.release_held))

    def _dispatch_queues(self) -> None:
        queues = list(self._to_dispatch)
        self._to_dispatch.clear()
        for queue in queues:
            try:
                queue.dispatch()
            except Exception as exc:  # contained: log, keep serving
                log.error("dispatch of queue '%s' failed: %r", queue.name, exc)

    def _dispatch(self, event: Any, raw: Any) -> None:
        try:
            event.dispatch(event.handler or self.handler)
        except Exception as exc:  # contained, see contain_fault
            self._server.contain_fault(exc, lib.pn_event_link(raw), lib.pn_event_connection(raw))
        event.dispatch(self.global_handler)


# ---- what a connection's socket carried -----------------------------------------------------


class SocketFigures(NamedTuple):
    """What one connection's socket carried: the bytes the loop read and wrote (what went
    over the network, so a TLS connection's are the encrypted bytes), when it last did
    either (seconds since the epoch; None before the first), and the local end of the
    socket as ``host:port`` (None once the socket is gone)."""

    bytes_in: int
    bytes_out: int
    last_io: float | None
    local_address: str | None


def socket_figures(transport: Transport | None) -> SocketFigures:
    """What ``transport``'s socket carried (see :class:`SocketFigures`). The loop counts on
    the socket's selectable as it reads and writes (once a system call, not a message), so
    a connection whose socket has closed reads nothing."""
    selectable = None if transport is None else getattr(transport, "_selectable", None)
    if selectable is None:
        return SocketFigures(0, 0, None, None)
    try:
        host, port = selectable._delegate.getsockname()[:2]
        local: str | None = f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        local = None
    return SocketFigures(
        getattr(selectable, "bytes_in", 0),
        getattr(selectable, "bytes_out", 0),
        getattr(selectable, "last_io", None),
        local,
    )


def bytes_written(connection: Any) -> int:
    """The bytes the socket of ``connection`` (a pn_connection_t*) has taken so far (0 once
    it is gone): what amqp/output.py weighs a connection's backlog against."""
    transport = lib.pn_connection_transport(connection)
    if transport == ffi.NULL:
        return 0
    selectable = getattr(Transport.wrap(transport), "_selectable", None)
    return int(getattr(selectable, "bytes_out", 0))


def _send_now(s: Selectable, frames: bytes) -> None:
    """Write a refusal's ``frames`` to ``s``'s socket before Proton writes a byte of it: a
    few hundred bytes, which a new socket takes at once (a peer already gone is no matter)."""
    with contextlib.suppress(OSError):
        s._delegate.send(frames)
