"""Subscriptions: the queue a receiver on an exchange reads from, and how long it lives.

Rules this module owns (qpidd's ``Session::attach`` for an exchange source, with Qpid JMS's
durable and shared subscriptions as Broker-J serves them):

* A receiver whose source is an exchange gets a subscription queue bound to that exchange
  with the keys and arguments the receiver asked for (see ``amqp/subscribing.py``). Its
  name: ``<container-id>_<link-name>`` (qpidd), for a shared subscription the link name
  without Qpid JMS's ``|...`` suffix (so every receiver of one subscription finds one
  queue), and with the ``global`` capability the same without the container id. A shared
  subscription that is not kept ends in ``|volatile``: JMS keeps durable and non-durable
  shared subscriptions of one name apart (Broker-J's ``_/nondurable``).
* Durable (stored, survives a restart) when the terminus is durable (qpidd); kept when its
  last link detaches when the terminus' expiry policy is ``never`` (qpidd's not
  auto-delete), and then removed only when it is unsubscribed: closed (a detach with
  ``closed``) by a link that asked for it kept or looked it up (how Qpid JMS unsubscribes),
  with no other link on it. While other links hold it, that close is answered with
  ``amqp:resource-locked`` and the subscription stays (Broker-J's "There are consumers").
  Kept or not is the subscription's, fixed when it is made.
* A source ``timeout`` T > 0 makes the subscription linger: its queue is deleted T seconds
  after its last link goes, unless a link attaches to it again meanwhile (qpidd's
  ``Session::setupOutgoing``: the queue is auto-delete with that delay, whatever the expiry
  policy, unless its node properties give a delay of their own). qpid::messaging asks for
  120 seconds on a ``{link: {durable: True}}`` receiver, so a reconnecting program finds
  what was published meanwhile. The queue carries it as ``auto-delete`` with
  ``qpid.auto_delete_timeout`` (:mod:`proton_broker.lifetime` deletes it); an unsubscribe
  still deletes it at once.
* The queue is marked as a subscription queue, shared or exclusive, and the mark is stored
  with it. A receiver never takes over a queue that is not a subscription queue: an
  ordinary queue of that name is used only if it is bound as the receiver asks (qpidd) and
  is never deleted or rebound; otherwise the attach is refused with
  ``amqp:resource-locked``.
* A subscription that is not shared has one link at a time (a second takes it over, see
  below). A shared one
  has any number, which compete for its messages. A shared receiver for an exclusive
  subscription, or the reverse, is refused the same way, used or not (Broker-J).
* A link for an exclusive subscription that another link holds takes it over (Broker-J's
  link stealing, AMQP 1.0 2.6.1: a link is named by its container and name, and the
  subscription's name is made of both): the holder is detached with ``amqp:link:stolen``
  and its unsettled messages go back to the subscription, which the new link then reads.
  That is how a Qpid JMS durable subscriber that failed over to a new connection gets its
  subscription back before the broker has seen the old connection time out.
* A subscription queue left with no bindings at all (its exchange deleted, or not stored
  and so gone at a restart while the subscription's queue and messages were) is bound again
  as the next link asks, its messages kept, as qpidd binds a recovered queue again.
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

from proton_broker.errors import BrokerError, ResourceLocked, Unauthorized
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import EXCLUSIVE_SUBSCRIPTION, SHARED_SUBSCRIPTION

if TYPE_CHECKING:
    from proton_broker.broker import Broker

JMS_SUFFIX = "|"  # Qpid JMS names a shared subscription's links <name>|<n>, <name>|global...
VOLATILE = "|volatile"  # a shared subscription that is not kept (see the module rules)


def subscription_name(
    container: str, link: str, shared: bool, global_: bool, kept: bool = True
) -> str:
    """The subscription queue's name (see the module rules)."""
    name = link.split(JMS_SUFFIX, 1)[0] if shared else link
    if shared and not kept:
        name += VOLATILE
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
    linger: int = 0  # seconds it outlives its last link (the source timeout; 0: none)

    @staticmethod
    def binding(key: str, arguments: Mapping[str, Any] | None = None) -> tuple[str, Any]:
        return key, tuple(sorted((arguments or {}).items()))


class Subscriptions:
    """The subscription queues in use: how many links hold each, and which are kept."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._holders: Counter[str] = Counter()

    def attach(self, wanted: Subscription, user: str | None = None) -> Queue:
        """The subscription queue for a new link: the existing one, or made now (and
        bound); see the module rules for sharing and replacing."""
        broker = self.broker
        queue = broker.queues.get(wanted.name)
        if queue is not None:
            queue = self._existing(queue, wanted, user)
        if queue is None:
            mode = SHARED_SUBSCRIPTION if wanted.shared else EXCLUSIVE_SUBSCRIPTION
            options = {**wanted.options, "durable": wanted.durable, "subscription": mode}
            if wanted.linger and "qpid.auto_delete_timeout" not in wanted.options:
                options.update({"auto-delete": True, "qpid.auto_delete_timeout": wanted.linger})
            queue = broker.declare(wanted.name, options, user=user)
            try:
                self._bind(wanted, user)
            except BaseException:
                broker.delete_queue(wanted.name, force=True)  # nothing half made stays
                raise
            queue.subscription_kept = wanted.kept
        self._holders[wanted.name] += 1
        return queue

    def _existing(self, queue: Queue, wanted: Subscription, user: str | None) -> Queue | None:
        """``queue``, named as ``wanted``, if the new link may use it; None once it is
        deleted to be made anew with other bindings; ResourceLocked if neither."""
        name = wanted.name
        held = self._holders[name]
        mode = queue.settings.subscription
        same_bindings = self._bindings(name) == self._wanted(wanted)
        if mode is None:  # an ordinary queue: used as it is, or not at all
            if not same_bindings:
                raise ResourceLocked(
                    f"queue '{name}' exists and is not a subscription to what the link asks for"
                )
            return queue
        if (mode == SHARED_SUBSCRIPTION) != wanted.shared:
            kind = "a shared" if mode == SHARED_SUBSCRIPTION else "an exclusive"
            raise ResourceLocked(f"subscription '{name}' is already in use as {kind} subscription")
        if held and not wanted.shared:
            raise ResourceLocked(f"subscription '{name}' is already in use")
        if same_bindings:
            return queue
        if not self._bindings(name):  # its exchange went (not stored, or deleted): qpidd
            self._bind(wanted, user)  # binds the queue again, its messages kept
            return queue
        if held:
            raise ResourceLocked(f"subscription '{name}' is in use with another topic or selector")
        self.broker.delete_queue(name, force=True, user=user)
        return None

    def _bind(self, wanted: Subscription, user: str | None) -> None:
        for key, arguments in wanted.bindings:
            self.broker.bind(wanted.exchange, wanted.name, key, dict(arguments), user=user)

    def find(self, name: str) -> Queue | None:
        """An existing subscription queue by name (a receiver that looks one up with a
        null source, as Qpid JMS does to unsubscribe), or None."""
        queue = self.broker.queues.get(name)
        return queue if queue is not None and queue.settings.subscription else None

    def in_use(self) -> dict[str, int]:
        """The subscriptions receivers hold now: name -> how many links."""
        return dict(self._holders)

    def stealable(self, name: str) -> bool:
        """Whether a new link for ``name`` takes it from the link holding it (see the
        module rules): an exclusive subscription that a link holds now."""
        queue = self.broker.queues.get(name)
        return (
            self._holders[name] > 0
            and queue is not None
            and queue.settings.subscription == EXCLUSIVE_SUBSCRIPTION
        )

    def hold(self, name: str) -> None:
        """A link holds ``name`` without asking for it again (the null-source lookup)."""
        self._holders[name] += 1

    def detach(
        self, name: str, unsubscribe: bool, stolen: bool = False, user: str | None = None
    ) -> BrokerError | None:
        """A link on subscription ``name`` went (``unsubscribe``: closed by a link that
        asked for it kept or looked it up, on behalf of ``user``; ``stolen``: taken over by
        a new link, so the subscription stays whatever its lifetime). Why an unsubscribe
        was refused (the subscription stays), or None."""
        self._holders[name] -= 1
        queue = self.broker.queues.get(name)
        kept = queue is None or queue.subscription_kept  # recovered from the store: kept
        if self._holders[name] > 0:
            if unsubscribe and kept:
                return ResourceLocked(f"There are active consumers on the subscription '{name}'")
            return None
        del self._holders[name]
        if stolen:  # the thief holds it next
            return None
        if queue is None or not queue.settings.subscription:
            return None  # never an ordinary queue
        lingers = bool(queue.settings.auto_delete_timeout)  # lifetime.py deletes it later
        if unsubscribe:  # the user's own act: the ACL's delete queue, as Broker-J checks it
            try:
                self.broker.delete_queue(name, force=True, user=user)
            except Unauthorized as exc:
                return exc
        elif not kept and not lingers:
            self.broker.delete_queue(name, force=True)
        return None

    def _bindings(self, name: str) -> set[tuple[str, str, tuple[tuple[str, Any], ...]]]:
        return {
            (b.exchange, b.key, tuple(sorted(b.arguments.items())))
            for b in self.broker.exchanges.bindings_of(name)
        }

    @staticmethod
    def _wanted(wanted: Subscription) -> set[tuple[str, str, tuple[tuple[str, Any], ...]]]:
        return {(wanted.exchange, key, arguments) for key, arguments in wanted.bindings}
