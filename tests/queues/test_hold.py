"""Hold until valid (Broker-J holdOnPublishEnabled, x-qpid-not-valid-before)."""

from __future__ import annotations

from typing import Any

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker

NOW = 1_000_000.0  # seconds since the epoch, the tests' clock


def msg(
    name: str, valid_from: float | None = None, where: str = "annotation", **kwargs: Any
) -> Message:
    """A message named ``name``; ``valid_from`` (seconds) becomes x-qpid-not-valid-before in
    ms, as a message annotation or an application property."""
    properties: dict[str, Any] = {"name": name}
    annotations: dict[Any, Any] = {}
    if valid_from is not None:
        millis = int(valid_from * 1000)
        if where == "annotation":
            annotations[proton.symbol("x-qpid-not-valid-before")] = millis
        else:
            properties["x-qpid-not-valid-before"] = millis
    return parse_message(
        proton.Message(
            body=name, properties=properties, annotations=annotations or None, **kwargs
        ).encode()
    )


def holding(**options: Any) -> Queue:
    return build_queue("held", parse_settings({"holdOnPublishEnabled": True, **options}))


def names(taker: Taker) -> list[str]:
    return taker.property_values("name")


@pytest.mark.parametrize("where", ["annotation", "application property"])
def test_a_message_is_held_until_its_not_valid_before_time(where: str) -> None:
    q = holding()
    q.enqueue(msg("later", valid_from=NOW + 60, where=where), now=NOW)
    q.enqueue(msg("now"), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["now"]
    assert q.release_held(now=NOW + 59) == 0
    assert q.release_held(now=NOW + 60) == 1
    assert names(consumer) == ["now", "later"]


def test_a_released_message_takes_its_normal_position() -> None:
    q = holding()
    q.enqueue(msg("first", valid_from=NOW + 10), now=NOW)
    q.enqueue(msg("second"), now=NOW)
    q.release_held(now=NOW + 10)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["first", "second"]


def test_a_message_valid_only_now_does_not_jump_ahead_of_older_ones_nobody_took() -> None:
    q = holding()
    q.enqueue(msg("older"), now=NOW)
    q.enqueue(msg("held", valid_from=NOW + 10), now=NOW)
    q.enqueue(msg("newer"), now=NOW)
    q.release_held(now=NOW + 10)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["older", "held", "newer"]


def test_without_hold_on_publish_the_annotation_is_ignored() -> None:
    q = build_queue("plain")
    q.enqueue(msg("later", valid_from=NOW + 60), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["later"]


def test_a_time_already_past_does_not_hold() -> None:
    q = holding()
    q.enqueue(msg("past", valid_from=NOW - 1), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["past"]


def test_the_queue_asks_to_be_woken_at_the_earliest_pending_time_only() -> None:
    q = holding()
    wakes: list[float] = []
    q.hooks.wake_at = lambda when, queue: wakes.append(when)
    q.enqueue(msg("b", valid_from=NOW + 20), now=NOW)
    q.enqueue(msg("c", valid_from=NOW + 30), now=NOW)  # later than the earliest: no new timer
    q.enqueue(msg("a", valid_from=NOW + 10), now=NOW)
    assert wakes == [NOW + 20, NOW + 10]
    q.release_held(now=NOW + 10)
    assert wakes[-1] == NOW + 20  # the next one


def test_browsers_do_not_see_a_held_message_until_it_is_valid() -> None:
    q = holding()
    q.enqueue(msg("held", valid_from=NOW + 5), now=NOW)
    q.enqueue(msg("free"), now=NOW)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser)
    assert names(browser) == ["free"]
    q.release_held(now=NOW + 5)
    assert names(browser) == ["free", "held"]


def test_held_messages_count_in_the_depth_and_keep_priority_order() -> None:
    q = holding(**{"x-qpid-priorities": 10})
    q.enqueue(msg("low-held", valid_from=NOW + 5), now=NOW)  # default priority 4, as "low"
    q.enqueue(msg("low"), now=NOW)
    q.enqueue(msg("high-held", valid_from=NOW + 5, priority=9), now=NOW)
    assert q.depth == 3
    q.release_held(now=NOW + 5)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["high-held", "low-held", "low"]


def test_a_held_message_that_expires_before_it_is_valid_is_dropped() -> None:
    q = holding()
    q.enqueue(msg("doomed", valid_from=NOW + 60, ttl=1), now=NOW)
    assert q.release_held(now=NOW + 60) == 0
    assert q.depth == 0 and q.stats.expired == 1


# ---- delivery delay (JMS 2.0: x-opt-delivery-time, x-opt-delivery-delay) ---------------------


def delayed(name: str, **annotations: Any) -> Message:
    """A message whose message annotations carry ``annotations`` (symbol keys, as sent)."""
    return parse_message(
        proton.Message(
            body=name,
            properties={"name": name},
            annotations={proton.symbol(k.replace("_", "-")): v for k, v in annotations.items()},
        ).encode()
    )


def test_a_delivery_time_holds_a_message_on_any_queue_until_then() -> None:
    q = build_queue("plain")
    q.enqueue(delayed("later", x_opt_delivery_time=int((NOW + 30) * 1000)), now=NOW)
    q.enqueue(delayed("now", x_opt_jms_msg_type=1), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["now"]
    assert q.depth == 2
    assert q.release_held(now=NOW + 29.999) == 0
    assert q.release_held(now=NOW + 30) == 1
    assert names(consumer) == ["now", "later"]


def test_a_delivery_delay_counts_from_the_messages_first_arrival() -> None:
    q = build_queue("plain")
    q.enqueue(delayed("delayed", x_opt_delivery_delay=5000), now=NOW)  # recovery passes
    consumer = Taker(credit=10)  # the first arrival as now: a restart keeps the time
    q.subscribe(consumer)
    assert q.release_held(now=NOW + 4.9) == 0
    assert q.release_held(now=NOW + 5) == 1
    assert names(consumer) == ["delayed"]


def test_a_due_delayed_message_takes_its_position_among_those_still_queued() -> None:
    q = build_queue("plain")
    q.enqueue(delayed("delayed", x_opt_delivery_delay=1000), now=NOW)
    q.enqueue(delayed("plain"), now=NOW)
    q.release_held(now=NOW + 1)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["delayed", "plain"]  # sent first: ahead, once due


@pytest.mark.parametrize("value", ["1000", True, None, -5])
def test_a_delay_that_is_not_a_positive_number_does_not_hold(value: object) -> None:
    q = build_queue("plain")
    q.enqueue(delayed("m", x_opt_delivery_delay=value), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["m"]


def test_on_a_hold_queue_the_later_of_the_two_times_wins() -> None:
    q = holding()
    message = delayed(
        "m",
        x_qpid_not_valid_before=int((NOW + 10) * 1000),
        x_opt_delivery_time=int((NOW + 20) * 1000),
    )
    q.enqueue(message, now=NOW)
    assert q.release_held(now=NOW + 10) == 0
    assert q.release_held(now=NOW + 20) == 1


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("annotation", ["x_opt_delivery_time", "x_qpid_not_valid_before"])
def test_a_time_that_is_not_finite_does_not_hold_nor_stall_the_others(
    annotation: str, value: float
) -> None:
    q = holding()
    q.enqueue(delayed("soon", x_opt_delivery_time=int((NOW + 1) * 1000)), now=NOW)
    q.enqueue(delayed("odd", **{annotation: value}), now=NOW)
    q.enqueue(delayed("later", x_opt_delivery_time=int((NOW + 2) * 1000)), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert names(consumer) == ["odd"]  # not held: NaN orders against nothing in the heap
    assert q.release_held(now=NOW + 1) == 1
    assert q.release_held(now=NOW + 2) == 1
    assert names(consumer) == ["odd", "soon", "later"]


def test_a_held_value_replaced_before_it_is_valid_is_dropped_when_due() -> None:
    """On a last-value queue the newer value of a key replaces a held one: the held one is
    not delivered when its time comes, it goes as replaced."""
    q = holding(lvqKey="name")
    q.enqueue(msg("A", valid_from=NOW + 60, subject="older"), now=NOW)
    q.enqueue(msg("A", subject="newer"), now=NOW)
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    subjects = [m.properties_field(3) for m in consumer.messages]  # field 3: subject
    assert subjects == ["newer"]
    assert q.release_held(now=NOW + 60) == 0
    assert [m.properties_field(3) for m in consumer.messages] == ["newer"]
    assert q.stats.replaced == 1
