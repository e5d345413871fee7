"""The HTTP gateway: the sequence-history HTTP API (docs/sequence-history.md) served by
the broker process with aiohttp.

Thread model. aiohttp runs its own asyncio loop in one background thread; the broker's
event loop stays the only thread that touches queues. A handler never reads broker state:
it passes a function to :meth:`BrokerLoop.call_soon`, which runs it on the broker's loop, and
the result (or the error it raised) comes back with ``loop.call_soon_threadsafe``. Nothing
on the broker's loop waits for HTTP: the functions sent there only look, enqueue or
register a listener (:mod:`proton_broker.http.watch`). A long poll that must wait is a
future on the gateway's loop, not a thread, so thousands of idle polls cost a socket and
a few objects each.

Endpoints (statuses and JSON shapes are in docs/sequence-history.md):

* ``POST /queue/send/{queue}``: enqueue ``{"id", "sequence"?, "payload"}``; answers the
  stored version ``{"id", "sequence", "payload"}``.
* ``GET /queue/listen/longpoll/{queue}[/{id}]?sequence=N|first|last&timeout=S``: the first
  kept version from N at once, else the next new one; 204 when ``timeout`` runs out.
* ``GET /queue/listen/ws/{queue}[/{id}]?sequence=N|first|last``: a WebSocket that gets
  the kept versions from N, then every new one, one JSON text message each.
* ``GET /metrics``: Prometheus text (:mod:`proton_broker.metrics`; docs/metrics.md).

Cross-site requests (:mod:`proton_broker.http.crossorigin`): a request with an ``Origin``
that is not the gateway's own is refused (403), and a send must be ``application/json``
(415), so a web page elsewhere can neither send nor listen through a visitor's browser.

Limits (``http`` config keys, on by default; docs/sequence-history.md, "Limits"):

* ``max_body_size``: a body over it is refused with 413. aiohttp's own limit
  (``client_max_size`` of the application) stops ``request.read()`` as soon as the body
  grows past it, so an oversized body is never held whole; a declared ``Content-Length``
  over it is refused before a byte of the body is read (:func:`_declared_body_size`).
* ``read_timeout``: aiohttp has no header or body read timeout of its own, so it is built
  from two simple parts. Headers: ``keepalive_timeout`` (an AppRunner argument) is armed
  when a connection opens and again after each answer, and closes the connection if no
  complete request head has arrived by then, however many bytes trickled in: so a request's
  headers must arrive within ``read_timeout`` (the connection is closed, as there is no
  request yet to answer), and an idle kept-alive connection is closed after
  ``read_timeout`` too (as Go's ``http.Server`` does when no idle timeout is set). Body:
  ``request.read()`` runs under ``asyncio.timeout(read_timeout)`` from the moment the
  headers are in, and a body not complete by then is answered 408 with ``Connection:
  close`` (:meth:`Gateway._body`). What a refused client still sends (the rest of a body
  answered 408 or 413) is read and dropped for at most ``read_timeout`` more, so that it
  gets to read the answer (aiohttp's lingering close, ``lingering_time``); then the
  connection is closed. So however slowly a client sends, its connection is answered or
  closed within about 3 x ``read_timeout`` (head, body, the dropped rest).
* ``max_long_polls``: long polls and WebSocket streams held at once, counted on the
  gateway's thread from the moment the request is taken until its handler ends, by any
  route (answered, timed out, client gone, queue deleted, shutdown); one more is answered
  503 at once, before the broker is asked anything (:meth:`Gateway._hold`).
* A body nested too deeply for Python's ``json`` (RecursionError) is answered 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from aiohttp import web

from proton_broker.config import Config, TlsSection
from proton_broker.errors import (
    BrokerError,
    InvalidField,
    NotFound,
    NotTaken,
    ResourceLimitExceeded,
    Unauthorized,
)
from proton_broker.http.auth import USER, Authenticator
from proton_broker.http.console import Console
from proton_broker.http.crossorigin import require_json, same_origin_only
from proton_broker.http.watch import Item, Listener, QueueWatch, Replay
from proton_broker.http.wire import (
    Deferred,
    RequestError,
    SendRequest,
    build_message,
    parse_send,
    refuse_when_full,
    version_json,
    when_written,
)
from proton_broker.message import Message
from proton_broker.queues.history import sequence_start
from proton_broker.queues.settings import parse_options

if TYPE_CHECKING:
    from proton_broker.broker import Broker
    from proton_broker.metrics import Snapshot
    from proton_broker.queues.queue import Queue

log = logging.getLogger("proton_broker.http")

T = TypeVar("T")
AUTO_CREATE_OPTIONS = {"sequenceKey": "id"}  # a queue first named over HTTP keys versions by id
_AUTO_CREATE_SETTINGS = parse_options(AUTO_CREATE_OPTIONS).settings
STREAM_BACKLOG = 10_000  # versions a WebSocket client may fall behind before it is dropped
_CLOSING = object()  # handed to waiting polls and streams when the gateway stops
_DELETED = object()  # handed to the polls and streams of a queue that is deleted
WS_QUEUE_DELETED = 4404  # the WebSocket close code of a stream whose queue was deleted


class BrokerLoop(Protocol):
    """What the gateway needs of the process it serves in (the AMQP server provides it):
    the broker, a way to run a call on the loop thread that owns it, and a metrics
    snapshot taken on that thread."""

    broker: Broker

    def call_soon(self, fn: Callable[[], None]) -> None: ...

    def metrics_snapshot(self) -> Snapshot: ...

    def check_password(self, user: str, password: str, host: str) -> bool: ...

    def connection_figures(self) -> list[dict[str, Any]]: ...

    def connection_counts(self) -> dict[str, tuple[int, int]]: ...

    def consumer_figures(self, queue_name: str) -> list[dict[str, Any]]: ...

    def close_connection(self, connection_id: str, user: str) -> None: ...


class Gateway:
    """The gateway's thread, its aiohttp application, and its bridge to the broker loop."""

    def __init__(self, server: BrokerLoop, config: Config) -> None:
        self.server = server
        self.config = config
        self.section = config.http
        self.authenticator = Authenticator(
            config.sasl, self._check_password, open_metrics=config.metrics.open
        )
        self.address: tuple[str, int] | None = None  # bound address, once started
        self._watches: dict[str, QueueWatch] = {}  # broker loop thread only
        server.broker.deletion_watchers.append(self._queue_deleted)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._waiting: set[Callable[[object], None]] = set()  # gateway thread only
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="http-gateway", daemon=True)
        self.console: Console | None = None
        if config.console.enabled:
            self.console = Console(
                server, config, self._on_broker, self._check_password, self._body
            )

    # ---- life cycle (any thread) --------------------------------------------------------

    def start(self) -> tuple[str, int]:
        """Start the thread and bind; returns the bound address (port 0: a free port).
        Raises OSError when the address cannot be bound."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        assert self.address is not None
        return self.address

    def stop(self) -> None:
        """Ask the gateway to close (thread-safe, returns at once)."""
        if self._loop is not None and self._stop is not None:
            self._post(self._stop.set)

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def listener_count(self) -> int:
        """Long polls and streams waiting for a new version (broker loop thread only)."""
        return sum(watch.count for watch in self._watches.values())

    # ---- the gateway's thread -----------------------------------------------------------

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve())
        finally:
            self._ready.set()
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        read_timeout = self.section.read_timeout
        runner = web.AppRunner(
            self._app(),
            access_log=None,
            shutdown_timeout=1.0,
            handler_cancellation=True,  # a client that goes: its poll ends
            keepalive_timeout=read_timeout,  # a request's head within read_timeout (above)
            lingering_time=read_timeout,  # the rest of a refused body: read and dropped
        )
        try:
            await runner.setup()
            site = web.TCPSite(
                runner,
                self.section.host,
                self.section.port,
                backlog=1024,
                ssl_context=https_context(self.config.tls) if self.section.tls else None,
            )
            await site.start()
            self.address = tuple(runner.addresses[0][:2])  # type: ignore[assignment]
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            await runner.cleanup()
            return
        if self.console is not None:
            self.console.start()
        self._ready.set()
        await self._stop.wait()
        if self.console is not None:
            await self.console.stop()
        for wake in list(self._waiting):
            wake(_CLOSING)
        await asyncio.sleep(0)  # let the woken handlers answer
        await runner.cleanup()

    def _post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the gateway's loop (from the broker's loop)."""
        assert self._loop is not None
        # RuntimeError: the gateway's loop has closed, nobody waits any more
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, *args)

    def _app(self) -> web.Application:
        app = web.Application(
            middlewares=[
                _json_errors,
                same_origin_only,  # before the credentials are looked at
                self.authenticator.middleware,
                _declared_body_size,
            ],
            client_max_size=self.section.max_body_size,
        )
        app.add_routes(
            [
                web.post("/queue/send/{queue}", self._send),
                web.get("/queue/listen/longpoll/{queue}", self._longpoll),
                web.get("/queue/listen/longpoll/{queue}/{id}", self._longpoll),
                web.get("/queue/listen/ws/{queue}", self._stream),
                web.get("/queue/listen/ws/{queue}/{id}", self._stream),
                web.get("/metrics", self._metrics),
            ]
        )
        if self.console is not None:
            app.add_routes(self.console.routes())
        return app

    async def _on_broker(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the broker's loop; its result or its exception comes back here."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def call() -> None:
            try:
                result = fn()
            except BaseException as exc:  # raised again in the handler
                self._post(_settle, future, None, exc)
            else:
                if isinstance(result, Deferred):  # answered once the broker is done
                    result.then(lambda value, error: self._post(_settle, future, value, error))
                else:
                    self._post(_settle, future, result, None)

        self.server.call_soon(call)
        return await future

    async def _check_password(self, user: str, password: str, host: str) -> bool:
        return await self._on_broker(lambda: self.server.check_password(user, password, host))

    # ---- handlers (gateway thread) -------------------------------------------------------

    async def _send(self, request: web.Request) -> web.Response:
        name = request.match_info["queue"]
        require_json(request)  # what a page elsewhere cannot send without asking first
        raw = await self._body(request)
        send = parse_send(raw)
        user = request[USER]
        sequence = await self._on_broker(lambda: self._enqueue(name, send, user))
        return web.json_response({"id": send.key, "sequence": sequence, "payload": send.payload})

    async def _longpoll(self, request: web.Request) -> web.StreamResponse:
        name, key = request.match_info["queue"], request.match_info.get("id")
        start = _start(request.query.get("sequence"))
        timeout = _timeout(request.query.get("timeout"), self.section.longpoll_timeout)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        wake = _waker(future)
        listener = Listener(key, lambda item: self._post(wake, item), once=True)

        user = request[USER]

        def look() -> Item | None:
            watch = self._watch(name, user, sending=False)
            found = watch.first_kept(start, key)
            if found is None:
                watch.add(listener)
            return found

        self._hold(wake)
        try:
            found = await self._on_broker(look)
            if found is None:
                found = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return web.Response(status=204)  # nothing new: poll again with the same sequence
        finally:
            self._waiting.discard(wake)
            if not future.done() or future.cancelled():
                self.server.call_soon(lambda: self._forget(name, listener))
        if found is _CLOSING:
            raise RequestError(503, "the broker is shutting down")
        if found is _DELETED:  # 410 Gone, as sonya answers (a queue that never was: 404)
            raise RequestError(410, f"queue '{name}' was deleted")
        return web.json_response(version_json(*found))

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        name, key = request.match_info["queue"], request.match_info.get("id")
        start = _start(request.query.get("sequence"))
        items: asyncio.Queue[Any] = asyncio.Queue()
        push = _pusher(items, request)
        listener = Listener(key, lambda item: self._post(push, item), once=False)

        user = request[USER]

        def subscribe() -> tuple[Replay, list[Item]]:
            watch = self._watch(name, user, sending=False)
            replay = watch.replay(start, key)  # up to now; the listener gets what follows
            watch.add(listener)
            return replay, replay.next()

        self._hold(push)
        try:
            replay, kept = await self._on_broker(subscribe)  # errors answer before the upgrade

            async def more() -> list[Item]:
                """The replay's next slice: one call on the broker's loop each, so the loop
                serves its sockets in between (none once the gateway is stopping)."""
                if replay.done or self._stop is None or self._stop.is_set():
                    return []
                return await self._on_broker(replay.next)

            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await _forward(ws, items, kept, more)
            return ws
        finally:
            self._waiting.discard(push)
            self.server.call_soon(lambda: self._forget(name, listener))

    async def _body(self, request: web.Request) -> bytes:
        """The request's body, received within ``read_timeout`` of its headers (else 408,
        and the connection is not kept alive) and at most ``max_body_size`` bytes (else
        413: aiohttp's ``client_max_size`` stops reading as soon as the body grows past
        it, so no more than that is ever held)."""
        try:
            async with asyncio.timeout(self.section.read_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _too_large(request.client_max_size) from None
        except TimeoutError:
            raise RequestError(
                408,
                f"the request body did not arrive within read_timeout "
                f"({self.section.read_timeout:g} s)",
            ) from None

    def _hold(self, wake: Callable[[object], None]) -> None:
        """Count a long poll or stream in (``_waiting``; its handler's ``finally`` counts
        it out), or refuse it with 503 when ``max_long_polls`` are held already."""
        limit = self.section.max_long_polls
        if len(self._waiting) >= limit:
            raise RequestError(
                503,
                f"too many waiting long polls: {limit} long polls and WebSocket streams "
                "wait already (http.max_long_polls); try again later",
            )
        self._waiting.add(wake)

    async def _metrics(self, request: web.Request) -> web.Response:
        from proton_broker.metrics import CONTENT_TYPE, render  # prometheus_client when used

        if not self.authenticator.open_metrics:
            user = request[USER]
            try:
                self.server.broker.access.check(user, "access", "broker", what="read the metrics")
            except Unauthorized as exc:
                raise RequestError(403, exc.description) from None
        snapshot = await self._on_broker(self.server.metrics_snapshot)
        # formatting is O(queues) (a few hundred ms for thousands of queues): off this
        # loop, so long polls and streams are not held up by a scrape
        body = await asyncio.get_running_loop().run_in_executor(None, render, snapshot)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    # ---- on the broker's loop ---------------------------------------------------------------

    def _watch(self, name: str, user: str, sending: bool) -> QueueWatch:
        """The listeners of queue ``name``; the queue is created (keyed by ``id``) when
        auto-create allows it. ``user`` sends to it or listens (a browse) as the ACL
        allows (security/access.py), asked before anything is created."""
        broker = self.server.broker
        queue = broker.queues.get(name)
        settings = queue.settings if queue is not None else _AUTO_CREATE_SETTINGS
        try:
            if sending:
                broker.access.send(user, name, settings)
            else:
                broker.access.receive(user, name, settings, browse=True)
        except Unauthorized as exc:
            raise RequestError(403, exc.description) from None
        if queue is None:
            if not broker.may_create(name):
                raise RequestError(
                    404,
                    f"queue '{name}' not found (auto-create is off or "
                    "the name does not match auto_create_patterns)",
                )
            try:
                queue = broker.resolve(name, AUTO_CREATE_OPTIONS, user=user)
            except NotFound as exc:
                raise RequestError(404, exc.description) from None
            except (Unauthorized, ResourceLimitExceeded) as exc:
                raise RequestError(403, exc.description) from None
        if queue.history is None:
            raise RequestError(
                409,
                f"queue '{name}' has no sequence key: declare it with "
                "sequenceKey or as a last-value queue",
            )
        watch = self._watches.get(name)
        if watch is None or watch.queue is not queue:
            watch = self._watches[name] = QueueWatch(queue)
        return watch

    def _enqueue(self, name: str, send: SendRequest, user: str) -> int | Deferred:
        """The message joins its queue: answered with the number it got as it joined, at
        once, or once it is written when the queue keeps it (its messageDurability); 503
        while the memory budget is full. The number is the message's own, not its key's
        latest when the answer goes: other sends of the key may join while it is written."""
        watch = self._watch(name, user, sending=True)
        refuse_when_full(self.server.broker.loop_hooks.budget)
        message = build_message(send, watch.key_property)
        answer, written = when_written(lambda: _numbered(message))
        try:
            if self.server.broker.publish(message, watch.queue, written):
                return answer
        except InvalidField as exc:  # a custom sequence not above the key's current one
            raise RequestError(409, exc.description, "sequence") from None
        except NotTaken as exc:  # the queue's filter: the message has no number to answer
            raise RequestError(409, exc.description) from None
        except ResourceLimitExceeded as exc:
            raise RequestError(503, exc.description) from None
        except BrokerError as exc:
            raise RequestError(400, exc.description) from None
        return _numbered(message)

    def _queue_deleted(self, queue: Queue) -> None:
        """A queue is being deleted: its waiting polls get a 410 (Gone) and its streams
        close (code 4404), rather than waiting on a queue nothing will reach any more."""
        watch = self._watches.get(queue.name)
        if watch is not None and watch.queue is queue:
            del self._watches[queue.name]
            watch.end(_DELETED)

    def _forget(self, name: str, listener: Listener) -> None:
        watch = self._watches.get(name)
        if watch is not None:
            watch.remove(listener)


# ---- helpers (gateway thread) ---------------------------------------------------------------


@web.middleware
async def _json_errors(
    request: web.Request,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """Every refusal as a JSON body naming the problem, aiohttp's own ones included."""
    try:
        return await handler(request)
    except RequestError as exc:
        response = web.json_response(exc.body(), status=exc.status, headers=exc.headers)
        if exc.status == 408:  # a client too slow to send its request: not kept alive
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        text = (
            exc.text if exc.text and not exc.text.startswith(f"{exc.status}:") else exc.reason
        )  # aiohttp's own detail when it gives one
        if exc.status == 404:
            text = f"no such endpoint: {request.method} {request.path}"
        headers = {
            k: v
            for k, v in exc.headers.items()
            if k.lower() not in ("content-type", "content-length")
        }
        return web.json_response(
            {"error": text, "status": exc.status}, status=exc.status, headers=headers
        )
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception:
        log.exception("HTTP %s %s failed", request.method, request.path)
        return web.json_response({"error": "internal error", "status": 500}, status=500)


@web.middleware
async def _declared_body_size(
    request: web.Request,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """A request that declares a body over ``max_body_size`` is refused (413) at once, on any
    endpoint, before a byte of the body is read."""
    if request.content_length is not None and request.content_length > request.client_max_size:
        raise _too_large(request.client_max_size)
    return await handler(request)


def _too_large(limit: int) -> RequestError:
    return RequestError(413, f"the request body is over max_body_size ({limit} bytes)")


def _numbered(message: Message) -> int:
    """The number a message the gateway sent got as it joined its queue (it carries the
    queue's key, so it has one)."""
    assert message.sequence is not None  # numbered as it joined
    return message.sequence


def _start(value: str | None) -> int | str | None:
    if value is None:
        return None  # only versions that arrive from now on
    try:
        return sequence_start(value)
    except InvalidField:
        raise RequestError(
            400,
            f"query parameter 'sequence' must be a sequence number, "
            f"'first' or 'last', got {value!r}",
            "sequence",
        ) from None


def _timeout(value: str | None, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        raise RequestError(
            400,
            f"query parameter 'timeout' must be a number of seconds >= 0, got {value!r}",
            "timeout",
        )
    return seconds


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return  # the client went away meanwhile
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _waker(future: asyncio.Future[Any]) -> Callable[[object], None]:
    def wake(item: object) -> None:
        if not future.done():
            future.set_result(item)

    return wake


def _pusher(items: asyncio.Queue[Any], request: web.Request) -> Callable[[object], None]:
    """Adds versions to a stream's backlog; a client too far behind is dropped, so an
    unread socket cannot make the gateway keep every version for it."""

    def push(item: object) -> None:
        if items.qsize() >= STREAM_BACKLOG:
            if request.transport is not None:
                log.warning(
                    "WebSocket %s dropped: %d versions behind", request.path, STREAM_BACKLOG
                )
                request.transport.abort()
            return
        items.put_nowait(item)

    return push


async def _forward(
    ws: web.WebSocketResponse,
    items: asyncio.Queue[Any],
    kept: list[Item],
    more: Callable[[], Awaitable[list[Item]]],
) -> None:
    """Send the replay, ``kept`` then each slice ``more`` gives until it gives none, at
    the client's pace (a send waits while the socket's buffer is full), then the backlog
    of new versions and every one after, until either side closes."""

    async def read() -> None:  # what the client sends is ignored; its close ends the stream
        async for _ in ws:
            pass
        items.put_nowait(None)

    reader = asyncio.ensure_future(read())
    try:
        while kept:
            for item in kept:
                if ws.closed:
                    return
                await ws.send_json(version_json(*item))
            kept = await more()
        while True:
            item = await items.get()
            if item is None or ws.closed:
                break
            if item is _CLOSING:
                await ws.close(code=1001, message=b"broker shutting down")
                break
            if item is _DELETED:
                await ws.close(code=WS_QUEUE_DELETED, message=b"queue deleted")
                break
            await ws.send_json(version_json(*item))
    finally:
        reader.cancel()


def https_context(section: TlsSection) -> ssl.SSLContext:
    """The gateway's TLS: the AMQPS listener's certificate and key, its oldest version, and
    its client verification: with ``verify_clients`` a client must present a certificate
    signed by a CA in ``ca_file`` or its handshake fails, as on AMQPS (amqp/tls.py), so a
    deployment that requires mutual TLS has no way around it over HTTPS (Basic and
    ``anonymous`` then apply inside it, as SASL does inside AMQPS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(section.cert_file, section.key_file, section.key_password or None)
    context.minimum_version = getattr(ssl.TLSVersion, section.min_version.replace(".", "_"))
    if section.verify_clients:
        if not section.ca_file:
            raise OSError("tls.ca_file is required (tls.verify_clients)")
        context.load_verify_locations(section.ca_file)  # its CAs only, not the system's
        context.verify_mode = ssl.CERT_REQUIRED
    return context
