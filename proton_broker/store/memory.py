"""The memory backend: the store contract with nothing on disk (transient brokers, tests).

Completions run at once, on the caller's thread, which is the event-loop thread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proton_broker.store.base import Recovered, Store, StoredMessage, Unit


class MemoryStore(Store):
    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[str, dict[str, Any]] = {}
        self.messages: dict[int, StoredMessage] = {}
        self.sequences: dict[str, dict[str, int]] = {}
        self.retired: set[int] = set()

    def open(self) -> Recovered:
        return Recovered(dict(self.queues), sorted(self.messages.values(), key=_by_id),
                         {queue: dict(keys) for queue, keys in self.sequences.items()},
                         set(self.retired))

    def save_queue(self, name: str, options: Mapping[str, Any]) -> None:
        self.queues[name] = dict(options)

    def delete_queue(self, name: str) -> None:
        self.queues.pop(name, None)
        self.sequences.pop(name, None)
        for message in [m for m in self.messages.values() if m.queue == name]:
            del self.messages[message.id]

    def commit(self, unit: Unit) -> None:
        for message in unit.enqueues:
            self.messages[message.id] = message
        self.retired.update(unit.retires)
        for message_id in unit.dequeues:
            self.messages.pop(message_id, None)
            self.retired.discard(message_id)
        for queue, key, seq in unit.sequences:
            self.sequences.setdefault(queue, {})[key] = seq
        if unit.done is not None:
            unit.done(None)

    def close(self) -> None:
        pass


def _by_id(message: StoredMessage) -> int:
    return message.id
