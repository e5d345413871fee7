"""The gateway's authentication: the aiohttp middleware that names the user of every
request, or refuses it, by the rules of :mod:`proton_broker.security.basic`.

``/metrics`` is served without authentication only when ``metrics.open`` says so. The web
console (``/console/``) is left to its own sessions (console.py), which follow the same
rules for passwords and ``anonymous``. The password is checked on the broker's loop (the
coroutine the gateway gives), and the user is kept on the request (``request[USER]``) for
the ACL.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from proton_broker.config import SaslSection
from proton_broker.http.wire import RequestError
from proton_broker.security.basic import (
    ANONYMOUS,
    Refused,
    credentials,
    locked_out,
    unauthenticated,
)
from proton_broker.security.logins import LockedOut
from proton_broker.security.users import password_user

log = logging.getLogger("proton_broker.http")

CONSOLE = "/console"  # the web console's pages and API: sessions of their own
USER = web.RequestKey("user", str)  # who a request comes from, for the handlers and the ACL
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# (user, password, client address): LockedOut while the address is locked out
PasswordCheck = Callable[[str, str, str], Awaitable[bool]]


class Authenticator:
    """The middleware (:meth:`middleware`) with its settings."""

    def __init__(self, section: SaslSection, check: PasswordCheck, open_metrics: bool) -> None:
        self.section = section
        self.check = check
        self.open_metrics = open_metrics

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == CONSOLE or request.path.startswith(CONSOLE + "/"):
            return await handler(request)  # the console logs its users in (console.py)
        try:
            request[USER] = await self.user_of(request)
        except Refused as refused:
            error = RequestError(refused.status, refused.message)
            error.headers = refused.headers
            raise error from None
        return await handler(request)

    async def user_of(self, request: web.Request) -> str:
        if request.path == "/metrics" and self.open_metrics:
            return ANONYMOUS
        header = request.headers.get("Authorization")
        given = credentials(self.section, request.remote, header, request.secure)
        if given is None:
            return ANONYMOUS
        name, password = given
        try:
            right = await self.check(name, password, request.remote or "?")
        except LockedOut as exc:
            raise locked_out(exc) from None
        if not right:
            log_failed(request.remote, name)
            raise unauthenticated("authentication failed: wrong user name or password")
        return password_user(name)  # alice@HOST is alice (security/users.py)


def log_failed(host: str | None, name: str) -> None:
    """HTP-1001: a wrong user or password over HTTP (the gateway's Basic, the console's
    login), with the client address and the user name, never the password."""
    log.warning("HTP-1001 : Authentication failed : %s : user %r", host, name)
