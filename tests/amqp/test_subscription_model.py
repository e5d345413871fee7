"""Topic subscriptions across detaches and restarts, at random: a Hypothesis state machine
publishes to ``amq.topic`` with subjects, and subscribes, detaches, consumes, unsubscribes
and restarts the broker as Qpid JMS does (link names, durable terminus, expiry ``never``,
an unsubscribe by a null-source lookup; docs/exchanges.md). It checks what a JMS user relies
on:

* a durable subscription gets every message published while it exists whose subject its
  pattern matches, attached or not, in order, once; after a restart the persistent ones
  it had not consumed, and it goes on getting new ones;
* a plain subscription gets what is published while its link is attached, and ends with
  its link (and with a restart);
* after an unsubscribe nothing of the subscription is left: subscribing again starts empty.

Every message body is unique, so a body says which message is meant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from proton import Disposition, Link, Message

from tests.amqp.models import SubscriberModel, run_model

CLIENT_ID = SubscriberModel.CLIENT_ID
SUBJECTS = ["news.uk", "news.uk.sport", "sport", "news.sport"]
PATTERNS = {"news": "news.#", "sport": "*.sport", "plain": "#"}  # subscription -> pattern
KEPT = ("news", "sport")  # durable subscriptions (the others are plain)


def matches(pattern: str, subject: str) -> bool:
    """A topic binding's match: words split at ``.``; ``*`` one word, ``#`` any number."""
    return _match(pattern.split("."), subject.split("."))


def _match(pattern: list[str], words: list[str]) -> bool:
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_match(rest, words[skip:]) for skip in range(len(words) + 1))
    return bool(words) and head in ("*", words[0]) and _match(rest, words[1:])


@dataclass
class Subscription:
    """What a subscriber knows of one subscription: whether it exists, its link while
    attached, and the messages (body, persistent) it holds, oldest first."""

    exists: bool = False
    link: Link | None = None
    held: list[tuple[str, bool]] = field(default_factory=list)


class SubscriptionModel(SubscriberModel):
    def __init__(self) -> None:
        super().__init__()
        self.subscriptions = {name: Subscription() for name in PATTERNS}

    # ---- steps --------------------------------------------------------------------------

    @rule(subject=st.sampled_from(SUBJECTS), durable=st.booleans())
    def publish(self, subject: str, durable: bool) -> None:
        self.made += 1
        body = f"m{self.made}"
        message = Message(subject=subject, body=body, durable=durable)
        delivery = self.client.send(self.publisher, message, pump=False)
        assert self.client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
        for name, subscription in self.subscriptions.items():
            if subscription.exists and matches(PATTERNS[name], subject):
                subscription.held.append((body, durable))

    @rule(name=st.sampled_from(sorted(PATTERNS)))
    def subscribe(self, name: str) -> None:
        subscription = self.subscriptions[name]
        if subscription.link is not None:
            return
        durable = name in KEPT
        subscription.link = self.client.receiver(
            f"amq.topic/{PATTERNS[name]}",
            name=name,
            capabilities=["topic"],
            durable=durable,
            expiry_never=durable,
        )
        assert subscription.link.remote_source.address is not None, f"{name} refused"
        subscription.exists = True

    @rule(name=st.sampled_from(sorted(PATTERNS)), count=st.integers(1, 3), accept=st.booleans())
    def consume(self, name: str, count: int, accept: bool) -> None:
        """Credit for the first ``count`` messages the subscription holds (no more, so that
        nothing comes unasked later), then accept or release them."""
        subscription = self.subscriptions[name]
        self.take(subscription.link, subscription.held, count, accept)

    @rule(name=st.sampled_from(sorted(PATTERNS)))
    def detach(self, name: str) -> None:
        """``consumer.close()``: a durable subscription stays, a plain one ends."""
        subscription = self.subscriptions[name]
        if subscription.link is None:
            return
        subscription.link.detach()  # answered by a detach, which Proton keeps no state for
        self.client.wait(lambda: self.consumers(f"{CLIENT_ID}_{name}") == 0)
        subscription.link = None
        if name not in KEPT:
            self.ended(subscription)

    @rule(name=st.sampled_from(KEPT))
    def unsubscribe(self, name: str) -> None:
        """``session.unsubscribe(name)``: a lookup with a null source, then a close."""
        subscription = self.subscriptions[name]
        if subscription.link is not None:
            return  # JMS refuses to unsubscribe a subscription in use
        lookup = self.client.receiver(None, name=name, null_source=True)
        if subscription.exists:
            self.client.wait(lambda: lookup.remote_source.address)
            assert lookup.remote_source.address == "amq.topic"
            lookup.close()
            self.client.wait_closed(lookup)
            assert lookup.remote_condition is None, lookup.remote_condition
        else:
            self.client.wait_closed(lookup)
            assert lookup.remote_condition.name == "amqp:not-found"
            lookup.close()  # the name is free again on this session
            self.client.pump(0.01)
        self.ended(subscription)

    @precondition(lambda self: self.made > 0)
    @rule()
    def restart(self) -> None:
        self.restart_broker()
        for name, subscription in self.subscriptions.items():
            subscription.link = None
            if name in KEPT:
                subscription.held = self.persistent(subscription.held)
            else:
                self.ended(subscription)

    @rule()
    def check(self) -> None:
        """Every subscription that exists holds what the model says: browsed by its queue's
        name (``<client id>_<subscription>``), so that nothing is taken."""
        for name, subscription in self.subscriptions.items():
            queue = f"{CLIENT_ID}_{name}"
            exists = self.exists(queue)
            assert exists == subscription.exists, f"{queue} exists: {exists}"
            if exists and subscription.link is None:
                expected = [body for body, _ in subscription.held]
                assert self.browsed(queue, len(expected)) == expected, name

    # ---- helpers ------------------------------------------------------------------------

    @staticmethod
    def ended(subscription: Subscription) -> None:
        subscription.exists, subscription.held = False, []


def test_subscriptions_keep_their_promises_across_detaches_and_restarts_at_random() -> None:
    run_model(SubscriptionModel, steps=25, examples=30)  # about a second each


@pytest.mark.soak
def test_subscriptions_keep_their_promises_at_random_for_longer() -> None:
    run_model(SubscriptionModel, steps=25, examples=500)
