"""The last-value (LVQ) index: for each key, the newest entry.

Rules owned here (after Qpid Broker-J's ``LastValueQueueList`` and the Qpid C++ LVQ):

* The key is the text of the application property named by the queue's LVQ key; keys are
  compared whole (``"1"`` and ``"10"`` are different keys).
* A message without the property is never replaced and never replaces another (Broker-J
  and Artemis; the C++ broker conflates such messages under ``""``, reported as a bug).
* Replacing is O(1): one dict lookup. The queue decides what happens to the older entry
  (see :meth:`proton_broker.queues.queue.Queue.enqueue`).
"""

from __future__ import annotations

from proton_broker.message import property_text
from proton_broker.queues.entries import Entry


class LastValueIndex:
    """Maps each key to its newest entry."""

    __slots__ = ("property", "_latest")

    def __init__(self, property_name: str) -> None:
        self.property = property_name
        self._latest: dict[str, Entry] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def replace(self, entry: Entry) -> Entry | None:
        """Record ``entry`` as its key's newest; return the entry it supersedes, if any.
        The queue's history reads the same property first and sets ``entry.key``: it is not
        read twice."""
        key = entry.key
        if key is None:
            key = property_text(entry.message.application_property(self.property))
            if key is None:
                return None
            entry.key = key  # type: ignore[misc] # a last-value queue's entries are keyed
        older = self._latest.get(key)
        self._latest[key] = entry
        return older

    def forget(self, entry: Entry) -> None:
        """``entry`` left the queue: if it was its key's newest, the key has none now."""
        if entry.key is not None and self._latest.get(entry.key) is entry:
            del self._latest[entry.key]

    def latest(self, key: str) -> Entry | None:
        return self._latest.get(key)
