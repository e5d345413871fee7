"""The broker's dead-lettering rules that need no client: alternates declared in the
config file, checked at start-up, made for Broker-J's DLQ argument, and an exchange's
alternate (AMQP paths: tests/amqp/test_dead_letters.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proton_broker import config as config_module
from proton_broker.broker import Broker
from proton_broker.codec.sections import parse_message
from proton_broker.config import Config, ExchangeConfig
from proton_broker.errors import ConfigError, NotFound, PreconditionFailed


def make(queues: dict | None = None, exchanges: dict | None = None) -> Broker:  # type: ignore[type-arg]
    config = Config()
    config.queues = queues or {}
    config.exchanges = exchanges or {}
    return Broker(config)


def test_a_configured_alternate_may_name_an_exchange_declared_after_the_queue() -> None:
    broker = make(
        queues={"orders": {"alternate-exchange": "dlx"}},
        exchanges={"dlx": ExchangeConfig("fanout")},
    )
    assert broker.queues["orders"].alternate == "dlx"


def test_a_configured_alternate_that_names_nothing_stops_start_up_naming_the_queue() -> None:
    with pytest.raises(ConfigError, match="queues.orders: alternate 'nope' of queue 'orders'"):
        make(queues={"orders": {"alternate-exchange": "nope"}})


def test_a_configured_exchanges_alternate_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="exchanges.events: alternate 'nope'"):
        make(exchanges={"events": ExchangeConfig("direct", arguments={"alternateBinding": "nope"})})


def test_an_empty_dead_letter_suffix_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("queue:\n  dead_letter_suffix: ''\n")
    with pytest.raises(ConfigError, match="queue.dead_letter_suffix' must not be empty"):
        config_module.load(path, environ={})


def test_the_dead_letter_queue_of_a_durable_queue_is_durable() -> None:
    broker = make()
    broker.declare("pay", {"durable": True, "x-qpid-dlq-enabled": True})
    assert broker.queues["pay"].alternate == "pay_DLQ"
    assert broker.queues["pay_DLQ"].settings.durable
    assert broker.queues["pay_DLQ"].alternate is None  # no DLQ of a DLQ


def test_an_alternate_declared_later_than_start_up_must_exist() -> None:
    broker = make()
    with pytest.raises(NotFound, match="alternate 'nope' of queue 'q'"):
        broker.declare("q", {"alternate-exchange": "nope"})
    assert "q" not in broker.queues
    with pytest.raises(NotFound, match="alternate 'nope' of exchange 'x'"):
        broker.declare_exchange("x", "direct", arguments={"alternate-exchange": "nope"})
    assert "x" not in broker.exchanges


def test_an_exchanges_alternate_takes_one_step_only() -> None:
    broker = make()
    broker.declare("last")
    broker.declare_exchange("second", "direct", arguments={"alternate-exchange": "last"})
    broker.declare_exchange("first", "direct", arguments={"alternate-exchange": "second"})
    message = parse_message(b"\x00\x53\x77\xa1\x01x")
    assert broker.route(broker.exchanges.named("first"), "k", message) == []
    assert [q.name for q in broker.route(broker.exchanges.named("second"), "k", message)] == [
        "last"
    ]


def test_an_exchange_used_as_an_alternate_cannot_be_deleted_until_it_is_not() -> None:
    broker = make()
    broker.declare_exchange("dlx", "fanout")
    broker.declare("q", {"alternate-exchange": "dlx"})
    with pytest.raises(PreconditionFailed, match="the alternate of queue 'q'"):
        broker.delete_exchange("dlx")
    broker.update_queue("q", {"alternate-exchange": "amq.fanout"})
    broker.delete_exchange("dlx")
