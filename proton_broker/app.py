"""The composition root: one place that builds the broker and everything around it.

From a :class:`~proton_broker.config.Config` it makes the broker (queues, store), the AMQP
server on Proton's loop (with its AMQPS listener when ``tls`` is on), the HTTP gateway and
the metrics listener; it starts and stops them in order. Nothing else wires these together:
the gateway gets a :class:`~proton_broker.http.gateway.BrokerLoop` (run a call on the
broker's loop, take a metrics snapshot, reach the broker), not the server, and the domain
knows none of them. ``__main__`` turns command-line flags into a config and calls this;
tests build an :class:`App` too.

Threading: the AMQP server's loop thread owns all broker state; the gateway and the metrics
listener run threads of their own and reach the broker only through ``call_soon``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from proton_broker.amqp.sasl import check_mechanisms
from proton_broker.amqp.server import Server
from proton_broker.broker import Broker
from proton_broker.config import Config, check_tls_files
from proton_broker.errors import BrokerError, Unauthorized
from proton_broker.metrics import fetch_from_loop
from proton_broker.security.acl import AclError

log = logging.getLogger("proton_broker.http")
acl_log = logging.getLogger("proton_broker.acl")


class App:
    """A broker and its listeners, built from ``config`` (nothing listens until
    :meth:`listen`). Raises ConfigError for SASL mechanisms the build cannot offer, a
    user database or TLS file that is not there, BrokerError for a bad declared queue,
    StoreError for a store that does not open (or whose data directory another broker
    holds)."""

    def __init__(self, config: Config) -> None:
        check_mechanisms(config)  # before anything is opened
        check_tls_files(config)
        self.config = config
        self.broker = Broker(config)
        self.server = Server(self.broker, config)
        self.http: Any = None  # the HTTP gateway (proton_broker.http), when enabled
        self.metrics: Any = None  # the metrics listener (proton_broker.metrics), when enabled
        self.failed_listener: str | None = None  # which listener could not bind, if one

    def listen(self) -> tuple[str, int]:
        """Bind every configured listener; returns the AMQP address (port 0: a free one).
        OSError if one cannot start, with :attr:`failed_listener` naming it."""
        section = self.config.broker
        self.failed_listener = f"{section.host}:{section.port}"
        address = self.server.listen(section.host, section.port)
        for number, also in enumerate(self.config.listeners):
            host = also.host or section.host
            self.failed_listener = f"{host}:{also.port} (listeners[{number}])"
            self.server.listen_also(host, also.port, also.max_frame_size or section.max_frame_size)
        if self.config.tls.enabled:
            self.failed_listener = f"{self.config.tls.host}:{self.config.tls.port} (AMQPS)"
            self.server.listen_tls()
        if self.config.http.enabled:
            self.failed_listener = f"{self.config.http.host}:{self.config.http.port} (HTTP)"
            self._listen_http()
        if self.config.metrics.enabled:
            metrics = self.config.metrics
            self.failed_listener = f"{metrics.host}:{metrics.port} (metrics)"
            self._listen_metrics()
        self.failed_listener = None
        return address

    def _listen_http(self) -> None:
        from proton_broker.http.gateway import Gateway  # aiohttp only when it is used

        gateway = Gateway(self.server, self.config)
        gateway.start()
        self.http = gateway

    def _listen_metrics(self) -> None:
        from proton_broker.metrics import MetricsListener

        listener = MetricsListener(
            fetch_from_loop(self.server.call_soon, self.server.metrics_snapshot),
            None if self.config.metrics.open else self._scrape_guard,
        )
        listener.start(self.config.metrics.host, self.config.metrics.port)
        self.metrics = listener

    def _scrape_guard(self, host: str | None, header: str | None) -> None:
        """Who may scrape the metrics listener: the rules of the HTTP gateway
        (security/basic.py), the password checked on the broker's loop."""
        from proton_broker.security.basic import (
            ANONYMOUS,
            Refused,
            credentials,
            locked_out,
            unauthenticated,
        )
        from proton_broker.security.logins import LockedOut

        given = credentials(self.config.sasl, host, header, secure=False)
        name = ANONYMOUS
        if given is not None:
            name, password = given
            check = functools.partial(self.server.check_password, name, password, host or "?")
            try:
                right = fetch_from_loop(self.server.call_soon, check)()
            except LockedOut as exc:
                raise locked_out(exc) from None
            if not right:
                log.warning("HTP-1001 : Authentication failed : %s : user %r", host, name)
                raise unauthenticated("authentication failed: wrong user name or password")
        try:
            self.server.broker.access.check(name, "access", "broker", what="read the metrics")
        except Unauthorized as exc:
            raise Refused(403, exc.description) from None

    def reload_acl(self) -> None:
        """Read the ACL file again, on the broker's loop (SIGHUP; thread-safe). A file
        that no longer reads is logged (``ACL-1004``) and the rules in force stay."""

        def reload() -> None:
            try:
                self.server.broker.access.reload()
            except (AclError, BrokerError) as exc:
                acl_log.error("ACL-1004 : Reload failed : %s", exc)

        self.server.call_soon(reload)

    def run(self) -> None:
        """Serve until :meth:`stop`; the listeners are stopped first."""
        self.server.run()
        if self.http is not None:
            self.http.join(5)

    def stop(self) -> None:
        """Stop the HTTP and metrics listeners, close every connection, end the loop
        (thread-safe)."""
        if self.http is not None:
            self.http.stop()
        if self.metrics is not None:
            self.metrics.stop()
        self.server.stop()
