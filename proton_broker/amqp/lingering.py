"""Lingering close: a connection's socket, closed by the broker, ends in order.

Rules this module owns:

* When the broker is done with a connection whose peer has not closed its side (the broker
  refused it, timed it out, or closed it with an error), what the peer sent and the broker
  will never read is read and dropped, and the socket is shut down for writing: the peer
  reads everything the broker wrote (the SASL outcome, the close frame with its error, the
  protocol header of a refusal) and then the end of the stream. The socket stays open,
  reading and dropping, until the peer closes it too or ``LINGER_SECONDS`` pass.
* Closing a socket with unread input makes the kernel answer with a reset, and a reset can
  make the peer drop what the broker wrote before it: a client that sends its open frame
  straight after its protocol header (rhea, Proton) then reported ``ECONNRESET`` instead of
  the refusal, whenever that frame reached the broker after the socket had closed. This is
  the usual *lingering close* of servers that answer and then hang up.
* At most ``MAX_LINGERING`` sockets linger at once; beyond that a socket is closed at once,
  so a flood of refused connections cannot hold descriptors for long.
"""

from __future__ import annotations

import socket
import time
from typing import Any

LINGER_SECONDS = 2.0  # the longest a socket waits for its peer to close
MAX_LINGERING = 1024  # sockets lingering at once, at most
_READS = 16  # reads of 64 KiB at most per turn (a peer that keeps sending is cut off)


def drain(sock: socket.socket) -> bool:
    """Read and drop what ``sock``'s peer has sent; True when the peer has closed its side
    (or the socket failed), so it needs no lingering."""
    try:
        sock.setblocking(False)
        for _ in range(_READS):
            if not sock.recv(65536):
                return True  # the end of its stream
    except BlockingIOError:
        return False  # nothing more now: it is still sending, or waiting
    except OSError:
        return True
    return False  # still sending after all that


class Lingerer:
    """The sockets lingering now, each a selectable of the broker's poller."""

    def __init__(self, selector: Any) -> None:
        self._selector = selector
        self.sockets: set[Lingering] = set()

    def close(self, sock: Any) -> None:
        """``sock`` (a connection's socket, which its owner closes next) ends in order:
        lingers on a duplicate, if its peer has not closed and there is room."""
        if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_STREAM:
            return  # the injector's pipe
        try:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                return  # a listener
        except OSError:
            return
        if drain(sock) or len(self.sockets) >= MAX_LINGERING:
            return
        try:
            duplicate = sock.dup()
            duplicate.shutdown(socket.SHUT_WR)  # what was written goes, then the end
        except OSError:
            return
        lingering = Lingering(self, duplicate, time.time() + LINGER_SECONDS)
        self.sockets.add(lingering)
        self._selector.add(lingering)

    def done(self, lingering: Lingering) -> None:
        self.sockets.discard(lingering)
        self._selector.remove(lingering)
        lingering.sock.close()


class Lingering:
    """One lingering socket, as the poller sees a selectable: it reads, never writes, and
    has a deadline."""

    reading = True
    writing = False

    def __init__(self, owner: Lingerer, sock: socket.socket, deadline: float) -> None:
        self.owner = owner
        self.sock = sock
        self._deadline = deadline

    def fileno(self) -> int:
        return self.sock.fileno()

    def readable(self) -> None:
        if drain(self.sock):
            self.owner.done(self)

    def expired(self) -> None:
        self.owner.done(self)
