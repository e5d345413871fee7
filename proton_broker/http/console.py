"""The web console: pages under ``/console/`` and their JSON API, on the HTTP gateway.

Thread model: as the gateway's (gateway.py). The handlers run on the gateway's thread and
never read broker state; each sends a function of :mod:`proton_broker.http.console_views`
to the broker's loop and answers with what it returns. The samples behind the rates and
plots (:mod:`proton_broker.http.rates`) are taken on the broker's loop too, every
``console.sample_interval`` seconds, at the gateway's request.

Rules this module owns (docs/console.md):

* The pages and their scripts (``console_static/``, shipped in the package, no CDN) are
  served to anyone: they hold no data. Every ``/console/api/`` request but ``session`` and
  ``login`` needs a session (:mod:`proton_broker.http.sessions`): 401 without one.
* Nothing changes over GET. Every POST, PUT and DELETE but ``login`` must carry the
  session's CSRF token in ``X-CSRF-Token`` (403 otherwise, before anything is asked of
  the broker), and a body, where there is one, must be JSON (``Content-Type:
  application/json``), which a form on another site cannot send without the browser
  asking this server first.
* Logging in follows the HTTP gateway's rules (security/basic.py): a password only over
  HTTPS or from where ``sasl.plain_without_tls`` allows, checked by Cyrus SASL on the
  broker's loop (``HTP-1001`` when wrong); ``anonymous`` only from where
  ``sasl.anonymous`` allows.
* Message bodies and application properties are shown only over HTTPS or from where
  ``broker.confidential_without_tls`` allows, as ``$management`` answers its confidential
  operations (console_views.py).
* Answers are JSON; a refusal is ``{"error": "...", "status": n}``, with the status
  ``$management`` gives the same refusal (400, 403, 404, 409).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from proton_broker.errors import NotFound
from proton_broker.http import console_views as views
from proton_broker.http.auth import log_failed
from proton_broker.http.logs import RecentLog
from proton_broker.http.rates import Rates
from proton_broker.http.sessions import COOKIE, CSRF_HEADER, Sessions
from proton_broker.http.wire import RequestError, load_json
from proton_broker.management import Management
from proton_broker.security.basic import ANONYMOUS, Refused, check_clear_password, locked_out
from proton_broker.security.logins import LockedOut
from proton_broker.security.peers import allowed
from proton_broker.security.users import password_user

if TYPE_CHECKING:
    from proton_broker.config import Config
    from proton_broker.http.gateway import BrokerLoop

log = logging.getLogger("proton_broker.http")

PREFIX = "/console"
SAMPLING_SHARE = 100  # a sample that took t seconds: the next one at least 100 t later
STATIC = Path(__file__).with_name("console_static")
T = TypeVar("T")
OnBroker = Callable[[Callable[[], T]], Awaitable[T]]
# The pages' own scripts and styles only: no inline script, nothing from elsewhere.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Console:
    """The console's routes, sessions and samples, for one gateway."""

    def __init__(
        self,
        server: BrokerLoop,
        config: Config,
        on_broker: OnBroker[Any],
        check_password: Callable[[str, str, str], Awaitable[bool]],
        read_body: Callable[[web.Request], Awaitable[bytes]],
    ) -> None:
        self.server = server
        self.config = config
        self.section = config.console
        self.on_broker = on_broker
        self.check_password = check_password
        self.read_body = read_body
        self.sessions = Sessions(self.section.max_sessions, self.section.session_timeout)
        self.rates = Rates(self.section.history, self.section.max_plotted_queues)
        self.management = Management(server.broker)
        self.recent = RecentLog(self.section.log_records)
        self.started = time.time()
        self._sampling: asyncio.Task[None] | None = None
        server.broker.deletion_watchers.append(lambda queue: self.rates.forget(queue.name))

    # ---- life cycle (gateway thread) ---------------------------------------------------

    def routes(self) -> list[web.AbstractRouteDef]:
        api = PREFIX + "/api"
        return [
            web.get(PREFIX, self._to_index),
            web.get(PREFIX + "/", self._index),
            web.static(PREFIX + "/static", STATIC),
            web.get(api + "/session", self._session),
            web.post(api + "/login", self._login),
            web.post(api + "/logout", self._logout),
            web.get(api + "/overview", self._overview),
            web.get(api + "/queues", self._queues),
            web.post(api + "/queues", self._create_queue),
            web.get(api + "/queues/{name}", self._queue),
            web.put(api + "/queues/{name}", self._update_queue),
            web.delete(api + "/queues/{name}", self._delete_queue),
            web.post(api + "/queues/{name}/purge", self._purge),
            web.get(api + "/queues/{name}/messages", self._browse),
            web.post(api + "/queues/{name}/messages", self._send_test),
            web.get(api + "/options", self._options),
            web.get(api + "/exchanges", self._exchanges),
            web.get(api + "/bindings", self._bindings),
            web.get(api + "/subscriptions", self._subscriptions),
            web.get(api + "/connections", self._connections),
            web.delete(api + "/connections/{id}", self._close_connection),
            web.get(api + "/logs", self._logs),
        ]

    def start(self) -> None:
        """Begin sampling and keeping log records (on the gateway's running loop)."""
        logging.getLogger("proton_broker").addHandler(self.recent)
        self._sampling = asyncio.get_running_loop().create_task(self._sample_every())

    async def stop(self) -> None:
        logging.getLogger("proton_broker").removeHandler(self.recent)
        if self._sampling is not None:
            self._sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampling

    async def _sample_every(self) -> None:
        """Ask the broker's loop for a sample every ``sample_interval`` seconds, or less
        often where a sample takes long (many queues): the loop spends at most
        1/SAMPLING_SHARE of its time on them."""
        server, rates = self.server, self.rates
        cost = [0.0]  # the last sample's duration, written on the broker's loop

        def sample() -> None:
            started = time.perf_counter()
            now = time.time()
            rates.sample(server.broker.queues.values(), now)
            rates.sample_connections(server.connection_counts(), now)
            cost[0] = time.perf_counter() - started

        while True:
            server.call_soon(sample)
            await asyncio.sleep(max(self.section.sample_interval, SAMPLING_SHARE * cost[0]))

    # ---- sessions -----------------------------------------------------------------------

    def _user(self, request: web.Request, changes: bool = False) -> str:
        """Who the request's session belongs to; for a change, its CSRF token is checked."""
        session = self.sessions.find(request.cookies.get(COOKIE), time.monotonic())
        if session is None:
            raise RequestError(401, "log in to the console first (no session, or it expired)")
        if changes and not session.allows(request.headers.get(CSRF_HEADER)):
            raise RequestError(403, f"missing or wrong {CSRF_HEADER}: reload the console page")
        return session.user

    async def _session(self, request: web.Request) -> web.Response:
        session = self.sessions.find(request.cookies.get(COOKIE), time.monotonic())
        if session is None:
            anonymous = allowed(self.config.sasl.anonymous, request.remote)
            return _json({"error": "not logged in", "anonymous": anonymous}, 401)
        return _json({"user": session.user, "csrf": session.csrf})

    async def _login(self, request: web.Request) -> web.Response:
        given = await self._json_body(request)
        name, password = given.get("user"), given.get("password")
        host = request.remote
        if not name:
            if not allowed(self.config.sasl.anonymous, host):
                raise RequestError(403, f"logging in without a password is refused from {host}")
            name = ANONYMOUS
        else:
            if not isinstance(name, str) or not isinstance(password, str):
                raise RequestError(400, "'user' and 'password' must be text")
            try:
                check_clear_password(self.config.sasl, host, request.secure)
            except Refused as refused:
                raise RequestError(refused.status, refused.message) from None
            try:
                right = await self.check_password(name, password, host or "?")
            except LockedOut as exc:
                refused = locked_out(exc)
                error = RequestError(refused.status, refused.message)
                error.headers.update(refused.headers)
                raise error from None
            if not right:
                log_failed(host, name)
                raise RequestError(401, "wrong user name or password")
            name = password_user(name)  # alice@HOST is alice (security/users.py)
        token, session = self.sessions.start(name, time.monotonic())
        log.info("HTP-1002 : Console login : %s : user %r", host, name)
        response = _json({"user": session.user, "csrf": session.csrf})
        response.set_cookie(
            COOKIE, token, path=PREFIX, httponly=True, samesite="Strict", secure=request.secure
        )
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        self._user(request, changes=True)
        self.sessions.end(request.cookies.get(COOKIE))
        response = web.Response(status=204)
        response.del_cookie(COOKIE, path=PREFIX)
        return response

    async def _json_body(self, request: web.Request) -> dict[str, Any]:
        """The request's body as a JSON object (read as the gateway reads bodies: within
        ``read_timeout``, at most ``max_body_size``); only ``application/json`` is taken."""
        if request.content_type != "application/json":
            raise RequestError(415, "send the body as JSON (Content-Type: application/json)")
        value = load_json(await self.read_body(request))
        if not isinstance(value, dict):
            raise RequestError(400, "the request body must be a JSON object")
        return value

    # ---- pages ----------------------------------------------------------------------------

    async def _to_index(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(PREFIX + "/")

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html", headers=HEADERS)

    # ---- reading --------------------------------------------------------------------------

    async def _overview(self, request: web.Request) -> web.Response:
        user = self._user(request)
        broker, rates, started = self.server.broker, self.rates, self.started

        def read() -> Any:
            views.check(broker, user, "access", "broker", None, "see the broker's figures")
            connections = len(self.server.connection_counts())
            return views.overview(broker, rates, connections, started, time.time())

        return _json(await self.on_broker(read))

    async def _queues(self, request: web.Request) -> web.Response:
        user = self._user(request)
        text = request.query.get("filter", "")
        limit = _count(request.query.get("limit"), 1000, 100_000, "limit")
        return _json(
            await self.on_broker(
                lambda: views.queue_list(self.server.broker, self.rates, user, text, limit)
            )
        )

    async def _queue(self, request: web.Request) -> web.Response:
        user, name = self._user(request), request.match_info["name"]
        server = self.server

        def read() -> Any:
            consumers = server.consumer_figures(name)
            return views.queue_page(self.management, self.rates, user, name, consumers)

        return _json(await self.on_broker(read))

    async def _browse(self, request: web.Request) -> web.Response:
        user, name = self._user(request), request.match_info["name"]
        count = _count(request.query.get("count"), 20, views.MAX_BROWSE, "count")
        broker = self.server.broker
        confidential = self._confidential(request)
        return _json(
            await self.on_broker(lambda: views.browse(broker, user, name, count, confidential))
        )

    def _confidential(self, request: web.Request) -> bool:
        """Whether what ``$management`` holds confidential may be shown to this request:
        over HTTPS, or from where ``broker.confidential_without_tls`` allows (as the AMQP
        side decides for management's secure operations)."""
        return request.secure or allowed(
            self.config.broker.confidential_without_tls, request.remote
        )

    async def _options(self, request: web.Request) -> web.Response:
        self._user(request)
        return _json(views.options())

    async def _exchanges(self, request: web.Request) -> web.Response:
        user = self._user(request)
        return _json(await self.on_broker(lambda: views.exchanges(self.management, user)))

    async def _bindings(self, request: web.Request) -> web.Response:
        user = self._user(request)
        return _json(await self.on_broker(lambda: views.bindings(self.management, user)))

    async def _subscriptions(self, request: web.Request) -> web.Response:
        user = self._user(request)
        broker = self.server.broker
        return _json(await self.on_broker(lambda: views.subscriptions(broker, user)))

    async def _connections(self, request: web.Request) -> web.Response:
        user = self._user(request)
        broker = self.server.broker

        def read() -> Any:
            views.check(broker, user, "access", "query", "connection", "list the connections")
            return {"connections": views.with_rates(self.server.connection_figures(), self.rates)}

        return _json(await self.on_broker(read))

    async def _logs(self, request: web.Request) -> web.Response:
        user = self._user(request)
        broker = self.server.broker
        await self.on_broker(
            lambda: views.check(broker, user, "access", "broker", None, "read the broker's log")
        )
        return _json({"records": self.recent.recent(request.query.get("code", ""))})

    # ---- acting ---------------------------------------------------------------------------

    async def _create_queue(self, request: web.Request) -> web.Response:
        user = self._user(request, changes=True)
        given = await self._json_body(request)
        name, options = given.get("name"), given.get("options", {})
        created = await self.on_broker(
            lambda: views.create_queue(self.management, user, name, options)
        )
        return _json(created, 201)

    async def _update_queue(self, request: web.Request) -> web.Response:
        user, name = self._user(request, changes=True), request.match_info["name"]
        options = (await self._json_body(request)).get("options", {})
        return _json(
            await self.on_broker(lambda: views.update_queue(self.management, user, name, options))
        )

    async def _delete_queue(self, request: web.Request) -> web.Response:
        user, name = self._user(request, changes=True), request.match_info["name"]
        force = request.query.get("force", False)  # management's to_bool judges it
        await self.on_broker(lambda: views.delete_queue(self.management, user, name, force))
        return web.Response(status=204)

    async def _purge(self, request: web.Request) -> web.Response:
        user, name = self._user(request, changes=True), request.match_info["name"]
        broker = self.server.broker
        return _json(await self.on_broker(lambda: views.purge_queue(broker, user, name)))

    async def _send_test(self, request: web.Request) -> web.Response:
        user, name = self._user(request, changes=True), request.match_info["name"]
        given = await self._json_body(request)
        broker = self.server.broker
        sent = await self.on_broker(lambda: views.send_test(broker, user, name, given))
        return _json(sent, 201)

    async def _close_connection(self, request: web.Request) -> web.Response:
        user, connection = self._user(request, changes=True), request.match_info["id"]
        broker = self.server.broker

        def close() -> None:
            views.check(broker, user, "delete", "connection", None, "close a connection")
            try:
                self.server.close_connection(connection, user)
            except NotFound as exc:
                raise RequestError(404, exc.description) from None

        await self.on_broker(close)
        return web.Response(status=204)


# ---- helpers (gateway thread) -------------------------------------------------------------


def _json(body: Any, status: int = 200) -> web.Response:
    return web.json_response(
        body, status=status, dumps=_dumps, headers={"Cache-Control": "no-store"}
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)  # UUIDs, decimals, described values: as text


def _count(text: str | None, default: int, most: int, name: str) -> int:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= most:
        raise RequestError(400, f"'{name}' must be a whole number from 1 to {most}", name)
    return value
