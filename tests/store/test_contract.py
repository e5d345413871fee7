"""The store contract, run over every backend: what is committed is recovered, in order."""

from __future__ import annotations

import logging
import queue
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from proton_broker.store.base import Recovered, Store, StoredMessage, StoreError, Unit
from proton_broker.store.memory import MemoryStore
from proton_broker.store.sqlite import FILE_NAME, SqliteStore
from tests.store.failing import DiskFullStore


class Backend:
    """A store plus the means to run its completions and reopen it."""

    def __init__(self, make: Callable[[Callable[[Callable[[], None]], None]], Store]) -> None:
        self.posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.make = make
        self.store = make(self.posted.put)

    def settle(self, count: int = 1) -> None:
        """Run the completions the store posted (waiting for them)."""
        for _ in range(count):
            self.posted.get(timeout=10)()

    def commit(self, unit: Unit) -> BaseException | None:
        results: list[BaseException | None] = []
        unit.done = results.append
        self.store.commit(unit)
        if not results:  # a backend that completes later
            self.settle()
        return results[0]

    def reopen(self) -> Recovered:
        """What the store holds when opened again (the memory store lives in-process)."""
        if isinstance(self.store, MemoryStore):
            return self.store.open()
        self.store.close()
        self.store = self.make(self.posted.put)
        return self.store.open()


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        made = Backend(lambda post: MemoryStore())
    else:
        made = Backend(lambda post: SqliteStore(tmp_path, post))
    made.store.open()
    yield made
    made.store.close()


def message(store: Store, queue_name: str, body: bytes, arrival: float = 1.0) -> StoredMessage:
    return StoredMessage(store.next_id(), queue_name, body, arrival)


def test_committed_messages_are_recovered_in_order_with_their_queue(backend: Backend) -> None:
    store = backend.store
    store.save_queue("q", {"qpid.priorities": "10"})
    sent = [message(store, "q", b"m%d" % i, arrival=100.0 + i) for i in range(5)]
    assert backend.commit(Unit(enqueues=sent)) is None
    recovered = backend.reopen()
    assert recovered.queues == {"q": {"qpid.priorities": "10"}}
    assert [(m.queue, m.data, m.arrival) for m in recovered.messages] == [
        ("q", b"m%d" % i, 100.0 + i) for i in range(5)
    ]


def test_dequeued_messages_are_not_recovered(backend: Backend) -> None:
    store = backend.store
    store.save_queue("q", {})
    kept, gone = message(store, "q", b"kept"), message(store, "q", b"gone")
    backend.commit(Unit(enqueues=[kept, gone]))
    backend.commit(Unit(dequeues=[gone.id]))
    recovered = backend.reopen()
    assert [m.data for m in recovered.messages] == [b"kept"]


def test_ids_keep_growing_across_a_restart(backend: Backend) -> None:
    backend.store.save_queue("q", {})
    first = message(backend.store, "q", b"a")
    backend.commit(Unit(enqueues=[first]))
    backend.reopen()
    assert backend.store.next_id() > first.id


def test_deleting_a_queue_forgets_its_messages(backend: Backend) -> None:
    store = backend.store
    store.save_queue("a", {})
    store.save_queue("b", {})
    backend.commit(Unit(enqueues=[message(store, "a", b"x"), message(store, "b", b"y")]))
    store.delete_queue("a")
    recovered = backend.reopen()
    assert list(recovered.queues) == ["b"]
    assert [m.queue for m in recovered.messages] == ["b"]


def test_a_message_whose_queue_was_deleted_before_its_write_is_not_written(tmp_path: Path) -> None:
    posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
    store = SqliteStore(tmp_path, posted.put)
    store.open()
    store.save_queue("q", {})
    store.save_queue("other", {})
    late, kept = message(store, "q", b"late"), message(store, "other", b"kept")
    store.delete_queue("q")  # while their write waited
    done: list[BaseException | None] = []
    store.commit(Unit(enqueues=[late, kept], done=done.append))
    posted.get(timeout=10)()
    assert done == [None]
    store.save_queue("q", {})  # a new queue of that name does not get it
    store.close()
    reopened = SqliteStore(tmp_path, posted.put)
    assert [(m.queue, m.data) for m in reopened.open().messages] == [("other", b"kept")]
    reopened.close()


def test_the_last_sequence_number_of_each_key_is_recovered(backend: Backend) -> None:
    store = backend.store
    store.save_queue("q", {})
    backend.commit(Unit(sequences=[("q", "a", 1), ("q", "b", 7), ("q", "a", 2)]))
    backend.commit(Unit(sequences=[("q", "a", 5)]))
    assert backend.reopen().sequences == {"q": {"a": 5, "b": 7}}
    backend.store.delete_queue("q")
    assert backend.reopen().sequences == {}


def test_a_forgotten_key_loses_its_number_row_and_the_highest_floor_is_recovered(
    backend: Backend,
) -> None:
    store = backend.store
    store.save_queue("q", {})
    backend.commit(Unit(sequences=[("q", "a", 3), ("q", "b", 7), ("q", "c", 2)]))
    # a forgotten at 3; c numbered 9 after it was forgotten (floor 8) in the same unit
    backend.commit(
        Unit(sequences=[("q", "c", 9)], forgets=[("q", "a", 3), ("q", "b", 8), ("q", "c", 8)])
    )
    recovered = backend.reopen()
    assert recovered.sequences == {"q": {"c": 9}}
    assert recovered.floors == {"q": 8}
    backend.store.delete_queue("q")
    assert backend.reopen().floors == {}


def test_a_reserved_key_floor_only_grows_keeps_every_key_row_and_goes_with_the_queue(
    backend: Backend,
) -> None:
    store = backend.store
    store.save_queue("q", {})
    backend.commit(Unit(sequences=[("q", "a", 3)], floors=[("q", 1024), ("q", 900)]))
    backend.commit(Unit(floors=[("q", 1000)], forgets=[("q", "b", 40)]))
    recovered = backend.reopen()
    assert recovered.floors == {"q": 1024}
    assert recovered.sequences == {"q": {"a": 3}}  # a floor forgets no key
    backend.store.delete_queue("q")
    assert backend.reopen().floors == {}


def test_queue_sequence_numbers_are_recovered_and_leave_with_their_message(
    backend: Backend,
) -> None:
    store = backend.store
    store.save_queue("q", {})
    kept, gone = message(store, "q", b"kept"), message(store, "q", b"gone")
    backend.commit(Unit(enqueues=[kept, gone]))
    backend.commit(Unit(numbers=[(kept.id, 4), (gone.id, 9)]))
    backend.commit(Unit(dequeues=[gone.id]))
    assert backend.reopen().numbers == {kept.id: 4}


def test_a_number_written_with_its_message_is_recovered_and_a_later_number_row_wins(
    backend: Backend,
) -> None:
    store = backend.store
    store.save_queue("q", {})
    numbered = StoredMessage(store.next_id(), "q", b"joined first", 1.0, 7)
    renumbered = StoredMessage(store.next_id(), "q", b"renumbered", 1.0, 8)
    unnumbered = message(store, "q", b"written first")
    backend.commit(Unit(enqueues=[numbered, renumbered, unnumbered]))
    backend.commit(Unit(numbers=[(renumbered.id, 20), (unnumbered.id, 21)]))
    assert backend.reopen().numbers == {numbered.id: 7, renumbered.id: 20, unnumbered.id: 21}
    backend.commit(Unit(dequeues=[numbered.id]))
    assert backend.reopen().numbers == {renumbered.id: 20, unnumbered.id: 21}


def test_a_store_of_a_newer_schema_is_refused_before_anything_is_written_to_it(
    tmp_path: Path,
) -> None:
    with sqlite3.connect(tmp_path / FILE_NAME) as db:  # as a newer broker might leave it
        db.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES ('schema', '3');
            CREATE TABLE pages (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
            INSERT INTO pages VALUES (1, x'00');
            """
        )
    with pytest.raises(StoreError, match="has schema 3, this broker reads schema 2"):
        SqliteStore(tmp_path, lambda fn: fn()).open()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert tables == {"meta", "pages", "sqlite_autoindex_meta_1"}
        assert db.execute("SELECT count(*) FROM pages").fetchone() == (1,)


def test_a_store_of_schema_1_is_opened_and_keeps_its_messages_and_numbers(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / FILE_NAME)
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '1');
        CREATE TABLE queues (name TEXT PRIMARY KEY, options TEXT NOT NULL);
        INSERT INTO queues VALUES ('q', '{}');
        CREATE TABLE numbers (id INTEGER PRIMARY KEY, number INTEGER NOT NULL);
        INSERT INTO numbers VALUES (1, 5);
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            queue TEXT NOT NULL,
            arrival REAL NOT NULL,
            crc INTEGER NOT NULL,
            data BLOB NOT NULL
        );
        INSERT INTO messages VALUES (1, 'q', 2.0, 1063113957, x'6f6c64');
        """
    )
    db.commit()
    db.close()
    backend = Backend(lambda post: SqliteStore(tmp_path, post))
    recovered = backend.store.open()
    assert [(m.id, m.data) for m in recovered.messages] == [(1, b"old")]
    assert recovered.numbers == {1: 5}
    added = StoredMessage(backend.store.next_id(), "q", b"new", 3.0, 6)
    backend.commit(Unit(enqueues=[added]))
    recovered = backend.reopen()
    assert [m.data for m in recovered.messages] == [b"old", b"new"]
    assert recovered.numbers == {1: 5, added.id: 6}
    backend.store.close()
    schema = sqlite3.connect(tmp_path / FILE_NAME).execute("SELECT value FROM meta").fetchone()
    assert schema == ("2",)


def test_a_queues_reservation_mark_only_grows_and_goes_with_the_queue(backend: Backend) -> None:
    store = backend.store
    store.save_queue("q", {})
    backend.commit(Unit(marks=[("q", 500), ("q", 300)]))
    backend.commit(Unit(marks=[("q", 400)]))
    assert backend.reopen().marks == {"q": 500}
    backend.store.delete_queue("q")
    assert backend.reopen().marks == {}


def test_seen_message_ids_are_recovered_oldest_first_until_forgotten(backend: Backend) -> None:
    store = backend.store
    store.save_queue("q", {})
    backend.commit(Unit(seen=[("q", "s:b", 20.0), ("q", "s:a", 10.0), ("q", "s:c", 30.0)]))
    backend.commit(Unit(unseen=[("q", "s:c")]))
    assert backend.reopen().seen == {"q": [("s:a", 10.0), ("s:b", 20.0)]}
    backend.store.delete_queue("q")
    assert backend.reopen().seen == {}


def test_a_unit_completes_once_with_no_error(backend: Backend) -> None:
    calls: list[BaseException | None] = []
    backend.store.commit(Unit(enqueues=[message(backend.store, "q", b"x")], done=calls.append))
    if not calls:
        backend.settle()
    assert calls == [None]


# ---- SQLite only: group commit, failures, integrity ---------------------------------------


def test_units_arriving_together_are_committed_in_one_group(tmp_path: Path) -> None:
    posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
    store = SqliteStore(tmp_path, posted.put)
    store.open()
    store.save_queue("q", {})
    done: list[BaseException | None] = []
    for i in range(500):
        store.commit(Unit(enqueues=[message(store, "q", b"%d" % i)], done=done.append))
    while len(done) < 500:
        posted.get(timeout=10)()
    store.close()
    assert done == [None] * 500
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 500


def test_a_failed_write_completes_every_unit_with_an_error_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = DiskFullStore(tmp_path)
    store.open()
    store.save_queue("q", {})
    results: list[BaseException | None] = []
    store.commit(Unit(enqueues=[message(store, "q", b"lost")], done=results.append))
    store.posted.get(timeout=10)()
    assert isinstance(results[0], StoreError) and "disk is full" in str(results[0])
    store.full = False  # space freed: the next write works
    store.commit(Unit(enqueues=[message(store, "q", b"kept")], done=results.append))
    store.posted.get(timeout=10)()
    assert results[1] is None
    store.close()
    reopened = SqliteStore(tmp_path, store.posted.put)
    assert [m.data for m in reopened.open().messages] == [b"kept"]
    reopened.close()


def test_a_message_whose_bytes_changed_on_disk_is_refused_naming_the_file(tmp_path: Path) -> None:
    posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
    store = SqliteStore(tmp_path, posted.put)
    store.open()
    store.save_queue("q", {})
    store.commit(Unit(enqueues=[message(store, "q", b"original")], done=lambda e: None))
    posted.get(timeout=10)()
    store.close()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE messages SET data = ?", (b"altered!",))
    reopened = SqliteStore(tmp_path, posted.put)
    recovered = reopened.open()  # the messages are read (and checked) as they are taken
    with pytest.raises(StoreError, match=f"{FILE_NAME}: message 1 on queue 'q' fails"):
        list(recovered.messages)
    reopened.close()


def test_a_file_that_is_not_a_database_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StoreError, match=FILE_NAME):
        SqliteStore(tmp_path, lambda fn: fn()).open()


def test_acknowledgements_a_full_disk_refused_are_written_once_space_is_freed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DiskFullStore(tmp_path)
    store.full = False
    store.open()
    store.save_queue("q", {})
    results: list[BaseException | None] = []
    kept = [message(store, "q", f"m{i}".encode()) for i in range(3)]
    store.commit(Unit(enqueues=kept, done=results.append))
    store.posted.get(timeout=10)()
    store.full = True
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        store.commit(
            Unit(dequeues=[kept[0].id, kept[1].id], done=results.append, acknowledgements=True)
        )
        store.posted.get(timeout=10)()
    assert "MST-1011 : 2 acknowledged messages could not be removed" in caplog.text
    assert store.commits.snapshot().removals_waiting == 2
    store.full = False  # space freed: the next write carries the held-back removals
    store.commit(Unit(enqueues=[message(store, "q", b"later")], done=results.append))
    store.posted.get(timeout=10)()
    assert store.commits.snapshot().removals_waiting == 0
    store.close()
    reopened = SqliteStore(tmp_path, store.posted.put)
    assert [m.data for m in reopened.open().messages] == [b"m2", b"later"]
    reopened.close()


def test_a_move_a_full_disk_refused_is_not_finished_later_only_its_acknowledgements_are(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DiskFullStore(tmp_path)
    store.full = False
    store.open()
    store.save_queue("q", {})
    store.save_queue("dlq", {})
    kept = [message(store, "q", f"m{i}".encode()) for i in range(3)]
    store.commit(Unit(enqueues=kept, done=lambda error: None))
    store.posted.get(timeout=10)()
    store.full = True
    moved = message(store, "dlq", b"m0 moved")
    results: list[BaseException | None] = []
    store.batching = True  # one group: a move (m0 to dlq) and an acknowledgement (m1)
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        store.commit(Unit(enqueues=[moved], dequeues=[kept[0].id], done=results.append))
        store.dequeue(kept[1].id)
        store.flush()
        store.posted.get(timeout=10)()
    store.batching = False
    assert isinstance(results[0], StoreError)
    assert "MST-1011 : 1 acknowledged messages could not be removed" in caplog.text
    store.full = False  # the next write carries the acknowledgement, not the move
    store.commit(Unit(enqueues=[message(store, "q", b"later")], done=results.append))
    store.posted.get(timeout=10)()
    store.close()
    reopened = SqliteStore(tmp_path, store.posted.put)
    assert [m.data for m in reopened.open().messages] == [b"m0", b"m2", b"later"]
    reopened.close()


def test_acknowledgements_a_full_disk_held_back_until_a_stop_are_finished_at_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DiskFullStore(tmp_path)
    store.full = False
    store.open()
    store.save_queue("q", {})
    kept = [message(store, "q", f"m{i}".encode()) for i in range(4)]
    store.commit(Unit(enqueues=kept, done=lambda error: None))
    store.posted.get(timeout=10)()
    store.full = True
    store.commit(
        Unit(dequeues=[kept[0].id, kept[2].id], done=lambda error: None, acknowledgements=True)
    )
    store.posted.get(timeout=10)()
    store.close()  # stopped before any write could carry the removals
    reopened = SqliteStore(tmp_path, store.posted.put)
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        recovered = reopened.open()
    assert [m.data for m in recovered.messages] == [b"m1", b"m3"]
    assert "MST-1013 : 2 acknowledged messages whose removal a full disk held back" in caplog.text
    reopened.close()
    caplog.clear()
    again = SqliteStore(tmp_path, store.posted.put)  # finished once: not said twice
    with caplog.at_level(logging.WARNING, logger="proton_broker.store"):
        assert [m.data for m in again.open().messages] == [b"m1", b"m3"]
    assert "MST-1013" not in caplog.text
    again.close()


def test_a_store_that_cannot_open_for_a_full_disk_says_what_to_free(tmp_path: Path) -> None:
    class FullAtOpen(SqliteStore):
        def _check(self) -> None:
            raise sqlite3.OperationalError("database or disk is full")

    store = FullAtOpen(tmp_path, lambda fn: None)
    with pytest.raises(StoreError, match=r"the disk holding .* is full \(\d+ bytes free\)"):
        store.open()
    after = SqliteStore(tmp_path, lambda fn: None)
    after.open()  # the lock was let go
    after.close()


def test_durable_exchanges_and_bindings_are_recovered_with_their_arguments(
    backend: Backend,
) -> None:
    store = backend.store
    store.save_queue("q", {})
    store.save_exchange("news", "topic", {"qpid.msg_sequence": True})
    store.save_exchange("match", "headers", {})
    store.save_binding("news", "q", "uk.#", {})
    store.save_binding("match", "q", "red", {"x-match": "all", "colour": "red"})
    store.save_binding("match", "q", "red", {"x-match": "any", "colour": "red"})  # replaces
    recovered = backend.reopen()
    assert recovered.exchanges == {
        "news": ("topic", {"qpid.msg_sequence": True}),
        "match": ("headers", {}),
    }
    assert sorted(recovered.bindings) == [
        ("match", "q", "red", {"x-match": "any", "colour": "red"}),
        ("news", "q", "uk.#", {}),
    ]


def test_binding_arguments_keep_binary_and_uuid_values(backend: Backend) -> None:
    """A headers binding on a binary or UUID value matches the same after a restart."""
    store = backend.store
    store.save_queue("q", {})
    store.save_exchange("match", "headers", {})
    tag = uuid.UUID("12345678-1234-5678-1234-567812345678")
    arguments = {"x-match": "all", "key": b"\x00\xff", "tag": tag, "count": 3}
    store.save_binding("match", "q", "typed", arguments)
    recovered = backend.reopen()
    assert recovered.bindings == [("match", "q", "typed", arguments)]


def test_bindings_go_with_their_binding_their_exchange_or_their_queue(backend: Backend) -> None:
    store = backend.store
    for queue_name in ("a", "b", "c"):
        store.save_queue(queue_name, {})
    store.save_exchange("x", "direct", {})
    store.save_exchange("y", "fanout", {})
    store.save_binding("x", "a", "k", {})
    store.save_binding("x", "a", "other", {})
    store.save_binding("x", "b", "k", {})
    store.save_binding("y", "c", "", {})
    store.delete_binding("x", "a", "other")
    store.delete_queue("b")
    store.delete_exchange("y")
    recovered = backend.reopen()
    assert list(recovered.exchanges) == ["x"]
    assert recovered.bindings == [("x", "a", "k", {})]


def test_a_key_keeps_the_greatest_number_written_for_it_whatever_the_order(
    backend: Backend,
) -> None:
    backend.store.save_queue("q", {})
    backend.commit(Unit(sequences=[("q", "a", 5)]))
    backend.commit(Unit(sequences=[("q", "a", 3), ("q", "b", 2)]))  # a commit's older number
    assert backend.reopen().sequences == {"q": {"a": 5, "b": 2}}
