"""Duplicate detection: the message-ids a queue has seen lately, so a retry is not enqueued twice.

An at-least-once producer resends a message whose ``accepted`` it never saw; if the queue
remembers the message-id, the copy is answered ``accepted`` and dropped, and the producer
gets exactly-once on the queue.

Rules owned here:

* The window is the last ``count`` ids, or the ids seen in the last ``seconds``, or, with
  both, the ids that are within both bounds (the count bounds the memory, the time makes
  ids older than that forgettable sooner). An id is remembered from its first sighting: a
  duplicate does not extend it.
* Ids are compared with their AMQP type: the ulong ``1`` and the string ``"1"`` are different
  ids, as are a uuid and its text. :func:`id_key` is the text form, used in memory and in the
  store alike.
* Every operation is O(1) amortised: the window is insertion-ordered and forgets from the
  front (an id seen at a later time never goes in front of one seen earlier, except for
  what recovery puts back, which only delays forgetting).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["DuplicateWindow", "id_key"]


def id_key(message_id: Any) -> str:
    """The text that identifies ``message_id`` with its type (see the module rules)."""
    if isinstance(message_id, str):
        return "s:" + message_id
    if isinstance(message_id, bool):
        return "o:" + repr(message_id)
    if isinstance(message_id, int):
        return f"u:{message_id}"
    if isinstance(message_id, (bytes, bytearray, memoryview)):
        return "b:" + bytes(message_id).hex()
    if isinstance(message_id, uuid.UUID):
        return f"g:{message_id}"
    return "o:" + repr(message_id)


class DuplicateWindow:
    """The ids one queue remembers. ``forgotten(key)`` is told when an id that was
    ``kept`` (written to the store) leaves the window, so its record may go too."""

    def __init__(
        self,
        count: int | None,
        seconds: float | None,
        forgotten: Callable[[str], object] | None = None,
    ) -> None:
        self.count = count
        self.seconds = seconds
        self.forgotten = forgotten
        self._seen: OrderedDict[str, tuple[float, bool]] = OrderedDict()  # key -> (time, kept)

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, key: str) -> bool:
        return key in self._seen

    def seen(self, key: str, now: float) -> bool:
        """Whether ``key`` is in the window at time ``now`` (seconds since the epoch)."""
        if self.seconds is not None:
            self._expire(now)
        return key in self._seen

    def remember(self, key: str, now: float, kept: bool = False) -> None:
        """``key`` arrived at ``now``; ``kept``: its record is in the store."""
        if key in self._seen:
            return
        self._seen[key] = (now, kept)
        if self.count is not None and len(self._seen) > self.count:
            self._drop_first()

    def forget(self, key: str) -> None:
        """``key``'s message was taken back (its transfer refused): a retry is not a
        duplicate."""
        entry = self._seen.pop(key, None)
        if entry is not None and entry[1] and self.forgotten is not None:
            self.forgotten(key)

    def restore(self, records: Iterable[tuple[str, float]], now: float) -> list[str]:
        """After a restart: the stored records, oldest first. Returns the keys that fell
        out of the window meanwhile (the caller deletes their records)."""
        stale = []
        for key, when in records:
            if self.seconds is not None and when <= now - self.seconds:
                stale.append(key)
                continue
            self._seen[key] = (when, True)
            self._seen.move_to_end(key)
        while self.count is not None and len(self._seen) > self.count:
            key, _ = self._seen.popitem(last=False)
            stale.append(key)
        return stale

    def _expire(self, now: float) -> None:
        horizon = now - self.seconds  # type: ignore[operator]
        seen = self._seen
        while seen and next(iter(seen.values()))[0] <= horizon:
            self._drop_first()

    def _drop_first(self) -> None:
        key, (_, kept) = self._seen.popitem(last=False)
        if kept and self.forgotten is not None:
            self.forgotten(key)
