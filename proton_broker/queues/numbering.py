"""Queue sequence numbers (``x-opt-sequence-number``) and duplicate detection.

Rules this module owns:

* Every message that joins a queue gets the next number, one above the last; numbers are
  never given out twice, also across restarts. A durable queue reserves numbers in the
  store a block at a time (:data:`NUMBER_BLOCK`), the next block when half of the current
  one is used, so a restart skips at most a block (gaps are allowed, reuse is not).
* A stored message's number reaches the disk in one of two ways. A producer's durable
  message joins its queue first, as qpidd's does, and is written with its number in its
  own row; a message written before it joins (a transaction's, a dead letter's, one
  renumbered at recovery) gets a number row when it joins. Until the row with the number
  is on disk, readers stop below it: :attr:`Numbering.readable_end` is that number and
  browsers wait there. A crash before the write either loses the message (its producer was
  never answered) or gives it a new number at recovery, and neither can show a reader one
  number for two messages or two numbers for one. A write that fails releases them too.
  Consumers do not wait: one may take the message before it is on disk, as in qpidd.
* Duplicate detection (Broker-J ``duplicateDetection*``): message ids seen within the
  window (a count and/or seconds) are duplicates; a durable queue's ids are recorded in the
  store as their messages join, and dropped from it as they leave the window.

The store side is a :class:`~proton_broker.queues.ports.Journal`, handed in by the
broker on a durable queue; without one, nothing is written and nothing is reserved.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from proton_broker.message import Message
from proton_broker.queues.duplicates import DuplicateWindow, id_key
from proton_broker.queues.settings import QueueSettings

if TYPE_CHECKING:
    from proton_broker.queues.ports import Journal
    from proton_broker.queues.queue import Queue

NUMBER_BLOCK = 1 << 16
_NEVER = 1 << 64  # the reservation watermark of a queue that keeps nothing (beyond a ulong)

log = logging.getLogger("proton_broker.queues")


class Numbering:
    """The sequence numbers and duplicate-detection window of one queue (``owner``);
    ``written`` is called when stored numbers reach the disk, so waiting readers go on."""

    def __init__(
        self, owner: Queue, settings: QueueSettings, written: Callable[[], object]
    ) -> None:
        self.owner = owner
        self.next = 1  # the number the next message gets
        # When ``next`` reaches the watermark the next block is reserved (_NEVER: no store).
        self.watermark = _NEVER
        self.journal: Journal | None = None
        self._unwritten: deque[Message] = deque()  # joined, number not yet on disk, in order
        self._journaling = False  # inside journal.numbered (a store may complete at once)
        self._written = written
        self.dedupe = (
            DuplicateWindow(settings.duplicate_count, settings.duplicate_seconds, self._unseen)
            if settings.detects_duplicates
            else None
        )

    @property
    def readable_end(self) -> int:
        """The end of what readers may read now: the next number, or the first number still
        being written."""
        unwritten = self._unwritten
        return unwritten[0].number if unwritten else self.next  # type: ignore[return-value]

    def restore(self, floor: int) -> None:
        """At start-up: no number below ``floor`` is given out again; reserve at once."""
        self.next = max(self.next, floor)
        self.reserve()

    def reserve(self) -> None:
        """Reserve numbers up to a block ahead (see the module rules)."""
        if self.journal is None:
            self.watermark = _NEVER
            return
        upto = self.next + NUMBER_BLOCK
        self.watermark = upto - NUMBER_BLOCK // 2
        self.journal.reserve(self.owner, upto)

    def keep(self, journal: Journal) -> None:
        """The queue became durable: numbers and seen ids go to ``journal``."""
        self.journal = journal
        self.watermark = 0  # the first message reserves the first block

    def joined(self, message: Message, key: str | None, writing: bool = False) -> None:
        """A stored message joined: write its number (``writing``: the caller writes it
        with the message, and calls :meth:`stored`) and, when duplicates are detected, its
        id (``key``, from :meth:`window_key`), so that a retry after a crash is still
        recognised."""
        journal = self.journal
        if journal is None:
            return
        if writing:
            message.number_unwritten = True
            self._unwritten.append(message)
        else:
            self.write(message)
        if key is not None and self.dedupe is not None and key in self.dedupe:
            journal.seen(self.owner, key, message.arrival)

    def write(self, message: Message) -> None:
        """Write the number of a stored message (when it joins, or at recovery when it came
        back without one); readers stop below it until it is on disk."""
        journal = self.journal
        if journal is None:
            return
        message.number_unwritten = True
        self._unwritten.append(message)
        self._journaling = True
        try:
            journal.numbered(self.owner, message, functools.partial(self._done, message))
        finally:
            self._journaling = False

    def stored(self, message: Message) -> None:
        """The message :meth:`joined` while being written is on disk, with its number (or
        its write failed: its producer is refused, and readers go on)."""
        self._done(message, None)

    def _done(self, message: Message, error: BaseException | None) -> None:
        """A number is on disk (or could not be written: then it is as safe as it will get,
        and holding readers back for it would stop them for good)."""
        if error is not None:
            log.warning(
                "queue '%s': the number of message %s was not written: %s",
                self.owner.name,
                message.store_id,
                error,
            )
        message.number_unwritten = False
        unwritten = self._unwritten
        while unwritten and not unwritten[0].number_unwritten:
            unwritten.popleft()
        if not self._journaling:
            self._written()

    def window_key(self, message: Message) -> str | None:
        """The duplicate window's key for ``message``'s id; None when duplicates are not
        detected or it has no id. Only then is the id read from the message's bytes (the
        record does not keep it decoded), so a caller reads it once and passes the key on."""
        if self.dedupe is None:
            return None
        message_id = message.message_id
        return None if message_id is None else id_key(message_id)

    def seen(self, key: str | None, now: float | None = None) -> bool:
        """Whether the id ``key`` (from :meth:`window_key`) is in the window."""
        if key is None or self.dedupe is None:
            return False
        return self.dedupe.seen(key, time.time() if now is None else now)

    def remember(self, key: str | None, arrival: float, kept: bool) -> None:
        """The message with the id ``key`` (from :meth:`window_key`) joined: its id is in
        the window from now on."""
        if key is not None and self.dedupe is not None:
            self.dedupe.remember(key, arrival, kept=kept)

    def withdrawn(self, message: Message) -> None:
        """``message`` was taken back off the queue (its transfer refused): its id leaves
        the window, so that the producer's retry is taken."""
        key = self.window_key(message)
        if key is not None:
            self.dedupe.forget(key)  # type: ignore[union-attr] # a key: there is a window

    def restore_seen(self, records: list[tuple[str, float]], now: float | None = None) -> None:
        """At start-up: the stored records, oldest first; those that fell out of the window
        while the broker was down are deleted."""
        if self.dedupe is None:
            for key, _ in records:
                self._unseen(key)
            return
        for key in self.dedupe.restore(records, time.time() if now is None else now):
            self._unseen(key)

    def _unseen(self, key: str) -> None:
        if self.journal is not None:
            self.journal.unseen(self.owner, key)
