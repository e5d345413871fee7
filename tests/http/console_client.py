"""A small client of the web console's JSON API, as its page uses it: a cookie jar for the
session, and the CSRF token sent back on every change."""

from __future__ import annotations

import http.cookiejar
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class ConsoleClient:
    def __init__(self, base: str, context: ssl.SSLContext | None = None) -> None:
        self.base = base  # http://host:port (https: ``context`` trusts its certificate)
        self.csrf: str | None = None
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(jar),
            _NoRedirect(),
            urllib.request.HTTPSHandler(context=context),
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        csrf: bool = True,
        content_type: str = "application/json",
    ) -> tuple[int, Any, dict[str, str]]:
        """(status, decoded JSON or None, headers) of one request to ``path`` (a ``bytes``
        body is sent as it is)."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type}
        if csrf and self.csrf is not None and method != "GET":
            headers["X-CSRF-Token"] = self.csrf
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=10) as resp:
                status, raw, got = resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            status, raw, got = exc.code, exc.read(), dict(exc.headers)
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        return status, decoded, got

    def get(self, path: str) -> tuple[int, Any]:
        status, body, _ = self.request("GET", path)
        return status, body

    def change(
        self, method: str, path: str, body: Any = None, csrf: bool = True
    ) -> tuple[int, Any]:
        status, answer, _ = self.request(method, path, {} if body is None else body, csrf)
        return status, answer

    def login(self, user: str | None = None, password: str | None = None) -> tuple[int, Any]:
        given = {} if user is None else {"user": user, "password": password}
        status, body, _ = self.request("POST", "/console/api/login", given, csrf=False)
        if status == 200:
            self.csrf = body["csrf"]
        return status, body


def queue_path(name: str, tail: str = "") -> str:
    return "/console/api/queues/" + urllib.parse.quote(name, safe="") + tail


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer to look at, not to follow
