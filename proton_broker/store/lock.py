"""The data directory lock: one broker per data directory.

Rules this module owns: a broker holds an exclusive OS file lock (``flock``) on
``broker.lock`` in its data directory for as long as its store is open, and writes its PID
there. A second broker on the same directory refuses to start, naming the directory and the
holder's PID, instead of recovering the same messages and delivering them twice. The OS
drops the lock when the holder exits, however it exits (``kill -9`` included), so a stale
lock file never blocks a restart: only a live holder does. A directory the broker cannot
use (a file, read-only, not its user's to write) stops start-up the same way, as a
StoreError naming it and what the system said, not as a traceback. A full disk (``ENOSPC``
making the file or writing the PID) is not such a directory: the OSError goes to the store,
which says a full disk in its own words, as for any write at start-up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from proton_broker.store.base import StoreError

LOCK_FILE = "broker.lock"


class DirectoryLock:
    """The lock on one data directory; :meth:`acquire` before using it, :meth:`release`
    when done."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory).resolve() / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError naming the directory and the holder's PID, or
        naming the directory and what the system said when it cannot be used at all (not
        a directory, read-only, not the broker's to write): an operator's error to
        correct, reported as one, not a traceback. OSError (ENOSPC) on a full disk."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            raise self._unusable(exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StoreError(
                f"data directory {self.path.parent} is in use by another broker "
                f"(pid {holder}); stop it or give this one another --data-dir"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            os.close(fd)  # the lock goes with it
            if exc.errno == errno.ENOSPC:
                raise
            raise self._unusable(exc) from exc
        self._fd = fd

    def _unusable(self, exc: OSError) -> StoreError:
        # mkdir of a path that is a file says "File exists": say what is wrong with it
        why = "not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        return StoreError(
            f"data directory {self.path.parent} cannot be used: {why} "
            f"({exc.filename or self.path}); the broker needs a directory it may write in"
        )

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the lock
            self._fd = None


def _read_pid(fd: int) -> str:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return text or "unknown"
