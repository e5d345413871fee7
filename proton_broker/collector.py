"""The broker's use of Python's cyclic garbage collector (docs/performance.md).

Rules owned here:

* Thresholds: the broker process collects its young generation every 50,000 net
  allocations of tracked objects, not Python's 700 (:data:`GC_THRESHOLDS`, set by
  :func:`configure` at start-up). A broker's heap is mostly long-lived queue entries and
  message records; with the default a collection started several times a millisecond at
  full rate.
* Untracked objects: an object that can never be part of a reference cycle needs no
  collector, and a queue that grows by millions of them (a last-value queue keeping every
  key's versions, a deep queue of any type that does not pack) would otherwise have each
  of them walked once by a young collection and once more by the next older one, each
  walk a cache miss on the object and on everything it refers to. Python takes tuples and
  dictionaries of atomic values out of the collector's view by itself, never an instance
  of a class or a list. :func:`untrack` does it for:

  - a message record (:class:`proton_broker.message.Message`), as it is made: it holds
    bytes, numbers, text, tuples shared by many records and, in its side record, AMQP
    values decoded from its bytes, which are trees. Nothing it refers to can refer back
    to it, so no cycle can pass through it.
  - a queue entry (:mod:`proton_broker.queues.entries`), as it is made: numbers, its
    record, its key and its rank (a priority level, a sort key's value). Not a grouped
    entry, whose rank is its group, which keeps entries.
  - the list (or deque) of one key's kept versions in a queue's history: it holds records
    and entries, and only the history's dictionary holds it.

  An untracked object is still freed when its last reference goes (reference counting),
  and an untracked container's references count as references from outside for the
  collector, so what it holds is never freed early. The one thing lost is collecting a
  cycle through it, which is why only objects that cannot be in one are untracked: a rule
  to keep when a slot is added to the record or an entry (``tests/test_collector.py``
  walks what records and entries refer to).
* Without a C compiler at install time (the helper is compiled, ``_collector.pyx``),
  :func:`untrack` does nothing: the broker behaves the same, and a growing queue costs
  its young collections again.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import ModuleType

GC_THRESHOLDS = (50_000, 20, 100)


def configure() -> None:
    """Set the broker process's collector thresholds (see the module rules)."""
    gc.set_threshold(*GC_THRESHOLDS)


def _compiled() -> ModuleType | None:
    """The compiled helper, or None where it was not built."""
    try:
        from proton_broker import _collector
    except ImportError:
        return None
    return _collector


def _leave_tracked(obj: object) -> None:
    """Without the compiled helper: the object stays in the collector's view."""


COMPILED = _compiled()
untrack: Callable[[object], None] = _leave_tracked if COMPILED is None else COMPILED.untrack
