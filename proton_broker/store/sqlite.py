"""The SQLite backend: the embedded default store, in the broker's data directory.

Rules this module owns:

* Durability: WAL journal with ``synchronous=FULL``, so a committed transaction survives a
  crash of the process or the machine. A unit's completion runs only after its commit.
* Group commit: one writer thread owns the write connection. It takes every unit that has
  arrived, writes them in one transaction, commits, and posts their completions back to
  the event loop in one call. Units arriving while a commit (and its fsync) is under way
  form the next group, so the batch grows with the load and there is no timer to tune.
* Failure: if a transaction fails (disk full, I/O error) it is rolled back and every unit
  in it completes with a :class:`StoreError`; nothing of them is on disk. The writer
  carries on, so producers recover once space is freed.
* Integrity: each message row carries a CRC-32 of its bytes, checked at recovery, and the
  file passes SQLite's ``quick_check`` at open. A file that fails either is refused with an
  error naming it (and the row): altered data is never served silently.

Threading: the event-loop thread only enqueues units (a thread-safe queue) and runs the
completions posted back to it; the writer thread never touches broker state.
"""

from __future__ import annotations

import json
import logging
import queue as _queue
import sqlite3
import threading
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from proton_broker.store.base import (
    Completion,
    Post,
    Recovered,
    Store,
    StoredMessage,
    StoreError,
    Unit,
)

log = logging.getLogger("proton_broker.store")

FILE_NAME = "broker.sqlite"
SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, options TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    queue TEXT NOT NULL,
    arrival REAL NOT NULL,
    crc INTEGER NOT NULL,
    data BLOB NOT NULL
);
"""
_MAX_GROUP = 4096  # units written in one transaction at most
_STOP = object()


class SqliteStore(Store):
    def __init__(self, directory: str | Path, post: Post,
                 before_commit: Callable[[], None] | None = None,
                 after_commit: Callable[[], None] | None = None) -> None:
        """``post`` runs a callable on the event-loop thread. ``before_commit`` and
        ``after_commit`` are fault-test hooks called by the writer around each commit."""
        super().__init__()
        self.path = Path(directory) / FILE_NAME
        self._post = post
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._units: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._db: sqlite3.Connection | None = None  # the loop thread's, for declarations

    # ---- opening and recovery ---------------------------------------------------------

    def open(self) -> Recovered:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._connect()
            self._check()
            recovered = self._recover()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} cannot be read: {exc}") from exc
        self._writer = threading.Thread(target=self._write_loop, name="store-writer",
                                        daemon=True)
        self._writer.start()
        log.info("store %s: %d durable queues, %d messages", self.path,
                 len(recovered.queues), len(recovered.messages))
        return recovered

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def _check(self) -> None:
        db = self._db
        assert db is not None
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise StoreError(f"store {self.path} is corrupt: {'; '.join(problems[:5])}")
        db.executescript(_SCHEMA)
        db.execute("DELETE FROM pages")  # paged-out transient messages do not outlive us
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            raise StoreError(f"store {self.path} has schema {row[0]}, this broker reads "
                             f"schema {SCHEMA_VERSION}")

    def _recover(self) -> Recovered:
        db = self._db
        assert db is not None
        recovered = Recovered()
        for name, options in db.execute("SELECT name, options FROM queues"):
            recovered.queues[name] = json.loads(options)
        last = 0
        rows = db.execute("SELECT id, queue, arrival, crc, data FROM messages ORDER BY id")
        for message_id, queue, arrival, crc, data in rows:
            data = bytes(data)
            if zlib.crc32(data) != crc:
                raise StoreError(f"store {self.path}: message {message_id} on queue "
                                 f"'{queue}' fails its checksum; refusing to serve it")
            recovered.messages.append(StoredMessage(message_id, queue, data, arrival))
            last = message_id
        self._ids_after(last)
        return recovered

    # ---- declarations (synchronous, on the loop thread) ------------------------------

    def save_queue(self, name: str, options: Mapping[str, Any]) -> None:
        self._declare("INSERT OR REPLACE INTO queues VALUES (?, ?)",
                      (name, json.dumps(dict(options), default=str)))

    def delete_queue(self, name: str) -> None:
        self._declare("DELETE FROM messages WHERE queue = ?", (name,),
                      "DELETE FROM queues WHERE name = ?")

    def _declare(self, sql: str, args: tuple[Any, ...], *more: str) -> None:
        db = self._db
        if db is None:
            raise StoreError("store is not open")
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, args)
            for statement in more:
                db.execute(statement, args[:1])
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(f"store {self.path}: {exc}") from exc

    # ---- messages (asynchronous, group commit on the writer thread) -------------------

    @property
    def pages(self) -> bool:
        return True

    def read(self, message_id: int, page: bool) -> bytes:
        db = self._db
        if db is None:
            raise StoreError("store is not open")
        table = "pages" if page else "messages"
        row = db.execute(f"SELECT data FROM {table} WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise StoreError(f"store {self.path}: message {message_id} is not in {table}")
        return bytes(row[0])

    def commit(self, unit: Unit) -> None:
        if self._writer is None:
            raise StoreError("store is not open")
        self._units.put(unit)

    def close(self) -> None:
        if self._writer is not None:
            self._units.put(_STOP)
            self._writer.join()
            self._writer = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def _write_loop(self) -> None:
        db = self._connect()
        try:
            while True:
                group = self._next_group()
                if group is None:
                    return
                error = self._write(db, group)
                done = [unit.done for unit in group if unit.done is not None]
                if done:
                    self._post(_completions(done, error))
        finally:
            db.close()

    def _next_group(self) -> list[Unit] | None:
        """Wait for a unit, then take every unit already waiting (up to a bound)."""
        first = self._units.get()
        if first is _STOP:
            return None
        group = [first]
        while len(group) < _MAX_GROUP:
            try:
                unit = self._units.get_nowait()
            except _queue.Empty:
                break
            if unit is _STOP:
                self._units.put(_STOP)  # finish this group, then stop
                break
            group.append(unit)
        return group

    def _write(self, db: sqlite3.Connection, group: list[Unit]) -> StoreError | None:
        rows = [(m.id, m.queue, m.arrival, zlib.crc32(m.data), m.data)
                for unit in group for m in unit.enqueues]
        gone = [(message_id,) for unit in group for message_id in unit.dequeues]
        pages = [page for unit in group for page in unit.pages]
        unpages = [(page_id,) for unit in group for page_id in unit.unpages]
        try:
            db.execute("BEGIN")
            if rows:
                db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", rows)
            if gone:
                db.executemany("DELETE FROM messages WHERE id = ?", gone)
            if pages:
                db.executemany("INSERT INTO pages VALUES (?, ?)", pages)
            if unpages:
                db.executemany("DELETE FROM pages WHERE id = ?", unpages)
            if self._before_commit is not None:
                self._before_commit()
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            log.error("store %s: a write of %d units failed: %s", self.path, len(group), exc)
            return StoreError(f"the store could not write: {exc}")
        if self._after_commit is not None:
            self._after_commit()
        return None


def _completions(done: list[Completion], error: StoreError | None) -> Callable[[], None]:
    def run() -> None:
        for callback in done:
            callback(error)

    return run
