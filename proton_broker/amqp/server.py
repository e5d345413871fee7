"""The AMQP 1.0 server: the event handler that turns Proton endpoints into broker producers
and consumers.

It answers connection, session and link events (attach, detach, refusals in Qpid's
shape, dynamic nodes, management and transaction-coordinator links) and hands transfers,
dispositions and credit to the link state objects of :mod:`proton_broker.amqp.links`. The
loop that feeds it events, and every private Proton API that loop uses, live in
:mod:`proton_broker.amqp.loop`.

Queue lifetimes are the broker's (:mod:`proton_broker.lifetime`): this adapter only tells it
which link attached to which queue (and whether that attach created it), which went, and
which connection closed, and refuses a link to an exclusive queue another connection holds.
While the broker shuts down nothing is reported: links that go because the broker stops
must not delete queues.

Every event is guarded: an exception closes only the link (or connection) it concerns, with
``amqp:internal-error``, and the loop carries on serving everyone else.

Threading: one thread runs the loop and owns all broker state; other threads talk to it
only through :meth:`Server.call_soon` (an ``EventInjector``).
"""

from __future__ import annotations

import logging
import queue as _queue
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from cproton_ffi import lib
from proton import (
    Condition,
    Connection,
    Data,
    Endpoint,
    Event,
    Handler,
    Link,
    SessionException,
    Terminus,
    Transport,
    symbol,
    uint,
)
from proton.reactor import ApplicationEvent, EventInjector

import proton_broker
from proton_broker.amqp import sasl, sole_connections
from proton_broker.amqp.conditions import (
    ILLEGAL_STATE,
    INTERNAL_ERROR,
    INVALID_FIELD,
    LINK_STOLEN,
    RESOURCE_DELETED,
    RESOURCE_LIMIT_EXCEEDED,
    RESOURCE_LOCKED,
    UNAUTHORIZED_ACCESS,
    close_link,
    condition_for,
)
from proton_broker.amqp.coordinator import LOCAL_TRANSACTIONS, CoordinatorLink
from proton_broker.amqp.links import ConsumerLink, ProducerLink
from proton_broker.amqp.loop import BrokerContainer, Callback, bytes_written, socket_figures
from proton_broker.amqp.management import MANAGEMENT_ADDRESS, ManagementNode, RequestLink
from proton_broker.amqp.output import OutputGate
from proton_broker.amqp.poller import install_poll
from proton_broker.amqp.quotas import Quotas
from proton_broker.amqp.subscribing import (
    exchange_capabilities,
    read_subscription,
    subject_filter,
)
from proton_broker.amqp.terminus import (
    capabilities_of,
    echo_exchange_properties,
    echo_filters,
    echo_properties,
    echo_terminus,
    exchange_options,
    node_durable,
    node_options,
    node_type,
    replay_period,
    selector_filter,
    sender_exchange_arguments,
    sequence_filter,
    sequence_number_filter,
    symbols_in,
)
from proton_broker.amqp.tls import refusal
from proton_broker.broker import Broker
from proton_broker.config import Config
from proton_broker.errors import (
    BrokerError,
    InvalidField,
    NotFound,
    PreconditionFailed,
    ResourceLimitExceeded,
    ResourceLocked,
    Unauthorized,
)
from proton_broker.exchanges.exchange import ALTERNATE_ARGUMENTS, TOPIC, ExchangeAddress
from proton_broker.exchanges.subscriptions import subscription_name
from proton_broker.management import Management
from proton_broker.management_links import ConsumerName, PublishingLink
from proton_broker.queues.entries import Entry
from proton_broker.queues.filters import REPLAY_PERIOD
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import differences, parse_options
from proton_broker.security.basic import ANONYMOUS
from proton_broker.security.logins import LockedOut, LoginGuard
from proton_broker.security.peers import allowed
from proton_broker.selector import with_subject

log = logging.getLogger("proton_broker.amqp")

PN_DELIVERY = lib.PN_DELIVERY
PN_LINK_FLOW = lib.PN_LINK_FLOW
PN_TRANSPORT = lib.PN_TRANSPORT
PN_EOS = lib.PN_EOS

OFFERED_CAPABILITIES = [
    symbol("ANONYMOUS-RELAY"),
    symbol("SHARED-SUBS"),
    symbol("DELAYED_DELIVERY"),  # x-opt-delivery-time/-delay are honoured (queues/holds.py)
    symbol(sole_connections.CAPABILITY),  # one connection per client ID (sole_connections.py)
]
ESTABLISHMENT_FAILED = symbol("amqp:connection-establishment-failed")
INVALID_FIELD_KEY = symbol("invalid-field")
CREATE_ON_DEMAND = "create-on-demand"
TEMPORARY_QUEUE, TEMPORARY_TOPIC = "temporary-queue", "temporary-topic"  # Qpid JMS's
_TEMPORARY = {TEMPORARY_QUEUE, TEMPORARY_TOPIC}
HONOURED_CAPABILITIES = {"queue", CREATE_ON_DEMAND}
# Seconds a connection whose peer's input has ended has to write its close frame before its
# socket is closed regardless: the engine holds the close back while it still owes frames
# it can no longer send (a peer that broke the protocol mid-conversation, for one).
CLOSE_GRACE = 2.0
# Seconds a stopping broker gives its connections' close frames to leave; it stops sooner
# once every connection has written everything it had (with no connection, at once).
SHUTDOWN_GRACE = 0.2
# The largest frame a client may send before its open is handled: AMQP's MIN-MAX-FRAME-SIZE
# (512) is all a peer may send before the open (AMQP 1.0 2.4.1); a few KiB leave room for
# SASL tokens and for clients that pipeline larger first frames.
PRE_OPEN_FRAME_SIZE = 4096


class Subscribed(NamedTuple):
    """What a receiver holds of the subscription it reads."""

    name: str  # the subscription queue
    unsubscribes: bool  # its close ends a kept subscription (exchanges/subscriptions.py)


class Server(Handler):
    """Accepts connections and turns AMQP endpoints into broker producers and consumers."""

    def __init__(self, broker: Broker, config: Config | None = None) -> None:
        super().__init__()
        install_poll()  # no FD_SETSIZE limit on the sockets we wait on
        self.broker = broker
        self.config = config or broker.config
        self.links: dict[Any, ProducerLink | ConsumerLink | CoordinatorLink | RequestLink] = {}
        # Queues that live as long as the link that made them (dynamic nodes, management
        # reply queues): queue name by pn_link_t*.
        self._temporary: dict[Any, str] = {}
        self._attached: dict[Queue, set[Any]] = {}  # pn_link_t* of the links on each queue
        # Exchanges that live as long as the link that made them (temporary topics).
        self._temporary_exchanges: dict[Any, str] = {}
        self._subscribed: dict[Any, Subscribed] = {}  # pn_link_t* -> the subscription it reads
        # Receivers whose connection's messages stay out of their queue while they are
        # attached (no-local): pn_link_t* -> (queue name, connection).
        self._locals: dict[Any, tuple[str, Any]] = {}
        # Links whose attach (being handled) created its queue: the controlling link of the
        # queue's lifetime policy (proton_broker/lifetime.py).
        self._created: set[Any] = set()
        # self: its LinkDirectory and ConnectionDirectory
        self.management = ManagementNode(broker, Management(broker, self, self))
        broker.deletion_watchers.append(self._queue_deleted)
        self.connections: dict[Any, Connection] = {}
        self.connections_opened = 0  # accepted since start (the metrics' counter)
        self.quotas = Quotas(self.config.broker)  # amqp/quotas.py
        self._refused_at_accept = 0  # sockets refused since the last accepted (_accept)
        section = self.config.sasl  # wrong passwords by client address (security/logins.py)
        self.logins = LoginGuard(section.max_failed_logins, section.failed_login_window)
        self.sole = sole_connections.SoleConnections()
        self.users: dict[Any, str] = {}  # pn_connection_t* -> who its client authenticated as
        broker.loop_hooks.budget.observers.append(self._memory_full)
        self._numbers: dict[Any, int] = {}  # pn_connection_t* -> its number (for the log)
        self._opened: dict[Any, float] = {}  # pn_connection_t* -> when it was accepted
        # pn_connection_t* -> the messages in and out of its links that have gone, so that
        # its counts are the connection's whole life's (Broker-J's messagesIn, messagesOut)
        self._gone_traffic: dict[Any, tuple[int, int]] = {}
        # What the broker may hold for a client that does not read (amqp/output.py).
        self.output = OutputGate(self.config.broker.max_connection_backlog, bytes_written)
        self.container = BrokerContainer(self, container_id=self.config.broker.container_id)
        self._injector = EventInjector()
        self._calls: _queue.SimpleQueue[Callable[[], None]] = _queue.SimpleQueue()
        self.container.selectable(self._injector)
        broker.lifetimes.wake_at = self._lifetimes_due
        self.broker.open_store(self.call_soon)  # raises StoreError: the caller reports it
        if self.broker.store is not None:
            self.broker.store.batching = True  # flushed once per pass (_BrokerContainer)
        self._acceptor: Any = None
        self._tls_acceptor: Any = None  # the AMQPS listener, when config ``tls`` enables it
        # The other plain listeners (config ``listeners``): acceptor -> its largest frame.
        self._frame_sizes: dict[Any, int] = {}
        self.other_addresses: list[tuple[str, int]] = []  # theirs, in the config's order
        self.tls_address: tuple[str, int] | None = None
        self.address: tuple[str, int] | None = None
        self._stopping = False

    # ---- life cycle ----------------------------------------------------------------------

    def listen(self, host: str, port: int) -> tuple[str, int]:
        """Bind the AMQP listener; returns the actual address (port 0 picks a free port)."""
        self._acceptor = self.container.acceptor(host, port)
        self.address = self.container.listening(self._acceptor)
        return self.address

    def listen_also(self, host: str, port: int, max_frame_size: int) -> tuple[str, int]:
        """Another plain AMQP listener (config ``listeners``) whose connections are told
        ``max_frame_size``; returns its address."""
        acceptor = self.container.acceptor(host, port)
        self._frame_sizes[acceptor] = max_frame_size
        address = self.container.listening(acceptor)
        self.other_addresses.append(address)
        log.info("AMQP listener on %s:%d (max_frame_size %d)", *address, max_frame_size)
        return address

    def _max_frame_size(self, conn: Connection) -> int:
        """The largest frame ``conn``'s listener takes (config ``listeners``)."""
        acceptor = getattr(conn, "_acceptor", None)
        return self._frame_sizes.get(acceptor, self.config.broker.max_frame_size)

    def listen_tls(self) -> tuple[str, int]:
        """The AMQPS listener (config ``tls``): the same broker over TLS on its own port;
        returns its address. OSError (a TlsConfigError naming the file) if it cannot
        start."""
        from proton_broker.amqp.tls import server_domain

        section = self.config.tls
        domain = server_domain(section)
        acceptor = self.container.acceptor(section.host, section.port)
        acceptor.set_ssl_domain(domain)
        self._tls_acceptor = acceptor
        self.tls_address = self.container.listening(acceptor)
        return self.tls_address

    def check_password(self, user: str, password: str, host: str) -> bool:
        """Whether ``password`` is ``user``'s (Cyrus SASL; loop thread, for HTTP Basic and
        the console's login, from a client at ``host``): LockedOut, its password not
        checked, while ``host`` is locked out (security/logins.py); a wrong one counts."""
        self.logins.check(host)
        if sasl.check_password(user, password):
            return True
        self.logins.failed(host)
        return False

    def metrics_snapshot(self) -> Any:
        """The figures one scrape reports (event-loop thread only; see
        :mod:`proton_broker.metrics`)."""
        from proton_broker.metrics import take_snapshot

        return take_snapshot(self.broker, len(self.connections), self.connections_opened)

    def connection_counts(self) -> dict[str, tuple[int, int]]:
        """Each open connection's messages in and out so far, by its id (loop thread;
        O(links): the console samples it)."""
        return {
            str(number): self._lifetime_traffic(impl, links)
            for impl, conn, number, links in self._open_connections()
        }

    def connection_figures(self) -> list[dict[str, Any]]:
        """Each open connection as the web console lists it (loop thread; O(links))."""
        figures = []
        transactions = self.broker.transactions
        for impl, conn, number, links in self._open_connections():
            messages_in, messages_out = self._lifetime_traffic(impl, links)
            socket = socket_figures(conn.transport)
            txns = transactions.counts_of(impl)
            open_txns, oldest_txn = transactions.open_of(impl)
            figures.append(
                {
                    "id": str(number),
                    "address": client_host_port(conn.url),
                    "user": self.users.get(impl),
                    "container": conn.remote_container,
                    "product": _announced(conn, "product"),
                    "version": _announced(conn, "version"),
                    "tls": self._over_tls(conn),
                    "sessions": _session_count(conn),
                    "links": len(links),
                    "opened": self._opened.get(impl),
                    "messages_in": messages_in,
                    "messages_out": messages_out,
                    "local_address": socket.local_address,
                    "bytes_in": socket.bytes_in,
                    "bytes_out": socket.bytes_out,
                    "last_io": socket.last_io,
                    "transactions_begun": txns.begins,
                    "transactions_rolled_back": txns.rollbacks,
                    "transactions_open": open_txns,
                    "oldest_transaction": oldest_txn,
                    "transacted_in": txns.messages_in,
                    "transacted_out": txns.messages_out,
                }
            )
        return figures

    def _lifetime_traffic(self, impl: Any, links: list[Any]) -> tuple[int, int]:
        """Messages connection ``impl`` took from its producers and sent to its consumers,
        on ``links`` (its links' states) and on the links it had before."""
        gone_in, gone_out = self._gone_traffic.get(impl, (0, 0))
        now_in, now_out = _traffic(links)
        return gone_in + now_in, gone_out + now_out

    def _open_connections(self) -> Iterator[tuple[Any, Connection, int, list[Any]]]:
        """(impl, connection, its number, the states of its links not closed) of every
        connection its client has opened (one still in its handshake has no user yet)."""
        for impl, conn in self.connections.items():
            number = self._numbers.get(impl)
            if number is None or conn.state & Endpoint.REMOTE_UNINIT:
                continue
            states = [self.links.get(link._impl) for link in _links_of(conn)]
            yield impl, conn, number, [state for state in states if state is not None]

    def consumer_figures(self, queue_name: str) -> list[dict[str, Any]]:
        """The links consuming from (or browsing) queue ``queue_name``, as the web console's
        queue page lists them (loop thread; O(links))."""
        figures = []
        for state in self._consumers_on(queue_name):
            conn = state.link.connection._impl
            figures.append(
                {
                    "connection": str(self._numbers.get(conn, "?")),
                    "user": self.users.get(conn),
                    "link": state.link.name,
                    "browse": state.browse,
                    "credit": state.credit,
                    "unsettled": len(state.unsettled),
                    "delivered": state.sent,
                }
            )
        return figures

    def consumers_of(self, queue: str) -> list[ConsumerName]:
        """The links consuming from or browsing ``queue``, as Broker-J names its consumers
        (management_links.py; loop thread; O(links))."""
        return [
            ConsumerName(
                self._numbers.get(state.link.connection._impl, 0),
                _session_number(state.link.session),
                state.link.remote_target.address or state.link.name,
            )
            for state in self._consumers_on(queue)
        ]

    def _consumers_on(self, queue_name: str) -> Iterator[ConsumerLink]:
        """The states of the links consuming from or browsing queue ``queue_name``, in
        the order they attached (O(links))."""
        for state in self.links.values():
            if isinstance(state, ConsumerLink) and state.queue.name == queue_name:
                yield state

    def publishers_to(self, queue: str) -> list[PublishingLink]:
        """The links sending to ``queue``'s address (management_links.py; loop thread;
        O(links))."""
        return [
            PublishingLink(state.link.name, state.link.remote_target.address or queue)
            for state in self.links.values()
            if isinstance(state, ProducerLink)
            and state.queue is not None  # None: an exchange or the relay
            and state.queue.name == queue
        ]

    def close_connection(self, connection_id: str, user: str, via: str = "in the console") -> None:
        """Close connection ``connection_id`` (its number, as the console and the CON-
        logs show it) with ``amqp:connection:forced``, as Broker-J closes one its management
        closes, saying ``user`` closed it ``via`` (where); NotFound when no open connection
        has it (loop thread)."""
        found = [
            conn
            for impl, conn in self.connections.items()
            if str(self._numbers.get(impl)) == connection_id
        ]
        if not found:
            raise NotFound(f"no open connection {connection_id}")
        conn = found[0]
        log.info(
            "CON-1008 : Closed by an operator : [con:%s(%s)] : %s", connection_id, conn.url, user
        )
        conn.condition = Condition("amqp:connection:forced", f"closed by {user} {via}")
        self._drop_connection(conn)
        conn.close()

    def run(self) -> None:
        self.container.run()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event-loop thread (safe to call from any thread): it is
        queued, and one ``broker_call`` event triggered for it."""
        self._calls.put(fn)
        try:
            self._injector.trigger(ApplicationEvent("broker_call"))
        except OSError:  # shutting down: the injector is closed, the loop is ending
            log.debug("call after shutdown dropped")

    def on_broker_call(self, event: Any) -> None:
        """Run one queued call: every call has its own event, and the loop handles the
        events its last select brought in before it selects again, so it runs the calls
        queued by then and returns to the sockets. Running until the queue was empty kept
        it from them for as long as other threads kept queueing: HTTP long polls, each
        asking again as soon as it was answered, left AMQP clients unserved for minutes."""
        try:
            call = self._calls.get_nowait()
        except _queue.Empty:  # cannot happen: each call is queued before its event
            return
        try:
            call()
        except Exception:  # one failed call must not stop the loop
            log.exception("call on the event loop failed")

    def stop(self) -> None:
        """Close the listener and every connection, then end the loop (thread-safe)."""
        self.call_soon(self._shutdown)

    def _shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("shutting down")
        if self._acceptor is not None:
            self._acceptor.close()
        if self._tls_acceptor is not None:
            self._tls_acceptor.close()
        for acceptor in self._frame_sizes:
            acceptor.close()
        for conn in list(self.connections.values()):
            conn.condition = Condition("amqp:connection:forced", "broker shutting down")
            conn.close()
        self._injector.close()
        self._stop_when_written(time.monotonic() + SHUTDOWN_GRACE)

    def _stop_when_written(self, deadline: float) -> None:
        """End the loop once every connection has written its close (its transport holds
        no more output), or at ``deadline``: a peer that reads nothing holds it no longer."""
        if time.monotonic() < deadline and any(map(_output_left, self.connections.values())):
            self.container.schedule(0.01, Callback(lambda: self._stop_when_written(deadline)))
            return
        self._stop_loop()

    def _stop_loop(self) -> None:
        self.broker.close()  # pending store writes finish first
        self.container.close_lingering()
        self.container.stop()

    def on_reactor_init(self, event: Event) -> None:
        interval = self.config.broker.expiry_interval
        self.container.schedule(interval, Callback(self._purge_expired))

    def _purge_expired(self) -> None:
        """A slice of the expiry sweep; while it has more to do, the next slice runs on
        the loop's next turn, after the sockets (queues/expiry.py), and the periodic work
        once it is done."""
        if self.broker.sweep_expired() and not self._stopping:
            self.container.schedule(0.0, Callback(self._purge_expired))
            return
        self._check_lifetimes()  # queues waiting to be empty, and the idle sweep
        if not self._stopping:
            self.container.schedule(
                self.config.broker.expiry_interval, Callback(self._purge_expired)
            )

    def _lifetimes_due(self, when: float) -> None:
        """A queue's timed deletion (qpid.auto_delete_timeout) is due at ``when``: check
        then, not only at the next periodic check."""
        delay = max(0.0, when - time.time())
        self.container.schedule(delay, Callback(self._check_lifetimes))

    def _check_lifetimes(self) -> None:
        """Lifetime policies and the idle sweep (proton_broker/lifetime.py); a broker
        shutting down deletes nothing: its links go because it stops, not their clients."""
        if not self._stopping:
            self.broker.lifetimes.check()

    # ---- connections and sessions --------------------------------------------------------

    def _over_tls(self, conn: Any) -> bool:
        """Whether ``conn`` came in on the AMQPS listener."""
        return getattr(conn, "_acceptor", None) is self._tls_acceptor is not None

    def _confidential(self, conn: Any) -> bool:
        """Whether management's confidential operations may be asked for on ``conn``: it
        came over TLS, or from where ``broker.confidential_without_tls`` allows."""
        if self._over_tls(conn):
            return True
        return allowed(self.config.broker.confidential_without_tls, client_address(conn.url))

    def on_connection_bound(self, event: Event) -> None:
        transport: Transport = event.transport
        conn = event.connection
        host = client_address(conn.url)
        if not self._accept(conn, transport, host):
            return
        locked = self.logins.locked_for(host)  # then only what needs no password
        tls = self._over_tls(conn)
        if tls:  # TLS only: plain bytes are refused before any SASL (amqp/loop.py)
            self.container.expect_tls(transport, lambda: self._not_tls(conn))
        else:  # a TLS handshake here is answered with a framing error (amqp/loop.py)
            self.container.expect_plain(transport, lambda: self._tls_on_plain(conn))
        if not sasl.configure(transport, self.config.sasl, host, tls, not locked):
            assert locked is not None  # nothing to offer only for want of passwords
            transport.condition = Condition(UNAUTHORIZED_ACCESS, str(LockedOut(host, locked)))
            transport.close_tail()
            transport.close_head()
        # Until the client's open is handled, frames are held to PRE_OPEN_FRAME_SIZE: the
        # engine buffers a frame whole, so a socket that never opens could otherwise make
        # it hold max_frame_size bytes (raised before the broker's open says it).
        transport.max_frame_size = min(PRE_OPEN_FRAME_SIZE, self._max_frame_size(conn))
        transport.channel_max = self.config.broker.max_sessions_per_connection - 1
        transport.idle_timeout = self.config.broker.idle_timeout
        self.connections[event.connection._impl] = event.connection
        self.connections_opened += 1
        self._numbers[event.connection._impl] = self.connections_opened
        self._opened[event.connection._impl] = time.time()
        self.container.schedule(
            self.config.broker.handshake_timeout, Callback(lambda: self._handshake_due(conn))
        )

    def _accept(self, conn: Connection, transport: Transport, host: str) -> bool:
        """Count a new socket against the broker's and its address's connection limits
        (amqp/quotas.py), or close it at once, unread, with the condition saying which:
        False then. Refusals are logged once a spell at a limit (CON-1006), with how many
        there were when the next connection is accepted."""
        try:
            self.quotas.accept(conn._impl, host)
        except ResourceLimitExceeded as exc:
            if not self._refused_at_accept:
                log.warning("CON-1006 : Refused : [con:-(%s)] : %s", conn.url or "?", exc)
            self._refused_at_accept += 1
            # a plain client reads why (Proton's header, open and close with the error); a
            # TLS client can only see its socket close
            frames = b"" if self._over_tls(conn) else refusal(RESOURCE_LIMIT_EXCEEDED, str(exc))
            self.container.refuse_now(transport, frames)
            return False
        if self._refused_at_accept > 1:
            log.warning(
                "CON-1006 : Refused : %d connections in all were refused at a connection "
                "limit since the last accepted one",
                self._refused_at_accept,
            )
        self._refused_at_accept = 0
        return True

    def _not_tls(self, conn: Connection) -> None:
        """A client of the TLS listener sent something other than a TLS handshake (plain
        AMQP, say): its connection is closed unread, as a TLS port's handshake fails."""
        log.info(
            "CON-1010 : Not TLS : [con:%d(%s)] : the client did not start a TLS handshake "
            "on the TLS port: closed",
            self._numbers.get(conn._impl, 0),
            conn.url or "?",
        )

    def _tls_on_plain(self, conn: Connection) -> None:
        """A client of the plain listener started a TLS handshake: it was answered with a
        framing error and its connection closed, as Proton answers any other protocol."""
        log.info(
            "CON-1011 : TLS on plain port : [con:%d(%s)] : the client started a TLS "
            "handshake on the plain AMQP port: closed with amqp:connection:framing-error",
            self._numbers.get(conn._impl, 0),
            conn.url or "?",
        )

    def _memory_full(self, full: bool) -> None:
        """The broker's memory budget filled, or has room again: every producer stops, or
        goes on (queues/budget.py), and so does every ``$management`` requester (each
        request's reply is a message too)."""
        budget = self.broker.loop_hooks.budget
        log.warning(
            "BRK-1010 : Memory budget %s : %d bytes of queued messages (broker.max_memory %d)",
            "full: producers stopped" if full else "has room: producers resumed",
            budget.used,
            budget.limit,
        )
        for state in list(self.links.values()):
            if isinstance(state, (ProducerLink, RequestLink)):
                state.memory_full(full)

    def _handshake_due(self, conn: Connection) -> None:
        """A connection that has not opened by now is closed at the socket (a client that
        sent nothing, or only a protocol header, must not hold a socket for ever)."""
        if not conn.state & Endpoint.REMOTE_UNINIT or conn._impl not in self.connections:
            return
        log.info(
            "CON-1005 : Handshake timeout : [con:%d(%s)] : no AMQP open within %g s",
            self._numbers.get(conn._impl, 0),
            conn.url or "?",
            self.config.broker.handshake_timeout,
        )
        self._drop_connection(conn)
        transport = conn.transport
        if transport is not None:
            transport.close_tail()
            transport.close_head()

    def on_connection_remote_open(self, event: Event) -> None:
        conn = event.connection
        if not conn.state & Endpoint.LOCAL_UNINIT:  # a second open frame
            self._second_open(conn)
            return
        if conn.transport is not None:  # said in the open that follows (on_connection_bound)
            conn.transport.max_frame_size = self._max_frame_size(conn)
        if not self._authenticated(conn):
            return
        user = sasl.user_of(conn.transport, self.config.sasl)
        if user is None:
            self._no_user(conn)
            return
        log.info(
            "CON-1001 : Open : [con:%d(%s)] : Client ID : %s : User : %s : Protocol Version : 1.0",
            self._numbers.get(conn._impl, 0),
            conn.url or "?",
            conn.remote_container,
            user,
        )
        refused = (
            self._long_container_id(conn) or self._sole_connection(conn) or self._admit(conn, user)
        )
        if refused is not None:
            number = self._numbers.get(conn._impl, 0)
            log.warning("CON-1006 : Refused : [con:%d] : %s", number, refused.description)
            conn.condition = refused
        else:
            self.users[conn._impl] = user
        conn.container = self.config.broker.container_id
        conn.offered_capabilities = OFFERED_CAPABILITIES
        conn.properties = {
            symbol("product"): "proton-broker",
            symbol("version"): proton_broker.__version__,
            symbol("platform"): "Python, Qpid Proton",
        }
        conn.properties = {**conn.properties, **_sole_connection_properties(conn)}
        if refused is not None:  # the close that follows is the answer (Qpid JMS waits for
            # it); Broker-J says so when it refuses a sole connection
            conn.properties = {**conn.properties, ESTABLISHMENT_FAILED: True}
        conn.open()
        if conn.condition is not None:  # refused: the open is answered, then closed
            self._drop_connection(conn)
            conn.close()

    def _authenticated(self, conn: Connection) -> bool:
        """Whether ``conn``'s client authenticated, or may stay anonymous. A client that
        began SASL and sent AMQP frames instead of finishing it reaches here through
        Proton's engine, which hands them on: it is closed as a failed login (logged
        CON-1007 as the transport reports it), before anything it asked for is done, as
        qpidd's SASL layer and Broker-J's open refuse such frames."""
        transport = conn.transport
        host = client_address(conn.url)
        if transport is None or lib.pn_transport_is_authenticated(transport._impl):
            return True
        if allowed(self.config.sasl.anonymous, host):
            return True  # it may stay anonymous: it is the anonymous user
        transport.condition = Condition(
            UNAUTHORIZED_ACCESS, "authentication required: complete the SASL exchange first"
        )
        _close_socket(transport)
        return False

    def _no_user(self, conn: Connection) -> None:
        """The client authenticated with EXTERNAL and a certificate whose subject has no
        CN (amqp/sasl.py): it is no user, and is closed as a failed login (logged CON-1007
        as the transport reports it), before its open is answered, as Broker-J fails such
        an authentication."""
        transport = conn.transport
        transport.condition = Condition(
            UNAUTHORIZED_ACCESS,
            f"the client certificate names no user: its subject has no CN ({transport.user})",
        )
        _close_socket(transport)

    def _second_open(self, conn: Connection) -> None:
        """AMQP 1.0 2.4.1: a connection is opened once. A second open frame closes it with
        ``amqp:illegal-state`` (Broker-J ends such a connection; qpidd ignores the frame),
        and nothing of it is counted or answered again."""
        if conn.state & Endpoint.LOCAL_ACTIVE:
            log.warning(
                "CON-1006 : Refused : [con:%d] : a second open frame on an open connection",
                self._numbers.get(conn._impl, 0),
            )
            conn.condition = Condition(ILLEGAL_STATE, "the connection is open already")
            conn.close()

    def _check_names(self, link: Link) -> None:
        """InvalidField unless the link's name and its addresses are at most
        ``broker.max_name_length`` bytes (see Broker.check_name)."""
        self.broker.check_name(link.name, "link")
        for terminus in (link.remote_source, link.remote_target):
            if terminus.address:
                self.broker.check_name(terminus.address, "node address")

    def _long_container_id(self, conn: Connection) -> Condition | None:
        """Why a connection whose container id is over ``broker.max_name_length`` bytes is
        refused (``amqp:invalid-field`` naming ``container-id``), or None."""
        try:
            self.broker.check_name(conn.remote_container or "", "container id")
        except InvalidField as exc:
            return Condition(INVALID_FIELD, str(exc), {INVALID_FIELD_KEY: symbol("container-id")})
        return None

    def _admit(self, conn: Connection, user: str) -> Condition | None:
        """The ACL's and the quotas' word on a connection that opens: why it is refused,
        or None (it is counted)."""
        address = client_address(conn.url)
        access = self.broker.access
        try:
            access.connect(user, address)
            self.quotas.admit(conn._impl, user, access.connection_quota(user))
        except (ResourceLimitExceeded, Unauthorized) as exc:
            return Condition(condition_for(exc)[0], str(exc))
        return None

    def _close_for_links(self, conn: Connection, exc: ResourceLimitExceeded) -> None:
        """Close ``conn``: it kept attaching beyond its link limit without detaching the
        links the broker refused (see _may_attach)."""
        description = (
            f"{exc}; the client attached as many more beyond it without detaching the "
            "links the broker refused"
        )
        log.warning(
            "CON-1012 : Too many links : [con:%d(%s)] : %s",
            self._numbers.get(conn._impl, 0),
            conn.url or "?",
            description,
        )
        self._drop_connection(conn)
        conn.condition = Condition(condition_for(exc)[0], description)
        conn.close()

    def _sole_connection(self, conn: Connection) -> Condition | None:
        """Broker-J's ``sole-connection-for-container`` (amqp/sole_connections.py): the
        condition that refuses this connection, or None; the open connections it replaces
        (policy close-existing) are closed here with ``amqp:resource-locked``."""
        try:
            policy = sole_connections.policy_asked(
                symbols_in(conn.remote_desired_capabilities),
                {str(k): v for k, v in (conn.remote_properties or {}).items()},
            )
        except InvalidField as exc:
            return Condition(INVALID_FIELD, str(exc))
        applied, others = self.sole.opening(conn.remote_container or "", conn._impl, policy)
        if applied is None:
            return None
        name = sole_connections.POLICY_NAMES[applied]
        why = f"Connection closed due to sole-connection-enforcement-policy '{name}'"
        if applied == sole_connections.REFUSE_CONNECTION:  # Qpid JMS: InvalidClientIDException
            return Condition(INVALID_FIELD, why, {INVALID_FIELD_KEY: symbol("container-id")})
        for impl in others:
            existing = self.connections.get(impl)
            if existing is not None:
                log.info("CON-1009 : Replaced : [con:%d] : %s", self._numbers.get(impl, 0), why)
                info = {symbol("sole-connection-enforcement"): True}
                existing.condition = Condition(RESOURCE_LOCKED, why, info)
                self._drop_connection(existing)
                existing.close()
        return None

    def on_session_remote_open(self, event: Event) -> None:
        event.session.open()

    def on_session_remote_close(self, event: Event) -> None:
        for link in _links_of(event.session.connection, event.session):
            self._forget(link)
            self._ended(link)  # an ended session ends its links on both sides
        event.session.close()

    def on_connection_remote_close(self, event: Event) -> None:
        self._drop_connection(event.connection)
        event.connection.close()

    def on_transport_tail_closed(self, event: Event) -> None:
        """The peer's input ended (it closed its side of the socket, or sent something the
        engine refused): close the connection if it is still open here, so our close frame
        goes out and then our side of the socket closes too; otherwise it would stay
        half-closed (CLOSE_WAIT) for ever, holding a file descriptor."""
        conn = event.connection
        if conn is not None and conn.state & Endpoint.LOCAL_ACTIVE:
            self._drop_connection(conn)
            conn.close()
        elif conn is None or conn.state & Endpoint.LOCAL_UNINIT:  # it never opened
            transport = event.transport
            if transport.pending() > 0:  # a last frame to write (a SASL outcome): then close
                self.container.schedule(CLOSE_GRACE, Callback(lambda: _close_socket(transport)))
            else:
                transport.close_head()

    def on_connection_local_close(self, event: Event) -> None:
        """Whoever closed the connection (its client, a fault, a limit, the peer's input
        ending), its socket is closed within ``CLOSE_GRACE`` seconds: the engine holds a
        close frame back while it owes frames it can no longer send, and a peer that
        stopped reading would otherwise keep the socket half-closed for ever."""
        transport = event.connection.transport
        if transport is not None:
            self.container.schedule(CLOSE_GRACE, Callback(lambda: _close_socket(transport)))

    def on_transport_closed(self, event: Event) -> None:
        if event.connection is not None:
            self._drop_connection(event.connection)

    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        cond = transport.condition
        if cond is None:
            return
        conn = event.connection
        if cond.name == UNAUTHORIZED_ACCESS and conn is not None:  # the SASL auth outcome
            host = client_address(conn.url)
            if sasl.password_mechanism(transport):  # a wrong password (or user)
                self.logins.failed(host)
            locked = self.logins.locked_for(host)
            log.warning(
                "CON-1007 : Authentication failed : [con:%d(%s)] : mechanism %s : %s%s",
                self._numbers.get(conn._impl, 0),
                conn.url or "?",
                transport.sasl().mech or "none",
                cond.description,
                "" if locked is None else f" ({LockedOut(host, locked)})",
            )
            return
        log.info("connection error: %s: %s", cond.name, cond.description)

    def _drop_connection(self, conn: Connection) -> None:
        for link in _links_of(conn):
            self._forget(link)
        if not self._stopping:  # see _check_lifetimes
            self.broker.lifetimes.connection_closed(conn._impl)  # exclusive queues it held
        self.connections.pop(conn._impl, None)
        self.users.pop(conn._impl, None)
        self.quotas.gone(conn._impl)
        self.sole.closed(conn._impl)
        self._opened.pop(conn._impl, None)
        self._gone_traffic.pop(conn._impl, None)
        self.output.connection_closed(conn._impl)
        self.broker.transactions.connection_closed(conn._impl)
        number = self._numbers.pop(conn._impl, None)
        if number is not None and not conn.state & Endpoint.REMOTE_UNINIT:
            # once, whichever of close and end of stream comes first; and only for a
            # connection that opened (a port probe or a failed SASL logs nothing)
            log.info("CON-1002 : Close : [con:%d(%s)]", number, conn.url or "?")

    # ---- links -------------------------------------------------------------------------------

    def on_link_remote_open(self, event: Event) -> None:
        link: Link = event.link
        if link.connection._impl not in self.users:
            return  # its connection was refused (or its open not handled): it is closing
        _ = link.name  # a name that is not UTF-8 is refused now (see contain_fault)
        self.quotas.attached(link.connection._impl, link._impl)  # until both sides detach
        try:
            self._may_attach(link)
            self._check_names(link)
            if link.is_receiver:
                state: ProducerLink | ConsumerLink | CoordinatorLink | RequestLink = (
                    self._attach_producer(link)
                )
            else:
                state = self._attach_consumer(link)
        except BrokerError as exc:
            self._created.discard(link._impl)
            self._refuse(link, exc)
            return
        self.links[link._impl] = state
        queue = getattr(state, "queue", None)
        created = link._impl in self._created
        self._created.discard(link._impl)
        if queue is not None:
            self._attached.setdefault(queue, set()).add(link._impl)
            consumes = isinstance(state, ConsumerLink) and not state.browse
            self.broker.lifetimes.attached(
                queue, link._impl, link.connection._impl, created, consumes
            )
        link.snd_settle_mode = link.remote_snd_settle_mode
        # As a receiver the broker settles each transfer as it gives the outcome, so it
        # answers rcv-settle-mode first whatever the producer asked for (as qpidd does;
        # the receiver's own attach is what holds, AMQP 1.0 2.7.3).
        link.rcv_settle_mode = Link.RCV_FIRST if link.is_receiver else link.remote_rcv_settle_mode
        link.open()
        if isinstance(state, (ProducerLink, CoordinatorLink, RequestLink)):
            state.start()

    def _attach_producer(self, link: Link) -> ProducerLink | CoordinatorLink | RequestLink:
        target = link.remote_target
        if target.type == Terminus.COORDINATOR:
            link.target.type = Terminus.COORDINATOR
            capabilities = link.target.capabilities
            capabilities.put_array(False, Data.SYMBOL)
            capabilities.enter()
            capabilities.put_symbol(LOCAL_TRANSACTIONS)
            capabilities.exit()
            _answer_source(link)
            return CoordinatorLink(link, self.broker, self.config.broker.producer_credit)
        if target.address == MANAGEMENT_ADDRESS and not target.dynamic:
            echo_terminus(link.target, target, MANAGEMENT_ADDRESS, ())
            _answer_source(link)
            return RequestLink(
                link,
                self.management,
                self.config.broker.producer_credit,
                self._user_of(link),
                self.config.broker.max_message_size,
                self._confidential(link.connection),
            )
        if target.type == Terminus.UNSPECIFIED:  # no target at all (not a null address)
            raise NotFound(  # Broker-J's answer; qpidd's is precondition-failed
                f"Link '{link.name}' not found: a sender with no target asks to recover a "
                "link, and this broker keeps none (the anonymous relay is a target with no "
                "address)"
            )
        options = node_options(link, target)
        node = self._node(link, target, options, required=False)
        credit = self.config.broker.producer_credit
        _answer_source(link)
        if isinstance(node, ExchangeAddress):
            self._echo_exchange(link.target, target, node, options)
            return ProducerLink(link, self.broker, None, credit, self._user_of(link), node)
        self._own_if_dynamic(link, target, node, options)
        self._echo(link.target, target, node, options)
        return ProducerLink(link, self.broker, node, credit, self._user_of(link))

    def _attach_consumer(self, link: Link) -> ConsumerLink:
        source = link.remote_source
        options = node_options(link, source)
        sequence, applied = sequence_filter(source)  # bad filters: refused, nothing created
        from_number, from_applied = sequence_number_filter(source)
        selector, selector_applied = selector_filter(source)
        subject, subject_applied = subject_filter(source)  # a queue's only (see below)
        applied = {**applied, **from_applied, **selector_applied}
        browsing = (
            source.distribution_mode == Terminus.DIST_MODE_COPY
            or sequence is not None
            or from_number is not None
        )  # replays are browses
        if source.address == MANAGEMENT_ADDRESS and not source.dynamic:
            queue: Queue | None = self.management.reply_queue_for(
                link.connection._impl, link.remote_target.address
            )
            self._temporary[link._impl] = queue.name
        elif source.type == Terminus.UNSPECIFIED and not source.dynamic:
            return self._look_up_subscription(link)
        else:
            node = self._node(link, source, options, required=True, browsing=browsing)
            if isinstance(node, ExchangeAddress):
                return self._subscribe(link, source, node, options)
            queue = node
            if subject is not None:  # qpidd's subject filter on a queue consumer
                selector = with_subject(subject, selector)
                applied = {**applied, **subject_applied}
            self._refuse_if_subscribed(queue, browsing)
            self._own_if_dynamic(link, source, queue, options)
        assert queue is not None
        browse = browsing or queue.browse_only
        self._echo(link.source, source, queue, options)
        if source.address == MANAGEMENT_ADDRESS and not source.dynamic:
            link.source.address = MANAGEMENT_ADDRESS
        link.source.distribution_mode = (
            Terminus.DIST_MODE_COPY if browse else Terminus.DIST_MODE_MOVE
        )
        link.target.copy(link.remote_target)
        period, requested = replay_period(link, source)
        if from_number is not None and requested is not None:
            raise InvalidField(
                f"{REPLAY_PERIOD} and x-opt-sequence-number cannot be "
                "combined: each says where browsing starts",
                REPLAY_PERIOD,
            )
        consumer = self._consumer(link, queue, browse)
        queue.subscribe(consumer, period, sequence, from_number, selector)
        if queue.settings.no_local:
            self._keep_local_out(link, queue.name)
        if requested is not None:
            applied = {**applied, REPLAY_PERIOD: requested}
        if applied:
            echo_filters(link.source, applied)
        return consumer

    def _refuse_if_subscribed(self, queue: Queue, browsing: bool) -> None:
        """A consumer of an exclusive subscription's queue by its address, while its
        subscriber holds it, is refused (qpidd's exclusive owner, Broker-J's LINK
        exclusivity); browsing it is allowed."""
        if not browsing and self.broker.subscriptions.stealable(queue.name):
            raise ResourceLocked(
                f"subscription '{queue.name}' is in use by its subscriber: a link "
                "consumes it by its topic and name, not by the queue's address"
            )

    def _node(
        self,
        link: Link,
        terminus: Terminus,
        options: dict[str, Any],
        required: bool,
        browsing: bool = False,
    ) -> Queue | ExchangeAddress | None:
        """The queue a terminus names, created as policy allows (and the connection's quota:
        see amqp/quotas.py), or the exchange it names (``exchange`` or
        ``exchange/subject``); a dynamic terminus gets a new temporary queue (or exchange:
        see _new_exchange). ``None`` only for an anonymous-relay target: a producer's
        target with no address, or a blank one (Broker-J's reading, as Proton C++'s
        ``open_sender("")`` and rhea's ``{target: {address: ''}}`` ask for the relay; a
        source's blank address stays refused). The ACL is asked first
        (security/access.py), so a refused attach creates nothing."""
        connection, user = link.connection._impl, self._user_of(link)
        if not required and not terminus.dynamic and _blank(terminus.address):
            if options:
                raise InvalidField("queue options need a node address", next(iter(options)))
            return None  # the anonymous relay
        exchange = self._exchange_node(link, terminus, options)
        if exchange is not None:
            return exchange
        if terminus.dynamic:
            name = f"TempQueue{_uuid()}"
            if TEMPORARY_QUEUE in capabilities_of(terminus):  # Qpid JMS's temporary queue:
                options = {**options, "exclusive": True}  # its connection's (Broker-J)
            self._authorise(link, name, None, options, browsing)
            self.quotas.may_create(connection, name)
            queue = self.broker.declare(name, options, user=user)
            self.quotas.created(connection)
            self._created.add(link._impl)
            return queue
        if terminus.address is None:
            raise NotFound("a receiving link needs a source address")
        existing = self.broker.queues.get(terminus.address)
        self._authorise(link, terminus.address, existing, options, browsing)
        if existing is None and _TEMPORARY & set(capabilities_of(terminus)):
            # A temporary destination that has gone (a late reply) is not made again as
            # a permanent queue: qpidd's and Broker-J's not-found.
            raise NotFound(f"Node not found: {terminus.address}")
        if existing is not None:
            if link.is_sender and not browsing:  # a consumer: exclusive queues refuse it
                self.broker.lifetimes.may_attach(existing, connection)
            return self.broker.resolve(terminus.address, options)
        self.quotas.may_create(connection, terminus.address)
        queue = self.broker.resolve(terminus.address, options, user=user)
        self.quotas.created(connection)
        self._created.add(link._impl)
        return queue

    def _exchange_node(
        self, link: Link, terminus: Terminus, options: dict[str, Any]
    ) -> ExchangeAddress | None:
        """The exchange a terminus names, or asks to be made (a dynamic node with the
        ``temporary-topic`` capability, as Qpid JMS asks for a temporary topic, or
        ``supported-dist-modes: copy`` or an ``exchange-type``, as qpidd reads them);
        None when it is about a queue. An alternate in ``options`` is the exchange's,
        applied when the attach makes it (a subscription queue does not take it: see
        _subscribe)."""
        wanted, kind, options_for_queue = exchange_options(terminus, options)
        address = terminus.address
        found = None
        if address is not None and not terminus.dynamic:
            asked = node_type(terminus)
            found = self.broker.node(address, link.is_receiver, asked)
            if link.is_sender:  # a consumer's source: the kind it asked for, or not found
                _refuse_other_kind(address, asked, found)
            if isinstance(found, Queue):
                return None
        if found is None and not wanted:
            return None
        # qpidd's node properties for an exchange: its alternate, read when it is made
        alternate = {k: options[k] for k in ALTERNATE_ARGUMENTS if k in options}
        options_for_queue = {k: v for k, v in options_for_queue.items() if k not in alternate}
        if found is None:
            # A sender's other node properties are the new exchange's arguments (qpidd);
            # a receiver's are its subscription queue's (see _subscribe).
            extra = (
                sender_exchange_arguments(options_for_queue, terminus.dynamic)
                if link.is_receiver
                else {}
            )
            found = self._new_exchange(
                link,
                terminus,
                kind or TOPIC,
                {**alternate, **extra},
                node_durable(terminus, options),
            )
        if (
            kind is not None
            and kind != found.exchange.kind
            and CREATE_ON_DEMAND in capabilities_of(terminus)
        ):  # qpidd's Session::resolve: 0-10's exchange-declare; otherwise the echo tells
            raise PreconditionFailed(
                f"Exchange of different type already exists: '{found.exchange.name}' is "
                f"'{found.exchange.kind}', not '{kind}'"
            )
        exchange = found.exchange
        self.broker.access.check(
            self._user_of(link),
            "access",
            "exchange",
            exchange.name,
            {"type": exchange.kind, "durable": "true" if exchange.durable else "false"},
        )
        return found

    def _new_exchange(
        self,
        link: Link,
        terminus: Terminus,
        kind: str,
        arguments: dict[str, Any],
        durable_node: bool = False,
    ) -> ExchangeAddress:
        """An exchange the attach asks for: dynamic (named ``TempTopic<uuid>``, living as
        long as the link), or by a name node policy lets clients create; durable when its
        node properties or capabilities say so (``durable_node``, qpidd's reading) or its
        terminus is durable."""
        user = self._user_of(link)
        if terminus.dynamic:
            name = f"TempTopic{_uuid()}"
            exchange = self.broker.declare_exchange(name, kind, arguments=arguments, user=user)
            self._temporary_exchanges[link._impl] = name
            return ExchangeAddress(exchange)
        name = terminus.address
        assert name is not None
        if not self.broker.may_create(name):
            raise NotFound(f"Node not found: {name}")
        durable = durable_node or terminus.durability != Terminus.NONDURABLE
        return ExchangeAddress(
            self.broker.declare_exchange(name, kind, durable, arguments, user=user)
        )

    def _subscribe(
        self, link: Link, source: Terminus, address: ExchangeAddress, options: dict[str, Any]
    ) -> ConsumerLink:
        """A receiver on an exchange: its subscription queue (amqp/subscribing.py,
        exchanges/subscriptions.py), then a consumer of that queue."""
        # An alternate in the node properties is the exchange's, not the subscription queue's.
        queue_options = {k: v for k, v in options.items() if k not in ALTERNATE_ARGUMENTS}
        request = read_subscription(link, source, address, queue_options)
        user = self._user_of(link)
        wanted = request.subscription
        existing = self.broker.queues.get(wanted.name)
        self._authorise(link, wanted.name, existing, dict(wanted.options), False)
        if not wanted.shared:
            self._steal(link, wanted.name)
        queue = self.broker.subscriptions.attach(wanted, user=user)
        if request.no_local or queue.settings.no_local:
            self._keep_local_out(link, wanted.name)
        self._echo_exchange(link.source, source, address, options)
        if request.echo:
            echo_filters(link.source, request.echo)
        # Each subscriber gets a copy of what the exchange routes: Broker-J's answer
        # (qpidd leaves the mode unset); the link still consumes its subscription queue.
        link.source.distribution_mode = Terminus.DIST_MODE_COPY
        return self._consume_subscription(link, Subscribed(wanted.name, wanted.kept), queue)

    def _keep_local_out(self, link: Link, name: str) -> None:
        """While the receiver ``link`` is attached, what its connection publishes stays out
        of queue ``name``: a no-local receiver, or any receiver of a no-local queue."""
        connection = link.connection._impl
        self._locals[link._impl] = (name, connection)
        self.broker.no_local_link(name, connection)

    def _look_up_subscription(self, link: Link) -> ConsumerLink:
        """A receiver with a null source: Qpid JMS looking a durable subscription up by
        its link name to unsubscribe (``<name>|global`` names a global one, as Broker-J
        reads it: Proton gives us no link capabilities). Our reply's source names its
        exchange; none found: a null source and ``amqp:not-found``."""
        global_ = link.name.endswith("|global")
        name = subscription_name(
            link.connection.remote_container or "", link.name, global_, global_
        )
        queue = self.broker.subscriptions.find(name)
        if queue is None:
            raise NotFound(f"no subscription '{name}'")
        self._authorise(link, name, queue, {}, False)
        self._steal(link, name)
        bindings = self.broker.exchanges.bindings_of(name)
        # Its exchange deleted: found all the same, named by its queue, so that it can be
        # unsubscribed (Proton reads a source with no address as none).
        link.source.address = bindings[0].exchange if bindings else name
        link.source.durability = Terminus.CONFIGURATION if queue.persistent else Terminus.NONDURABLE
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
        self.broker.subscriptions.hold(name)
        return self._consume_subscription(link, Subscribed(name, True), queue)

    def _steal(self, thief: Link, name: str) -> None:
        """Broker-J's link stealing for exclusive subscription ``name`` (see
        exchanges/subscriptions.py): the link holding it is detached with
        ``amqp:link:stolen``, its unsettled messages back on the queue, before ``thief``
        takes it."""
        if not self.broker.subscriptions.stealable(name):
            return
        description = (  # Broker-J's words
            f"Link is being stolen by connection '{client_host_port(thief.connection.url)}'"
        )
        holders = [impl for impl, held in self._subscribed.items() if held.name == name]
        for impl in holders:
            state = self.links.get(impl)
            if state is None:
                continue
            victim = state.link
            log.info("link '%s' on subscription '%s' stolen: %s", victim.name, name, description)
            self._forget(victim, stolen=True)
            close_link(victim, LINK_STOLEN, description)

    def _consume_subscription(self, link: Link, held: Subscribed, queue: Queue) -> ConsumerLink:
        """The consumer of the subscription ``held`` names (held by this link until it
        goes)."""
        self._subscribed[link._impl] = held
        link.target.copy(link.remote_target)
        consumer = self._consumer(link, queue, False)
        queue.subscribe(consumer, None, None, None, None)
        return consumer

    def _consumer(self, link: Link, queue: Queue, browse: bool) -> ConsumerLink:
        """The state of a link that consumes (or browses) ``queue``."""
        state = ConsumerLink(
            link,
            queue,
            browse,
            self.broker.transactions,
            self.config.broker.max_message_size,
            self.output,
            self.output.backlog_of(link.connection._impl),
        )
        state.on_fault = self._consumer_failed
        return state

    def _consumer_failed(self, state: ConsumerLink, entry: Entry | None, error: Exception) -> None:
        """A delivery to ``state`` raised (the queue's backstop, queues/dispatching.py: the
        message is back in its place): the error is logged once, with its traceback, and
        the link detached with ``amqp:internal-error`` once the dispatch that failed is
        over (the link's going may delete the queue)."""
        link, queue = state.link, state.queue.name
        what = (
            f"message {entry.seq} on queue '{queue}'" if entry is not None else f"queue '{queue}'"
        )
        description = f"internal error: {what} could not be sent: {type(error).__name__}: {error}"
        log.error("detaching consumer '%s': %s", link.name, description, exc_info=error)

        def detach() -> None:
            if self.links.get(link._impl) is state:  # not gone meanwhile
                self._forget(link)
                close_link(link, INTERNAL_ERROR, description)

        self.call_soon(detach)

    def _echo_exchange(
        self,
        local: Terminus,
        remote: Terminus,
        address: ExchangeAddress,
        options: dict[str, Any],
    ) -> None:
        """Our half of an attach to an exchange; ``options``: the node properties it gave."""
        honoured = exchange_capabilities(capabilities_of(remote), address)
        exchange = address.exchange
        name = exchange.name
        echo_terminus(local, remote, remote.address if not remote.dynamic else name, honoured)
        echo_exchange_properties(local, options, exchange)

    def _authorise(
        self,
        link: Link,
        name: str,
        queue: Queue | None,
        options: dict[str, Any],
        browsing: bool,
    ) -> None:
        """Unauthorized unless the ACL lets this link's user send to (a receiving link) or
        receive from queue ``name``: ``queue``, or the one ``options`` would create."""
        access = self.broker.access
        if not access.enabled:
            return
        settings = queue.settings if queue is not None else parse_options(options).settings
        user = self._user_of(link)
        if link.is_receiver:
            access.send(user, name, settings)
        else:
            access.receive(user, name, settings, browsing or settings.ensure_nondestructive)

    def _user_of(self, link: Link) -> str:
        return self.users.get(link.connection._impl, ANONYMOUS)

    def _echo(
        self, local: Terminus, remote: Terminus, queue: Queue | None, options: dict[str, Any]
    ) -> None:
        """Our half of the attach: the node, the capabilities honoured, the queue's options
        (as declared, plus the ones this attach gave if they match the queue's settings;
        a queue attached with other settings is echoed as it is)."""
        honoured = HONOURED_CAPABILITIES
        if queue is not None and queue.settings.durable:
            honoured = honoured | {"durable"}
        echo_terminus(local, remote, queue.name if queue else None, honoured)
        if queue is not None:
            parsed = parse_options(options) if options else None
            same = parsed is not None and not differences(queue.settings, parsed)
            requested = parsed.echo if parsed is not None and same else {}
            echo_properties(local, {**queue.options, **requested}, queue.settings.lifetime_policy)

    def _refuse(self, link: Link, exc: BrokerError) -> None:
        """Qpid's refusal shape: an attach with a null terminus, then a detach with the error."""
        name, description, info = condition_for(exc)
        log.info("refused link '%s': %s %s", link.name, name, description)
        node = link.target if link.is_receiver else link.source
        node.type = Terminus.UNSPECIFIED  # encoded as null: "no such node"
        link.open()
        close_link(link, name, description, info)

    def on_link_remote_close(self, event: Event) -> None:
        refused = self._forget(event.link, closed=True)
        self._ended(event.link)
        if event.link.state & Endpoint.LOCAL_CLOSED:
            return
        if refused is not None:  # an unsubscribe while others consume (Broker-J's answer)
            close_link(event.link, *condition_for(refused))  # or that the ACL denies
        else:
            event.link.close()

    def on_link_remote_detach(self, event: Event) -> None:
        self._forget(event.link)
        self._ended(event.link)
        event.link.detach()

    def _ended(self, link: Link) -> None:
        """The client detached ``link``; the broker answers at once if it has not detached
        it first: both sides have, and it no longer counts (amqp/quotas.py)."""
        self.quotas.detached(link.connection._impl, link._impl)

    def _may_attach(self, link: Link) -> None:
        """ResourceLimitExceeded if ``link``'s connection has as many links as it may (this
        one counted). A connection whose count, refused and detached links its client
        never detached included, reaches twice its limit is closed with the same
        condition: each further attach would leave one more link in Proton's engine."""
        conn = link.connection
        try:
            self.quotas.may_attach(conn._impl, link._impl)
        except ResourceLimitExceeded as exc:
            if self.quotas.overrun(conn._impl):
                self._close_for_links(conn, exc)
            raise

    def _forget(self, link: Link, closed: bool = False, stolen: bool = False) -> BrokerError | None:
        """A link went: its state, and what lived as long as it (``closed``: a detach
        with closed=true, which ends a kept subscription; ``stolen``: its subscription
        taken over by a new link, which it outlives). Why an unsubscribe it asked
        for was refused, if it was."""
        impl = link._impl
        self._created.discard(impl)
        state = self.links.pop(impl, None)
        if state is not None:
            state.detach()
            self._unindex(state, impl)
            self._count_gone(link.connection._impl, state)
        temporary = self._temporary.pop(impl, None)
        if temporary is not None and temporary in self.broker.queues:
            self.broker.delete_queue(temporary, force=True)
        held = self._subscribed.pop(impl, None)
        refused = None
        if held is not None:
            refused = self.broker.subscriptions.detach(
                held.name, closed and held.unsubscribes, stolen, self._user_of(link)
            )
        local = self._locals.pop(impl, None)
        if local is not None:
            self.broker.no_local_link(*local, attached=False)
        exchange = self._temporary_exchanges.pop(impl, None)
        if exchange is not None and exchange in self.broker.exchanges:
            self.broker.delete_exchange(exchange)
        queue = getattr(state, "queue", None)
        if queue is not None and not self._stopping:  # last: it may delete the queue now
            if stolen:  # once the thief holds it, so that its lifetime does not end it
                self.call_soon(lambda: self.broker.lifetimes.detached(queue, impl))
            else:
                self.broker.lifetimes.detached(queue, impl)
        return refused

    def _count_gone(self, conn: Any, state: Any) -> None:
        """Keep the messages of a link that went in its connection's counts."""
        moved_in, moved_out = _traffic([state])
        if moved_in or moved_out:
            gone_in, gone_out = self._gone_traffic.get(conn, (0, 0))
            self._gone_traffic[conn] = (gone_in + moved_in, gone_out + moved_out)

    def _own_if_dynamic(
        self, link: Link, terminus: Terminus, queue: Queue | None, options: dict[str, Any]
    ) -> None:
        """A dynamic node lives as long as the link that asked for it (AMQP 1.0's default
        lifetime policy for dynamic nodes, delete-on-close; qpidd defaults to
        delete-on-no-links and Broker-J to the connection's close, see
        docs/queue-lifetime.md), unless its node properties give a lifetime policy: that
        one is honoured (proton_broker/lifetime.py, with this link as the controlling
        link)."""
        if not terminus.dynamic or queue is None:
            return
        if not options or "lifetime_policy" not in parse_options(options).given:
            self._temporary[link._impl] = queue.name

    def _queue_deleted(self, queue: Queue) -> None:
        """A queue is being deleted: detach every consumer and browser attached to it with
        ``amqp:resource-deleted`` (their unsettled messages go back to it first); producers
        stay attached until their next transfer detaches them (see ProducerLink)."""
        for impl in self._attached.pop(queue, ()):
            self._temporary.pop(impl, None)
            self._locals.pop(impl, None)  # its count went with the queue (Broker.no_local)
            if self._subscribed.pop(impl, None) is not None:
                self.broker.subscriptions.detach(queue.name, unsubscribe=True)
            state = self.links.get(impl)
            if isinstance(state, ProducerLink):
                state.target_deleted()
            elif state is not None:
                del self.links[impl]
                state.detach()
                close_link(state.link, RESOURCE_DELETED, f"queue '{queue.name}' was deleted")

    def _unindex(self, state: Any, impl: Any) -> None:
        queue = getattr(state, "queue", None)
        attached = self._attached.get(queue) if queue is not None else None
        if attached is not None:
            attached.discard(impl)
            if not attached:
                del self._attached[queue]

    # ---- hot path: raw engine events --------------------------------------------------------

    # PN_DELIVERY (a transfer, or a consumer's disposition) is handled inline in
    # _BrokerContainer.process, which calls the link state's on_delivery directly.

    def on_raw_link_flow(self, event: Any) -> None:
        state = self.links.get(lib.pn_event_link(event))
        if state is not None and isinstance(state, ConsumerLink):
            state.on_flow()

    # ---- faults -------------------------------------------------------------------------------

    def contain_fault(self, exc: BaseException, link_impl: Any, conn_impl: Any) -> None:
        """Close what the failing event concerned, and keep running: with
        ``amqp:invalid-field`` when the peer sent text that is not UTF-8 (a container id,
        link name or address: Proton hands it over undecoded and the first read of it
        fails), else with ``amqp:internal-error`` and the traceback logged."""
        what = "link" if link_impl else "connection"
        if isinstance(exc, UnicodeDecodeError):
            name = INVALID_FIELD
            description = (
                f"a name, address or other text field is not valid UTF-8 (byte "
                f"0x{exc.object[exc.start]:02x} at position {exc.start})"
            )
            log.warning("closing the %s: %s", what, description)
        else:
            name = INTERNAL_ERROR
            description = f"internal error: {type(exc).__name__}: {exc}"
            log.error(
                "handler fault, closing the %s: %s", what, "".join(traceback.format_exception(exc))
            )
        try:
            if link_impl:
                link = Link.wrap(link_impl)
                self._forget(link)
                close_link(link, name, description)
            elif conn_impl:
                conn = Connection.wrap(conn_impl)
                self._drop_connection(conn)
                conn.condition = Condition(name, description)
                conn.close()
        except (SessionException, BrokerError, ValueError):  # pragma: no cover - best effort
            log.exception("could not close after a fault")


def _blank(address: str | None) -> bool:
    """Whether a target ``address`` names no node: none, or only blanks (Java's ``trim``,
    as Broker-J's ``Session_1_0.getReceivingDestination`` reads it)."""
    return address is None or all(c <= " " for c in address)


def _answer_source(link: Link) -> None:
    """Our half of a producer's source: the client's, echoed (as Broker-J echoes it).
    Proton's engine reads a source with no address (the anonymous relay's, a
    coordinator's) as no source at all, so such a source is answered as one with the
    fields the engine kept: a producer that sent no source gets one it can ignore."""
    link.source.copy(link.remote_source)
    link.source.type = Terminus.SOURCE


def _refuse_other_kind(
    address: str, asked: str | None, found: Queue | ExchangeAddress | None
) -> None:
    """NotFound when a consumer asked for a ``queue`` or a ``topic`` (its source's
    capability) and ``address`` names a node of the other kind: qpidd's
    ``Session::resolve`` looks up only that kind. A Qpid JMS Topic consumer would
    otherwise drain a queue, and a Queue consumer get a copy of everything an exchange
    routes (Broker-J attaches to whatever the name is; producers still do here)."""
    if asked == "topic" and isinstance(found, Queue):
        raise NotFound(
            f"Node not found: '{address}' is a queue, and the source's capability "
            "'topic' asks for an exchange"
        )
    if asked == "queue" and isinstance(found, ExchangeAddress):
        raise NotFound(
            f"Node not found: '{address}' is an exchange, and the source's capability "
            "'queue' asks for a queue"
        )


def _output_left(conn: Connection) -> bool:
    """Whether ``conn``'s transport still has bytes to write (a closed one has none)."""
    transport = conn.transport  # the engine's count: PN_EOS (negative) once it is closed
    return transport is not None and lib.pn_transport_pending(transport._impl) > 0


def _sole_connection_properties(conn: Connection) -> dict[symbol, uint]:
    """What Broker-J's open says to a client that desires ``sole-connection-for-container``:
    its detection policy, strong (0: a second connection is seen at once), and the
    enforcement policy when it is close-existing (1), the one the client asked for."""
    if sole_connections.CAPABILITY not in symbols_in(conn.remote_desired_capabilities):
        return {}
    said = {symbol(sole_connections.DETECTION): uint(sole_connections.STRONG)}
    asked = (conn.remote_properties or {}).get(symbol(sole_connections.POLICY))
    if asked == sole_connections.CLOSE_EXISTING:
        said[symbol(sole_connections.POLICY)] = uint(sole_connections.CLOSE_EXISTING)
    return said


def _links_of(conn: Connection, session: Any = None) -> list[Link]:
    links = []
    link = conn.link_head(0)
    while link is not None:
        if session is None or link.session == session:
            links.append(link)
        link = link.next(0)
    return links


def _session_number(session: Any) -> int:
    """``session``'s place among its connection's open sessions, from 0: its channel, as
    Proton gives each new session the lowest free one (while none before it has ended)."""
    number = 0
    other = session.connection.session_head(Endpoint.LOCAL_ACTIVE)
    while other is not None and other != session:
        number += 1
        other = other.next(Endpoint.LOCAL_ACTIVE)
    return number


def _announced(conn: Connection, key: str) -> str | None:
    """What the client's open announced under ``key`` (Proton and Qpid JMS send
    ``product`` and ``version``), as text; None when it did not."""
    value = (conn.remote_properties or {}).get(symbol(key))
    return None if value is None else str(value)


def _session_count(conn: Connection) -> int:
    """The connection's sessions its client has begun and not ended."""
    count, session = 0, conn.session_head(Endpoint.REMOTE_ACTIVE)
    while session is not None:
        count += 1
        session = session.next(Endpoint.REMOTE_ACTIVE)
    return count


def _traffic(links: list[Any]) -> tuple[int, int]:
    """Messages taken from producers and sent to consumers on these links' states."""
    return (
        sum(s.received for s in links if isinstance(s, ProducerLink)),
        sum(s.sent for s in links if isinstance(s, ConsumerLink)),
    )


def _close_socket(transport: Transport) -> None:
    """Close both directions of a transport that has not finished closing by itself: the
    reactor then closes its socket."""
    if not transport.closed:
        transport.close_tail()
        transport.close_head()


def client_address(url: Any) -> str:
    """The client's host in a connection's URL (Proton's ``Url`` of the peer), for quotas."""
    host = getattr(url, "host", None)
    return str(host) if host else "?"


def client_host_port(url: Any) -> str:
    """The client's ``host:port`` in a connection's URL, as the console and the logs name
    a connection."""
    return f"{client_address(url)}:{getattr(url, 'port', '?')}"


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())
