"""One AMQP connection of the connector: Proton's engine over a socket this module drives.

Rules this module owns:

* The protocol is Proton's engine (``proton.Connection`` and ``proton.Transport``, with
  SASL, and TLS for ``amqps``); the socket, the waiting and the timeouts are ours. There is
  no reactor and no event collector: the connector waits for a few states (a link
  attached, deliveries queued, credit drained, dispositions answered), so after each read
  it looks at those states directly instead of creating and popping an event per delivery,
  which is what made the reactor-based client slow. The per-message calls go straight to
  the engine's C functions through ``cproton_ffi`` (:mod:`proton_broker.spark.client`).
* Every wait has a deadline: ``timeout`` seconds from the moment it starts (a step: an
  attach, a batch of deliveries, the answers to a window of transfers). Missing it raises
  :class:`ClientTimeout` saying what was awaited. The engine's idle-timeout ticks are kept
  while waiting, so a broker's heartbeat rule is honoured.
* The broker's refusals are errors with its reason: a connection or link the broker closes
  with an error condition (an unknown queue, an access rule, a malformed attach) raises
  :class:`BrokerRequestError` carrying the condition's name and description; a socket the
  broker closes raises it too.
* The URL's password never appears in an error: a task's error becomes a Spark task
  failure, shown in its logs and UI, so the URL is named as ``amqp://user:***@host:port``
  (:func:`safe_url`).
* A connection is opened and closed by one call and never shared or pickled: Spark runs the
  connector in Python workers that come and go.
"""

from __future__ import annotations

import select
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from cproton_ffi import ffi, lib
from proton import (
    SSL,
    Connection,
    Data,
    Endpoint,
    Link,
    SSLDomain,
    Terminus,
    Transport,
    Url,
    symbol,
)

from proton_broker.spark.options import TlsFiles

READ_SIZE = 256 * 1024  # bytes read from the socket at a time (when the engine takes them)
CLOSE_WAIT = 2.0  # seconds to wait for the broker to answer a close, at most

_REMOTE_CLOSED = Endpoint.REMOTE_CLOSED
_REMOTE_ACTIVE = Endpoint.REMOTE_ACTIVE
_POLL_IN, _POLL_OUT = select.POLLIN, select.POLLOUT
_POLL_BAD = select.POLLERR | select.POLLHUP | select.POLLNVAL


class BrokerRequestError(RuntimeError):
    """The broker answered a request with an error (a missing queue, a refusal)."""


class ClientTimeout(BrokerRequestError, TimeoutError):
    """The broker did not answer within the timeout."""


class AmqpConnection:
    """An open connection with one session; make links with :meth:`receiver` and
    :meth:`sender`, wait with :meth:`wait`, and :meth:`close` it."""

    def __init__(self, url: str, timeout: float, tls: TlsFiles | None = None) -> None:
        self.url = Url(url, defaults=True)
        self.name = safe_url(url)  # how errors name the URL
        self.timeout = timeout
        self.tls = tls
        self.sock = socket.create_connection(
            (str(self.url.host), int(self.url.port)), timeout=timeout
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.poller = select.poll()
        self.poller.register(self.sock, _POLL_IN)
        self.polling = _POLL_IN
        self.connection = Connection()
        self.connection.container = f"proton-broker-spark-{uuid.uuid4().hex[:12]}"
        self.connection.hostname = str(self.url.host)
        self.transport = Transport()
        self._security(self.transport)
        self.transport.bind(self.connection)
        self.timpl = self.transport._impl
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()
        self.links: list[Link] = []
        self.out = ffi.new("char[]", READ_SIZE)  # the engine's output is copied here to send

    def _security(self, transport: Transport) -> None:
        """SASL always (ANONYMOUS, or the URL's user and password), TLS for ``amqps``: the
        same as Proton's ``BlockingConnection`` does for a URL."""
        sasl = transport.sasl()
        sasl.allow_insecure_mechs = True
        if self.url.username:
            self.connection.user = self.url.username
        if self.url.password:
            self.connection.password = self.url.password
        if self.url.scheme == "amqps":
            tls = SSL(transport, client_domain(self.tls))
            tls.peer_hostname = str(self.url.host)

    # ---- links -------------------------------------------------------------------------------

    def receiver(
        self,
        address: str | None,
        *,
        browse: bool = False,
        settled: bool = False,
        filters: dict[str, Any] | None = None,
        dynamic: bool = False,
    ) -> Link:
        """Attach a receiving link from ``address`` (or a dynamic node) and wait for the
        broker's answer; :class:`BrokerRequestError` when it refuses."""
        link = self.session.receiver(f"spark-receiver-{len(self.links)}")
        source = link.source
        if dynamic:
            source.dynamic = True
        elif address is not None:
            source.address = address
        if browse:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        if settled:  # the broker sends settled: nothing to acknowledge
            link.snd_settle_mode = Link.SND_SETTLED
        if filters:
            _put_map(source.filter, filters)
        return self._attach(link, f"attaching a receiver to '{address or 'a dynamic node'}'")

    def sender(self, address: str, node_properties: dict[str, Any] | None = None) -> Link:
        """Attach a sending link to ``address`` (``node_properties``: queue options, should
        the attach create the queue) and wait for the broker's answer."""
        link = self.session.sender(f"spark-sender-{len(self.links)}")
        link.target.address = address
        if node_properties:
            _put_map(link.target.properties, node_properties)
        return self._attach(link, f"attaching a sender to '{address}'")

    def _attach(self, link: Link, what: str) -> Link:
        link.open()
        self.links.append(link)
        impl = link._impl
        self.wait(lambda: bool(lib.pn_link_state(impl) & _REMOTE_ACTIVE), what)
        return link

    # ---- waiting -----------------------------------------------------------------------------

    def wait(self, ready: Callable[[], bool], what: str) -> None:
        """Move bytes both ways until ``ready()`` holds; errors and the timeout raise."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.flush()
            self.check()
            if ready():
                return
            now = time.monotonic()
            if now >= deadline:
                raise ClientTimeout(
                    f"no answer from the broker within {self.timeout:g}s while {what}"
                )
            self._poll(min(deadline, self._tick(now)) - now)

    def _tick(self, now: float) -> float:
        """Keep the engine's idle timeouts; when it wants to be called next."""
        due = lib.pn_transport_tick(self.timpl, int(now * 1000))
        return due / 1000.0 if due else now + 3600.0

    def _poll(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the socket, then read what it has."""
        want = _POLL_IN | (_POLL_OUT if lib.pn_transport_pending(self.timpl) > 0 else 0)
        if want != self.polling:
            self.poller.modify(self.sock, want)
            self.polling = want
        ready = self.poller.poll(max(0, int(seconds * 1000) + 1))
        if ready and ready[0][1] & (_POLL_IN | _POLL_BAD):
            self.read()

    def read(self) -> None:
        """Hand the engine what the socket has (without blocking)."""
        timpl = self.timpl
        while True:
            capacity = lib.pn_transport_capacity(timpl)
            if capacity <= 0:
                return
            try:
                data = self.sock.recv(min(capacity, READ_SIZE))
            except BlockingIOError:
                return
            except OSError as exc:
                lib.pn_transport_close_tail(timpl)
                raise BrokerRequestError(f"the connection to {self.name} failed: {exc}") from None
            if not data:
                lib.pn_transport_close_tail(timpl)
                return
            lib.pn_transport_push(timpl, data, len(data))
            if len(data) < min(capacity, READ_SIZE):
                return

    def flush(self) -> None:
        """Write what the engine has to send, as far as the socket takes it now."""
        timpl = self.timpl
        while True:
            pending = lib.pn_transport_pending(timpl)
            if pending <= 0:
                return
            out = self.out
            if pending > len(out):
                out = self.out = ffi.new("char[]", pending)
            lib.pn_transport_peek(timpl, out, pending)
            try:
                sent = self.sock.send(ffi.buffer(out, pending))
            except BlockingIOError:
                return
            except OSError as exc:
                lib.pn_transport_close_head(timpl)
                raise BrokerRequestError(f"the connection to {self.name} failed: {exc}") from None
            lib.pn_transport_pop(timpl, sent)
            if sent < pending:
                return

    def check(self) -> None:
        """Raise the broker's error if it closed a link, the connection or the socket."""
        for link in self.links:
            if lib.pn_link_state(link._impl) & _REMOTE_CLOSED:
                raise BrokerRequestError(_refusal(f"link to '{_address(link)}'", link))
        if self.connection.state & _REMOTE_CLOSED:
            raise BrokerRequestError(_refusal("connection", self.connection))
        if lib.pn_transport_closed(self.timpl):
            condition = self.transport.condition
            why = f"{condition.name}: {condition.description}" if condition else "closed"
            raise BrokerRequestError(f"the connection to {self.name} ended: {why}")

    # ---- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close politely (wait briefly for the broker's close), then the socket."""
        try:
            if not self.connection.state & _REMOTE_CLOSED:
                self.connection.close()
                deadline = time.monotonic() + min(self.timeout, CLOSE_WAIT)
                while not lib.pn_transport_closed(self.timpl) and time.monotonic() < deadline:
                    self.flush()
                    if self.connection.state & _REMOTE_CLOSED:
                        break
                    self._poll(deadline - time.monotonic())
        except (OSError, BrokerRequestError):
            pass  # closing anyway
        finally:
            self.sock.close()
            self.transport.unbind()


def client_domain(files: TlsFiles | None) -> SSLDomain:
    """A client's TLS settings: the broker's certificate always verified, its name too
    (``VERIFY_PEER_NAME``, Proton's default for a client), against ``files.ca_file`` when
    given; this client's certificate when given."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if files is None:
        return domain
    if files.ca_file:
        domain.set_trusted_ca_db(files.ca_file)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, files.ca_file)
    if files.cert_file:
        domain.set_credentials(files.cert_file, files.key_file, files.key_password)
    return domain


def safe_url(url: str) -> str:
    """``url`` as errors name it: its password, if any, masked (``amqp://alice:***@h:p``)."""
    parsed = Url(url, defaults=True)
    host = str(parsed.host)
    user = parsed.username
    who = f"{user}:***@" if parsed.password else f"{user}@" if user else ""
    where = f"[{host}]" if ":" in host else host
    path = f"/{parsed.path}" if parsed.path else ""
    return f"{parsed.scheme}://{who}{where}:{int(parsed.port)}{path}"


def _put_map(data: Data, values: dict[str, Any]) -> None:
    """Fill a terminus field (filter set, node properties) with a map keyed by symbols."""
    data.put_dict({symbol(key): value for key, value in values.items()})


def _address(link: Link) -> str | None:
    terminus = link.target if link.is_sender else link.source
    return terminus.address


def _refusal(what: str, endpoint: Any) -> str:
    """The text of an endpoint the broker closed: its error condition, if it sent one."""
    condition = endpoint.remote_condition
    if condition is None:
        return f"the broker closed the {what}"
    return f"the broker closed the {what}: {condition.name}: {condition.description}"
