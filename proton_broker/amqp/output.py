"""The bound on what the broker holds for a client that does not read: output waits for it.

Proton's engine keeps every delivery the broker sends, framed or not, until the socket takes
it. A client that grants a large credit and then does not read its socket (stuck, or slow)
would otherwise have the broker acquire and copy messages up to its credit into the engine:
the whole queue for a browser, once for each such client, in memory no budget counts.

Rules this module owns:

* A connection's *backlog* is what its consumers and browsers handed to the engine less
  what its socket has taken (the socket's own count, amqp/loop.py). Once it is over
  ``broker.max_connection_backlog`` bytes, each of its consumers that sends is *held*: the
  queue sees it with no credit, so it hands it nothing, and what arrives goes to the others
  or waits on the queue, available. Its held consumers are let go once the backlog is at
  most half the bound, and are then served with the credit their clients gave them. So
  such a client costs the bound, plus what one check period sends (below), plus what the
  kernel's socket buffers take. qpidd likewise produces deliveries only while its output
  buffer has room, and Broker-J stops a consumer while its connection is blocked for
  writing.
* A consumer adds what it sent to the backlog and looks at it every :data:`CHECK_EVERY`
  bytes, not for every message. A connection with held consumers is looked at each time
  its socket is written.
* A held consumer is not out of messages, so its drain waits: a drain that arrives while
  it is held, or that it was serving as it was held, is answered only once it has been let
  go and, served with its credit, finds nothing more on its queue that it may take. Clients
  read a drain answered with credit left as "nothing more now" (Qpid JMS's
  ``receiveNoWait``, Proton's ``drain``, the Spark connector's end of a range), and both
  Qpid brokers answer it only when their queue has nothing more for the link (qpidd's
  ``OutgoingFromQueue::doWork``, Broker-J's ``noMessagesAvailable``). A client that
  drains and then does not read waits for its answer as it waits for its messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

CHECK_EVERY = 64 * 1024  # bytes a consumer sends between two looks at its backlog


class Held(Protocol):
    """A consumer link the gate can hold (amqp/links.py's ConsumerLink)."""

    closed: bool

    def let_go(self) -> None:
        """Its connection has room again: back to the credit its client gave it."""
        ...


class Backlog:
    """What one connection's consumers handed to the engine, and those of them held."""

    __slots__ = ("connection", "handed", "held")

    def __init__(self, connection: Any) -> None:
        self.connection = connection  # its pn_connection_t*
        self.handed = 0  # bytes
        self.held: list[Held] = []


class OutputGate:
    """The backlogs of the broker's connections (see the module rules)."""

    def __init__(self, limit: int, written: Callable[[Any], int]) -> None:
        """``limit``: broker.max_connection_backlog; ``written(connection)``: the bytes that
        connection's socket has taken so far."""
        self.limit = limit
        self.resume = limit // 2
        self._written = written
        self._backlogs: dict[Any, Backlog] = {}
        # pn_connection_t* -> its backlog, while it holds consumers: the loop reads this on
        # every write, so it is empty when none is held
        self.held: dict[Any, Backlog] = {}

    def backlog_of(self, connection: Any) -> Backlog:
        """The backlog its consumers add to (made with its first consumer)."""
        backlog = self._backlogs.get(connection)
        if backlog is None:
            backlog = self._backlogs[connection] = Backlog(connection)
        return backlog

    def sent(self, backlog: Backlog, sent: int, consumer: Held) -> bool:
        """``consumer`` handed ``sent`` more bytes to the engine: hold it (True) if its
        connection's backlog is over the bound."""
        backlog.handed += sent
        if backlog.handed - self._written(backlog.connection) <= self.limit:
            return False
        backlog.held.append(consumer)
        self.held[backlog.connection] = backlog
        return True

    def written(self, connection: Any, written: int) -> None:
        """``connection``'s socket has taken ``written`` bytes in all: let go of its held
        consumers if its backlog is down to half the bound."""
        backlog = self.held.get(connection)
        if backlog is None or backlog.handed - written > self.resume:
            return
        del self.held[connection]
        held, backlog.held = backlog.held, []
        for consumer in held:  # one let go may be held again at once: a new list
            if not consumer.closed:
                consumer.let_go()

    def connection_closed(self, connection: Any) -> None:
        self._backlogs.pop(connection, None)
        self.held.pop(connection, None)
