"""The removal ledger: held-back acknowledgements, written where a full disk cannot stop
them."""

from __future__ import annotations

from pathlib import Path

from proton_broker.store.removals import CAPACITY, SIZE, RemovalLedger


def test_a_new_ledger_reserves_its_space_and_holds_nothing(tmp_path: Path) -> None:
    ledger = RemovalLedger(tmp_path)
    assert ledger.open() == ([], 0)
    ledger.close()
    assert ledger.path.stat().st_size == SIZE
    assert ledger.path.stat().st_blocks * 512 >= SIZE  # allocated, not a sparse file


def test_what_is_recorded_is_read_back_after_a_reopen_and_clearing_empties_it(
    tmp_path: Path,
) -> None:
    ledger = RemovalLedger(tmp_path)
    ledger.open()
    ledger.record([7, 3, 2**40])
    ledger.close()
    again = RemovalLedger(tmp_path)
    assert again.open() == ([7, 3, 2**40], 3)
    again.clear()
    again.close()
    assert RemovalLedger(tmp_path).open() == ([], 0)


def test_removals_beyond_its_capacity_are_counted_but_not_named(tmp_path: Path) -> None:
    ledger = RemovalLedger(tmp_path)
    ledger.open()
    ledger.record(list(range(CAPACITY + 5)))
    ledger.close()
    ids, total = RemovalLedger(tmp_path).open()
    assert (len(ids), ids[-1], total) == (CAPACITY, CAPACITY - 1, CAPACITY + 5)
