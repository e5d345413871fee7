"""Commit timings: the plain numbers the SQLite writer records for the metrics."""

from __future__ import annotations

from pathlib import Path

from proton_broker.store.base import COMMIT_BOUNDS, CommitClock, StoredMessage, Unit
from tests.store.failing import DiskFullStore


def test_a_duration_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() -> None:
    clock = CommitClock()
    for seconds in (0.0001, 0.0005, 0.0006, 0.003, 10.0):
        clock.record(seconds)
    times = clock.snapshot()
    assert times.count == 5
    assert times.seconds == 0.0001 + 0.0005 + 0.0006 + 0.003 + 10.0
    expected = [0] * len(COMMIT_BOUNDS)
    expected[0] = 2  # le 0.0005, the bound itself included (Prometheus' "le")
    expected[1] = 1  # le 0.001
    expected[3] = 1  # le 0.005
    assert list(times.buckets) == expected  # 10 s is past every bound: in +Inf only


def test_the_sqlite_writer_times_each_commit_and_counts_the_failed_ones(tmp_path: Path) -> None:
    store = DiskFullStore(tmp_path)
    store.open()
    try:
        for body in (b"lost", b"kept"):
            store.commit(
                Unit(
                    enqueues=[StoredMessage(store.next_id(), "q", body, 1.0)],
                    done=lambda error: None,
                )
            )
            store.posted.get(timeout=10)()
            store.full = False
        times = store.commits.snapshot()
        assert (times.count, times.failures) == (1, 1)
        assert times.seconds > 0
        assert sum(times.buckets) <= 1
    finally:
        store.close()
