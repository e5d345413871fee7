"""The broker's side of exchanges, in process: the configuration's exchanges and bindings,
start-up refusals naming the entry, the ACL on declaring and binding, a deleted queue's
bindings, and routing to live queues only."""

from __future__ import annotations

import proton
import pytest

from proton_broker.broker import Broker
from proton_broker.codec.sections import parse_message
from proton_broker.config import BindingConfig, Config, ExchangeConfig
from proton_broker.errors import ConfigError, NotFound, Unauthorized
from proton_broker.exchanges.exchange import ExchangeAddress


def configured(**sections: object) -> Config:
    made = Config()
    made.broker.store = "memory"
    for name, value in sections.items():
        setattr(made, name, value)
    return made


def message(subject: str) -> object:
    return parse_message(proton.Message(subject=subject, body="x").encode())


def test_the_configuration_declares_exchanges_and_binds_its_queues() -> None:
    broker = Broker(
        configured(
            queues={"uk": {}, "all": {}},
            exchanges={"news": ExchangeConfig("topic", durable=True)},
            bindings=[BindingConfig("news", "uk", "uk.#"), BindingConfig("news", "all", "#")],
        )
    )
    address = broker.node("news")
    assert isinstance(address, ExchangeAddress) and address.exchange.durable
    routed = broker.route(address.exchange, "uk.sport", message("uk.sport"))
    assert sorted(q.name for q in routed) == ["all", "uk"]


@pytest.mark.parametrize(
    ("sections", "complaint"),
    [
        (
            {"exchanges": {"amq.mine": ExchangeConfig("topic")}},
            "exchanges.amq.mine: exchange names",
        ),
        ({"bindings": [BindingConfig("amq.topic", "nowhere")]}, "bindings[0]: Node not found"),
        ({"bindings": [BindingConfig("nope", "q")]}, "bindings[0]: Exchange not found: nope"),
    ],
)
def test_a_configured_exchange_or_binding_that_cannot_be_made_stops_start_up(
    sections: dict, complaint: str
) -> None:
    with pytest.raises(ConfigError, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        Broker(configured(queues={"q": {}}, **sections))


def test_an_address_names_a_queue_then_an_exchange_then_exchange_slash_subject() -> None:
    broker = Broker(configured(queues={"amq.topic/x": {}}))
    assert broker.node("amq.topic/x") is broker.queues["amq.topic/x"]
    found = broker.node("amq.topic/news.uk")
    assert isinstance(found, ExchangeAddress) and found.subject == "news.uk"
    assert broker.node("nowhere/news") is None
    assert broker.node("nowhere") is None


def test_deleting_a_queue_removes_its_bindings() -> None:
    broker = Broker(configured(queues={"q": {}}))
    broker.bind("amq.topic", "q", "#")
    broker.delete_queue("q")
    assert broker.exchanges.binding_count == 0


def test_binding_a_queue_that_does_not_exist_is_not_found() -> None:
    broker = Broker(configured())
    with pytest.raises(NotFound, match="Node not found: q"):
        broker.bind("amq.topic", "q", "#")


def test_the_acl_is_asked_before_an_exchange_is_declared_or_a_queue_bound(tmp_path) -> None:
    acl = tmp_path / "broker.acl"
    acl.write_text(
        "acl allow alice create exchange name=news.*\n"
        "acl allow alice bind exchange name=amq.topic routingkey=uk.#\n"
        "acl deny all all\n"
    )
    made = configured(queues={"q": {}})
    made.acl.file = str(acl)
    broker = Broker(made)
    broker.declare_exchange("news.eu", "topic", user="alice")
    with pytest.raises(Unauthorized, match="may not create exchange 'sport'"):
        broker.declare_exchange("sport", "topic", user="alice")
    assert "sport" not in broker.exchanges
    broker.bind("amq.topic", "q", "uk.#", user="alice")
    with pytest.raises(Unauthorized):
        broker.bind("amq.topic", "q", "fr.#", user="alice")
    assert [b.key for b in broker.exchanges.bindings_of("q")] == ["uk.#"]
