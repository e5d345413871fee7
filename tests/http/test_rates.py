"""The console's samples: rates are counter differences over the time between two samples,
never negative, and per-queue plots are kept for the queues looked at most recently."""

from __future__ import annotations

from proton_broker.codec.encode import encode_message
from proton_broker.codec.sections import parse_message
from proton_broker.http.rates import Rates, series
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings


def queue(name: str, messages: int = 0) -> Queue:
    made = build_queue(name, parse_settings({}))
    for _ in range(messages):
        made.enqueue(parse_message(encode_message("m")))
    return made


def test_a_rate_needs_two_samples_and_is_the_difference_over_the_time_between() -> None:
    rates, orders = Rates(history=10, max_plotted=5), queue("orders", 2)
    rates.sample([orders], now=100.0)
    assert rates.rate_of("orders") is None and rates.broker[-1].rate_in is None
    for _ in range(6):
        orders.enqueue(parse_message(encode_message("m")))
    rates.sample([orders], now=102.0)
    assert rates.rate_of("orders") == (3.0, 0.0)
    assert rates.broker[-1] == (102.0, 8, 3.0, 0.0)


def test_a_queue_new_or_gone_between_two_samples_counts_in_no_rate() -> None:
    rates, old, new = Rates(history=10, max_plotted=5), queue("old", 4), queue("new", 50)
    rates.sample([old], now=0.0)
    rates.sample([new], now=1.0)  # old deleted, new created meanwhile
    assert rates.broker[-1].rate_in is None and rates.rate_of("new") is None
    rates.sample([new], now=2.0)
    assert rates.broker[-1].rate_in == 0.0 and rates.broker[-1].depth == 50


def test_the_broker_keeps_its_last_samples_only() -> None:
    rates, q = Rates(history=3, max_plotted=5), queue("q")
    for t in range(5):
        rates.sample([q], now=float(t))
    assert series(rates.broker)["t"] == [2.0, 3.0, 4.0]


def test_a_queue_is_plotted_from_when_it_is_looked_at_and_the_oldest_look_loses_first() -> None:
    rates = Rates(history=10, max_plotted=2)
    a, b, c = queue("a"), queue("b"), queue("c")
    rates.sample([a, b, c], now=0.0)
    assert rates.plot_of("a") == []  # looked at: plotted from the next sample
    rates.plot_of("b")
    rates.sample([a, b, c], now=1.0)
    rates.plot_of("c")  # a third: the one looked at longest ago (a) loses its plot
    rates.sample([a, b, c], now=2.0)
    assert [p.t for p in rates.plot_of("b")] == [1.0, 2.0]
    assert [p.t for p in rates.plot_of("c")] == [2.0]
    assert "a" not in rates._plots


def test_no_plots_are_kept_when_none_are_allowed() -> None:
    rates = Rates(history=10, max_plotted=0)
    assert rates.plot_of("a") == []
    rates.sample([queue("a")], now=0.0)
    assert rates.plot_of("a") == []


def test_a_connections_rates_are_its_counts_difference_and_a_new_one_has_none() -> None:
    rates = Rates(history=10, max_plotted=5)
    rates.sample_connections({"1": (10, 0)}, now=0.0)
    assert rates.connection_rate("1") is None
    rates.sample_connections({"1": (30, 4), "2": (5, 5)}, now=2.0)
    assert rates.connection_rate("1") == (10.0, 2.0) and rates.connection_rate("2") is None
