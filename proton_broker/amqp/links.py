"""Link endpoints: producers (links the broker receives on) and consumers (links it sends on).

This is the broker's hot path. Transfers, dispositions and credit are handled here straight
from Proton's C engine through cffi (``cproton_ffi.lib``), without building Python
``Event``/``Delivery`` wrappers: that per-event wrapping is what makes a plain reactor
broker slow (see the README's performance section). Everything here runs on the event-loop
thread, one call per engine event, and the engine objects (links, deliveries) are used only
while the owning state object holds a reference to the link's Python wrapper, so their
memory cannot be reused underneath us.

Rules owned here:
* a producer is granted ``window`` credits and topped up when it falls below half;
* a transfer is accepted only after the message is on its queue; a malformed transfer
  detaches the link with ``amqp:decode-error`` and is not stored;
* a consumer never receives more than its credit; drain is answered at once;
* a consumer's unsettled deliveries go back to the queue when its link goes away.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

from cproton_ffi import ffi, lib
from proton import Condition, Delivery, Link

from proton_broker.amqp.codec import DecodeError, parse_message, redelivered
from proton_broker.amqp.conditions import DECODE_ERROR, condition_for
from proton_broker.errors import BrokerError
from proton_broker.queues.queue import Entry, Queue

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.amqp")

PN_ACCEPTED = lib.PN_ACCEPTED
PN_REJECTED = lib.PN_REJECTED
PN_RELEASED = lib.PN_RELEASED
PN_MODIFIED = lib.PN_MODIFIED

_ids = itertools.count(1)


def close_link(link: Link, name: str, description: str, info: dict[str, Any] | None = None) -> None:
    """Detach ``link`` (closing) with an error condition."""
    link.condition = Condition(name, description, info)
    link.close()


class ProducerLink:
    """A link on which a client sends messages to a queue (or, anonymous, to any address)."""

    def __init__(self, link: Link, broker: Broker, queue: Queue | None, window: int) -> None:
        self.link = link
        self.impl = link._impl
        self.broker = broker
        self.queue = queue  # None: anonymous relay, route each message by its 'to'
        self.window = window
        self.closed = False

    def start(self) -> None:
        lib.pn_link_flow(self.impl, self.window)

    def on_delivery(self, dlv: Any) -> None:
        """A transfer arrived (or progressed): store complete messages and settle them."""
        if not lib.pn_delivery_readable(dlv) or lib.pn_delivery_partial(dlv):
            return  # wait for the last frame; Proton buffers the partial message
        impl = self.impl
        if lib.pn_delivery_aborted(dlv):
            lib.pn_delivery_settle(dlv)
            return
        size = lib.pn_delivery_pending(dlv)
        buf = ffi.new("char[]", size)
        lib.pn_link_recv(impl, buf, size)
        data = ffi.buffer(buf, size)[:]
        lib.pn_link_advance(impl)
        try:
            message = parse_message(data)
        except DecodeError as exc:
            self._refuse_malformed(dlv, str(exc))
            return
        try:
            queue = self.queue
            if queue is None:
                self.broker.route(message, message.to)
            else:
                queue.enqueue(message)
        except BrokerError as exc:
            self._reject(dlv, exc)
        else:
            if not lib.pn_delivery_settled(dlv):
                lib.pn_delivery_update(dlv, PN_ACCEPTED)
            lib.pn_delivery_settle(dlv)
        if lib.pn_link_credit(impl) < self.window >> 1:
            lib.pn_link_flow(impl, self.window - lib.pn_link_credit(impl))

    def _reject(self, dlv: Any, exc: BrokerError) -> None:
        """Settle the transfer as rejected, carrying the error (e.g. an unknown 'to')."""
        name, description, info = condition_for(exc)
        delivery = Delivery.wrap(dlv)
        delivery.local.condition = Condition(name, description, info)
        delivery.update(Delivery.REJECTED)
        delivery.settle()

    def _refuse_malformed(self, dlv: Any, why: str) -> None:
        description = f"malformed message: {why}"
        log.warning("QUE-1006 %s on link '%s': %s", DECODE_ERROR, self.link.name, description)
        delivery = Delivery.wrap(dlv)
        delivery.local.condition = Condition(DECODE_ERROR, description)
        delivery.update(Delivery.REJECTED)
        delivery.settle()
        close_link(self.link, DECODE_ERROR, description)

    def detach(self) -> None:
        self.closed = True


class ConsumerLink:
    """A link on which the broker sends a queue's messages to a client.

    Implements the queue's ``Consumer`` protocol: ``credit`` mirrors the engine's link
    credit, and ``deliver`` sends one entry.
    """

    def __init__(self, link: Link, queue: Queue, browse: bool) -> None:
        self.id = next(_ids)
        self.link = link
        self.impl = link._impl
        self.queue = queue
        self.browse = browse
        self.presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        self.credit = 0
        self.unsettled: dict[Any, Entry] = {}
        self._tags = itertools.count()
        self.closed = False

    def deliver(self, entry: Entry) -> None:
        message = entry.message
        data = message.data
        if entry.delivery_count != message.delivery_count:
            data = redelivered(message, entry.delivery_count)
        impl = self.impl
        tag = b"%x" % next(self._tags)
        dlv = lib.pn_delivery(impl, (len(tag), ffi.from_buffer(tag)))
        lib.pn_link_send(impl, data, len(data))
        lib.pn_link_advance(impl)
        self.credit -= 1
        if self.browse:
            lib.pn_delivery_settle(dlv)
        elif self.presettled:
            lib.pn_delivery_settle(dlv)
            self.queue.settle(entry)  # at-most-once: sent settled counts as consumed
        else:
            self.unsettled[dlv] = entry

    def on_flow(self) -> None:
        """The client changed our credit (or asked us to drain)."""
        impl = self.impl
        self.credit = lib.pn_link_credit(impl)
        if self.credit > 0:
            self.queue.credit_granted(self)
        if lib.pn_link_get_drain(impl):
            lib.pn_link_drained(impl)
            self.credit = 0

    def on_delivery(self, dlv: Any) -> None:
        """The client updated a delivery: apply its outcome to the queue entry."""
        entry = self.unsettled.get(dlv)
        if entry is None:
            return
        state = lib.pn_delivery_remote_state(dlv)
        queue = self.queue
        if state == PN_ACCEPTED:
            queue.settle(entry)
        elif state == PN_RELEASED:
            queue.release(entry)
        elif state == PN_MODIFIED:
            remote = lib.pn_delivery_remote(dlv)
            failed = bool(lib.pn_disposition_is_failed(remote))
            here = bool(lib.pn_disposition_is_undeliverable(remote))
            queue.release(entry, delivery_failed=failed,
                          undeliverable_for=self.id if here else None)
        elif state == PN_REJECTED:
            queue.reject(entry)
        elif lib.pn_delivery_settled(dlv):
            queue.settle(entry)  # settled with no outcome: treated as accepted, as Qpid does
        else:
            return  # a non-terminal state (received): keep waiting
        del self.unsettled[dlv]
        lib.pn_delivery_settle(dlv)

    def detach(self) -> None:
        """Return unsettled messages to the queue (in order, delivery count +1)."""
        if self.closed:
            return
        self.closed = True
        self.queue.unsubscribe(self)
        entries = sorted(self.unsettled.values(), key=lambda e: e.seq)
        self.unsettled.clear()
        for entry in entries:
            self.queue.release(entry, delivery_failed=True)
