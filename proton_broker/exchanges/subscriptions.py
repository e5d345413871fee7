"""Subscriptions: the queue a receiver on an exchange reads from, and how long it lives.

Rules this module owns (qpidd's ``Session::attach`` for an exchange source, with Qpid JMS's
durable and shared subscriptions as Broker-J serves them):

* A receiver whose source is an exchange gets a subscription queue bound to that exchange
  with the keys and arguments the receiver asked for (see ``amqp/subscribing.py``). Its
  name: ``<container-id>_<link-name>`` (qpidd), for a shared subscription the link name
  without Qpid JMS's ``|...`` suffix (so every receiver of one subscription finds one
  queue), and with the ``global`` capability the same without the container id.
* Durable (stored, survives a restart) when the terminus is durable (qpidd); kept when its
  last link detaches when the terminus' expiry policy is ``never`` (qpidd's not
  auto-delete), and then removed only when a link closes it (a detach with ``closed``:
  how Qpid JMS unsubscribes) with no other link on it; otherwise it goes with its last link.
* A subscription that is not shared has one link at a time: a second is refused with
  ``amqp:resource-locked`` (Broker-J's "subscription is already in use"). A shared one
  has any number, which compete for its messages.
* Asked for again with other bindings (another topic or selector), an unused subscription
  is replaced: deleted with its messages and made anew (JMS's rule for a durable
  subscription whose selector or topic changed); one in use is refused with
  ``amqp:resource-locked``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proton_broker.errors import ResourceLocked
from proton_broker.queues.queue import Queue

if TYPE_CHECKING:
    from proton_broker.broker import Broker

JMS_SUFFIX = "|"  # Qpid JMS names a shared subscription's links <name>|<n>, <name>|global...


def subscription_name(container: str, link: str, shared: bool, global_: bool) -> str:
    """The subscription queue's name (see the module rules)."""
    name = link.split(JMS_SUFFIX, 1)[0] if shared else link
    return name if shared and global_ else f"{container}_{name}"


@dataclass(frozen=True)
class Subscription:
    """What a receiver on an exchange asks for."""

    name: str  # the subscription queue
    exchange: str
    bindings: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]  # (key, arguments)
    options: Mapping[str, Any] = field(default_factory=dict)  # queue options of the attach
    durable: bool = False  # stored
    kept: bool = False  # outlives its links (expiry policy never)
    shared: bool = False

    @staticmethod
    def binding(key: str, arguments: Mapping[str, Any] | None = None) -> tuple[str, Any]:
        return key, tuple(sorted((arguments or {}).items()))


class Subscriptions:
    """The subscription queues in use: how many links hold each, and which are kept."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._holders: Counter[str] = Counter()
        self._kept: dict[str, bool] = {}  # name -> outlives its links

    def attach(self, wanted: Subscription, user: str | None = None) -> Queue:
        """The subscription queue for a new link: the existing one, or made now (and
        bound); see the module rules for sharing and replacing."""
        broker = self.broker
        queue = broker.queues.get(wanted.name)
        held = self._holders[wanted.name]
        if queue is not None and held and not wanted.shared:
            raise ResourceLocked(f"subscription '{wanted.name}' is already in use")
        if queue is not None and self._bindings(wanted.name) != self._wanted(wanted):
            if held:
                raise ResourceLocked(
                    f"subscription '{wanted.name}' is in use with another topic or selector"
                )
            broker.delete_queue(wanted.name, force=True, user=user)
            queue = None
        if queue is None:
            options = {**wanted.options, "durable": wanted.durable}
            queue = broker.declare(wanted.name, options, user=user)
            try:
                for key, arguments in wanted.bindings:
                    broker.bind(wanted.exchange, wanted.name, key, dict(arguments), user=user)
            except BaseException:
                broker.delete_queue(wanted.name, force=True)  # nothing half made stays
                raise
        self._holders[wanted.name] += 1
        self._kept[wanted.name] = wanted.kept
        return queue

    def find(self, name: str) -> Queue | None:
        """An existing subscription queue by name (a receiver that looks one up with a
        null source, as Qpid JMS does to unsubscribe), or None."""
        queue = self.broker.queues.get(name)
        return queue if queue is not None and self.broker.exchanges.bindings_of(name) else None

    def in_use(self) -> dict[str, int]:
        """The subscriptions receivers hold now: name -> how many links."""
        return dict(self._holders)

    def hold(self, name: str) -> None:
        """A link holds ``name`` without asking for it again (the null-source lookup)."""
        self._holders[name] += 1

    def detach(self, name: str, closed: bool) -> None:
        """A link on subscription ``name`` went (``closed``: closed, not just detached)."""
        self._holders[name] -= 1
        if self._holders[name] > 0:
            return
        del self._holders[name]
        kept = self._kept.pop(name, True)
        if (not kept or closed) and name in self.broker.queues:
            self.broker.delete_queue(name, force=True)

    def _bindings(self, name: str) -> set[tuple[str, str, tuple[tuple[str, Any], ...]]]:
        return {
            (b.exchange, b.key, tuple(sorted(b.arguments.items())))
            for b in self.broker.exchanges.bindings_of(name)
        }

    @staticmethod
    def _wanted(wanted: Subscription) -> set[tuple[str, str, tuple[tuple[str, Any], ...]]]:
        return {(wanted.exchange, key, arguments) for key, arguments in wanted.bindings}
