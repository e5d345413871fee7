"""Compaction after a few dead entries, not 1,024: random runs of a few dozen steps then go
through the rebuilding of a queue's arrival log and orderings (queues/entries.py), and the
cursors that must find their place again afterwards."""

from __future__ import annotations

from proton_broker.queues import entries

USUAL = entries._COMPACT_MIN
EARLY = 4


def compact_early() -> None:
    entries._COMPACT_MIN = EARLY


def compact_as_usual() -> None:
    entries._COMPACT_MIN = USUAL
