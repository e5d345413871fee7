"""Links on which clients send requests the broker answers itself, with no queue behind
them: the transaction coordinator and the ``$management`` node.

Both take whole messages only (a partial transfer waits for its last frame), settle each
one themselves, and keep the client's credit topped up once it falls below half, so a
client may pipeline requests. Like a producer's link, each advertises
``broker.max_message_size`` on its attach and refuses a larger request before the rest of
it is buffered (``amqp:link:message-size-exceeded``, the link detached), as Broker-J's
coordinator does. What a request means is the subclass's business
(:meth:`ControlLink.handle`).
"""

from __future__ import annotations

from typing import Any

from proton import Delivery, Link

from proton_broker.amqp.conditions import refuse_oversized


class ControlLink:
    """A receiving link of requests; subclasses say what a request does."""

    def __init__(self, link: Link, credit: int, max_size: int) -> None:
        self.link = link
        self.credit = credit
        self.closed = False
        self.max_size = max_size
        link.max_message_size = max_size  # advertised on the attach

    def start(self) -> None:
        self.link.flow(self.credit)

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
        data = self.link.recv(delivery.pending)
        self.link.advance()
        self.handle(delivery, data)
        if self.link.credit < self.credit // 2:
            self.link.flow(self.credit - self.link.credit)

    def handle(self, delivery: Delivery, data: bytes) -> None:
        """Perform one request and settle its delivery."""
        raise NotImplementedError

    def detach(self) -> None:
        self.closed = True
