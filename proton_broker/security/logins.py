"""Failed logins: a client address that keeps giving wrong passwords may not try another one
for a while, on every listener (AMQP, the HTTP gateway and web console, the metrics
listener). Neither Qpid broker limits this; a password that can be guessed at the speed of
the network is a password that will be.

Rules this module owns (docs/security.md, "Failed logins"):

* Each wrong password (a SASL exchange that fails, a wrong HTTP Basic or console password)
  counts against the client address it came from. An address with ``sasl.max_failed_logins``
  failures within the last ``sasl.failed_login_window`` seconds is locked out until the
  oldest of them is that old: its passwords are not checked (so guessing goes no faster than
  the limit), and an attempt while it is locked out does not count. 0 turns the limit off.
* A login that succeeds does not wipe the count: one known password must not buy more
  guesses at others.
* What needs no password goes on: a locked-out address may still connect anonymously
  where ``sasl.anonymous`` allows it, or with a TLS certificate (EXTERNAL).
* Memory is bounded: at most :data:`TRACKED` addresses are remembered (the one that failed
  least recently is forgotten first), each with at most ``max_failed_logins`` times. Every
  operation is O(1).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

TRACKED = 10_000  # client addresses whose recent failures are remembered


class LockedOut(Exception):
    """A login from an address that is locked out: ``seconds`` until it may try again."""

    def __init__(self, host: str, seconds: float) -> None:
        self.host = host
        self.seconds = max(1, math.ceil(seconds))
        super().__init__(f"too many failed logins from {host}: try again in {self.seconds} seconds")


class LoginGuard:
    """The recent failed logins of each client address."""

    def __init__(
        self,
        limit: int,
        window: float,
        now: Callable[[], float] = time.monotonic,
        tracked: int = TRACKED,
    ) -> None:
        self.limit = limit  # failures within the window that lock an address out; 0: no limit
        self.window = window  # seconds
        self._now = now
        self._tracked = tracked
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()  # least recent first

    def check(self, host: str) -> None:
        """LockedOut if ``host`` may not try a password now."""
        wait = self.locked_for(host)
        if wait is not None:
            raise LockedOut(host, wait)

    def locked_for(self, host: str) -> float | None:
        """Seconds until ``host`` may try a password again; None: it may now."""
        times = self._failures.get(host)
        if times is None or self.limit == 0 or len(times) < self.limit:
            return None
        wait = times[0] + self.window - self._now()
        return wait if wait > 0 else None

    def failed(self, host: str) -> None:
        """A wrong password from ``host`` (not counted while it is locked out)."""
        if self.limit == 0 or self.locked_for(host) is not None:
            return
        times = self._failures.pop(host, None)
        if times is None:
            times = deque(maxlen=self.limit)
            if len(self._failures) >= self._tracked:
                self._failures.popitem(last=False)
        times.append(self._now())
        self._failures[host] = times  # now the most recent
