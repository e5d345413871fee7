"""A SQLite store whose disk is full until the test says it is not."""

from __future__ import annotations

import queue
import sqlite3
from collections.abc import Callable
from pathlib import Path

from proton_broker.store.sqlite import SqliteStore


class DiskFullStore(SqliteStore):
    """Every commit fails with SQLite's disk-full error while ``full`` is true; completions
    are posted to ``posted`` (run them with ``posted.get(timeout=10)()``)."""

    def __init__(self, path: Path) -> None:
        self.full = True
        self.posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        super().__init__(path, self.posted.put, before_commit=self._check_space)

    def _check_space(self) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")
