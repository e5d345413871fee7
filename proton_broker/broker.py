"""The broker: the set of queues, which names may be created on demand, and routing.

This is the only place that decides whether an address resolves to a queue. It knows no
protocol: the AMQP adapter asks it for queues by name and hands it message records.
Node auto-creation follows the Qpid brokers' node policies: a name is created on demand
when ``auto_create`` is on and the name matches one of ``auto_create_patterns``
(shell-style patterns; the Qpid interop suite expects ``qit.*`` and ``test.*`` to work).
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Mapping
from typing import Any

from proton_broker.config import Config
from proton_broker.errors import InvalidField, NotFound
from proton_broker.message import Message
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import QueueSettings, parse_settings

log = logging.getLogger("proton_broker.broker")


class Broker:
    """Owns every queue. Used only from the event-loop thread."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.queues: dict[str, Queue] = {}
        for name, options in self.config.queues.items():
            self.declare(name, options)

    def declare(self, name: str, options: Mapping[str, Any] | None = None) -> Queue:
        """Create ``name`` with ``options`` (refusing unknown ones) or return the existing."""
        existing = self.queues.get(name)
        if existing is not None:
            return existing
        settings, unknown = parse_settings(options or {})
        if unknown:
            keys = ", ".join(sorted(unknown))
            raise InvalidField(f"unknown queue option(s) for '{name}': {keys}", keys)
        return self._create(name, settings)

    def _create(self, name: str, settings: QueueSettings) -> Queue:
        queue = Queue(name, settings)
        self.queues[name] = queue
        log.info("QUE-1001 created queue '%s' %s", name, settings)
        return queue

    def may_create(self, name: str) -> bool:
        broker = self.config.broker
        return broker.auto_create and any(
            fnmatch.fnmatchcase(name, pattern) for pattern in broker.auto_create_patterns
        )

    def resolve(self, name: str | None, create: bool = True) -> Queue:
        """The queue for ``name``, created on demand when policy allows."""
        if not name:
            raise NotFound("no address given")
        queue = self.queues.get(name)
        if queue is not None:
            return queue
        if create and self.may_create(name):
            return self._create(name, QueueSettings())
        raise NotFound(f"Node not found: {name}")

    def route(self, message: Message, address: str | None) -> Queue:
        """Enqueue ``message`` on the queue named ``address``."""
        queue = self.resolve(address)
        queue.enqueue(message)
        return queue

    def purge_expired(self, now: float | None = None) -> int:
        """Drop expired messages from every queue (called on a timer)."""
        now = time.time() if now is None else now
        return sum(queue.purge_expired(now) for queue in self.queues.values())
