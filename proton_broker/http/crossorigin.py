"""The gateway's guard against cross-site requests: what a web page from another site may
make a browser send to the gateway, with the browser's anonymous access (``sasl.anonymous:
loopback`` serves any page open on the broker's machine) or its cached Basic credentials.

Rules this module owns (docs/sequence-history.md, "Cross-site requests"):

* A request to the gateway's API (every path but the web console's, which guards itself
  with a session, a CSRF token and JSON bodies: console.py) that carries an ``Origin``
  header naming another origin than the gateway's own is refused with 403 before anything
  else is done, its credentials not even checked. The gateway's own origin is the scheme,
  host and port the request was made to: ``https`` over TLS, else ``http``, and its
  ``Host`` header (a missing port is the scheme's default). A browser sends ``Origin`` on
  every WebSocket handshake (RFC 6455, 4.1), on every POST, and on a ``fetch`` from another
  site; ``Origin: null`` (a sandboxed frame, a ``file:`` page) is another origin. Programs
  (curl, the Python clients) send none and are served as before.
* A browser sends no ``Origin`` on a plain GET another site's page makes it send (an
  ``<img>``, a ``<script>``, a link): a long poll for a queue that does not exist would
  create it. Browsers tell such a request by its fetch metadata (``Sec-Fetch-Site:
  cross-site``, or ``same-site`` from another origin of the same site), so a gateway
  request saying either is refused with 403 too, whatever its method. Programs send no
  fetch metadata; a page of the gateway's own origin says ``same-origin``, a typed-in URL
  or bookmark ``none``.
* A request that changes something (the gateway's one: ``POST /queue/send``) must send its
  body as ``Content-Type: application/json`` (parameters such as ``charset`` aside), else
  415. A form or a ``fetch`` with a "simple" type (``text/plain``, the form encodings) is
  what a browser sends to another site without asking it first (a CORS preflight); JSON
  needs the preflight, and the gateway answers none with the CORS headers that would let
  it through, so a page elsewhere cannot send one even where its ``Origin`` were not seen.

Neither Qpid broker has this API. Broker-J's HTTP management grants cross-origin access
(CORS) only to the origins its ``corsAllowOrigins`` lists, none by default; this gateway
grants it to none and has no such list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from proton_broker.http.auth import CONSOLE
from proton_broker.http.wire import JSON_TYPE, RequestError

DEFAULT_PORTS = {"http": 80, "https": 443}
FOREIGN_SITES = ("cross-site", "same-site")  # Sec-Fetch-Site values of another origin's page
Origin = tuple[str, str, int]  # (scheme, host, port), lower case


@web.middleware
async def same_origin_only(
    request: web.Request,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """Refuse (403) a gateway request whose ``Origin`` is not the gateway's own, or that a
    browser says another site's page made (``Sec-Fetch-Site``)."""
    if _console(request.path):  # the console guards itself
        return await handler(request)
    site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if site in FOREIGN_SITES:
        raise RequestError(
            403,
            f"cross-site request refused: the browser says another site's page made it "
            f"(Sec-Fetch-Site: {site}); a web page elsewhere may not use the gateway",
        )
    given = request.headers.get("Origin")
    if given is not None:
        own = own_origin(request)
        if own is None or parse_origin(given) != own:  # None: matches nothing, not None
            raise RequestError(
                403,
                f"cross-origin request refused: Origin {given!r} is not this gateway's "
                f"origin {_text(own)!r} (a web page elsewhere may not use the gateway; "
                "a program sends no Origin)",
            )
    return await handler(request)


def require_json(request: web.Request) -> None:
    """Refuse (415) a body that is not ``application/json``: a body of any other type is
    one a browser sends from another site without a preflight (see the module rules)."""
    if request.content_type != JSON_TYPE:
        raise RequestError(
            415,
            f"send the body as JSON (Content-Type: {JSON_TYPE}), not "
            f"{request.headers.get('Content-Type', 'without a Content-Type')!r}",
        )


def own_origin(request: web.Request) -> Origin | None:
    """The origin the request was made to, from its scheme and ``Host`` header."""
    return _origin(request.scheme, f"//{request.host}")


def parse_origin(text: str) -> Origin | None:
    """An ``Origin`` header's (scheme, host, port); None for ``null`` and what does not
    parse, which matches no origin."""
    scheme, _, rest = text.strip().partition("://")
    return _origin(scheme, "//" + rest) if rest else None


def _origin(scheme: str, netloc: str) -> Origin | None:
    scheme = scheme.lower()
    try:
        parts = urlsplit(netloc)
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number, a bad IPv6 literal
        return None
    extra = parts.username is not None or parts.path or parts.query or parts.fragment
    if not parts.hostname or port is None or extra:  # an origin is scheme, host and port
        return None
    return scheme, parts.hostname, port


def _text(origin: Origin | None) -> str:
    if origin is None:
        return "unknown"
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _console(path: str) -> bool:
    return path == CONSOLE or path.startswith(CONSOLE + "/")
