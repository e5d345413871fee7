"""``poll(2)`` in place of ``select(2)`` for the reactor's socket wait.

Proton's Python reactor waits on its sockets with ``select.select``, which cannot watch a
file descriptor numbered 1024 or above (FD_SETSIZE): once the process has that many files
open (a busy HTTP gateway holding long polls, many connections), the next connection's
socket would make the wait fail and stop the event loop. ``poll`` has no such limit.
:func:`install` points Proton's ``IO.select`` at :func:`poll_select`, which keeps the
``select`` calling convention (lists of objects with ``fileno()``; ready ones returned).
"""

from __future__ import annotations

import select
from collections.abc import Iterable
from typing import Any

from proton._io import IO

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
_TROUBLE = select.POLLERR | select.POLLHUP | select.POLLNVAL


def poll_select(readers: Iterable[Any], writers: Iterable[Any], errors: Iterable[Any],
                timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
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
    ready = poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999)))
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in ready:
        if events & (_READ | _TROUBLE):
            readable += watched[0].get(fd, ())
        if events & (_WRITE | _TROUBLE):
            writable += watched[1].get(fd, ())
    return readable, writable, []


def install() -> None:
    """Make Proton's reactor wait with poll (see the module doc)."""
    IO.select = staticmethod(poll_select)  # type: ignore[method-assign]
