"""The broker's socket wait: Proton's reactor ``IO.Selector``, kept on one ``poll`` object.

Proton's Python selector scans every selectable each time one of them changes (to find the
earliest deadline) and, through ``IO.select``, hands the whole reading and writing sets to
``select(2)`` on every wait. With many connections that is O(connections) per socket
event: at 100 connections it was a tenth of the broker's CPU. This selector keeps the
same interface (``add``, ``update``, ``remove``, ``select``, ``selectables``) with these
rules:

* Each selectable's socket is registered with one long-lived ``select.poll`` object, and
  re-registered only when what it waits for (read, write) changes: an update is O(1), a
  wait costs what is ready, not what is connected. ``poll`` also has no FD_SETSIZE limit,
  so no socket number is too high. A selectable without a socket (the reactor's own, for
  timers) only carries a deadline.
* The earliest deadline is kept as a lower bound: an update can only lower it, never scan
  for it. A wait may so end early, when the selectable that set the bound has since moved
  its deadline later; only then are the deadlines scanned, once, for the expired ones and
  the true earliest. Deadlines are idle-timeout ticks, seconds apart, so the scan is rare.
* A socket in error or hung up is reported readable (and writable, if it waits to write),
  so that the next read or write sees the error, as ``select`` would.
"""

from __future__ import annotations

import select
import time
from typing import Any

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
_TROUBLE = select.POLLERR | select.POLLHUP | select.POLLNVAL


class PollSelector:
    """``proton._io.IO.Selector`` on a persistent ``poll`` object (see the module rules)."""

    def __init__(self) -> None:
        self._poller = select.poll()
        self._selectables: set[Any] = set()
        self._registered: dict[Any, tuple[int, int]] = {}  # selectable -> (fd, mask)
        self._by_fd: dict[int, Any] = {}
        self._deadline: float | None = None  # at or before the earliest deadline

    @property
    def selectables(self) -> int:
        return len(self._selectables)

    def add(self, selectable: Any) -> None:
        self._selectables.add(selectable)
        self.update(selectable)

    def remove(self, selectable: Any) -> None:
        self._selectables.discard(selectable)
        self._unregister(selectable)

    def update(self, selectable: Any) -> None:
        """What ``selectable`` waits for changed (reading, writing, its deadline)."""
        mask = (_READ if selectable.reading else 0) | (_WRITE if selectable.writing else 0)
        old = self._registered.get(selectable)
        if old is None or old[1] != mask:
            self._register(selectable, mask, old)
        deadline = selectable._deadline
        if deadline and (self._deadline is None or deadline < self._deadline):
            self._deadline = deadline

    def _register(self, selectable: Any, mask: int, old: tuple[int, int] | None) -> None:
        if old is not None:
            fd = old[0]
        else:
            fd = selectable.fileno()
            if fd < 0:
                return  # no socket: a deadline only
        if not mask:
            self._unregister(selectable)
            return
        if old is None:
            self._poller.register(fd, mask)
            self._by_fd[fd] = selectable
        else:
            self._poller.modify(fd, mask)
        self._registered[selectable] = (fd, mask)

    def _unregister(self, selectable: Any) -> None:
        old = self._registered.pop(selectable, None)
        if old is not None and self._by_fd.get(old[0]) is selectable:
            self._poller.unregister(old[0])  # not when a newer socket already has its number
            del self._by_fd[old[0]]

    def select(self, timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
        """Wait until a socket is ready, the earliest deadline or ``timeout`` seconds
        (None: no limit); return the readable, the writable and the expired selectables."""
        wait = timeout
        if self._deadline is not None:
            until = max(0.0, self._deadline - time.time())
            wait = until if wait is None else min(wait, until)
        ready = self._poller.poll(None if wait is None else int(wait * 1000 + 0.999))
        readable: list[Any] = []
        writable: list[Any] = []
        by_fd, registered = self._by_fd, self._registered
        for fd, events in ready:
            selectable = by_fd.get(fd)
            if selectable is None:
                continue
            mask = registered[selectable][1]
            if mask & _READ and events & (_READ | _TROUBLE):
                readable.append(selectable)
            if mask & _WRITE and events & (_WRITE | _TROUBLE):
                writable.append(selectable)
        return readable, writable, self._expired()

    def _expired(self) -> list[Any]:
        """The selectables whose deadline has passed, once the lower bound has; the bound
        is then made exact again (as Proton's selector does after every wait)."""
        now = time.time()
        if self._deadline is None or now <= self._deadline:
            return []
        expired, earliest = [], None
        for selectable in self._selectables:
            deadline = selectable._deadline
            if not deadline:
                continue
            if now > deadline:
                expired.append(selectable)  # its handler moves its deadline, or it fires again
            if earliest is None or deadline < earliest:
                earliest = deadline
        self._deadline = earliest
        return expired
