"""Links on which clients send requests the broker answers itself, with no queue behind
them: the transaction coordinator and the ``$management`` node.

Both take whole messages only (a partial transfer waits for its last frame), settle each
one themselves, and keep the client's credit topped up once it falls below half, so a
client may pipeline requests. What a request means is the subclass's business
(:meth:`ControlLink.handle`).
"""

from __future__ import annotations

from typing import Any

from proton import Delivery, Link


class ControlLink:
    """A receiving link of requests; subclasses say what a request does."""

    def __init__(self, link: Link, credit: int) -> None:
        self.link = link
        self.credit = credit
        self.closed = False

    def start(self) -> None:
        self.link.flow(self.credit)

    def on_delivery(self, dlv: Any) -> None:
        delivery = Delivery.wrap(dlv)
        if not delivery.readable or delivery.partial:
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
