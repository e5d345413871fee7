"""Exchanges route by type: direct by equal key, topic by pattern, fanout to all, headers by
properties; one copy per queue; bindings are identified by (queue, key); unbinding a
deleted queue's bindings touches only that queue's; routed and dropped are counted."""

from __future__ import annotations

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.exchanges.exchange import (
    DEFAULT_EXCHANGES,
    Binding,
    Exchange,
    check_declarable,
)
from proton_broker.message import Message


def message(**properties: object) -> Message:
    return parse_message(proton.Message(body="x", properties=properties or None).encode())


def test_a_direct_exchange_routes_to_the_queues_bound_with_the_routing_key():
    exchange = Exchange("orders", "direct")
    exchange.bind("eu", "eu")
    exchange.bind("all", "eu")
    exchange.bind("all", "us")
    assert exchange.route("eu", message()) == {"eu", "all"}
    assert exchange.route("us", message()) == {"all"}
    assert exchange.route("asia", message()) == set()


def test_a_topic_exchange_routes_by_pattern_and_gives_each_queue_one_copy():
    exchange = Exchange("news", "topic")
    exchange.bind("uk", "news.uk.#")
    exchange.bind("uk", "#.sport")  # both match news.uk.sport: still one copy
    exchange.bind("sport", "*.*.sport")
    assert exchange.route("news.uk.sport", message()) == {"uk", "sport"}
    assert exchange.route("news.fr.sport", message()) == {"uk", "sport"}
    assert exchange.route("news.uk", message()) == {"uk"}


def test_a_fanout_exchange_routes_to_every_bound_queue_whatever_the_key():
    exchange = Exchange("all", "fanout")
    exchange.bind("a", "")
    exchange.bind("b", "ignored")
    exchange.bind("b", "also-ignored")
    assert exchange.route("anything", message()) == {"a", "b"}
    exchange.unbind("b", "ignored")
    assert exchange.route("", message()) == {"a", "b"}  # b keeps one binding
    exchange.unbind("b", "also-ignored")
    assert exchange.route("", message()) == {"a"}


def test_a_headers_exchange_routes_by_application_properties():
    exchange = Exchange("match", "headers")
    exchange.bind("red", "r", {"x-match": "all", "colour": "red"})
    exchange.bind("big-or-blue", "bb", {"x-match": "any", "colour": "blue", "size": "big"})
    assert exchange.route("", message(colour="red", size="big")) == {"red", "big-or-blue"}
    assert exchange.route("", message(colour="blue")) == {"big-or-blue"}
    assert exchange.route("", message()) == set()


def test_a_headers_binding_with_bad_arguments_is_refused_and_changes_nothing():
    exchange = Exchange("match", "headers")
    exchange.bind("q", "k", {"x-match": "all", "colour": "red"})
    with pytest.raises(InvalidField):
        exchange.bind("q", "k", {"colour": "blue"})
    assert exchange.bindings() == [Binding("match", "q", "k", {"x-match": "all", "colour": "red"})]
    assert exchange.route("", message(colour="red")) == {"q"}


def test_binding_again_replaces_the_arguments_and_is_not_a_second_binding():
    exchange = Exchange("match", "headers")
    assert exchange.bind("q", "k", {"x-match": "all", "colour": "red"})
    assert not exchange.bind("q", "k", {"x-match": "all", "colour": "blue"})
    assert exchange.binding_count == 1
    assert exchange.route("", message(colour="blue")) == {"q"}
    assert exchange.route("", message(colour="red")) == set()


def test_unbinding_a_binding_that_does_not_exist_says_so():
    exchange = Exchange("news", "topic")
    exchange.bind("q", "a.#")
    assert not exchange.unbind("q", "b.#")
    assert not exchange.unbind("other", "a.#")
    assert exchange.unbind("q", "a.#")
    assert exchange.route("a.b", message()) == set()


@pytest.mark.parametrize("kind", ["direct", "topic", "fanout", "headers"])
def test_unbinding_a_queue_removes_only_its_bindings(kind):
    exchange = Exchange("x", kind)
    arguments = {"x-match": "all"} if kind == "headers" else None
    for key in ("a", "b", "c"):
        exchange.bind("gone", key, arguments)
    exchange.bind("stays", "a", arguments)
    assert exchange.unbind_queue("gone") == 3
    assert exchange.unbind_queue("gone") == 0
    assert [(b.queue, b.key) for b in exchange.bindings()] == [("stays", "a")]
    assert exchange.route("a", message()) == {"stays"}
    assert exchange.is_bound("stays") and not exchange.is_bound("gone")


def test_routed_and_dropped_messages_are_counted():
    exchange = Exchange("orders", "direct")
    exchange.bind("q", "k")
    exchange.route("k", message())
    exchange.route("k", message())
    exchange.route("nowhere", message())
    assert (exchange.routed, exchange.dropped) == (2, 1)


def test_the_default_exchanges_are_the_four_types():
    assert DEFAULT_EXCHANGES == {
        "amq.direct": "direct",
        "amq.topic": "topic",
        "amq.fanout": "fanout",
        "amq.match": "headers",
    }
    assert Exchange("amq.topic", "topic").builtin and not Exchange("news", "topic").builtin


@pytest.mark.parametrize(
    ("name", "kind", "says"),
    [
        ("", "topic", "needs a name"),
        ("amq.mine", "topic", "reserved"),
        ("qpid.mine", "direct", "reserved"),
        ("news", "xml", "unknown exchange type 'xml'"),
    ],
)
def test_what_may_not_be_declared_is_refused_saying_why(name, kind, says):
    with pytest.raises(InvalidField, match=says):
        check_declarable(name, kind)


def test_an_exchange_of_an_unknown_type_cannot_be_built():
    with pytest.raises(InvalidField, match="unknown exchange type"):
        Exchange("x", "xml")


@pytest.mark.parametrize(
    ("kind", "key", "arguments"),
    [
        ("direct", "k", {}),
        ("topic", "k.#", {}),
        ("fanout", "", {}),
        ("headers", "h", {"x-match": "all"}),
    ],
)
def test_a_binding_with_a_selector_routes_only_the_messages_it_selects(kind, key, arguments):
    exchange = Exchange("x", kind)
    exchange.bind("red", key, {**arguments, "x-filter-jms-selector": "colour = 'red'"})
    exchange.bind("every", key, arguments)
    assert exchange.route("k", message(colour="red")) == {"red", "every"}
    assert exchange.route("k", message(colour="blue")) == {"every"}


def test_a_queue_selected_by_either_of_two_bindings_gets_the_message_once():
    exchange = Exchange("news", "topic")
    exchange.bind("q", "uk.#", {"x-filter-jms-selector": "urgent = TRUE"})
    exchange.bind("q", "#.sport")
    assert exchange.route("uk.sport", message(urgent=False)) == {"q"}  # by the second
    assert exchange.route("uk.weather", message(urgent=True)) == {"q"}  # by the first
    assert exchange.route("uk.weather", message(urgent=False)) == set()
    exchange.unbind("q", "uk.#")
    assert exchange.route("uk.weather", message(urgent=True)) == set()


def test_a_binding_with_a_bad_selector_is_refused_naming_the_filter():
    exchange = Exchange("news", "topic")
    with pytest.raises(InvalidField, match="invalid selector") as refused:
        exchange.bind("q", "#", {"x-filter-jms-selector": "colour = "})
    assert refused.value.field == "filter"
    assert exchange.bindings() == []


def test_a_headers_binding_does_not_take_its_selector_for_a_header():
    exchange = Exchange("match", "headers")
    exchange.bind("q", "", {"x-match": "all", "x-filter-jms-selector": "n > 1", "kind": "a"})
    assert exchange.route("", message(kind="a", n=2)) == {"q"}
    assert exchange.route("", message(kind="a", n=1)) == set()


def test_unroutable_messages_are_discarded_unless_the_exchange_says_reject():
    assert not Exchange("x", "topic").rejects_unroutable
    assert Exchange(
        "x", "topic", arguments={"unroutableMessageBehaviour": "reject"}
    ).rejects_unroutable
    with pytest.raises(InvalidField, match="DISCARD or REJECT") as refused:
        Exchange("x", "topic", arguments={"unroutableMessageBehaviour": "bounce"})
    assert refused.value.field == "unroutableMessageBehaviour"
