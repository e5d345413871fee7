"""The broker's exchanges: the four defaults, declaring (same type or refused), deleting
with the bindings, the limits on exchanges and bindings, and a deleted queue's bindings."""

from __future__ import annotations

import pytest

from proton_broker.errors import InvalidField, NotFound, PreconditionFailed, ResourceLimitExceeded
from proton_broker.exchanges.exchange import Binding
from proton_broker.exchanges.registry import Exchanges


def test_the_default_exchanges_exist_are_durable_and_cannot_be_deleted():
    exchanges = Exchanges()
    assert sorted(e.name for e in exchanges) == [
        "amq.direct",
        "amq.fanout",
        "amq.match",
        "amq.topic",
    ]
    assert all(e.durable for e in exchanges)
    with pytest.raises(PreconditionFailed, match="broker's own"):
        exchanges.delete("amq.topic")
    assert "amq.topic" in exchanges


def test_declaring_again_with_the_same_type_returns_the_exchange():
    exchanges = Exchanges()
    first, created = exchanges.declare("news", "topic", durable=True)
    again, created_again = exchanges.declare("news", "topic")
    assert (created, created_again) == (True, False)
    assert again is first and again.durable


def test_declaring_again_with_another_type_is_refused_and_changes_nothing():
    exchanges = Exchanges()
    exchanges.declare("news", "topic")
    with pytest.raises(InvalidField, match="exists with type 'topic', not 'fanout'") as refused:
        exchanges.declare("news", "fanout")
    assert refused.value.field == "exchange-type"
    assert exchanges.named("news").kind == "topic"


def test_an_unknown_exchange_is_not_found():
    exchanges = Exchanges()
    with pytest.raises(NotFound, match="Exchange not found: nowhere"):
        exchanges.bind("nowhere", "q", "k")
    with pytest.raises(NotFound):
        exchanges.delete("nowhere")


def test_deleting_an_exchange_takes_its_bindings_and_only_them():
    exchanges = Exchanges()
    exchanges.declare("news", "topic")
    exchanges.bind("news", "q", "uk.#")
    exchanges.bind("amq.direct", "q", "k")
    exchanges.delete("news")
    assert exchanges.binding_count == 1
    assert exchanges.bindings_of("q") == [Binding("amq.direct", "q", "k")]


def test_a_deleted_queues_bindings_go_from_every_exchange():
    exchanges = Exchanges()
    exchanges.bind("amq.topic", "q", "a.#")
    exchanges.bind("amq.topic", "q", "b.*")
    exchanges.bind("amq.fanout", "q")
    exchanges.bind("amq.topic", "other", "a.#")
    assert exchanges.queue_deleted("q") == 3
    assert exchanges.binding_count == 1
    assert exchanges.bindings_of("q") == []
    assert [b.queue for b in exchanges.named("amq.topic").bindings()] == ["other"]


def test_unbinding_counts_and_forgets_the_queue_once_its_last_binding_there_goes():
    exchanges = Exchanges()
    assert exchanges.bind("amq.direct", "q", "a")
    assert not exchanges.bind("amq.direct", "q", "a")
    assert exchanges.bind("amq.direct", "q", "b")
    assert exchanges.unbind("amq.direct", "q", "a")
    assert not exchanges.unbind("amq.direct", "q", "a")
    assert exchanges.bindings_of("q") == [Binding("amq.direct", "q", "b")]
    assert exchanges.unbind("amq.direct", "q", "b")
    assert exchanges.binding_count == 0 and exchanges.bindings_of("q") == []


def test_past_the_exchange_limit_a_declaration_is_refused_naming_the_setting():
    exchanges = Exchanges(max_exchanges=2)
    exchanges.declare("one", "direct")
    exchanges.declare("two", "direct")
    with pytest.raises(ResourceLimitExceeded, match=r"broker\.max_exchanges"):
        exchanges.declare("three", "direct")
    assert "three" not in exchanges
    exchanges.declare("two", "direct")  # an existing one is not a new one


def test_past_the_binding_limit_a_binding_is_refused_but_rebinding_is_not():
    exchanges = Exchanges(max_bindings=2)
    exchanges.bind("amq.direct", "q", "a")
    exchanges.bind("amq.direct", "q", "b")
    with pytest.raises(ResourceLimitExceeded, match=r"broker\.max_bindings"):
        exchanges.bind("amq.direct", "q", "c")
    assert not exchanges.bind("amq.direct", "q", "a")
    assert exchanges.binding_count == 2
