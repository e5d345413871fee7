"""Acknowledged messages whose removal a full disk held back, kept where a full disk
cannot stop them being written.

Rules this module owns:

* The file ``removals.pending`` in the data directory is allocated in full
  (:data:`SIZE` bytes) when the store opens, so rewriting it never needs a new block on the
  file system: it can be written while the disk is full, which is when it is needed.
* Layout: the total number of held-back removals (8 bytes, big-endian), then the message
  ids, 8 bytes each, as many as fit (:data:`CAPACITY`). The file is rewritten and synced
  after every commit that fails with removals in it, and emptied after the commit that
  finally carries them.
* At the next open the store finishes those removals before it recovers anything, so a
  message the consumer acknowledged is not delivered again, and says how many. Ids beyond
  the capacity cannot be named: the count says how many of those come back.

Only the store writer thread uses a ledger once the store is open.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

LEDGER_FILE = "removals.pending"
SIZE = 1 << 20  # bytes reserved on disk for the ledger
_WORD = struct.Struct(">Q")
CAPACITY = SIZE // _WORD.size - 1  # message ids the file can name


class RemovalLedger:
    """The held-back removals of one data directory."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory).resolve() / LEDGER_FILE
        self._fd: int | None = None
        self._empty = False  # whether the file is known to hold no removals

    def open(self) -> tuple[list[int], int]:
        """Reserve the file's space and return what it holds: the ids it names and the
        total number of removals held back (greater than the ids when they did not fit)."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        head = os.pread(self._fd, SIZE, 0)
        if len(head) < SIZE:
            os.posix_fallocate(self._fd, 0, SIZE)
        total = _WORD.unpack_from(head)[0] if len(head) >= _WORD.size else 0
        self._empty = total == 0
        named = min(total, CAPACITY, len(head) // _WORD.size - 1)
        ids = [_WORD.unpack_from(head, _WORD.size * (1 + i))[0] for i in range(named)]
        return ids, total

    def record(self, ids: Sequence[int]) -> None:
        """Write the removals held back now (all of them, replacing what was there)."""
        named = ids[:CAPACITY]
        data = _WORD.pack(len(ids)) + b"".join(_WORD.pack(i) for i in named)
        self._write(data)
        self._empty = not ids

    def clear(self) -> None:
        """Nothing is held back any more."""
        if not self._empty:
            self._write(_WORD.pack(0))
            self._empty = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, data: bytes) -> None:
        assert self._fd is not None, "the ledger is not open"
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)
