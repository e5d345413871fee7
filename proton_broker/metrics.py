"""Prometheus metrics: the broker's public figures in the Prometheus text format.

Rules this module owns:

* Nothing is counted here. Queues already count what happens to their messages
  (:class:`~proton_broker.queues.queue.QueueStats`, depth and bytes), the server counts
  connections and the store times its commits (:class:`~proton_broker.store.base.CommitClock`);
  a scrape copies those figures and formats them. So a message costs nothing more with
  metrics on, and a scrape costs O(queues), never O(messages).
* The copy is taken on the broker's event-loop thread (:func:`take_snapshot`, called through
  ``Server.call_soon``), the only thread that may read queues; formatting runs on the HTTP
  thread that answers the scrape, over the copy (:func:`render`).
* Names follow Prometheus conventions: ``proton_broker_`` prefix, base units (seconds,
  bytes), ``_total`` on counters, one ``queue`` label on per-queue series (subscriptions are
  queues), ``exchange`` and ``type`` labels on per-exchange ones. A queue or exchange that
  is deleted simply stops having series.

This module knows the broker's state, not sockets: serving the text is the HTTP gateway's
job (``/metrics``) or :class:`MetricsListener`'s, on a port of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from proton_broker.security.basic import Refused
from proton_broker.store.base import COMMIT_BOUNDS, CommitTimes

if TYPE_CHECKING:
    from proton_broker.broker import Broker

T = TypeVar("T")
# Called with a scrape's client address and Authorization header; raises Refused to refuse it.
Guard = Callable[[str | None, str | None], None]

CONTENT_TYPE = CONTENT_TYPE_LATEST  # what generate_latest() writes
PREFIX = "proton_broker_"
SNAPSHOT_TIMEOUT = 5.0  # seconds a scrape waits for the event loop before it fails

# QueueStats field -> (metric name without prefix and _total, help text)
QUEUE_COUNTERS: dict[str, tuple[str, str]] = {
    "enqueued": ("queue_enqueued", "Messages that joined the queue."),
    "dequeued": ("queue_dequeued", "Messages consumed and settled (accepted) off the queue."),
    "expired": ("queue_expired", "Messages dropped because their time to live ran out."),
    "evicted": ("queue_evicted", "Messages deleted by a ring queue to make room."),
    "refused": ("queue_refused", "Messages a reject-policy queue refused because it was full."),
    "rejected": ("queue_rejected", "Messages a consumer rejected (settled as rejected)."),
    "released": ("queue_released", "Messages a consumer released or modified back."),
    "redelivered": (
        "queue_redelivered",
        "Messages returned with delivery-failed, to be delivered again.",
    ),
    "replaced": (
        "queue_replaced",
        "Messages replaced by a newer value for their key (last-value queues).",
    ),
    "duplicates": (
        "queue_duplicates",
        "Messages dropped because their message-id was seen within the queue's "
        "duplicate detection window (answered accepted).",
    ),
    "dead_lettered": (
        "queue_dead_lettered",
        "Messages sent to the queue's alternate (rejected, evicted, expired under the "
        "route policy, past the maximum delivery attempts, or left when it was deleted).",
    ),
    "exhausted": (
        "queue_delivery_attempts_exhausted",
        "Messages that reached the queue's maximum delivery attempts.",
    ),
    "discarded": (
        "queue_dead_letters_discarded",
        "Messages the queue gave up on that had nowhere to go (the maximum delivery attempts "
        "without an alternate, an alternate that routes them nowhere).",
    ),
    "paged_out": (
        "queue_paged_out",
        "Messages whose bytes were moved from memory to the store (flow to disk).",
    ),
}


@dataclass(frozen=True)
class QueueFigures:
    name: str
    depth: int  # live messages, available or acquired
    bytes: int
    consumers: int
    counters: dict[str, int]  # QueueStats field -> value


@dataclass(frozen=True)
class ExchangeFigures:
    name: str
    kind: str
    bindings: int
    routed: int  # messages that reached at least one queue
    dropped: int  # messages that reached none


@dataclass(frozen=True)
class Snapshot:
    """Everything one scrape reports, copied on the event-loop thread."""

    queues: list[QueueFigures]
    connections: int  # open now
    connections_opened: int  # accepted since start
    commits: CommitTimes | None  # None: no store opened yet
    exchanges: list[ExchangeFigures] = field(default_factory=list)
    history_bytes: int = 0  # what sequence histories hold beyond their queues
    history_keys_forgotten: int = 0


def take_snapshot(broker: Broker, connections: int, connections_opened: int) -> Snapshot:
    """Copy the figures (event-loop thread only): O(number of queues)."""
    queues = [
        QueueFigures(
            queue.name, queue.depth, queue.bytes, queue.consumer_count, dict(vars(queue.stats))
        )  # the quickest copy of a plain dataclass
        for queue in broker.queues.values()
    ]
    exchanges = [
        ExchangeFigures(e.name, e.kind, e.binding_count, e.routed, e.dropped)
        for e in broker.exchanges
    ]
    store = broker.store
    commits = store.commits.snapshot() if store is not None else None
    history = broker.loop_hooks.history_budget
    return Snapshot(
        queues, connections, connections_opened, commits, exchanges, history.used, history.forgotten
    )


class SnapshotCollector(Collector):
    """Turns snapshots into metric families; ``fetch`` gets a fresh one for each scrape."""

    def __init__(self, fetch: Callable[[], Snapshot]) -> None:
        self.fetch = fetch

    def collect(self) -> Iterator[Metric]:
        snapshot = self.fetch()
        yield from _queue_families(snapshot.queues)
        yield from _exchange_families(snapshot.exchanges)
        yield GaugeMetricFamily(
            PREFIX + "queues", "Queues that exist now.", value=len(snapshot.queues)
        )
        yield GaugeMetricFamily(
            PREFIX + "connections", "AMQP connections open now.", value=snapshot.connections
        )
        yield CounterMetricFamily(
            PREFIX + "connections_opened",
            "AMQP connections accepted since the broker started.",
            value=snapshot.connections_opened,
        )
        yield GaugeMetricFamily(
            PREFIX + "history_bytes",
            "What sequence histories hold beyond their queues (consumed and replaced versions, "
            "their bytes and records), counted against broker.max_history_memory.",
            value=snapshot.history_bytes,
        )
        yield CounterMetricFamily(
            PREFIX + "history_keys_forgotten",
            "Keys sequence histories forgot because broker.max_history_memory was full.",
            value=snapshot.history_keys_forgotten,
        )
        if snapshot.commits is not None:
            yield from _commit_families(snapshot.commits)


def _queue_families(queues: list[QueueFigures]) -> Iterator[Metric]:
    def gauge(name: str, text: str, value: Callable[[QueueFigures], int]) -> Metric:
        family = GaugeMetricFamily(PREFIX + name, text, labels=["queue"])
        for figures in queues:
            family.add_metric([figures.name], value(figures))
        return family

    yield gauge(
        "queue_depth_messages", "Messages on the queue (available or acquired).", lambda q: q.depth
    )
    yield gauge("queue_depth_bytes", "Bytes of the messages on the queue.", lambda q: q.bytes)
    yield gauge(
        "queue_consumers",
        "Consumers (browsers included) attached to the queue.",
        lambda q: q.consumers,
    )
    for field_name, (name, text) in QUEUE_COUNTERS.items():
        family = CounterMetricFamily(PREFIX + name, text, labels=["queue"])
        for figures in queues:
            family.add_metric([figures.name], figures.counters.get(field_name, 0))
        yield family


def _exchange_families(exchanges: list[ExchangeFigures]) -> Iterator[Metric]:
    labels = ["exchange", "type"]
    bindings = GaugeMetricFamily(
        PREFIX + "exchange_bindings", "Bindings of the exchange.", labels=labels
    )
    routed = CounterMetricFamily(
        PREFIX + "exchange_routed",
        "Messages the exchange routed to at least one queue.",
        labels=labels,
    )
    dropped = CounterMetricFamily(
        PREFIX + "exchange_dropped",
        "Messages the exchange routed to no queue (unroutable: dropped).",
        labels=labels,
    )
    for figures in exchanges:
        bindings.add_metric([figures.name, figures.kind], figures.bindings)
        routed.add_metric([figures.name, figures.kind], figures.routed)
        dropped.add_metric([figures.name, figures.kind], figures.dropped)
    yield from (bindings, routed, dropped)


def _commit_families(commits: CommitTimes) -> Iterator[Metric]:
    cumulative, buckets = 0, []
    for bound, count in zip(COMMIT_BOUNDS, commits.buckets, strict=True):
        cumulative += count
        buckets.append((_bound(bound), cumulative))
    buckets.append(("+Inf", commits.count))
    yield HistogramMetricFamily(
        PREFIX + "store_commit_seconds",
        "Time the store took to write and commit (fsync) one group of units.",
        buckets=buckets,
        sum_value=commits.seconds,
    )
    yield CounterMetricFamily(
        PREFIX + "store_commit_failures",
        "Store commits that failed and were rolled back.",
        value=commits.failures,
    )
    yield GaugeMetricFamily(
        PREFIX + "store_removals_waiting",
        "Acknowledged messages a failed commit could not remove from the store yet "
        "(written with the next commit that succeeds; back after a restart before then).",
        value=commits.removals_waiting,
    )


def _bound(value: float) -> str:
    return repr(float(value))


def render(snapshot: Snapshot) -> bytes:
    """The Prometheus text exposition of ``snapshot`` (any thread)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot))
    return generate_latest(registry)


def fetch_from_loop(
    call_soon: Callable[[Callable[[], None]], None], take: Callable[[], T]
) -> Callable[[], T]:
    """A blocking ``fetch`` for threads that may wait: runs ``take`` on the event loop and
    waits for it (at most :data:`SNAPSHOT_TIMEOUT`; a scrape then fails with a 500)."""

    def fetch() -> T:
        done = threading.Event()
        result: list[Any] = []

        def call() -> None:
            try:
                result.append(take())
            except BaseException as exc:  # raised again on the scraping thread
                result.append(exc)
            done.set()

        call_soon(call)
        if not done.wait(SNAPSHOT_TIMEOUT):
            raise TimeoutError("the broker's event loop did not answer the scrape")
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    return fetch


class MetricsListener:
    """``/metrics`` on a port of its own (config ``metrics``), for a broker whose HTTP
    gateway is off: prometheus_client's small threaded HTTP server, whose scrapes fetch a
    snapshot from the event loop (and wait for it on their own thread)."""

    def __init__(self, fetch: Callable[[], Snapshot], guard: Guard | None = None) -> None:
        self.guard = guard
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(fetch))
        self.address: tuple[str, int] | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind and serve (port 0: a free port); OSError when the address cannot be bound."""
        app = _guarded(make_wsgi_app(self.registry), self.guard)
        self._server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.address = tuple(self._server.server_address[:2])  # type: ignore[assignment]
        return self.address  # type: ignore[return-value]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (as prometheus_client's own server)."""


def _guarded(app: Any, guard: Guard | None) -> Any:
    """The WSGI app behind ``guard`` (who may scrape; see security/basic.py)."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        if guard is not None:
            try:
                guard(environ.get("REMOTE_ADDR"), environ.get("HTTP_AUTHORIZATION"))
            except Refused as refused:
                status = f"{refused.status} {HTTPStatus(refused.status).phrase}"
                headers = [("Content-Type", "text/plain; charset=utf-8"), *refused.headers.items()]
                start_response(status, headers)
                return [refused.message.encode() + b"\n"]
        return app(environ, start_response)

    return guarded
