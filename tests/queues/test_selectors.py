"""Consumers and browsers with a JMS selector, on a plain Queue (the selector language has
its own tests in tests/test_selector.py). No sockets: consumers are ``Taker`` objects."""

from __future__ import annotations

import time
from typing import Any

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.errors import NotImplementedByBroker
from proton_broker.message import Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import Selector, parse_selector
from tests.queues.consumers import Taker


def msg(color: str, n: int, **fields: Any) -> Message:
    return parse_message(
        proton.Message(body=n, properties={"color": color, "n": n}, **fields).encode()
    )


def queue(**options: Any) -> Queue:
    return build_queue("q", parse_settings(options))


def numbers(taker: Taker) -> list[int]:
    return [e.message.application_property("n") for e in taker.got]


class Counting:
    """A selector that counts the messages it is asked about."""

    def __init__(self, selector: Selector) -> None:
        self.selector = selector
        self.asked: list[int] = []

    def matches(self, message: Message) -> bool:
        self.asked.append(message.application_property("n"))
        return self.selector.matches(message)


def test_a_consumer_with_a_selector_gets_only_the_messages_it_matches_in_order() -> None:
    q = queue()
    for n, color in enumerate(["red", "blue", "red", "blue", "red"]):
        q.enqueue(msg(color, n))
    red, anyone = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 10)
    assert numbers(red) == [0, 2, 4]
    q.subscribe(anyone)
    anyone.grant(q, 10)
    assert numbers(anyone) == [1, 3]  # what the selector passed over stays for others


def test_new_messages_reach_the_consumer_whose_selector_matches_them() -> None:
    q = queue()
    red, blue = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    q.subscribe(blue, selector=parse_selector("color = 'blue'"))
    red.grant(q, 10)
    blue.grant(q, 10)
    for n, color in enumerate(["blue", "red", "green", "blue"]):
        q.enqueue(msg(color, n))
    assert numbers(red) == [1] and numbers(blue) == [0, 3]
    assert q.depth == 4 and len(q._order) == 1  # green waits for somebody


def test_a_message_the_selector_does_not_match_is_looked_at_once_not_on_every_dispatch() -> None:
    q = queue()
    for n in range(100):
        q.enqueue(msg("blue", n))
    counting = Counting(parse_selector("color = 'red'"))
    red = Taker()
    q.subscribe(red, selector=counting)
    for n in range(100, 110):
        red.grant(q, 1)
        q.enqueue(msg("red" if n % 2 else "blue", n))
    assert numbers(red) == [101, 103, 105, 107, 109]
    assert sorted(counting.asked) == list(range(110))  # each message asked about once


def test_a_released_message_behind_the_cursor_is_offered_again() -> None:
    q = queue()
    for n in range(3):
        q.enqueue(msg("red", n))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 3)
    first = red.got[0]
    q.release(first)
    red.grant(q, 1)
    assert numbers(red) == [0, 1, 2, 0]


def test_a_message_held_until_valid_reaches_the_selecting_consumer_once_valid() -> None:
    q = queue(holdOnPublishEnabled=True)
    later = int((time.time() + 3600) * 1000)
    q.enqueue(msg("red", 0, annotations={proton.symbol("x-qpid-not-valid-before"): later}))
    q.enqueue(msg("red", 1))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 5)
    assert numbers(red) == [1]
    q.release_held(now=time.time() + 7200)
    assert numbers(red) == [1, 0]


def test_an_expired_message_is_dropped_not_given_to_the_selecting_consumer() -> None:
    q = queue()
    q.enqueue(msg("red", 0, ttl=0.001), now=time.time() - 10)
    q.enqueue(msg("red", 1))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 5)
    assert numbers(red) == [1]
    assert q.stats.expired == 1 and q.depth == 1


def test_a_selecting_consumer_with_a_replay_period_starts_where_the_period_does() -> None:
    q = queue()
    q.enqueue(msg("red", 0))
    red = Taker()
    q.subscribe(red, replay_period=0, selector=parse_selector("color = 'red'"))
    q.enqueue(msg("red", 1))
    red.grant(q, 5)
    assert numbers(red) == [1]


def test_a_browser_with_a_selector_sees_only_matching_messages_and_takes_none() -> None:
    q = queue()
    for n, color in enumerate(["red", "blue", "red"]):
        q.enqueue(msg(color, n))
    browser = Taker(browse=True)
    q.subscribe(browser, selector=parse_selector("n > 0 AND color <> 'blue'"))
    browser.grant(q, 10)
    assert numbers(browser) == [2]
    assert q.depth == 3


def test_a_selector_on_a_priority_queue_takes_matching_messages_in_arrival_order() -> None:
    q = queue(**{"x-qpid-priorities": 10})
    q.enqueue(msg("red", 0, priority=1))
    q.enqueue(msg("red", 1, priority=9))
    red, anyone = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("JMSPriority < 5"))
    red.grant(q, 5)
    assert numbers(red) == [0]
    q.subscribe(anyone)
    anyone.grant(q, 5)
    assert numbers(anyone) == [1]


def test_a_consuming_selector_on_a_grouped_queue_is_refused_but_a_browsing_one_is_not() -> None:
    q = queue(**{"qpid.group_header_key": "color", "qpid.shared_msg_group": 1})
    with pytest.raises(NotImplementedByBroker, match="selector on a grouped queue"):
        q.subscribe(Taker(), selector=parse_selector("n = 1"))
    assert q.consumer_count == 0
    q.enqueue(msg("red", 1))
    browser = Taker(browse=True)
    q.subscribe(browser, selector=parse_selector("n = 1"))
    browser.grant(q, 1)
    assert numbers(browser) == [1]


def test_a_consumer_that_leaves_takes_its_selector_with_it() -> None:
    q = queue()
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    q.unsubscribe(red)
    assert not q._picky.cursors
    q.enqueue(msg("red", 0))
    assert red.got == []
