"""Connection quotas: how many connections the broker serves, from one client address, and
how many queues and links one connection may have.

Rules this module owns (each limit is a ``broker`` config key, on by default):

* ``max_connections`` connections may be open at once, ``max_connections_per_address``
  from one client address and ``max_connections_per_user`` as one user (``anonymous``
  counts as a user), unless the ACL file gives that user a ``quota connections`` of its
  own (qpidd's ``--max-connections``, ``--max-connections-per-ip`` and
  ``--max-connections-per-user``, and its ACL quotas; Broker-J's per-port and per-user
  limits). The total and the per-address count take a connection from the moment its
  socket is accepted, before it says a word (as qpidd counts a connection when it is
  created and Broker-J when its port accepts it): a socket that never opens holds a place
  until it ends or the handshake timeout closes it, so a flood of silent sockets meets the
  limits instead of the broker's memory. A socket over either limit is closed at once
  (:meth:`Quotas.accept`). Who the user is is known only from the open, so the per-user
  count takes a connection from its open (:meth:`Quotas.admit`); over it the open is
  answered and then closed with ``amqp:resource-limit-exceeded`` saying which limit.
* A connection may create at most ``max_queues_per_connection`` queues, by attaching to a
  name that does not exist (auto-create) or with a dynamic terminus (temporary queues);
  attaching to queues that exist is never limited. Over it the attach is refused with
  ``amqp:resource-limit-exceeded``. The count is the connection's, over its life: a queue
  it deleted still counts, and it goes with the connection (the queues stay). It bounds
  what one connection can do at once, not what a user keeps: qpidd's
  ``--max-queues-per-user`` counts the queues a user made that exist, as the ACL's
  ``quota queues`` does here (:mod:`proton_broker.security.access`). The broker-wide
  ``max_queues`` is the broker's own rule.
* A connection may have at most ``max_links_per_connection`` links at once (of every kind:
  producers, consumers, coordinators, management); an attach beyond is refused with
  ``amqp:resource-limit-exceeded``. A link counts from its attach until both sides have
  detached it, whatever the broker answered: Proton's engine keeps a link the broker
  refused or detached until its client detaches too, so a client that never answers
  those detaches fills its own count. One whose count reaches twice the limit (it kept
  attaching, refused, without detaching) is closed with the same condition, so what it
  holds in the engine stays bounded (:meth:`Quotas.overrun`). Its sessions are bounded
  by the channel-max of the broker's open frame (``max_sessions_per_connection`` less
  one, as Broker-J's session count limit, 256 by default, sets it), which Proton's engine
  enforces.

Keys are opaque: whatever identifies a connection or a link (the engine objects) and the
client's address as text; nothing here touches Proton.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from proton_broker.config import BrokerSection
from proton_broker.errors import ResourceLimitExceeded


class Quotas:
    """The connections, their client addresses and users, and what each holds."""

    def __init__(self, section: BrokerSection) -> None:
        self.section = section
        self._address: dict[Any, str] = {}  # accepted connection -> its client address
        self._per_address: Counter[str] = Counter()
        self._user: dict[Any, str] = {}  # opened connection -> its user
        self._per_user: Counter[str] = Counter()
        self._created: Counter[Any] = Counter()  # connection -> queues it created
        self._links: dict[Any, set[Any]] = {}  # connection -> links not detached by both

    def accept(self, connection: Any, address: str) -> None:
        """Count a connection whose socket was just accepted, or raise
        ResourceLimitExceeded (it is not counted)."""
        section = self.section
        most, per = section.max_connections, section.max_connections_per_address
        if len(self._address) >= most:
            raise ResourceLimitExceeded(
                f"connection refused: the broker serves {most} connections already "
                "(broker.max_connections)"
            )
        if self._per_address[address] >= per:
            raise ResourceLimitExceeded(
                f"connection refused: {per} connections from {address} are open already "
                "(broker.max_connections_per_address)"
            )
        self._address[connection] = address
        self._per_address[address] += 1

    def admit(self, connection: Any, user: str, user_quota: int | None = None) -> None:
        """Count the user of an accepted connection that opened, or raise
        ResourceLimitExceeded (the user is not counted). ``user_quota``: the user's own
        limit (an ACL quota) instead of the broker's."""
        own = user_quota if user_quota is not None else self.section.max_connections_per_user
        if self._per_user[user] >= own:
            where = "its ACL quota" if user_quota is not None else "broker.max_connections_per_user"
            raise ResourceLimitExceeded(
                f"connection refused: user '{user}' has {own} connections open already ({where})"
            )
        self._user[connection] = user
        self._per_user[user] += 1

    def gone(self, connection: Any) -> None:
        """A connection ended: it no longer counts (nothing happens if it never did)."""
        address = self._address.pop(connection, None)
        if address is not None:
            _uncount(self._per_address, address)
        user = self._user.pop(connection, None)
        if user is not None:
            _uncount(self._per_user, user)
        self._created.pop(connection, None)
        self._links.pop(connection, None)

    def may_attach(self, connection: Any, link: Any) -> None:
        """ResourceLimitExceeded if ``connection`` has as many links as it may, besides
        ``link`` (the one being attached, counted already)."""
        most = self.section.max_links_per_connection
        links = self._links.get(connection, set())
        if len(links) - (link in links) >= most:
            raise ResourceLimitExceeded(
                f"link refused: this connection has {most} links attached already "
                "(broker.max_links_per_connection)"
            )

    def attached(self, connection: Any, link: Any) -> None:
        """``link`` was attached by its client: it counts, whatever the broker answers."""
        self._links.setdefault(connection, set()).add(link)

    def detached(self, connection: Any, link: Any) -> None:
        """Both sides have detached ``link``: it no longer counts."""
        links = self._links.get(connection)
        if links is not None:
            links.discard(link)
            if not links:
                del self._links[connection]

    def overrun(self, connection: Any) -> bool:
        """Whether ``connection`` has twice as many links as it may attach: its client
        keeps attaching beyond its limit and never detaches the links refused."""
        return len(self._links.get(connection, ())) >= 2 * self.section.max_links_per_connection

    def may_create(self, connection: Any, name: str) -> None:
        """ResourceLimitExceeded if ``connection`` has created as many queues as it may."""
        most = self.section.max_queues_per_connection
        if self._created[connection] >= most:
            raise ResourceLimitExceeded(
                f"cannot create queue '{name}': this connection created {most} queues "
                "already (broker.max_queues_per_connection)"
            )

    def created(self, connection: Any) -> None:
        self._created[connection] += 1

    @property
    def open_connections(self) -> int:
        """The connections counted: accepted and not yet ended."""
        return len(self._address)


def _uncount(counter: Counter[Any], key: Any) -> None:
    """One fewer of ``key``; its entry goes at zero (and a key not counted stays absent)."""
    if counter[key] > 1:
        counter[key] -= 1
    else:
        counter.pop(key, None)
