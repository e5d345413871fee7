"""When a queue gives up on a message and tells its dead-letter sink (the broker's
dead-lettering is tested over AMQP in tests/amqp/test_dead_letters.py and at the broker in
tests/test_deadletters.py)."""

from __future__ import annotations

import time
from typing import Any

import proton

from proton_broker.codec.sections import parse_message
from proton_broker.message import Header, Message
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker


class Sink:
    """A dead-letter sink as the broker is one: records what it was handed, and why."""

    def __init__(self, takes: bool = True) -> None:
        self.takes = takes
        self.got: list[tuple[str, bytes, str, str | None]] = []

    def dead_letter(
        self, queue: Queue, message: Message, reason: str, detail: str | None, written: Any = None
    ) -> bool:
        self.got.append((queue.name, message.data, reason, detail))
        return self.takes

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.got]


def queue(sink: Sink, alternate: str | None = "dlq", most: int = 0, **options: Any) -> Queue:
    q = build_queue("q", parse_settings(options))
    q.hooks.dead_letters = sink
    q.alternate = alternate
    q.max_delivery_attempts = most
    return q


def msg(n: int, ttl: int | None = None) -> Message:
    message = Message(data=b"%d" % n)
    message.header = Header(ttl=ttl)
    return message


def taken(q: Queue, credit: int = 1) -> Taker:
    taker = Taker(credit=credit)
    q.subscribe(taker)
    return taker


def test_a_rejected_message_is_handed_to_the_sink_with_the_rejections_reason() -> None:
    sink = Sink()
    q = queue(sink)
    q.enqueue(msg(1))
    taker = taken(q)
    q.reject(taker.got[0], "app:bad: broken")
    assert sink.got == [("q", b"1", "rejected", "app:bad: broken")]
    assert (q.depth, q.stats.rejected, q.stats.dead_lettered) == (0, 1, 1)


def test_without_an_alternate_a_rejected_message_is_discarded_unseen() -> None:
    sink = Sink()
    q = queue(sink, alternate=None)
    q.enqueue(msg(1))
    q.reject(taken(q).got[0])
    assert sink.got == [] and q.depth == 0


def test_the_maximum_delivery_attempts_count_failed_deliveries_only() -> None:
    sink = Sink()
    q = queue(sink, most=2)
    q.enqueue(msg(1))
    taker = taken(q, credit=10)
    q.release(taker.got[-1])  # released: not an attempt
    q.release(taker.got[-1], delivery_failed=True)
    assert sink.got == [] and q.depth == 1
    q.release(taker.got[-1], delivery_failed=True)
    assert sink.reasons() == ["maximum-delivery-attempts"]
    assert (q.depth, q.stats.exhausted) == (0, 1)


def test_the_sink_hears_of_a_message_past_its_maximum_even_without_an_alternate() -> None:
    sink = Sink(takes=False)
    q = queue(sink, alternate=None, most=1)
    q.enqueue(msg(1))
    q.release(taken(q).got[0], delivery_failed=True)
    assert sink.reasons() == ["maximum-delivery-attempts"]
    assert (q.depth, q.stats.dead_lettered, q.stats.discarded) == (0, 0, 1)


def test_a_ring_hands_over_what_it_evicts() -> None:
    sink = Sink()
    q = queue(sink, **{"qpid.max_count": 2, "qpid.policy_type": "ring"})
    for n in range(4):
        q.enqueue(msg(n))
    assert [data for _, data, _, _ in sink.got] == [b"0", b"1"]
    assert set(sink.reasons()) == {"ring-overflow"}


def test_expired_messages_are_handed_over_only_under_route_to_alternate() -> None:
    deleting, routing = Sink(), Sink()
    plain = queue(deleting)
    routed = queue(routing, expiryPolicy="ROUTE_TO_ALTERNATE")
    for q in (plain, routed):
        q.enqueue(msg(1, ttl=1), now=time.time() - 1)
        assert q.purge_expired() == 1
    assert deleting.got == []
    assert routing.reasons() == ["expired"]


def test_clearing_a_queue_being_deleted_hands_over_every_message_held_or_not() -> None:
    sink = Sink()
    q = queue(sink)
    for n in range(3):
        q.enqueue(msg(n))
    taken(q)  # one is acquired
    assert q.clear() == 3
    assert sorted(data for _, data, _, _ in sink.got) == [b"0", b"1", b"2"]
    assert set(sink.reasons()) == {"queue-deleted"}


def test_a_superseded_last_value_is_replaced_not_dead_lettered() -> None:
    sink = Sink()
    q = queue(sink, lvqKey="k")
    for value in ("a", "b"):
        q.enqueue(parse_message(proton.Message(body=value, properties={"k": "same"}).encode()))
    assert sink.got == [] and q.stats.replaced == 1
