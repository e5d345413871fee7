"""The sorted queue: ascending by the sort key's text, keyless first, ties by arrival."""

from __future__ import annotations

from typing import Any

import proton

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import parse_selector
from tests.queues import consumers

_MISSING = object()


class Taker(consumers.Taker):
    def names(self) -> list[str]:
        return self.property_values("name")


def msg(name: str, rank: Any = _MISSING, ttl: float | None = None) -> Message:
    """A message whose sort key 'rank' is ``rank`` (absent when not given)."""
    properties = {"name": name}
    if rank is not _MISSING:
        properties["rank"] = rank
    kwargs = {} if ttl is None else {"ttl": ttl}
    return parse_message(proton.Message(body=name, properties=properties, **kwargs).encode())


def sorted_queue() -> Queue:
    return build_queue("s", parse_settings({"qpid.queue_sort_key": "rank"}))


def drain(q: Queue, credit: int = 1000) -> Taker:
    t = Taker(credit=credit)
    q.subscribe(t)
    return t


def test_messages_are_delivered_in_ascending_order_of_the_key_text() -> None:
    q = sorted_queue()
    for rank in ["pear", "apple", "Zebra", "banana", "apple2"]:
        q.enqueue(msg(rank, rank))
    # Ordinal (code point) order: upper case before lower case.
    assert drain(q).names() == ["Zebra", "apple", "apple2", "banana", "pear"]


def test_messages_without_the_key_come_first_in_arrival_order() -> None:
    q = sorted_queue()
    q.enqueue(msg("b", "b"))
    q.enqueue(msg("none1"))
    q.enqueue(msg("a", "a"))
    q.enqueue(msg("none2"))
    q.enqueue(msg("empty", ""))
    assert drain(q).names() == ["none1", "none2", "empty", "a", "b"]


def test_equal_keys_are_delivered_in_arrival_order() -> None:
    q = sorted_queue()
    for i in range(4):
        q.enqueue(msg(f"k{i}", "same"))
        q.enqueue(msg(f"z{i}", "zzz"))
    q.enqueue(msg("first", "aaa"))
    assert drain(q).names() == ["first", "k0", "k1", "k2", "k3", "z0", "z1", "z2", "z3"]


def test_a_message_arriving_with_a_smaller_key_overtakes_waiting_ones() -> None:
    q = sorted_queue()
    q.enqueue(msg("m", "m"))
    q.enqueue(msg("x", "x"))
    t = drain(q, credit=1)
    assert t.names() == ["m"]
    q.enqueue(msg("c", "c"))
    t.credit = 5
    q.credit_granted(t)
    assert t.names() == ["m", "c", "x"]


def test_a_released_message_goes_back_to_its_position() -> None:
    q = sorted_queue()
    for rank in ["b", "d", "a", "c"]:
        q.enqueue(msg(rank, rank))
    t = drain(q, credit=2)
    assert t.names() == ["a", "b"]
    q.release(t.got[1])
    q.enqueue(msg("b2", "b"))  # same key, arrived after the released one
    t.credit = 10
    q.credit_granted(t)
    assert t.names()[2:] == ["b", "b2", "c", "d"]


def test_non_string_values_are_sorted_by_their_text() -> None:
    q = sorted_queue()
    for name, rank in [
        ("ten", 10),
        ("nine", 9),
        ("hundred", 100),
        ("one", 1),
        ("text-5", "5"),
        ("true", True),
    ]:
        q.enqueue(msg(name, rank))
    # "1" < "10" < "100" < "5" < "9" < "True" by text, not by number.
    assert drain(q).names() == ["one", "ten", "hundred", "text-5", "nine", "true"]


def test_a_number_and_its_text_tie_and_keep_arrival_order() -> None:
    q = sorted_queue()
    q.enqueue(msg("number", 7))
    q.enqueue(msg("text", "7"))
    q.enqueue(msg("six", "6"))
    assert drain(q).names() == ["six", "number", "text"]


def test_expired_messages_are_skipped_and_removed() -> None:
    q = sorted_queue()
    q.enqueue(msg("old", "a", ttl=0.001), now=1.0)
    q.enqueue(msg("new", "b"))
    q.enqueue(msg("swept", "c", ttl=1.0), now=100.0)
    assert q.purge_expired(now=200.0) == 2  # "old" and "swept", both still available
    assert drain(q).names() == ["new"]
    assert q.depth == 1 and q.stats.expired == 2


def test_browsers_see_sort_order_on_a_sorted_queue() -> None:
    q = sorted_queue()
    for rank in ["c", "a", "b"]:
        q.enqueue(msg(rank, rank))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert browser.names() == ["a", "b", "c"]
    assert q.depth == 3


def test_a_browser_is_shown_a_new_message_sorting_before_its_place_next_and_nothing_twice() -> None:
    q = sorted_queue()
    for rank in ["b", "d", "f"]:
        q.enqueue(msg(rank, rank))
    browser = Taker(credit=2, browse=True)
    q.subscribe(browser)
    assert browser.names() == ["b", "d"]
    q.enqueue(msg("a", "a"))  # before its place
    q.enqueue(msg("e", "e"))  # after it
    browser.grant(q, 10)
    assert browser.names() == ["b", "d", "a", "e", "f"]


def test_a_consumer_with_a_selector_takes_in_sort_order_and_looks_back_for_new_ones() -> None:
    q = sorted_queue()
    for rank in ["x", "c", "a"]:
        q.enqueue(msg(rank, rank))
    picky = Taker(credit=3)
    q.subscribe(picky, selector=parse_selector("name <> 'x'"))
    assert picky.names() == ["a", "c"]  # and it looked at "x"
    q.enqueue(msg("b", "b"))  # sorts before where it is
    assert picky.names() == ["a", "c", "b"]


def test_settled_messages_leave_the_queue() -> None:
    q = sorted_queue()
    for i in range(50):
        q.enqueue(msg(f"m{i}", f"{i:03d}"))
    t = drain(q, credit=50)
    assert t.names() == [f"m{i}" for i in range(50)]
    for entry in t.got:
        q.settle(entry)
    assert q.depth == 0 and q.bytes == 0 and len(q._order) == 0
