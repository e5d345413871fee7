"""The web console's sessions: who is logged in, and the token that guards their changes.

Rules this module owns (docs/console.md, "Logging in"):

* A session starts when a user logs in (with the password the broker's SASL database
  checks, or as ``anonymous`` where ``sasl.anonymous`` allows the client address). It is
  named by a random token (``secrets``, 256 bits) kept in an HttpOnly, SameSite=Strict
  cookie, and carries a second random token, the CSRF token, which the page must send back
  in the ``X-CSRF-Token`` header of every request that changes something: another site
  can make a browser send the cookie, but cannot read the token.
* A session unused for ``console.session_timeout`` seconds ends; at most
  ``console.max_sessions`` exist at once. Logging in beyond that ends a session of the
  user who holds the most (the one of theirs used longest ago), so that a user who logs
  in again and again (``anonymous`` from a script) ends only their own sessions, never an
  administrator's who holds fewer. Logging out ends it at once.
* Sessions live in memory on the gateway's thread: a restart logs everyone out.
"""

from __future__ import annotations

import hmac
import secrets
from collections import Counter, OrderedDict
from dataclasses import dataclass

COOKIE = "proton_console"
CSRF_HEADER = "X-CSRF-Token"


@dataclass
class Session:
    user: str
    csrf: str
    used: float  # when it was last used (monotonic seconds)

    def allows(self, token: str | None) -> bool:
        """Whether ``token`` is this session's CSRF token (compared in constant time)."""
        return token is not None and hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"), self.csrf.encode()
        )  # bytes: compare_digest refuses text that is not ASCII


class Sessions:
    """The open sessions, most recently used last (gateway thread only)."""

    def __init__(self, limit: int, timeout: float) -> None:
        self.limit = limit
        self.timeout = timeout
        self._open: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def start(self, user: str, now: float) -> tuple[str, Session]:
        """A new session for ``user``: (its cookie token, the session)."""
        token = secrets.token_urlsafe(32)
        session = self._open[token] = Session(user, secrets.token_urlsafe(32), now)
        if len(self._open) > self.limit:
            self._make_room(now)
        return token, session

    def _make_room(self, now: float) -> None:
        """Over the limit: the expired sessions end, else the session used longest ago of
        the user who holds the most (see the module rules). O(sessions), at a login."""
        expired = [t for t, s in self._open.items() if now - s.used > self.timeout]
        for token in expired:
            del self._open[token]
        while len(self._open) > self.limit:
            held = Counter(s.user for s in self._open.values())
            most = max(held.values())
            oldest = next(t for t, s in self._open.items() if held[s.user] == most)
            del self._open[oldest]

    def find(self, token: str | None, now: float) -> Session | None:
        """The live session ``token`` names (now used again), or None."""
        if token is None:
            return None
        session = self._open.get(token)
        if session is None:
            return None
        if now - session.used > self.timeout:
            del self._open[token]
            return None
        session.used = now
        self._open.move_to_end(token)
        return session

    def end(self, token: str | None) -> None:
        if token is not None:
            self._open.pop(token, None)
