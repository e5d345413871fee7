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
from collections.abc import Callable, Mapping
from typing import Any

from proton_broker.config import Config
from proton_broker.errors import InvalidField, NotFound
from proton_broker.message import Message
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import (
    ParsedOptions,
    QueueSettings,
    differences,
    parse_options,
    unknown_options_error,
)

log = logging.getLogger("proton_broker.broker")


class Broker:
    """Owns every queue. Used only from the event-loop thread."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.queues: dict[str, Queue] = {}
        self._hooks: dict[str, Any] = {}
        for name, options in self.config.queues.items():
            self.declare(name, options)

    def set_queue_hooks(self, defer: Callable[[Queue], object] | None = None,
                        wake_at: Callable[[float, Queue], object] | None = None) -> None:
        """How the server's event loop drives every queue, present and future: ``defer``
        dispatches a queue later in the loop's pass (:attr:`Queue.defer`), ``wake_at`` runs
        a queue's :meth:`~Queue.release_held` at a given time (:attr:`Queue.wake_at`)."""
        self._hooks = {"defer": defer, "wake_at": wake_at}
        for queue in self.queues.values():
            self._hook(queue)

    def _hook(self, queue: Queue) -> None:
        for name, hook in self._hooks.items():
            setattr(queue, name, hook)

    def declare(self, name: str, options: Mapping[str, Any] | None = None) -> Queue:
        """Create ``name`` with ``options`` or return the existing queue if it matches."""
        return self._get_or_create(name, options, allowed=True)

    def may_create(self, name: str) -> bool:
        broker = self.config.broker
        return broker.auto_create and any(
            fnmatch.fnmatchcase(name, pattern) for pattern in broker.auto_create_patterns
        )

    def resolve(self, name: str | None, options: Mapping[str, Any] | None = None,
                create: bool = True) -> Queue:
        """The queue for ``name``, created on demand (with ``options``) when policy allows.

        Options are checked even when the queue exists: unknown keys, bad values and
        settings that differ from the queue's own are refused with :class:`InvalidField`,
        and nothing is created or changed.
        """
        if not name:
            raise NotFound("no address given")
        return self._get_or_create(name, options, allowed=create and self.may_create(name))

    def _get_or_create(self, name: str, options: Mapping[str, Any] | None,
                       allowed: bool) -> Queue:
        parsed = parse_options(options) if options else None
        if parsed is not None and parsed.unknown:
            raise unknown_options_error(name, parsed.unknown)
        queue = self.queues.get(name)
        if queue is not None:
            if parsed is not None:
                _check_same(queue, parsed)
            return queue
        if not allowed:
            raise NotFound(f"Node not found: {name}")
        settings = parsed.settings if parsed is not None else QueueSettings()
        queue = Queue(name, settings, parsed.echo if parsed is not None else {},
                      default_group=self.config.broker.default_message_group)
        self._hook(queue)
        self.queues[name] = queue
        log.info("QUE-1001 Create : \"%s\" : %s : %s", name, settings.kind,
                 ", ".join(f"{k}={v}" for k, v in (options or {}).items()) or "defaults")
        return queue

    def route(self, message: Message, address: str | None) -> Queue:
        """Enqueue ``message`` on the queue named ``address``."""
        queue = self.resolve(address)
        queue.enqueue(message)
        return queue

    def purge_expired(self, now: float | None = None) -> int:
        """Drop expired messages from every queue (called on a timer)."""
        now = time.time() if now is None else now
        return sum(queue.purge_expired(now) for queue in self.queues.values())


def _check_same(queue: Queue, parsed: ParsedOptions) -> None:
    diffs = differences(queue.settings, parsed)
    if diffs:
        first = next(iter(parsed.given.values()))
        raise InvalidField(f"queue '{queue.name}' exists with different settings: "
                           + "; ".join(diffs), first)
