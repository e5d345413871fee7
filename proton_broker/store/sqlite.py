"""The SQLite backend: the embedded default store, in the broker's data directory.

Rules this module owns:

* Durability: WAL journal with ``synchronous=FULL``, so a committed transaction survives a
  crash of the process or the machine. A unit's completion runs only after its commit.
* Group commit: one writer thread owns the write connection. It takes every unit that has
  arrived, writes them in one transaction, commits, and posts their completions back to
  the event loop in one call. Units arriving while a commit (and its fsync) is under way
  form the next group, so the batch grows with the load. A stream (a pass of the loop
  that brought GROUP_STREAM writes and removals or more) also keeps its group open for
  GROUP_WINDOW, as PostgreSQL's ``commit_delay`` waits only while other transactions are
  busy: bigger commits cost less a message. Fewer writes (a lone producer waiting for
  each answer) are committed at once.
* A message written and removed in the same group (a consumer took and settled it before
  its write began) is neither written nor removed: the transaction ends the same.
* A message is written only while its queue is stored: one whose queue was deleted while
  its write waited (``delete_queue`` removes the queue's row at once) is not, as nothing
  would remove it later and a new queue of that name would recover it. Its completion
  runs as for the others; the broker forgets it (its queue is gone).
* Failure: if a transaction fails (disk full, I/O error) it is rolled back and every unit
  in it completes with a :class:`StoreError`; nothing of them is on disk. The writer
  carries on, so producers recover once space is freed. The first failed write of an
  episode (a full disk) is logged as an error, those after it only at debug level, and
  the first write that succeeds again says how many failed. A unit's removals that go with
  its writes (a client's transaction, a dead letter's move, a management move) fail with
  it, as qpidd's and Broker-J's store transactions do: its caller keeps those messages
  where the store has them. Removals that stand alone (``Unit.acknowledgements``:
  consumers' acknowledgements) have no one to tell, so they are not lost with the
  transaction: they are logged (``MST-1011``, with the count; the metric
  ``proton_broker_store_removals_waiting``) and written with the next commit that succeeds
  (``MST-1012``). They are also written to a file whose space is reserved in advance
  (store/removals.py), so a broker that stops before then finishes them at its next start
  and says how many (``MST-1013``): an acknowledged message is not delivered again.
* Arguments (an exchange's, a binding's) are JSON whose values keep their AMQP types where
  JSON has none: binary as ``{"$binary": hex}`` and a UUID as ``{"$uuid": text}``, so a
  headers binding on such a value matches the same after a restart. Anything else JSON
  cannot say is kept as its text.
* Integrity: each message row carries a CRC-32 of its bytes, checked at recovery, and the
  file passes SQLite's ``quick_check`` at open. A file that fails either is refused with an
  error naming it (and the row): altered data is never served silently.
* Recovery reads everything but the messages' bytes at open: queues, exchanges, bindings,
  numbers (with each queue's highest), marks, histories. The messages come after, in id
  order, one row at a time as the broker takes them, each checksum checked as its row is
  read, so the store is never in memory at once and a flow-to-disk queue pages each out
  as it joins (Broker-J recovers its messages' metadata alone and reads their content on
  demand). They are read in chunks of _CHUNK rows, up to the highest id stored at open
  (messages stored during recovery are not recovered again), so no read transaction holds
  the WAL for the whole recovery. A row that fails its checksum stops recovery there.

Threading: the event-loop thread only enqueues units (a thread-safe queue) and runs the
completions posted back to it; the writer thread never touches broker state.
"""

from __future__ import annotations

import errno
import json
import logging
import queue as _queue
import shutil
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from proton_broker.store.lock import DirectoryLock
from proton_broker.store.removals import RemovalLedger

log = logging.getLogger("proton_broker.store")

FILE_NAME = "broker.sqlite"
SCHEMA_VERSION = "2"  # 2: messages.number (a schema 1 store is brought up to 2 at open)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, options TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS exchanges (
    name TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    arguments TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bindings (
    exchange TEXT NOT NULL,
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    arguments TEXT NOT NULL,
    PRIMARY KEY (exchange, queue, key)
);
CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS retired (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS sequences (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE TABLE IF NOT EXISTS floors (queue TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS numbers (id INTEGER PRIMARY KEY, number INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS marks (queue TEXT PRIMARY KEY, upto INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS seen (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    queue TEXT NOT NULL,
    arrival REAL NOT NULL,
    crc INTEGER NOT NULL,
    data BLOB NOT NULL,
    number INTEGER
);
"""
# A message row's columns as written (the blob last: see _insert); schema 1 had no number.
_MESSAGE_ROW = "INSERT INTO messages (id, queue, arrival, crc, number, data)"
# Recovery reads the messages in id order, a chunk at a time: (after id, up to id, rows).
_RECOVER_MESSAGES = (
    "SELECT id, queue, arrival, crc, data FROM messages WHERE id > ? AND id <= ? ORDER BY id "
    "LIMIT ?"
)
_GREATEST_SEQUENCE = " ON CONFLICT (queue, key) DO UPDATE SET seq = max(seq, excluded.seq)"
_GREATEST_FLOOR = " ON CONFLICT (queue) DO UPDATE SET seq = max(seq, excluded.seq)"
_MAX_GROUP = 4096  # units written in one transaction at most
GROUP_STREAM = 32  # messages written or removed in one pass that make a stream
GROUP_WINDOW = 0.006  # seconds a stream's group stays open for more units
_STOP = object()


class SqliteStore(Store):
    def __init__(
        self,
        directory: str | Path,
        post: Post,
        before_commit: Callable[[], None] | None = None,
        after_commit: Callable[[], None] | None = None,
    ) -> None:
        """``post`` runs a callable on the event-loop thread. ``before_commit`` and
        ``after_commit`` are fault-test hooks called by the writer around each commit
        (inside its transaction, and after it); ``_before_write`` (set by a test) is called
        before each group's transaction begins, while the database is not locked."""
        super().__init__()
        self.path = Path(directory).resolve() / FILE_NAME
        self._lock = DirectoryLock(directory)  # store/lock.py
        self._ledger = RemovalLedger(directory)  # store/removals.py
        self._post = post
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._before_write: Callable[[], None] | None = None
        self._units: _queue.SimpleQueue[Any] = _queue.SimpleQueue()  # lists of units
        # With ``batching`` (set by the server), units collect in ``outbox`` until flush()
        # hands them to the writer together, once per pass of the event loop: one wake-up
        # of the writer thread per pass instead of one per message.
        self._writer: threading.Thread | None = None
        self._shared: Unit | None = None  # this pass's unit for enqueue() and dequeue()
        self._db: sqlite3.Connection | None = None  # the loop thread's, for declarations
        self._retired_rows = False  # the retired table may hold rows (see retire())
        self._number_rows = False  # the numbers table may hold rows (writer thread's)
        self._unwritten: list[tuple[int]] = []  # removals a failed commit held (writer's)
        self._failed_writes = 0  # failed in a row (writer's; see the module rules)

    # ---- opening and recovery ---------------------------------------------------------

    def open(self) -> Recovered:
        try:
            self._lock.acquire()  # before anything is read: one broker per data directory
            self._db = self._connect()
            self._check()
            self._finish_removals()
            recovered = self._recover()
        except sqlite3.DatabaseError as exc:
            self._release()
            if "full" in str(exc):  # SQLITE_FULL: "database or disk is full"
                raise StoreError(self._full_disk()) from exc
            raise StoreError(f"store {self.path} cannot be read: {exc}") from exc
        except OSError as exc:  # the lock's PID, the ledger's reserved space
            self._release()
            if exc.errno == errno.ENOSPC:
                raise StoreError(self._full_disk()) from exc
            raise StoreError(f"store {self._ledger.path} cannot be used: {exc}") from exc
        except StoreError:
            self._release()
            raise
        self._writer = threading.Thread(target=self._write_loop, name="store-writer", daemon=True)
        self._writer.start()
        return recovered

    def _release(self) -> None:
        self._ledger.close()
        self._lock.release()

    def _finish_removals(self) -> None:
        """Remove the acknowledged messages a full disk held back before the broker last
        stopped, before anything is recovered, and say how many."""
        db = self._db
        assert db is not None
        ids, total = self._ledger.open()
        if not total:
            return
        rows = [(message_id,) for message_id in ids]
        db.execute("BEGIN")
        removed = _delete(db, "messages", rows)
        _delete(db, "numbers", rows)
        _delete(db, "retired", rows)
        db.execute("COMMIT")
        log.warning(
            "MST-1013 : %d acknowledged messages whose removal a full disk held back before "
            "the broker stopped are removed now%s",
            removed,
            ""
            if total == len(ids)
            else f"; {total - len(ids)} more could not be recorded and are delivered again",
        )
        self._ledger.clear()

    def _full_disk(self) -> str:
        """What to tell an operator whose disk is too full to open the store."""
        existing = self.path.parent  # not made yet, if the disk had no room for it
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        free = shutil.disk_usage(existing).free
        return (
            f"the disk holding {self.path.parent} is full ({free} bytes free): recovery "
            "needs room to write; free space on that file system (the store's own "
            f"{FILE_NAME}-wal file shrinks once the broker runs), or move the data directory"
        )

    @property
    def location(self) -> str | None:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def _check(self) -> None:
        """Refuse a corrupt store or one of a schema this broker does not read, before
        anything is written to it: a newer broker's store must stay as that broker left
        it (an older broker would otherwise add its tables and drop its pages first)."""
        db = self._db
        assert db is not None
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise StoreError(f"store {self.path} is corrupt: {'; '.join(problems[:5])}")
        schema = _stored_schema(db)
        if schema not in (None, "1", SCHEMA_VERSION):
            raise StoreError(
                f"store {self.path} has schema {schema}, this broker reads schema {SCHEMA_VERSION}"
            )
        db.executescript(_SCHEMA)
        db.execute("DELETE FROM pages")  # paged-out transient messages do not outlive us
        if schema is None:
            db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif schema == "1":  # messages had no number column: their numbers are all rows
            db.execute("BEGIN")
            db.execute("ALTER TABLE messages ADD COLUMN number INTEGER")
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))
            db.execute("COMMIT")

    def _recover(self) -> Recovered:
        db = self._db
        assert db is not None
        recovered = Recovered()
        for name, options in db.execute("SELECT name, options FROM queues"):
            recovered.queues[name] = self._declared(options, f"queue '{name}'", json.loads)
        for name, kind, arguments in db.execute("SELECT name, type, arguments FROM exchanges"):
            recovered.exchanges[name] = (
                kind,
                self._declared(arguments, f"exchange '{name}'", _arguments_read),
            )
        recovered.bindings = [
            (
                exchange,
                queue,
                key,
                self._declared(arguments, f"binding of '{queue}' to '{exchange}'", _arguments_read),
            )
            for exchange, queue, key, arguments in db.execute(
                "SELECT exchange, queue, key, arguments FROM bindings ORDER BY rowid"
            )
        ]
        for queue, key, seq in db.execute("SELECT queue, key, seq FROM sequences"):
            recovered.sequences.setdefault(queue, {})[key] = seq
        recovered.floors = dict(db.execute("SELECT queue, seq FROM floors"))
        recovered.retired = {row[0] for row in db.execute("SELECT id FROM retired")}
        # A number whose message is gone (it cannot be written after the message's
        # removal, but a store from before numbers may hold neither) is dropped here.
        db.execute("DELETE FROM numbers WHERE id NOT IN (SELECT id FROM messages)")
        recovered.numbers, recovered.highest = _stored_numbers(db)
        recovered.marks = dict(db.execute("SELECT queue, upto FROM marks"))
        for queue, key, at in db.execute("SELECT queue, key, at FROM seen ORDER BY at"):
            recovered.seen.setdefault(queue, []).append((key, at))
        self._retired_rows = bool(recovered.retired)
        self._number_rows = bool(db.execute("SELECT 1 FROM numbers LIMIT 1").fetchone())
        (last,) = db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        self._ids_after(last)  # before a message is read: recovery may store new ones
        recovered.messages = self._messages(db, last)
        return recovered

    def _messages(self, db: sqlite3.Connection, last: int) -> Iterator[StoredMessage]:
        """The stored messages by id up to ``last`` (those written before this start),
        each row read as it is taken and its checksum checked then (see the module rules):
        one message's bytes in hand at a time, however big the store. In statements of
        _CHUNK rows, so that no read transaction lasts the whole recovery (the WAL is
        checkpointed meanwhile, though the writer commits what recovery changes)."""
        after = 0
        try:
            while after < last:
                chunk_after = after
                for message_id, queue, arrival, crc, data in db.execute(
                    _RECOVER_MESSAGES, (after, last, _CHUNK)
                ):
                    data = bytes(data)
                    if zlib.crc32(data) != crc:
                        raise StoreError(
                            f"store {self.path}: message {message_id} on queue "
                            f"'{queue}' fails its checksum; refusing to serve it"
                        )
                    after = message_id
                    yield StoredMessage(message_id, queue, data, arrival)
                if after == chunk_after:
                    return  # nothing left up to ``last``
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} cannot be read: {exc}") from exc

    def _declared(self, text: str, what: str, read: Callable[[str], Any]) -> dict[str, Any]:
        """A declaration's options or arguments, as ``read`` reads their JSON; one that is
        not a JSON object (an altered row) is refused naming it, as an altered message is:
        guessing them would give the entity other settings than it was declared with."""
        refused = f"store {self.path}: the {what} cannot be recovered: its stored settings"
        try:
            value = read(text)
        except ValueError as exc:  # json.JSONDecodeError, and a bad $binary or $uuid
            raise StoreError(f"{refused} are not JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise StoreError(f"{refused} are not a JSON object")
        return value

    # ---- declarations (synchronous, on the loop thread) ------------------------------

    def save_queue(self, name: str, options: Mapping[str, Any]) -> None:
        self._declare(
            "INSERT OR REPLACE INTO queues VALUES (?, ?)",
            (name, json.dumps(dict(options), default=str)),
        )

    def delete_queue(self, name: str, moved: Sequence[StoredMessage] = ()) -> None:
        rows = [_message_row(m) for m in moved]
        self._declare(
            "DELETE FROM numbers WHERE id IN (SELECT id FROM messages WHERE queue = ?)",
            (name,),
            "DELETE FROM messages WHERE queue = ?",
            "DELETE FROM queues WHERE name = ?",
            "DELETE FROM sequences WHERE queue = ?",
            "DELETE FROM floors WHERE queue = ?",
            "DELETE FROM marks WHERE queue = ?",
            "DELETE FROM seen WHERE queue = ?",
            "DELETE FROM bindings WHERE queue = ?",
            "DELETE FROM retired WHERE id NOT IN (SELECT id FROM messages)",
            before=lambda db: _insert(db, _MESSAGE_ROW, 6, rows),
        )

    def save_exchange(self, name: str, kind: str, arguments: Mapping[str, Any]) -> None:
        self._declare(
            "INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?)",
            (name, kind, _arguments_text(arguments)),
        )

    def delete_exchange(self, name: str) -> None:
        self._declare(
            "DELETE FROM exchanges WHERE name = ?",
            (name,),
            "DELETE FROM bindings WHERE exchange = ?",
        )

    def save_binding(
        self, exchange: str, queue: str, key: str, arguments: Mapping[str, Any]
    ) -> None:
        self._declare(
            "INSERT OR REPLACE INTO bindings VALUES (?, ?, ?, ?)",
            (exchange, queue, key, _arguments_text(arguments)),
        )

    def delete_binding(self, exchange: str, queue: str, key: str) -> None:
        self._declare(
            "DELETE FROM bindings WHERE exchange = ? AND queue = ? AND key = ?",
            (exchange, queue, key),
        )

    def _declare(
        self,
        sql: str,
        args: tuple[Any, ...],
        *more: str,
        before: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        db = self._db
        if db is None:
            raise StoreError("store is not open")
        try:
            db.execute("BEGIN IMMEDIATE")
            if before is not None:
                before(db)
            db.execute(sql, args)
            for statement in more:
                db.execute(statement, args[: statement.count("?")])
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
        self.outbox.append(unit)
        if not self.batching:
            self.flush()

    # The hot path: one durable transfer, one settlement. They join the pass's shared unit
    # instead of each making a Unit (all of a group commits in one transaction anyway).

    def enqueue(self, message: StoredMessage, done: Completion | None = None) -> None:
        unit = self._shared or self._shared_unit()
        unit.enqueues.append(message)
        if done is not None:
            unit.dones.append(done)
        if not self.batching:
            self.flush()

    def retire(self, message_id: int) -> None:
        self._shared_unit().retires.append(message_id)
        self._retired_rows = True
        if not self.batching:
            self.flush()

    def sequence(self, queue: str, key: str, seq: int) -> None:
        self._shared_unit().sequences.append((queue, key, seq))
        if not self.batching:
            self.flush()

    def number(self, message_id: int, number: int, done: Completion | None = None) -> None:
        unit = self._shared or self._shared_unit()
        unit.numbers.append((message_id, number))
        if done is not None:
            unit.dones.append(done)
        if not self.batching:
            self.flush()

    def forget(self, queue: str, key: str, floor: int) -> None:
        self._shared_unit().forgets.append((queue, key, floor))
        if not self.batching:
            self.flush()

    def mark(self, queue: str, upto: int) -> None:
        self._shared_unit().marks.append((queue, upto))
        if not self.batching:
            self.flush()

    def floor(self, queue: str, upto: int) -> None:
        self._shared_unit().floors.append((queue, upto))
        if not self.batching:
            self.flush()

    def seen(self, queue: str, key: str, when: float) -> None:
        self._shared_unit().seen.append((queue, key, when))
        if not self.batching:
            self.flush()

    def unseen(self, queue: str, key: str) -> None:
        self._shared_unit().unseen.append((queue, key))
        if not self.batching:
            self.flush()

    def dequeue(self, message_id: int) -> None:
        (self._shared or self._shared_unit()).dequeues.append(message_id)
        if not self.batching:
            self.flush()

    def after_writes(self, done: Completion) -> None:
        """In this pass's shared unit, so ``done`` runs with the commit of the removals the
        pass made (those before it were handed to the writer first, and commit first)."""
        (self._shared or self._shared_unit()).dones.append(done)
        if not self.batching:
            self.flush()

    def _shared_unit(self) -> Unit:
        unit = self._shared
        if unit is None:
            if self._writer is None:
                raise StoreError("store is not open")
            unit = self._shared = Unit(acknowledgements=True)  # its removals stand alone
            self.outbox.append(unit)
        return unit

    def flush(self) -> None:
        """Hand the units committed since the last flush to the writer."""
        if self.outbox:
            self._units.put(self.outbox)
            self.outbox = []
            self._shared = None

    def close(self) -> None:
        if self._writer is not None:
            self.flush()
            self._units.put(_STOP)
            self._writer.join()
            self._writer = None
        if self._db is not None:
            self._db.close()
            self._db = None
        self._release()

    def _write_loop(self) -> None:
        db = self._connect()
        try:
            while True:
                group = self._next_group()
                if group is None:
                    return
                error = self._write(db, group)
                done = [unit.done for unit in group if unit.done is not None]
                done += [callback for unit in group for callback in unit.dones]
                if done:
                    self._post(_completions(done, error))
        finally:
            db.close()

    def _next_group(self) -> list[Unit] | None:
        """Wait for units, then take every unit already waiting (up to a bound). A stream of
        writes (the first units hold GROUP_STREAM messages or more) keeps its group open for
        GROUP_WINDOW for more: bigger commits cost less a message, and a message taken
        and settled within the group is not written at all. Fewer writes (a lone producer
        waiting for each answer) are committed at once."""
        first = self._units.get()
        if first is _STOP:
            return None
        group = list(first)
        load = sum(len(unit.enqueues) + len(unit.dequeues) for unit in group)
        deadline = time.monotonic() + (GROUP_WINDOW if load >= GROUP_STREAM else 0.0)
        while len(group) < _MAX_GROUP:
            wait = deadline - time.monotonic()
            try:
                units = self._units.get(timeout=wait) if wait > 0 else self._units.get_nowait()
            except _queue.Empty:
                break
            if units is _STOP:
                self._units.put(_STOP)  # finish this group, then stop
                break
            group += units
        return group

    def _hold_removals(self, gone: list[tuple[int]], exc: sqlite3.Error) -> None:
        """A commit failed: its removals that stand alone (acknowledged messages) are kept
        for the next commit, and said so, for a restart before then brings those messages
        back. A transaction's or a move's removals are not among them: their callers were
        told that nothing was written, and keep those messages where the store has them."""
        if not gone:
            return
        self._unwritten = gone
        self.commits.waiting_removals(len(gone))
        log.warning(
            "MST-1011 : %d acknowledged messages could not be removed from the store (%s): "
            "the removals are retried with the next write, and finished at the next start "
            "if the broker stops first",
            len(gone),
            exc,
        )
        try:
            self._ledger.record([message_id for (message_id,) in gone])
        except OSError as failed:
            log.error(
                "MST-1014 : the held-back removals could not be recorded in %s (%s): if the "
                "broker stops before they are written, those messages are delivered again",
                self._ledger.path,
                failed,
            )

    def _write(self, db: sqlite3.Connection, group: list[Unit]) -> StoreError | None:  # noqa: C901 - the store writer loop
        enqueues = [m for unit in group for m in unit.enqueues]
        # Removals a failed commit held back go first (see the module rules). Those that
        # stand alone are held back if this commit fails too; the others fail with it.
        held = self._unwritten + [
            (message_id,) for unit in group if unit.acknowledgements for message_id in unit.dequeues
        ]
        gone = held + [
            (message_id,)
            for unit in group
            if not unit.acknowledgements
            for message_id in unit.dequeues
        ]
        removed = gone  # from the messages table: not those this group would write
        if enqueues and gone:
            enqueues, removed = _unwritten(enqueues, gone)
        rows = [_message_row(m) for m in enqueues]
        pages = [page for unit in group for page in unit.pages]
        unpages = [(page_id,) for unit in group for page_id in unit.unpages]
        sequences = [row for unit in group for row in unit.sequences]
        forgets = [row for unit in group for row in unit.forgets]
        floors = [row for unit in group for row in unit.floors]
        retires = [(message_id,) for unit in group for message_id in unit.retires]
        numbers = [row for unit in group for row in unit.numbers]
        marks = [row for unit in group for row in unit.marks]
        seen = [row for unit in group for row in unit.seen]
        unseen = [row for unit in group for row in unit.unseen]
        if self._before_write is not None:
            self._before_write()
        started = time.perf_counter()
        try:
            # IMMEDIATE: the queues read below are the latest, and stay so until COMMIT
            db.execute("BEGIN IMMEDIATE")
            if rows:  # a queue deleted since its messages arrived keeps none of them
                rows = _of_stored_queues(db, rows)
            _insert(db, _MESSAGE_ROW, 6, rows)
            if numbers:
                _rows(db, "INSERT OR REPLACE INTO numbers", 2, numbers)
                self._number_rows = True
            _delete(db, "messages", removed)
            if gone and self._number_rows:  # only durable queues' messages have numbers
                _delete(db, "numbers", gone)
            if marks:
                db.executemany(
                    "INSERT INTO marks VALUES (?, ?) ON CONFLICT (queue) DO "
                    "UPDATE SET upto = max(upto, excluded.upto)",
                    marks,
                )
            if seen:
                _rows(db, "INSERT OR REPLACE INTO seen", 3, seen)
            if unseen:
                db.executemany("DELETE FROM seen WHERE queue = ? AND key = ?", unseen)
            _insert(db, "INSERT INTO pages", 2, pages)
            _delete(db, "pages", unpages)
            if retires:
                _rows(db, "INSERT OR IGNORE INTO retired", 1, retires)
            if gone and self._retired_rows:  # only queues with history retire messages
                _delete(db, "retired", gone)
            if sequences:  # a key's row keeps the greatest number given out, whatever the order
                # (a transaction's numbers are written at commit, after later ones)
                _rows(db, "INSERT INTO sequences", 3, sequences, _GREATEST_SEQUENCE)
            if forgets:  # a number given out after the forgetting is above its floor
                db.executemany(
                    "DELETE FROM sequences WHERE queue = ? AND key = ? AND seq <= ?", forgets
                )
            if forgets or floors:
                highest = _highest_floors(forgets, floors)
                _rows(db, "INSERT INTO floors", 2, highest, _GREATEST_FLOOR)
            if self._before_commit is not None:
                self._before_commit()
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            self.commits.failed()
            self._failed_writes += 1
            if self._failed_writes == 1:
                log.error(
                    "store %s: a write of %d units failed: %s (writes that fail after it are "
                    "counted, and said once one succeeds)",
                    self.path,
                    len(group),
                    exc,
                )
            else:
                log.debug("store %s: a write of %d units failed: %s", self.path, len(group), exc)
            self._hold_removals(held, exc)
            return StoreError(f"the store could not write: {exc}")
        if self._failed_writes:
            log.warning(
                "store %s: writing again, after %d failed writes", self.path, self._failed_writes
            )
            self._failed_writes = 0
        if self._unwritten:
            log.info(
                "MST-1012 : %d acknowledged messages held back by a failed write are removed",
                len(self._unwritten),
            )
            self._unwritten = []
            self.commits.waiting_removals(0)
            self._ledger.clear()
        self.commits.record(time.perf_counter() - started)
        if self._after_commit is not None:
            self._after_commit()
        return None


# Rows go in as one multi-row statement per chunk rather than one statement per row: the
# sqlite3 module releases the GIL around every statement step, and with the event loop
# busy on the other core each release is a thread switch.
_CHUNK = 1000  # rows per statement (5 values a row: well under SQLite's 32766 variables)
_CHUNK_BYTES = 1 << 20  # and about this much message data


def _message_row(m: StoredMessage) -> tuple[Any, ...]:
    """``m``'s values in _MESSAGE_ROW's order, with the checksum of its bytes."""
    return (m.id, m.queue, m.arrival, zlib.crc32(m.data), m.number, m.data)


def _of_stored_queues(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The message ``rows`` whose queue the store still has (see the module rules): a
    queue's deletion (delete_queue, synchronous) removes its row first, so a message whose
    write was under way then is not written after it, where no removal would ever reach it
    and a later queue of that name would recover it."""
    names = list({row[1] for row in rows})
    if len(names) > _CHUNK:
        stored = {name for (name,) in db.execute("SELECT name FROM queues")}
    else:
        marks = ", ".join("?" * len(names))
        sql = f"SELECT name FROM queues WHERE name IN ({marks})"
        stored = {name for (name,) in db.execute(sql, names)}
    if len(stored) == len(names):
        return rows
    return [row for row in rows if row[1] in stored]


def _unwritten(
    enqueues: list[StoredMessage], gone: list[tuple[int]]
) -> tuple[list[StoredMessage], list[tuple[int]]]:
    """``enqueues`` without the messages ``gone`` removes, and ``gone`` without those
    ``enqueues`` writes: in one transaction a message written and removed is neither."""
    removing = {message_id for (message_id,) in gone}
    kept = [m for m in enqueues if m.id not in removing]
    if len(kept) == len(enqueues):
        return enqueues, gone
    writing = {m.id for m in enqueues}
    return kept, [item for item in gone if item[0] not in writing]


def _insert(db: sqlite3.Connection, insert: str, width: int, rows: list[Any]) -> None:
    """``insert`` (``INSERT INTO table [(columns)]``) of ``rows`` (the blob last in each) in
    statements of at most _CHUNK rows and about _CHUNK_BYTES of data, so that big messages
    are not all bound at once."""
    row = "(" + ", ".join("?" * width) + ")"
    chunk: list[Any] = []
    size = 0
    for item in rows:
        chunk.append(item)
        size += len(item[-1])
        if len(chunk) >= _CHUNK or size >= _CHUNK_BYTES:
            _insert_chunk(db, insert, row, chunk)
            chunk, size = [], 0
    if chunk:
        _insert_chunk(db, insert, row, chunk)


def _insert_chunk(
    db: sqlite3.Connection, insert: str, row: str, chunk: list[Any], then: str = ""
) -> None:
    values = [value for item in chunk for value in item]
    db.execute(f"{insert} VALUES " + ", ".join([row] * len(chunk)) + then, values)


def _rows(db: sqlite3.Connection, insert: str, width: int, rows: list[Any], then: str = "") -> None:
    """``insert`` (``INSERT ... INTO table``) of every row, up to _CHUNK rows a statement, in
    order (a later row replaces an earlier one with its key). One statement for many rows,
    not ``executemany``: that steps once a row, giving up and taking back the interpreter's
    lock each time, and the event loop holds it meanwhile (measured: the numbers of a
    durable stream cost the writer 18% of the broker's samples one row at a time)."""
    row = "(" + ", ".join("?" * width) + ")"
    for start in range(0, len(rows), _CHUNK):
        _insert_chunk(db, insert, row, rows[start : start + _CHUNK], then)


def _highest_floors(
    forgets: list[tuple[str, str, int]], floors: list[tuple[str, int]]
) -> list[tuple[str, int]]:
    """Each queue's highest floor among ``forgets`` (queue, key, floor) and ``floors``
    (queue, floor): one floors row a queue, however many keys a group forgot."""
    highest: dict[str, int] = {}
    for queue, floor in [(queue, floor) for queue, _key, floor in forgets] + floors:
        highest[queue] = max(floor, highest.get(queue, floor))
    return list(highest.items())


def _delete(db: sqlite3.Connection, table: str, ids: list[Any]) -> int:
    """Delete the rows of ``ids`` (1-tuples); returns how many there were."""
    removed = 0
    for start in range(0, len(ids), _CHUNK):
        chunk = [item[0] for item in ids[start : start + _CHUNK]]
        sql = f"DELETE FROM {table} WHERE id IN ({', '.join('?' * len(chunk))})"
        removed += db.execute(sql, chunk).rowcount
    return removed


def _stored_numbers(db: sqlite3.Connection) -> tuple[dict[int, int], dict[str, int]]:
    """Each stored message's queue number (its number row's, else its own row's), and per
    queue the highest, read in one pass over the messages without their bytes."""
    numbers: dict[int, int] = {}
    highest: dict[str, int] = {}
    rows = db.execute(
        "SELECT m.id, m.queue, coalesce(n.number, m.number) FROM messages AS m "
        "LEFT JOIN numbers AS n ON n.id = m.id "
        "WHERE n.number IS NOT NULL OR m.number IS NOT NULL"
    )
    for message_id, queue, number in rows:
        numbers[message_id] = number
        if number > highest.get(queue, 0):
            highest[queue] = number
    return numbers, highest


def _stored_schema(db: sqlite3.Connection) -> str | None:
    """The store's schema version, read without writing (None: a new, empty store)."""
    table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    if db.execute(table).fetchone() is None:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return None if row is None else str(row[0])


def _completions(done: list[Completion], error: StoreError | None) -> Callable[[], None]:
    def run() -> None:
        for callback in done:
            callback(error)

    return run


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    """Arguments as JSON, binary and UUID values kept as such (see the module rules)."""
    return json.dumps(dict(arguments), default=_typed)


def _typed(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$binary": value.hex()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    return str(value)


def _arguments_read(text: str) -> Any:
    return json.loads(text, object_hook=_untyped)


def _untyped(value: dict[str, Any]) -> Any:
    if len(value) == 1:
        if isinstance(value.get("$binary"), str):
            return bytes.fromhex(value["$binary"])
        if isinstance(value.get("$uuid"), str):
            return uuid.UUID(value["$uuid"])
    return value
