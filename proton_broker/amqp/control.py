"""Links on which clients send requests the broker answers itself, with no queue behind
them: the transaction coordinator and the ``$management`` node.

Both take whole messages only (a partial transfer waits for its last frame), settle each
one themselves, and keep the client's credit topped up once it falls below half, so a
client may pipeline requests. Like a producer's link, each advertises
``broker.max_message_size`` on its attach and refuses a larger request before the rest of
it is buffered (``amqp:link:message-size-exceeded``, the link detached), as Broker-J's
coordinator does. What a request means is the subclass's business
(:meth:`ControlLink.handle`).

A subclass may withdraw the client's credit (:meth:`ControlLink.withdraw`: the management
node does while the broker's memory budget is full, as every producer's is) and give it back
(:meth:`ControlLink.restore`). While it is withdrawn, the requests in flight then are taken;
one more, from a client that ignores its credit, detaches the link with
``amqp:link:transfer-limit-exceeded`` (AMQP 1.0 2.8.15), as a producer's does (links.py).
"""

from __future__ import annotations

from typing import Any

from proton import Delivery, Link

from proton_broker.amqp.conditions import refuse_beyond_credit, refuse_oversized


class ControlLink:
    """A receiving link of requests; subclasses say what a request does."""

    def __init__(self, link: Link, credit: int, max_size: int) -> None:
        self.link = link
        self.credit = credit
        self.closed = False
        self.max_size = max_size
        link.max_message_size = max_size  # advertised on the attach
        # While credit is withdrawn: the requests that may still come (those in flight
        # then); None while credit is granted.
        self.allowance: int | None = None

    def start(self) -> None:
        if self.may_grant():
            self.link.flow(self.credit)
        else:
            self.allowance = 0  # none granted: none may come

    def may_grant(self) -> bool:
        """Whether the client may have credit now (a subclass may say no)."""
        return True

    def withheld_because(self) -> str:
        """Why credit is withdrawn (for the description of a transfer beyond it)."""
        return "of a limit"

    def withdraw(self) -> None:
        """Take the client's credit back: ``flow(link-credit=0, drain=true)``, as a
        producer's."""
        if self.closed or self.allowance is not None:
            return
        credit = self.link.credit
        self.link.drain_mode = True
        self.link.flow(-max(0, credit))  # Proton only adds: a negative grant zeroes it
        self.allowance = max(0, credit)

    def restore(self) -> None:
        """Give the client its credit back (up to the window)."""
        if self.closed or self.allowance is None or not self.may_grant():
            return
        self.allowance = None
        self.link.drain_mode = False
        self.link.flow(self.credit - self.link.credit)

    def on_delivery(self, dlv: Any) -> None:
        delivery = Delivery.wrap(dlv)
        if not delivery.readable or self.closed:
            return
        if delivery.pending > self.max_size:
            self.closed = True
            refuse_oversized(self.link, delivery, self.max_size)
            return
        if delivery.partial:
            return
        if self.allowance is not None and self.link.credit <= -self.allowance:
            self._exceeded(self.allowance)
            return
        data = self.link.recv(delivery.pending)
        self.link.advance()
        self.handle(delivery, data)
        if self.allowance is None and self.link.credit < self.credit // 2:
            self.link.flow(self.credit - self.link.credit)

    def _exceeded(self, allowance: int) -> None:
        """A request beyond the credit the client was given: the link is detached, the
        request not performed (nor any after it)."""
        self.closed = True
        refuse_beyond_credit(self.link, self.withheld_because(), allowance)

    def handle(self, delivery: Delivery, data: bytes) -> None:
        """Perform one request and settle its delivery."""
        raise NotImplementedError

    def detach(self) -> None:
        self.closed = True
