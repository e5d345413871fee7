"""Queue lifetimes: which queues delete themselves, when, and who may use an exclusive queue.

The protocol adapter tells :class:`Lifetimes` when a link attaches to a queue or goes, and
when a connection closes; links and connections are opaque ids here. The rules follow the
Qpid C++ broker (qpidd's ``Queue::checkAutoDelete`` and its AMQP 1.0 session):

* The *controlling link* is the link whose attach created the queue.
* ``delete-on-close``: deleted when the controlling link goes (detach, close, or its
  connection ending), even if other links are attached (they are detached).
* ``delete-if-unused`` (AMQP ``delete-on-no-links``, qpidd's ``auto-delete: true``): deleted
  when no link is attached any more (consumer, browser or producer), once one was.
* ``delete-if-empty`` (``delete-on-no-messages``): deleted when the controlling link is gone
  and the queue holds no messages, checked when the link goes and by the periodic check
  afterwards.
* ``delete-if-unused-and-empty`` (``delete-on-no-links-or-messages``): no links, once one
  was, and no messages.
* An exclusive queue's owning connection counts as a user while it is open (qpidd's
  ``isUnused``), so the two *unused* policies wait for it to close.
* ``qpid.auto_delete_timeout`` N > 0: the deletion waits N seconds and does not happen if
  a link attaches meanwhile or the condition no longer holds then. A link going later
  starts a new wait; ``delete-if-empty``, whose condition is not about links, starts one
  at the next periodic check that finds it empty.
* A queue made without a controlling link (the config file, management, or an attach that
  was refused after creating it): ``delete-on-close`` and ``delete-if-empty`` treat the
  first link that attaches and goes as the controlling link gone. Without that they could
  never be deleted; qpidd has no such queues over AMQP 1.0 because it creates through links.
* Exclusive: the queue belongs to the connection whose attach created it (or, for a queue
  made otherwise or whose owner closed, the next connection whose consumer attaches); a
  consumer from any other connection is refused
  (:class:`~proton_broker.errors.ResourceLocked`). Other producers and browsers are
  neither refused nor owners: qpidd refuses only consuming subscriptions
  (``Session::setupOutgoing``), so a server answers on a client's exclusive reply queue.
  Ownership
  ends when the owning connection closes, as qpidd releases it. Made exclusive on a live
  queue (management's UPDATE), the queue belongs to the connection all its links come
  from (none: the next to attach); links from several connections refuse the change
  (Broker-J's ``switchToConnectionExclusivity``). Made not exclusive, it belongs to none.
* The idle sweep (``broker.idle_queue_timeout`` > 0): a queue made on demand
  (``Queue.auto_created``: by an attach to a new name or by the HTTP gateway) that has had
  no link and no message for that many seconds is deleted by the periodic check. Queues of
  the config file or management, subscription queues and dynamic nodes are never swept;
  an auto-created durable queue is swept like any other (it is empty when swept) but, after
  a restart, it comes back as a declared queue. HTTP long polls are not links: a gateway
  queue with nothing on it may be swept under a waiting poll, which then gets a 404.

Deleting is always :meth:`Broker.delete_queue` with ``force`` (so the store forgets a
durable queue, and what is left goes where deletion sends it), logged first with QUE-1010
and the reason. All of this runs on the event-loop thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proton_broker.errors import BrokerError, InvalidField, ResourceLocked
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import (
    DELETE_IF_EMPTY,
    DELETE_IF_UNUSED,
    DELETE_IF_UNUSED_AND_EMPTY,
    DELETE_ON_CLOSE,
)

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.broker")

_CONTROLLED = (DELETE_ON_CLOSE, DELETE_IF_EMPTY)  # wait for the controlling link
_UNUSED = (DELETE_IF_UNUSED, DELETE_IF_UNUSED_AND_EMPTY)  # wait for no links
_EMPTY = (DELETE_IF_EMPTY, DELETE_IF_UNUSED_AND_EMPTY)  # wait for no messages
# Timers may fire a little before their time by the loop's clock: a deletion due within
# this many seconds counts as due.
_SLACK = 0.01


@dataclass
class _Life:
    """What one queue's lifetime depends on (kept from the first attach to deletion)."""

    links: dict[object, object] = field(default_factory=dict)  # link -> its connection
    controller: object | None = None  # the link whose attach created the queue
    anchor_gone: bool = False  # the controlling link went (or, without one, a link went)
    owner: object | None = None  # exclusive: the connection holding it
    due: float | None = None  # a timed deletion (qpid.auto_delete_timeout)


class Lifetimes:
    """The broker's tracker of links per queue, controlling links, exclusive owners and
    pending deletions (see the module rules)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._lives: dict[Queue, _Life] = {}
        self._owned: dict[object, set[Queue]] = {}  # connection -> exclusive queues it holds
        # Queues whose deletion waits for a time, or for their messages to go: the
        # periodic check looks at these only.
        self._waiting: set[Queue] = set()
        self._idle_since: dict[Queue, float] = {}  # the idle sweep's clock, per queue
        # Asks the event loop to call check() at a time (set by the server): a timed
        # deletion then happens on time rather than at the next periodic check.
        self.wake_at: Callable[[float], object] | None = None
        broker.deletion_watchers.append(self._forget)

    # ---- what the protocol adapter reports -------------------------------------------------

    def may_attach(self, queue: Queue, connection: object) -> None:
        """Refuse a consumer from ``connection`` on an exclusive queue another connection
        holds (browsers and producers are not asked: see the module rules)."""
        life = self._lives.get(queue)
        owner = life.owner if life is not None else None
        if owner is not None and owner != connection:
            raise ResourceLocked(
                f"queue '{queue.name}' is exclusive to the connection that holds it; "
                "links from other connections are refused until it closes"
            )

    def attached(
        self, queue: Queue, link: object, connection: object, created: bool, consumes: bool = True
    ) -> None:
        """``link`` (of ``connection``) attached to ``queue``; ``created``: its attach made
        the queue, so it is the controlling link; ``consumes``: it takes messages (not a
        producer nor a browser). Either makes its connection an exclusive queue's owner
        (a Qpid JMS temporary queue is made by a producer link).
        Cancels a pending timed deletion."""
        life = self._lives.get(queue)
        if life is None:
            life = self._lives[queue] = _Life()
        life.links[link] = connection
        if created:
            life.controller = link
        if queue.settings.exclusive and life.owner is None and (consumes or created):
            life.owner = connection
            self._owned.setdefault(connection, set()).add(queue)
        life.due = None
        self._idle_since.pop(queue, None)
        if queue.settings.lifetime_policy in _EMPTY and self._reason(queue, life) is not None:
            self._waiting.add(queue)  # delete-if-empty: links do not matter, messages do
        else:
            self._waiting.discard(queue)  # until a link goes again

    def made_by(self, queue: Queue, connection: object) -> bool:
        """Whether ``queue``'s controlling link (the attach that made it: a dynamic reply
        queue's receiver) is attached and of ``connection``."""
        life = self._lives.get(queue)
        return (
            life is not None
            and life.controller is not None
            and life.links.get(life.controller) == connection
        )

    def detached(self, queue: Queue, link: object, now: float | None = None) -> None:
        """``link`` left ``queue`` (detach, close, or its connection ending)."""
        life = self._lives.get(queue)
        if life is None or link not in life.links:
            return  # a queue deleted meanwhile, or a link it never counted
        del life.links[link]
        now = time.time() if now is None else now
        if life.controller is None or life.controller == link:
            life.anchor_gone = True
        if queue.auto_created and not life.links and not queue.depth:
            self._idle_since[queue] = now
        self._evaluate(queue, life, now)

    def exclusivity_changed(self, queue: Queue, exclusive: bool) -> None:
        """``queue`` is made exclusive or not on the fly (see the module rules); raises
        :class:`~proton_broker.errors.InvalidField` (Broker-J's 400), and nothing changes,
        when links from several connections are attached to a queue made exclusive."""
        life = self._lives.get(queue)
        if not exclusive:
            if life is not None and life.owner is not None:
                self._owned.get(life.owner, set()).discard(queue)
                life.owner = None
            return
        connections = set(life.links.values()) if life is not None else set()
        if len(connections) > 1:
            raise InvalidField(  # Broker-J's words
                "Unable to set exclusivity policy to CONNECTION as an existing combinations "
                f"of consumers prevents this ({len(connections)} connections have links to "
                f"queue '{queue.name}')",
                "exclusive",
            )
        if connections and life is not None:
            (owner,) = connections
            life.owner = owner
            self._owned.setdefault(owner, set()).add(queue)

    def connection_closed(self, connection: object, now: float | None = None) -> None:
        """``connection`` closed (its links were reported first): the exclusive queues it
        held are free, and those with a lifetime policy are checked again."""
        now = time.time() if now is None else now
        for queue in self._owned.pop(connection, ()):
            life = self._lives.get(queue)
            if life is not None and life.owner == connection:
                life.owner = None
                self._evaluate(queue, life, now)

    def check(self, now: float | None = None) -> None:
        """The periodic check: timed deletions that are due, queues waiting to be empty,
        and the idle sweep."""
        now = time.time() if now is None else now
        for queue in list(self._waiting):
            life = self._lives.get(queue)
            if life is None or not self.broker.is_live(queue):
                self._waiting.discard(queue)
            else:
                self._evaluate(queue, life, now)
        self._sweep(now)

    def links_on(self, queue: Queue) -> int:
        """How many links are attached to ``queue`` (for tests)."""
        life = self._lives.get(queue)
        return len(life.links) if life is not None else 0

    # ---- the rules ----------------------------------------------------------------------

    def _evaluate(self, queue: Queue, life: _Life, now: float) -> None:
        """Delete ``queue`` if its policy says so now, or arm (or keep) its timed deletion."""
        reason = self._reason(queue, life)
        if reason is None:
            life.due = None
            self._waiting.discard(queue)
            return
        if queue.settings.lifetime_policy in _EMPTY and queue.depth:
            life.due = None  # a timed deletion stops when messages come; armed again later
            self._waiting.add(queue)
            return
        timeout = queue.settings.auto_delete_timeout
        if timeout:
            if life.due is None:
                life.due = now + timeout
                if self.wake_at is not None:
                    self.wake_at(life.due)
            if now < life.due - _SLACK:
                self._waiting.add(queue)
                return
            reason += f", for {timeout} s (qpid.auto_delete_timeout)"
        self._delete(queue, reason)

    def _reason(self, queue: Queue, life: _Life) -> str | None:
        """Why ``queue`` may go by its links and owner (None: it may not); whether it is
        empty is asked separately."""
        policy = queue.settings.lifetime_policy
        if policy in _CONTROLLED and life.anchor_gone:
            return f"{policy}: the link that created it is gone"
        if policy in _UNUSED and not life.links and life.owner is None:
            return f"{policy}: no links attached"
        return None

    def _sweep(self, now: float) -> None:
        """Delete queues made on demand that have been idle for ``idle_queue_timeout``."""
        timeout = self.broker.config.broker.idle_queue_timeout
        if not timeout:
            return
        for queue in [q for q in self.broker.queues.values() if q.auto_created]:
            life = self._lives.get(queue)
            if queue.depth or (life is not None and (life.links or life.owner is not None)):
                self._idle_since.pop(queue, None)
                continue
            since = self._idle_since.setdefault(queue, now)
            if now - since >= timeout - _SLACK:
                self._delete(queue, f"idle (no links, no messages) for {timeout:g} s")

    def _delete(self, queue: Queue, reason: str) -> None:
        if not self.broker.is_live(queue):
            return
        log.info('QUE-1010 Auto-delete : "%s" : %s', queue.name, reason)
        try:
            self.broker.delete_queue(queue.name, force=True)
        except BrokerError as exc:  # e.g. another queue's alternate: it stays, and says why
            log.warning('auto-delete of "%s" refused: %s', queue.name, exc.description)

    def _forget(self, queue: Queue) -> None:
        """A queue is being deleted, for whatever reason: nothing here is about it any more."""
        life = self._lives.pop(queue, None)
        if life is not None and life.owner is not None:
            owned = self._owned.get(life.owner)
            if owned is not None:
                owned.discard(queue)
        self._waiting.discard(queue)
        self._idle_since.pop(queue, None)
