"""Replay period and default filters (Broker-J 4.7.3): what a new consumer sees of the past."""

from __future__ import annotations

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.filters import replay_seconds
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import parse_selector
from tests.queues.consumers import Taker


def msg(name: str) -> Message:
    return parse_message(
        proton.Message(body=name, properties={"name": name}, group_id=name[0]).encode()
    )


def names(taker: Taker) -> list[str]:
    return taker.property_values("name")


def history(q: Queue, *ages: float, now: float) -> None:
    """Messages named m<age> that arrived ``age`` seconds before ``now``, oldest first."""
    for age in sorted(ages, reverse=True):
        q.enqueue(msg(f"m{age:g}"), now=now - age)


def test_a_browser_with_a_replay_period_sees_only_what_arrived_within_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = build_queue("history")
    history(q, 7200, 1800, 60, now=10_000.0)
    monkeypatch.setattr("time.time", lambda: 10_000.0)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, replay_period=3600)
    assert names(browser) == ["m1800", "m60"]
    q.enqueue(msg("new"))
    assert names(browser) == ["m1800", "m60", "new"]


def test_a_replay_period_of_zero_gives_only_new_messages() -> None:
    q = build_queue("history")
    q.enqueue(msg("old"))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, replay_period=0)
    consumer = Taker(credit=0)
    q.subscribe(consumer, replay_period=0)
    assert browser.got == [] and consumer.got == []
    q.enqueue(msg("new"))
    assert names(browser) == ["new"]  # shown before the consumer takes it (credit below)
    consumer.grant(q, 10)
    assert names(consumer) == ["new"]
    assert q.depth == 2  # "old" stays for consumers without the filter


def test_a_destructive_consumer_with_a_replay_period_leaves_older_messages_to_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = build_queue("history")
    history(q, 600, 10, now=5_000.0)
    monkeypatch.setattr("time.time", lambda: 5_000.0)
    recent = Taker(credit=10)
    q.subscribe(recent, replay_period=60)
    assert names(recent) == ["m10"]
    everyone = Taker(credit=10)
    q.subscribe(everyone)
    assert names(everyone) == ["m600"]


def test_the_queue_default_filter_applies_to_consumers_that_set_none() -> None:
    settings = parse_settings(
        {"defaultFilters": {"x-qpid-replay-period": {"x-qpid-replay-period": ["0"]}}}
    )
    q = build_queue("topic-like", settings)
    q.enqueue(msg("before"))
    default = Taker(credit=10, browse=True)
    q.subscribe(default)
    own = Taker(credit=10, browse=True)
    q.subscribe(own, replay_period=3600)
    q.enqueue(msg("after"))
    assert names(default) == ["after"]
    assert names(own) == ["before", "after"]


def test_default_filters_may_be_given_as_json_text_as_a_config_file_would() -> None:
    settings = parse_settings(
        {"defaultFilters": '{"x-qpid-replay-period": {"x-qpid-replay-period": ["60"]}}'}
    )
    assert settings.default_filters == {"x-qpid-replay-period": {"x-qpid-replay-period": ["60"]}}


@pytest.mark.parametrize(
    "filters",
    [
        {"x-qpid-replay-period": {"x-qpid-replay-period": ["soon"]}},
        {"x-qpid-replay-period": {"x-qpid-replay-period": ["1", "2"]}},
        {"jms-selector": {"jms-selector": ["a = 1"]}},
    ],
)
def test_default_filters_the_broker_cannot_apply_are_refused_naming_them(filters: dict) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_settings({"defaultFilters": filters})
    assert "defaultFilters" in str(caught.value) or "x-qpid-replay-period" in str(caught.value)


@pytest.mark.parametrize(
    "value, seconds", [(0, 0.0), ("3600", 3600.0), (1.5, 1.5), (b"60", 60.0), (" 5 ", 5.0)]
)
def test_a_replay_period_is_seconds_as_a_number_or_numeric_text(
    value: object, seconds: float
) -> None:
    assert replay_seconds(value) == seconds


@pytest.mark.parametrize("value", ["an hour", "", -1, True, None, float("nan"), [60]])
def test_a_replay_period_that_is_not_a_number_of_seconds_is_refused_naming_it(
    value: object,
) -> None:
    with pytest.raises(InvalidField, match="x-qpid-replay-period"):
        replay_seconds(value)


def test_on_a_grouped_queue_a_consumer_with_a_replay_period_takes_only_what_arrived_within_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broker-J's replay period is a filter of arrival times: on a grouped queue its
    consumer takes the recent messages of free groups; the old ones wait for others."""
    q = build_queue(
        "grouped",
        parse_settings({"qpid.group_header_key": "JMSXGroupID", "qpid.shared_msg_group": 1}),
    )
    for name, age in (("A-old", 600), ("B-old", 600), ("A-new", 10)):
        q.enqueue(msg(name), now=5_000.0 - age)  # grouped by their first letter (group-id)
    monkeypatch.setattr("time.time", lambda: 5_000.0)
    recent = Taker(credit=10)
    q.subscribe(recent, replay_period=60)
    assert names(recent) == ["A-new"]  # group A is its own now, A-old waits for it to free
    everyone = Taker(credit=10)
    q.subscribe(everyone)
    assert names(everyone) == ["B-old"]
    q.settle(recent.got[0])
    assert names(everyone) == ["B-old", "A-old"]


def test_a_message_older_than_a_consumers_replay_period_never_comes_back_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Released, an old message is available again, but not to a consumer (with a
    selector) that started after it: it is outside its replay period for good."""
    q = build_queue("history")
    history(q, 600, now=5_000.0)
    monkeypatch.setattr("time.time", lambda: 5_000.0)
    everyone = Taker(credit=1)
    q.subscribe(everyone)
    recent = Taker(credit=10)
    q.subscribe(recent, replay_period=60, selector=parse_selector("name LIKE 'm%'"))
    q.release(everyone.got[0])
    assert recent.got == []
    everyone.grant(q, 1)
    assert names(everyone) == ["m600", "m600"]
