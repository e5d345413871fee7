"""Command line: ``python -m proton_broker`` / ``proton-broker``.

Flags override the environment, which overrides the config file (see
:mod:`proton_broker.config`). The line ``listening on HOST:PORT`` is logged once the
listener is bound, so scripts and tests can wait for it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import resource
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proton_broker import __version__, collector, config
from proton_broker.errors import BrokerError, ConfigError
from proton_broker.store.base import StoreError

log = logging.getLogger("proton_broker")
DEFAULT_CONFIG = "conf/broker.yaml"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="proton-broker",
        description="An AMQP 1.0 message broker with Qpid queue semantics.",
    )
    parser.add_argument(
        "--config",
        help=f"YAML configuration file (default: {DEFAULT_CONFIG} if it exists; a file "
        "named here must exist)",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default 5672; 0 = any free)")
    parser.add_argument("--data-dir", help="directory for the store (default ./data)")
    parser.add_argument(
        "--store",
        choices=["sqlite", "memory"],
        help="where durable state is kept (default sqlite, in the data dir)",
    )
    parser.add_argument(
        "--default-message-group",
        "--default-msg-group",  # the name qpidd's user book gives it
        dest="default_message_group",
        help="group of messages without a group id on shared-groups queues (default qpid.no-group)",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        help="serve the HTTP gateway on this port (turns it on; 0 = any free)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus metrics on this port (turns it on; 0 = any "
        "free); the HTTP gateway serves /metrics too when it is on",
    )
    parser.add_argument(
        "--tls-port",
        type=int,
        help="serve AMQPS (TLS) on this port too (turns it on; 0 = any free); "
        "needs tls.cert_file and tls.key_file in the config",
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR or CRITICAL")
    parser.add_argument("--version", action="version", version=f"proton-broker {__version__}")
    return parser.parse_args(argv)


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    broker = {
        k: v
        for k, v in (
            ("host", args.host),
            ("port", args.port),
            ("data_dir", args.data_dir),
            ("default_message_group", args.default_message_group),
            ("store", args.store),
        )
        if v is not None
    }
    out: dict[str, dict[str, Any]] = {"broker": broker}
    if args.http_port is not None:
        out["http"] = {"enabled": True, "port": args.http_port}
    if args.metrics_port is not None:
        out["metrics"] = {"enabled": True, "port": args.metrics_port}
    if args.tls_port is not None:
        out["tls"] = {"enabled": True, "port": args.tls_port}
    if args.log_level:
        out["logging"] = {"level": args.log_level.upper()}
    return out


def _raise_open_file_limit() -> None:
    """Allow as many open files as the hard limit lets us (Debian's soft limit is 1024):
    every connection and every waiting HTTP long poll holds a socket."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):  # else keep the soft limit we have
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# Allocations at least this big get pages of their own, which go back to the OS when freed.
LARGE_ALLOCATION = 256 * 1024


def _return_large_buffers_to_the_os() -> None:
    """Have glibc map every allocation of LARGE_ALLOCATION or more on its own pages.

    glibc's default threshold moves up to the size of a freed mapping (up to 32 MiB), after
    which large message bodies come from the heap, whose free middle is never given back:
    an idle broker that once held large messages would keep their memory for ever. A fixed
    threshold (``mallopt(M_MMAP_THRESHOLD)``, what ``MALLOC_MMAP_THRESHOLD_`` sets) turns
    that off; small messages are unaffected. Other C libraries: nothing to do."""
    m_mmap_threshold = -3
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(m_mmap_threshold, LARGE_ALLOCATION)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _raise_open_file_limit()
    _return_large_buffers_to_the_os()
    path = args.config or DEFAULT_CONFIG
    try:
        cfg = config.load(path, overrides=_overrides(args), must_exist=args.config is not None)
    except ConfigError as exc:
        print(f"proton-broker: configuration error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=cfg.logging.level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    read = Path(path).resolve() if Path(path).is_file() else "none (built-in defaults)"
    log.info("proton-broker %s; configuration file: %s", __version__, read)
    from proton_broker.app import App  # after logging, so import logs show

    try:
        app = App(cfg)
    except (BrokerError, ConfigError) as exc:
        print(f"proton-broker: configuration error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"proton-broker: cannot open the store: {exc}", file=sys.stderr)
        return 2
    try:
        host, port = app.listen()
    except OSError as exc:
        print(f"proton-broker: cannot listen on {app.failed_listener}: {exc}", file=sys.stderr)
        return 1
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: app.stop())
    signal.signal(signal.SIGHUP, lambda *_: app.reload_acl())  # reads the ACL again (docs/acl.md)
    if app.http is not None:
        scheme = "https" if cfg.http.tls else "http"
        log.info("HTTP gateway on %s://%s:%d", scheme, *app.http.address)
    if app.metrics is not None:
        log.info("metrics on http://%s:%d/metrics", *app.metrics.address)
    if app.server.tls_address is not None:
        log.info("AMQPS (TLS) on %s:%d", *app.server.tls_address)
    log.info("listening on %s:%d", host, port)
    collector.configure()  # see collector.py
    app.run()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
