"""The SQLite writer's groups: a stream's group stays open for more, a lone write does not
wait, and a message written and removed in one group is neither."""

from __future__ import annotations

import queue
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from proton_broker.store import sqlite as sqlite_store
from proton_broker.store.base import StoredMessage
from proton_broker.store.sqlite import SqliteStore

Post = Callable[[], None]


class TracedStore(SqliteStore):
    """A real SQLite store whose writer connection records every statement it runs."""

    def __init__(self, directory: Path, post: Callable[[Post], None]) -> None:
        super().__init__(directory, post)
        self.statements: list[str] = []

    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        db.set_trace_callback(self.statements.append)
        return db


@pytest.fixture
def posted() -> queue.SimpleQueue[Post]:
    return queue.SimpleQueue()


@pytest.fixture
def store(tmp_path: Path, posted: queue.SimpleQueue[Post]) -> Iterator[TracedStore]:
    made = TracedStore(tmp_path, posted.put)
    made.open()
    made.save_queue("q", {})  # the store writes messages of stored queues only
    made.batching = True  # units wait in the outbox until flush(), as in the broker
    yield made
    made.close()


def send(store: SqliteStore, count: int, done: list[BaseException | None]) -> list[int]:
    """Enqueue ``count`` messages as one pass of the loop would, and hand them over."""
    ids = []
    for _ in range(count):
        message = StoredMessage(store.next_id(), "q", b"body", 1.0)
        store.enqueue(message, done.append)
        ids.append(message.id)
    store.flush()
    return ids


def settle(posted: queue.SimpleQueue[Post], done: list[BaseException | None], count: int) -> None:
    while len(done) < count:
        posted.get(timeout=10)()


def test_a_stream_keeps_its_group_open_for_the_next_pass(
    store: TracedStore, posted: queue.SimpleQueue[Post], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "GROUP_WINDOW", 5.0)
    done: list[BaseException | None] = []
    send(store, sqlite_store.GROUP_STREAM, done)
    time.sleep(0.5)  # the next pass, well within the window
    send(store, 1, done)
    settle(posted, done, sqlite_store.GROUP_STREAM + 1)
    assert done == [None] * (sqlite_store.GROUP_STREAM + 1)
    assert store.commits.snapshot().count == 1


def test_a_lone_write_is_committed_without_waiting_for_more(
    store: TracedStore, posted: queue.SimpleQueue[Post], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "GROUP_WINDOW", 5.0)
    done: list[BaseException | None] = []
    send(store, 1, done)
    time.sleep(0.5)  # a second producer's write, within the window a stream would wait
    send(store, 1, done)
    settle(posted, done, 2)
    assert store.commits.snapshot().count == 2


def test_a_message_removed_in_the_group_that_writes_it_is_neither_written_nor_removed(
    store: TracedStore, posted: queue.SimpleQueue[Post], tmp_path: Path
) -> None:
    done: list[BaseException | None] = []
    kept, taken = (StoredMessage(store.next_id(), "q", body, 1.0) for body in (b"kept", b"taken"))
    store.enqueue(kept, done.append)
    store.enqueue(taken, done.append)
    store.dequeue(taken.id)  # a consumer settled it in the same pass
    store.flush()
    settle(posted, done, 2)
    assert done == [None, None]  # both producers are answered
    written = [s for s in store.statements if s.startswith("INSERT INTO messages")]
    removed = [s for s in store.statements if s.startswith("DELETE FROM messages")]
    assert len(written) == 1  # the statement runs with its values expanded
    assert b"kept".hex() in written[0] and b"taken".hex() not in written[0]
    assert removed == []
    store.close()
    reopened = SqliteStore(tmp_path, posted.put)
    assert [m.data for m in reopened.open().messages] == [b"kept"]
    reopened.close()


def test_a_message_written_in_an_earlier_group_is_removed_in_a_later_one(
    store: TracedStore, posted: queue.SimpleQueue[Post], tmp_path: Path
) -> None:
    done: list[BaseException | None] = []
    (first,) = send(store, 1, done)
    settle(posted, done, 1)
    store.dequeue(first)
    send(store, 1, done)
    settle(posted, done, 2)
    assert any(s.startswith("DELETE FROM messages") for s in store.statements)
    store.close()
    reopened = SqliteStore(tmp_path, posted.put)
    assert [m.id for m in reopened.open().messages] == [first + 1]
    reopened.close()
