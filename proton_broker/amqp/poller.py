"""The broker's socket wait: Proton's reactor ``IO.Selector``, kept on one ``epoll`` object.

Proton's Python selector scans every selectable each time one of them changes (to find the
earliest deadline) and, through ``IO.select``, hands the whole reading and writing sets to
``select(2)`` on every wait. With many connections that is O(connections) per socket
event: at 100 connections it was a tenth of the broker's CPU. This selector keeps the
same interface (``add``, ``update``, ``remove``, ``select``, ``selectables``) with these
rules:

* Each selectable's socket is registered with one long-lived ``select.epoll`` object
  (``select.poll`` where there is no epoll), and re-registered only when what it waits
  for (read, write) changes: an update is O(1), and with epoll a wait costs what is
  ready, not what is connected (``poll`` hands the kernel every socket on each wait, which
  at 10,000 connections made a burst of connects slower the more had connected). Neither
  has select's FD_SETSIZE limit, so no socket number is too high. A selectable without a
  socket (the reactor's own, for timers) only carries a deadline. The kernel forgets a
  closed socket by itself, so unregistering one that is gone is not an error.
* Deadlines (idle time-out ticks, the handshake time-out, timers) are kept in a heap,
  O(log n) an update: each change pushes the new deadline, and an entry that no longer
  matches its selectable's deadline is dropped when it reaches the top (the heap is
  rebuilt once it holds more stale entries than live ones plus a margin). The wait ends
  at the earliest deadline; those past it are expired, as Proton's selector does it
  (``now`` after the deadline), and stay due until their handler moves them. Scanning
  every deadline after each wait, as Proton does, cost a seventh of the broker's CPU at
  10,000 connections, whose deadlines pass every few milliseconds.
* A socket in error or hung up is reported readable (and writable, if it waits to write),
  so that the next read or write sees the error, as ``select`` would.

Other Proton containers in the process (clients) keep Proton's selector, but wait with
``poll`` too (:func:`install_poll`), so no socket number is too high for them either.
Private API used here: ``proton._io.IO.select`` (replaced) and a selectable's
``_deadline``.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import select
import time
from collections.abc import Iterable
from typing import Any

from proton._io import IO

# The poll(2) and epoll(7) event bits are the same numbers on Linux.
_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
_TROUBLE = select.POLLERR | select.POLLHUP | select.POLLNVAL
_SLACK = 1024  # stale heap entries allowed beyond the live ones before a rebuild


def _milliseconds(seconds: float | None) -> int | None:
    """A ``poll`` time-out: ``seconds`` rounded up to whole milliseconds (None: no limit)."""
    return None if seconds is None else max(0, int(seconds * 1000 + 0.999))


def readable_now(fd: int) -> bool:
    """Whether ``fd`` has input waiting right now (a zero-timeout poll)."""
    poller = select.poll()
    poller.register(fd, _READ)
    return bool(poller.poll(0))


def install_poll() -> None:
    """Point Proton's ``IO.select`` at :func:`poll_select`: Proton's Python reactor waits
    with ``select.select``, which cannot watch a file descriptor numbered 1024 or above
    (FD_SETSIZE). ``poll`` has no such limit; :func:`poll_select` keeps the ``select``
    calling convention (lists of objects with ``fileno()``; ready ones returned)."""
    IO.select = staticmethod(poll_select)  # type: ignore[method-assign]


def poll_select(
    readers: Iterable[Any],
    writers: Iterable[Any],
    errors: Iterable[Any],
    timeout: float | None = None,
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select(readers, writers, errors, timeout)``, done with ``poll``. A socket
    in error or hung up is reported readable (and writable, if watched for writing), so
    that the caller's next read or write sees the error, as with ``select``."""
    watched: tuple[dict[int, list[Any]], dict[int, list[Any]]] = ({}, {})
    masks: dict[int, int] = {}
    for objects, mask, table in ((readers, _READ, watched[0]), (writers, _WRITE, watched[1])):
        for obj in objects:
            fd = obj.fileno()
            masks[fd] = masks.get(fd, 0) | mask
            table.setdefault(fd, []).append(obj)
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = poller.poll(_milliseconds(timeout))
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in ready:
        if events & (_READ | _TROUBLE):
            readable += watched[0].get(fd, ())
        if events & (_WRITE | _TROUBLE):
            writable += watched[1].get(fd, ())
    return readable, writable, []


class PollSelector:
    """``proton._io.IO.Selector`` on a persistent ``epoll`` (or ``poll``) object (see the
    module rules)."""

    def __init__(self, use_epoll: bool = hasattr(select, "epoll")) -> None:
        self._epoll = use_epoll
        self._poller: Any = select.epoll() if use_epoll else select.poll()
        self._selectables: set[Any] = set()
        self._registered: dict[Any, tuple[int, int]] = {}  # selectable -> (fd, mask)
        self._by_fd: dict[int, Any] = {}
        self._due: dict[Any, float] = {}  # selectable -> its deadline in the heap
        self._heap: list[tuple[float, int, Any]] = []  # (deadline, tie-break, selectable)
        self._pushed = itertools.count()

    @property
    def selectables(self) -> int:
        return len(self._selectables)

    def add(self, selectable: Any) -> None:
        self._selectables.add(selectable)
        self.update(selectable)

    def remove(self, selectable: Any) -> None:
        self._selectables.discard(selectable)
        self._due.pop(selectable, None)
        self._unregister(selectable)

    def update(self, selectable: Any) -> None:
        """What ``selectable`` waits for changed (reading, writing, its deadline)."""
        mask = (_READ if selectable.reading else 0) | (_WRITE if selectable.writing else 0)
        old = self._registered.get(selectable)
        if old is None or old[1] != mask:
            self._register(selectable, mask, old)
        self._track(selectable)

    def _track(self, selectable: Any) -> None:
        """Note ``selectable``'s deadline (0: none) in the heap, if it changed."""
        deadline = selectable._deadline
        due = self._due
        if not deadline:
            due.pop(selectable, None)  # its heap entries are stale now
        elif due.get(selectable) != deadline:
            due[selectable] = deadline
            heap = self._heap
            heapq.heappush(heap, (deadline, next(self._pushed), selectable))
            if len(heap) > 2 * len(due) + _SLACK:
                self._heap = [(d, next(self._pushed), s) for s, d in due.items()]
                heapq.heapify(self._heap)

    def _earliest(self) -> float | None:
        """The earliest deadline, stale entries dropped from the top on the way."""
        heap, due = self._heap, self._due
        while heap:
            deadline, _, selectable = heap[0]
            if due.get(selectable) == deadline:
                return deadline
            heapq.heappop(heap)
        return None

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
        try:
            if old is None:
                self._poller.register(fd, mask)
            else:
                self._poller.modify(fd, mask)
        except FileExistsError:  # epoll: a closed socket's number, not forgotten yet
            self._poller.modify(fd, mask)
        except OSError:  # epoll: closed meanwhile; its read sees why
            pass
        if old is None:
            self._by_fd[fd] = selectable  # the newest socket with this number is the one
        self._registered[selectable] = (fd, mask)

    def _unregister(self, selectable: Any) -> None:
        old = self._registered.pop(selectable, None)
        if old is not None and self._by_fd.get(old[0]) is selectable:
            del self._by_fd[old[0]]  # not when a newer socket already has its number
            with contextlib.suppress(KeyError, OSError):  # closed first: already forgotten
                self._poller.unregister(old[0])

    def select(self, timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
        """Wait until a socket is ready, the earliest deadline or ``timeout`` seconds
        (None: no limit); return the readable, the writable and the expired selectables."""
        wait = timeout
        earliest = self._earliest()
        if earliest is not None:
            until = max(0.0, earliest - time.time())
            wait = until if wait is None else min(wait, until)
        if self._epoll:
            ready = self._poller.poll(-1 if wait is None else wait)
        else:
            ready = self._poller.poll(_milliseconds(wait))
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
        """The selectables whose deadline has passed. Each stays due (its entry is pushed
        again) until its handler moves its deadline, as with Proton's selector."""
        now = time.time()
        heap, due = self._heap, self._due
        expired = []
        while heap and heap[0][0] < now:
            deadline, _, selectable = heapq.heappop(heap)
            if due.get(selectable) == deadline:
                expired.append(selectable)
        for selectable in expired:
            del due[selectable]
            self._track(selectable)
        return expired
