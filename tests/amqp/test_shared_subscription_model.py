"""Shared subscriptions and selectors at random: a Hypothesis state machine subscribes to
``amq.topic`` the way Qpid JMS does, through shared durable, shared non-durable and
exclusive durable subscriptions whose topic pattern and JMS selector it picks at each
attach, and publishes messages whose properties a selector may or may not select
(docs/exchanges.md; selectors: docs/delivery-control.md). It checks what a JMS user relies on:

* a subscription holds every message published while it exists that its pattern and its
  selector select, in order, once; a selector on a property a message lacks selects
  nothing (SQL's unknown), ``<>`` included;
* its links take turns at its messages: the link given credit gets the oldest ones held;
* asked for with another pattern or selector, a subscription nobody reads is replaced
  (its messages go), and one somebody reads is refused with ``amqp:resource-locked`` and
  left as it was (JMS 2.0, and Qpid Broker-J's ``getSubscriptionQueue``);
* a shared non-durable subscription ends with its last link; a durable one stays until
  unsubscribed, which is refused while links read a shared one (the lookup of an
  exclusive one steals its link, as in Broker-J); across a restart a durable one
  keeps its pattern, its selector and its persistent messages.

Every message body is unique, so a body says which message is meant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule
from proton import Described, Disposition, Link, Message, symbol

from tests.amqp.models import SubscriberModel, run_model
from tests.amqp.test_subscription_model import matches

CLIENT_ID = SubscriberModel.CLIENT_ID
SELECTOR = symbol("apache.org:selector-filter:string")
SUBJECTS = ["news.uk", "sport"]
PATTERNS = ["#", "news.*"]
COLOURS = ["red", "blue", None]
WEIGHTS = [1, 9, None]
Properties = dict[str, object]
# A selector, as JMS writes it, and the test's own reading of it (None: no selector).
SELECTORS: dict[str | None, Callable[[Properties], bool]] = {
    None: lambda _: True,
    "colour = 'red'": lambda p: p.get("colour") == "red",
    "colour <> 'red'": lambda p: p.get("colour") is not None and p.get("colour") != "red",
    "weight > 5": lambda p: p.get("weight") is not None and p["weight"] > 5,  # type: ignore[operator]
    "colour IS NULL OR weight < 5": lambda p: (
        p.get("colour") is None or (p.get("weight") is not None and p["weight"] < 5)  # type: ignore[operator]
    ),
}


@dataclass(frozen=True)
class Kind:
    """How Qpid JMS makes one subscription: its link names (the first consumer's, the
    second's), whether it is shared, whether it is kept, and the queue the broker names."""

    links: tuple[str, ...]
    shared: bool
    kept: bool
    queue: str

    def link(self, slot: int) -> str:
        """The name of the consumer link in ``slot`` (the last there is, beyond them)."""
        return self.links[min(slot, len(self.links) - 1)]


KINDS = {
    # createSharedDurableConsumer: links name, name|2
    "feed": Kind(("feed", "feed|2"), shared=True, kept=True, queue=f"{CLIENT_ID}_feed"),
    # createSharedConsumer: links name|volatile1, name|volatile2
    "pool": Kind(
        ("pool|volatile1", "pool|volatile2"),
        shared=True,
        kept=False,
        queue=f"{CLIENT_ID}_pool|volatile",
    ),
    # createDurableSubscriber: one link, named for the subscription
    "solo": Kind(("solo",), shared=False, kept=True, queue=f"{CLIENT_ID}_solo"),
}
MESSAGES = st.tuples(  # subject, colour, weight, persistent
    st.sampled_from(SUBJECTS), st.sampled_from(COLOURS), st.sampled_from(WEIGHTS), st.booleans()
)
KEPT = sorted(name for name, kind in KINDS.items() if kind.kept)


@dataclass
class Subscription:
    """What the subscriber knows of one subscription: whether it exists, the pattern and
    selector it was made with, its attached links by name, and the messages (body,
    persistent) it holds, oldest first."""

    exists: bool = False
    binding: tuple[str, str | None] = ("#", None)
    links: dict[str, Link] = field(default_factory=dict)
    held: list[tuple[str, bool]] = field(default_factory=list)

    def ends(self) -> None:
        self.exists, self.held = False, []


class SharedSubscriptionModel(SubscriberModel):
    def __init__(self) -> None:
        super().__init__()
        self.subscriptions = {name: Subscription() for name in KINDS}

    # ---- steps --------------------------------------------------------------------------

    @initialize(
        bindings=st.lists(
            st.tuples(st.sampled_from(PATTERNS), st.sampled_from(sorted(SELECTORS, key=str))),
            min_size=len(KINDS),
            max_size=len(KINDS),
        )
    )
    def subscribe(self, bindings: list[tuple[str, str | None]]) -> None:
        """Every subscription has a consumer to begin with (the steps then change that)."""
        for name, (pattern, selector) in zip(sorted(KINDS), bindings, strict=True):
            self.attach(name, 0, pattern, selector)

    @rule(messages=st.lists(MESSAGES, min_size=1, max_size=4))
    def publish(self, messages: list[tuple[str, str | None, int | None, bool]]) -> None:
        """Publish a few messages, each with a subject, perhaps a colour and a weight, and
        persistent or not."""
        for subject, colour, weight, durable in messages:
            self.publish_one(subject, colour, weight, durable)

    def publish_one(
        self, subject: str, colour: str | None, weight: int | None, durable: bool
    ) -> None:
        self.made += 1
        body = f"m{self.made}"
        properties: Properties = {}
        if colour is not None:
            properties["colour"] = colour
        if weight is not None:
            properties["weight"] = weight
        message = Message(subject=subject, body=body, durable=durable, properties=properties)
        delivery = self.client.send(self.publisher, message, pump=False)
        assert self.client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
        for subscription in self.subscriptions.values():
            pattern, selector = subscription.binding
            if (
                subscription.exists
                and matches(pattern, subject)
                and SELECTORS[selector](properties)
            ):
                subscription.held.append((body, durable))

    @rule(
        name=st.sampled_from(sorted(KINDS)),
        slot=st.integers(0, 1),
        pattern=st.sampled_from(PATTERNS),
        selector=st.sampled_from(sorted(SELECTORS, key=str)),
    )
    def attach(self, name: str, slot: int, pattern: str, selector: str | None) -> None:
        """A consumer on the subscription, asking for ``pattern`` and ``selector``."""
        kind, subscription = KINDS[name], self.subscriptions[name]
        if slot >= len(kind.links) or kind.links[slot] in subscription.links:
            return  # JMS has one consumer of an exclusive subscription; this one is open
        link_name = kind.links[slot]
        link = self.client.receiver(
            f"amq.topic/{pattern}",
            name=link_name,
            capabilities=["topic", "shared"] if kind.shared else ["topic"],
            durable=kind.kept,
            expiry_never=kind.kept,
            filters=None if selector is None else {"jms": Described(SELECTOR, selector)},
        )
        asked = (pattern, selector)
        if subscription.exists and subscription.binding != asked and subscription.links:
            self.client.wait_closed(link)  # in use: refused, and left as it was
            assert link.remote_condition is not None, f"{name}: another binding taken in use"
            assert link.remote_condition.name == "amqp:resource-locked", link.remote_condition
            link.close()  # the name is free again on this session
            self.client.pump(0.01)
            return
        assert link.remote_source.address is not None, f"{link_name} refused"
        if subscription.exists and subscription.binding != asked:
            subscription.ends()  # replaced, its messages gone
        subscription.exists, subscription.binding = True, asked
        subscription.links[link_name] = link

    @rule(
        name=st.sampled_from(sorted(KINDS)),
        slot=st.integers(0, 1),
        count=st.integers(1, 3),
        accept=st.booleans(),
    )
    def consume(self, name: str, slot: int, count: int, accept: bool) -> None:
        """Credit for the first ``count`` messages the subscription holds on one of its
        links (no more, so that nothing comes unasked later), then accept or release them:
        that link gets the oldest, whichever link took some before."""
        kind, subscription = KINDS[name], self.subscriptions[name]
        self.take(subscription.links.get(kind.link(slot)), subscription.held, count, accept)

    @rule(name=st.sampled_from(sorted(KINDS)), slot=st.integers(0, 1))
    def detach(self, name: str, slot: int) -> None:
        """``consumer.close()``: Qpid JMS detaches a durable subscription's link (the
        subscription stays) and closes a non-durable one's (it ends with its last link)."""
        kind, subscription = KINDS[name], self.subscriptions[name]
        link = subscription.links.pop(kind.link(slot), None)
        if link is None:
            return
        if kind.kept:
            link.detach()  # answered by a detach, which Proton keeps no state for
        else:
            self.close(link)
        left = len(subscription.links)
        self.client.wait(lambda: self.consumers(kind.queue) == left)
        if not kind.kept and not left:
            subscription.ends()

    @rule(name=st.sampled_from(KEPT))
    def unsubscribe(self, name: str) -> None:
        """``session.unsubscribe(name)`` from another connection of the same client: a
        lookup with a null source, then a close; refused while links read a shared one.
        The lookup of an exclusive one takes its link's name, so it steals the link
        (Broker-J's link stealing) and the unsubscribe goes ahead."""
        subscription = self.subscriptions[name]
        other = self.broker.client(container=CLIENT_ID)
        try:
            lookup = other.receiver(None, name=name, null_source=True)
            if not subscription.exists:
                other.wait_closed(lookup)
                assert lookup.remote_condition.name == "amqp:not-found"
                return
            other.wait(lambda: lookup.remote_source.address)
            assert lookup.remote_source.address == "amq.topic"
            if not KINDS[name].shared:
                for stolen in subscription.links.values():
                    self.client.wait_closed(stolen)
                    assert stolen.remote_condition.name == "amqp:link:stolen"
                    stolen.close()  # the name is free again on this session, once
                    self.client.pump(0.01)  # the close is out (Proton attaches first)
                subscription.links.clear()
            lookup.close()
            other.wait_closed(lookup)
            if subscription.links:
                assert lookup.remote_condition is not None, f"{name} unsubscribed while read"
                assert lookup.remote_condition.name == "amqp:resource-locked"
            else:
                assert lookup.remote_condition is None, lookup.remote_condition
                subscription.ends()
        finally:
            other.close()

    @precondition(lambda self: self.made > 0)
    @rule()
    def restart(self) -> None:
        self.restart_broker()
        for name, subscription in self.subscriptions.items():
            subscription.links.clear()
            if KINDS[name].kept:
                subscription.held = self.persistent(subscription.held)
            else:
                subscription.ends()

    @rule()
    def check(self) -> None:
        """Every subscription that exists holds what the model says, browsed by its queue's
        name so that nothing is taken; none that ended is left."""
        for name, subscription in self.subscriptions.items():
            queue = KINDS[name].queue
            exists = self.exists(queue)
            assert exists == subscription.exists, f"{queue} exists: {exists}"
            if exists:
                expected = [body for body, _ in subscription.held]
                assert self.browsed(queue, len(expected)) == expected, name


def test_shared_subscriptions_and_selectors_keep_their_promises_at_random() -> None:
    run_model(SharedSubscriptionModel, steps=25, examples=12)  # about 3.5 s each


@pytest.mark.soak
def test_shared_subscriptions_and_selectors_keep_their_promises_at_random_for_longer() -> None:
    run_model(SharedSubscriptionModel, steps=25, examples=500)
