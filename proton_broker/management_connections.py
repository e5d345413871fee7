"""Broker-J's connections on ``$management``: ``org.apache.qpid.Connection`` entities, which
QUERY lists, READ reads, ``getStatistics`` counts and DELETE closes.

Rules this module owns:

* A connection is an entity from the moment its client's open has been handled until it
  closes. Its name is Broker-J's, ``[<number>] <remote host>:<port>``: the number is the
  one the console and the ``CON-`` log lines give it. READ and DELETE find it by that name,
  by its number alone, or by its ``identity`` (a UUID made from its number and the time it
  opened, so a number used again later names another entity).
* Its attributes are Broker-J's, of what this broker knows: ``clientId`` (the container
  id), ``clientProduct`` and ``clientVersion`` (the ``product`` and ``version`` its open
  announced), ``principal`` (the authenticated user), ``remoteAddress``, ``transport``
  (``TCP`` or ``SSL``), ``port`` (``AMQP`` or ``AMQPS``, the listener), ``protocol``
  (``AMQP_1_0``), ``incoming`` (always true), ``state`` (``ACTIVE``), ``createdTime``
  (milliseconds since the epoch, as every time here), ``localAddress``, and the statistics
  ``sessionCount``, ``messagesIn`` (taken from its producers) and ``messagesOut`` (sent to
  its consumers), both over the connection's whole life, ``bytesIn`` and ``bytesOut`` (what
  its socket carried: a TLS connection's encrypted bytes), ``lastIoTime``, and of its
  transactions ``localTransactionBegins``, ``localTransactionRollbacks``,
  ``localTransactionOpen``, ``oldestTransactionStartTime``, ``transactedMessagesIn`` (the
  transfers sent under them) and ``transactedMessagesOut`` (the outcomes given under them).
  Not kept: the last inbound and outbound message times, which would add a step to every
  message's path.
* DELETE closes it with ``amqp:connection:forced``, as Broker-J's management deletes a
  connection (204). Connections are made by clients: CREATE and UPDATE are refused with
  501, as Broker-J answers for a connection, which is not creatable and has nothing a
  client may change.
* The ACL asks ``access query connection`` of QUERY, READ and ``getStatistics``, and
  ``delete connection`` of DELETE: the rules the web console's connection list and close
  button ask.
* The protocol adapter knows the connections (:class:`ConnectionDirectory`); this module
  only shapes the answers. Each request is O(connections + their links).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from proton_broker.errors import InvalidField, NotFound, NotImplementedByBroker
from proton_broker.management_exchanges import statistics, wanted_statistics

if TYPE_CHECKING:
    from proton_broker.security.access import Access

CONNECTION_TYPE = "org.apache.qpid.Connection"
GET_STATISTICS = "getStatistics"

Facts = Mapping[str, Any]  # one connection, as ConnectionDirectory.connection_figures gives it

# Broker-J's statistics of a connection: what getStatistics answers, and what READ and QUERY
# give after the attributes.
CONNECTION_STATISTICS: dict[str, Callable[[Facts], Any]] = {
    "sessionCount": lambda c: c["sessions"],
    "messagesIn": lambda c: c["messages_in"],
    "messagesOut": lambda c: c["messages_out"],
    "bytesIn": lambda c: c["bytes_in"],
    "bytesOut": lambda c: c["bytes_out"],
    "lastIoTime": lambda c: _millis(c["last_io"]),
    "localTransactionBegins": lambda c: c["transactions_begun"],
    "localTransactionRollbacks": lambda c: c["transactions_rolled_back"],
    "localTransactionOpen": lambda c: c["transactions_open"],
    "oldestTransactionStartTime": lambda c: _millis(c["oldest_transaction"]),
    "transactedMessagesIn": lambda c: c["transacted_in"],
    "transactedMessagesOut": lambda c: c["transacted_out"],
}
CONNECTION_ATTRIBUTES: dict[str, Callable[[Facts], Any]] = {
    "name": lambda c: f"[{c['id']}] {c['address']}",
    "id": lambda c: _identity(c),
    "identity": lambda c: _identity(c),  # Broker-J's name for it
    "object-path": lambda c: f"[{c['id']}] {c['address']}",
    "type": lambda c: CONNECTION_TYPE,
    "clientId": lambda c: c["container"],
    "clientProduct": lambda c: c["product"],
    "clientVersion": lambda c: c["version"],
    "principal": lambda c: c["user"],
    "remoteAddress": lambda c: c["address"],
    "localAddress": lambda c: c["local_address"],
    "transport": lambda c: "SSL" if c["tls"] else "TCP",
    "port": lambda c: "AMQPS" if c["tls"] else "AMQP",
    "protocol": lambda c: "AMQP_1_0",
    "incoming": lambda c: True,
    "state": lambda c: "ACTIVE",
    "createdTime": lambda c: _millis(c["opened"]),
    **CONNECTION_STATISTICS,
}


class ConnectionDirectory(Protocol):
    """What the protocol adapter tells management about the open connections."""

    def connection_figures(self) -> list[dict[str, Any]]:
        """Each open connection: ``id`` (its number, as text), ``address``, ``user``,
        ``container``, ``product``, ``version``, ``tls``, ``sessions``, ``opened``
        (seconds since the epoch), ``messages_in``, ``messages_out`` (over its whole life,
        links that went included), ``local_address``, ``bytes_in``, ``bytes_out``,
        ``last_io`` (seconds since the epoch, or None), and its transactions'
        ``transactions_begun``, ``transactions_rolled_back``, ``transactions_open``,
        ``oldest_transaction`` (when the oldest open one was declared, or None),
        ``transacted_in`` and ``transacted_out``."""
        ...

    def close_connection(self, connection_id: str, user: str, via: str) -> None:
        """Close connection ``connection_id`` with ``amqp:connection:forced``, saying
        ``user`` closed it ``via`` (where); NotFound when none is open with that number."""
        ...


def connection_attributes(facts: Facts, names: list[str] | None = None) -> dict[str, Any]:
    """The named attributes of one connection (all of them without ``names``; a name it
    does not have reads None)."""
    wanted = names if names is not None else list(CONNECTION_ATTRIBUTES)
    return {
        n: CONNECTION_ATTRIBUTES[n](facts) if n in CONNECTION_ATTRIBUTES else None for n in wanted
    }


class ConnectionEntities:
    """READ, DELETE, getStatistics and QUERY of connections."""

    def __init__(self, access: Access, directory: ConnectionDirectory | None) -> None:
        self.access = access
        self.directory = directory  # None: management not reached over AMQP knows none

    def rows(self) -> list[dict[str, Any]]:
        """Every open connection's attributes, by number: what QUERY lists."""
        found = [] if self.directory is None else self.directory.connection_figures()
        return [connection_attributes(c) for c in sorted(found, key=lambda c: int(c["id"]))]

    def handle(
        self, operation: str, properties: Mapping[str, Any], user: str | None
    ) -> tuple[int, str, Any]:
        """(status, description, body) for one operation on a connection."""
        if operation in ("CREATE", "UPDATE"):
            raise NotImplementedByBroker(  # Broker-J's 501: not creatable, nothing to change
                f"{operation} is not an operation on a connection: clients make them, and "
                "DELETE closes one"
            )
        if operation not in ("READ", "DELETE", GET_STATISTICS):
            raise InvalidField(f"unknown operation {operation!r} for type {CONNECTION_TYPE!r}")
        if user is not None:  # asked first: a refused user learns nothing of connections
            if operation == "DELETE":
                self.access.check(user, "delete", "connection", what="close a connection")
            else:
                self.access.check(user, "access", "query", "connection", what="read a connection")
        facts = self._find(properties)
        if operation == "DELETE":
            assert self.directory is not None  # found one
            self.directory.close_connection(facts["id"], user or "the broker", "by management")
            return 204, "Deleted", {}
        if operation == "READ":
            return 200, "OK", connection_attributes(facts)
        return 200, "OK", statistics(CONNECTION_STATISTICS, facts, wanted_statistics(properties))

    def _find(self, properties: Mapping[str, Any]) -> Facts:
        """The connection a request names (by name, number or identity); NotFound."""
        name, identity = properties.get("name"), properties.get("identity")
        if name is None and identity is None:
            raise InvalidField("a connection is named by 'name' or 'identity'", "name")
        wanted = None if name is None else str(name)  # its number may come as a number
        for facts in [] if self.directory is None else self.directory.connection_figures():
            named = CONNECTION_ATTRIBUTES["name"](facts)
            if identity == _identity(facts) or wanted in (named, facts["id"]):
                return facts
        raise NotFound(f"no open connection {name if name is not None else identity}")


def _millis(seconds: float | None) -> int | None:
    """A time as Broker-J gives one: milliseconds since the epoch (None stays None)."""
    return None if seconds is None else int(seconds * 1000)


def _identity(facts: Facts) -> str:
    return str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"proton-broker:connection:{facts['id']}:{facts['opened']}")
    )
