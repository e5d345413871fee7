"""The consumer the queue unit tests use: what a queue sees of a subscriber, and a record of
what it was given."""

from __future__ import annotations

import itertools
from typing import Any

from proton_broker.message import Message
from proton_broker.queues.entries import ACQUIRED, Entry
from proton_broker.queues.queue import Queue

_ids = itertools.count(1)


class Taker:
    """A consumer as the queue sees it: some credit and a list of what it got."""

    def __init__(self, credit: int = 0, browse: bool = False) -> None:
        self.id = next(_ids)
        self.credit = credit
        self.browse = browse
        self.got: list[Entry] = []
        # The messages as delivered: an entry lets go of its message once it leaves the
        # queue, so what was sent is kept here, as the protocol adapter sends it at once.
        self.messages: list[Message] = []

    def deliver(self, entry: Entry) -> None:
        assert self.credit > 0, "delivered beyond credit"
        self.credit -= 1
        self.got.append(entry)
        self.messages.append(entry.message)

    def grant(self, queue: Queue, credit: int) -> None:
        """More credit, as a flow frame would give it."""
        self.credit += credit
        queue.credit_granted(self)

    def bodies(self) -> list[bytes]:
        return [m.data for m in self.messages]

    def property_values(self, name: str) -> list[Any]:
        """The application property ``name`` of each message got (None where absent)."""
        return [m.application_properties.get(name) for m in self.messages]


class Told(Taker):
    """A consumer that writes each delivery into a journal the consumers share, so the order
    of deliveries across consumers is known."""

    def __init__(self, journal: list[tuple[Told, Entry]], browse: bool = False) -> None:
        super().__init__(browse=browse)
        self.journal = journal

    def deliver(self, entry: Entry) -> None:
        super().deliver(entry)
        self.journal.append((self, entry))


def check_figures(queue: Queue, sent: int) -> None:
    """The queue's management figures agree with its entries and with the ``sent`` messages
    it was given: the messages consumers hold are the acquired entries, and every message
    sent is either still there or counted as gone."""
    entries = list(queue.entries())
    assert queue.unacknowledged == sum(1 for entry in entries if entry.state == ACQUIRED)
    assert queue.stats.enqueued == sent
    assert queue.removed == sent - queue.depth
