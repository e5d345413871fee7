"""Broker-J's ``getConsumers`` and ``getPublishingLinks`` queue operations: who takes
messages from a queue and what puts them on it.

Rules this module owns:

* **getConsumers** answers the names of the links that consume from or browse the queue,
  in the order they attached, as Broker-J names its queue consumers:
  ``<connection>|<session>|<name>``. The connection is its number (the one the console and
  the ``CON-`` log lines show), the session its channel, and the name the link's target
  address, or its link name when the target has none. Broker-J's management converts each
  consumer object to its name, so the answer is a list of texts.
* **getPublishingLinks** answers what sends to the queue, as Broker-J's
  ``Queue.getPublishingLinks`` lists it, each a map:

  - every link attached to the queue's address that sends to it:
    ``{"name": <link name>, "type": "link", "destination": <its target address>}``;
  - every binding of an exchange to the queue, as Broker-J's ``Binding`` value reads:
    ``{"name": <binding key>, "type": "binding", "bindingKey": <binding key>,
    "destination": <the queue>, "arguments": <its arguments>}`` (Broker-J's binding value
    does not name its exchange, so neither does this).

  Links to an exchange, and the anonymous relay, are not the queue's publishing links:
  the exchange's bindings are.
* Both are read-only; the ACL asks ``access`` on the queue, as READ does (Broker-J skips
  its ACL for both).
* The protocol adapter knows the links (:class:`LinkDirectory`); this module only shapes
  the answers. Both are O(links on the broker + bindings of the queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from proton_broker.exchanges.registry import Exchanges

GET_CONSUMERS, GET_PUBLISHING_LINKS = "getConsumers", "getPublishingLinks"
LINK_OPERATIONS = (GET_CONSUMERS, GET_PUBLISHING_LINKS)
LINK, BINDING = "link", "binding"  # Broker-J's PublishingLink types


class ConsumerName(NamedTuple):
    """A consuming link, as Broker-J names a queue consumer."""

    connection: int
    session: int
    name: str  # the link's target address, or its name when the target has none

    def __str__(self) -> str:
        return f"{self.connection}|{self.session}|{self.name}"


class PublishingLink(NamedTuple):
    """A link sending to the queue's address."""

    name: str
    destination: str  # its target address


class LinkDirectory(Protocol):
    """What the protocol adapter tells management about the links on a queue."""

    def consumers_of(self, queue: str) -> list[ConsumerName]:
        """The links consuming from or browsing ``queue``, in the order they attached."""
        ...

    def publishers_to(self, queue: str) -> list[PublishingLink]:
        """The links sending to ``queue``'s address, in the order they attached."""
        ...


def link_operation(
    operation: str, queue: str, links: LinkDirectory | None, exchanges: Exchanges
) -> list[Any]:
    """Answer ``operation`` (one of :data:`LINK_OPERATIONS`) on ``queue``. Without a
    directory (management not reached over AMQP) no links are known."""
    if operation == GET_CONSUMERS:
        return [] if links is None else [str(c) for c in links.consumers_of(queue)]
    senders = [] if links is None else links.publishers_to(queue)
    return [
        {"name": link.name, "type": LINK, "destination": link.destination} for link in senders
    ] + [
        {
            "name": binding.key,
            "type": BINDING,
            "bindingKey": binding.key,
            "destination": binding.queue,
            "arguments": dict(binding.arguments),
        }
        for binding in exchanges.bindings_of(queue)
    ]
