"""The memory backend: the store contract with nothing on disk (transient brokers, tests).

Completions run at once, on the caller's thread, which is the event-loop thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proton_broker.store.base import Recovered, Store, StoredMessage, Unit


class MemoryStore(Store):
    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[str, dict[str, Any]] = {}
        self.messages: dict[int, StoredMessage] = {}
        self.sequences: dict[str, dict[str, int]] = {}
        self.floors: dict[str, int] = {}
        self.retired: set[int] = set()
        self.numbers: dict[int, int] = {}
        self.marks: dict[str, int] = {}
        self.seen_ids: dict[str, dict[str, float]] = {}  # queue -> key -> when
        self.exchanges: dict[str, tuple[str, dict[str, Any]]] = {}
        self.bindings: dict[tuple[str, str, str], dict[str, Any]] = {}

    def open(self) -> Recovered:
        numbers = {
            **{m.id: m.number for m in self.messages.values() if m.number is not None},
            **self.numbers,
        }
        return Recovered(
            dict(self.queues),
            sorted(self.messages.values(), key=_by_id),
            {queue: dict(keys) for queue, keys in self.sequences.items()},
            set(self.retired),
            numbers,
            dict(self.marks),
            {queue: sorted(keys.items(), key=_by_time) for queue, keys in self.seen_ids.items()},
            {name: (kind, dict(arguments)) for name, (kind, arguments) in self.exchanges.items()},
            [(*names, dict(arguments)) for names, arguments in self.bindings.items()],
            dict(self.floors),
            self._highest(numbers),
        )

    def _highest(self, numbers: dict[int, int]) -> dict[str, int]:
        """Per queue, the highest of its messages' ``numbers`` (see Recovered.highest)."""
        highest: dict[str, int] = {}
        for message_id, number in numbers.items():
            stored = self.messages.get(message_id)
            if stored is not None and number > highest.get(stored.queue, 0):
                highest[stored.queue] = number
        return highest

    def save_queue(self, name: str, options: Mapping[str, Any]) -> None:
        self.queues[name] = dict(options)

    def delete_queue(self, name: str, moved: Sequence[StoredMessage] = ()) -> None:
        for message in moved:
            self.messages[message.id] = message
        self.queues.pop(name, None)
        self.sequences.pop(name, None)
        self.floors.pop(name, None)
        self.marks.pop(name, None)
        self.seen_ids.pop(name, None)
        for names in [names for names in self.bindings if names[1] == name]:
            del self.bindings[names]
        for message in [m for m in self.messages.values() if m.queue == name]:
            del self.messages[message.id]
            self.numbers.pop(message.id, None)

    def save_exchange(self, name: str, kind: str, arguments: Mapping[str, Any]) -> None:
        self.exchanges[name] = (kind, dict(arguments))

    def delete_exchange(self, name: str) -> None:
        self.exchanges.pop(name, None)
        for names in [names for names in self.bindings if names[0] == name]:
            del self.bindings[names]

    def save_binding(
        self, exchange: str, queue: str, key: str, arguments: Mapping[str, Any]
    ) -> None:
        self.bindings[(exchange, queue, key)] = dict(arguments)

    def delete_binding(self, exchange: str, queue: str, key: str) -> None:
        self.bindings.pop((exchange, queue, key), None)

    def commit(self, unit: Unit) -> None:
        for message in unit.enqueues:
            self.messages[message.id] = message
        self.retired.update(unit.retires)
        for message_id, number in unit.numbers:
            if message_id in self.messages:
                self.numbers[message_id] = number
        for message_id in unit.dequeues:
            self.messages.pop(message_id, None)
            self.retired.discard(message_id)
            self.numbers.pop(message_id, None)
        for queue, key, seq in unit.sequences:  # the greatest, as the SQLite store keeps
            keys = self.sequences.setdefault(queue, {})
            keys[key] = max(seq, keys.get(key, seq))
        self._forget(unit.forgets, unit.floors)
        for queue, upto in unit.marks:
            self.marks[queue] = max(upto, self.marks.get(queue, 0))
        for queue, key, when in unit.seen:
            self.seen_ids.setdefault(queue, {})[key] = when
        for queue, key in unit.unseen:
            self.seen_ids.get(queue, {}).pop(key, None)
        if unit.done is not None:
            unit.done(None)

    def _forget(self, forgets: list[tuple[str, str, int]], floors: list[tuple[str, int]]) -> None:
        """Keys a history forgot, after the unit's numbers (as the SQLite store writes
        them): a key's row goes unless its number is above the floor; and the floors of
        numbers reserved for versions not stored."""
        for queue, key, floor in forgets:
            keys = self.sequences.get(queue, {})
            if keys.get(key, floor + 1) <= floor:
                del keys[key]
        for queue, floor in [*((queue, floor) for queue, _key, floor in forgets), *floors]:
            self.floors[queue] = max(floor, self.floors.get(queue, 0))

    def close(self) -> None:
        pass


def _by_id(message: StoredMessage) -> int:
    return message.id


def _by_time(item: tuple[str, float]) -> float:
    return item[1]
