"""Queue lifetimes on their own (proton_broker/lifetime.py): a real Broker, links and
connections as plain ids, time passed in."""

from __future__ import annotations

from typing import Any

import pytest

from proton_broker.broker import Broker
from proton_broker.config import Config
from proton_broker.errors import ResourceLocked
from proton_broker.message import Message
from proton_broker.queues.queue import Queue
from tests.queues.consumers import Taker

A, B, C = "link-a", "link-b", "link-c"  # links
ONE, TWO = "conn-1", "conn-2"  # connections


def broker_with(name: str, idle: float = 0.0, **options: Any) -> tuple[Broker, Queue]:
    config = Config()
    config.broker.idle_queue_timeout = idle
    broker = Broker(config)
    return broker, broker.declare(name, options)


def gone(broker: Broker, name: str) -> bool:
    return name not in broker.queues


def consume_all(queue: Queue) -> None:
    taker = Taker(credit=100)
    queue.subscribe(taker)
    for entry in list(taker.got):
        queue.settle(entry)
    queue.unsubscribe(taker)


def test_a_delete_on_close_queue_goes_when_its_controlling_link_goes() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-close"})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.attached(queue, B, TWO, created=False)
    broker.lifetimes.detached(queue, A, now=1.0)
    assert gone(broker, "q")


def test_a_delete_on_close_queue_stays_while_its_controlling_link_is_attached() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-close"})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.attached(queue, B, ONE, created=False)
    broker.lifetimes.detached(queue, B, now=1.0)
    assert not gone(broker, "q")


def test_a_delete_on_close_queue_made_without_a_link_goes_when_a_link_came_and_went() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-close"})
    broker.lifetimes.check(now=1.0)
    assert not gone(broker, "q")
    broker.lifetimes.attached(queue, A, ONE, created=False)
    broker.lifetimes.detached(queue, A, now=2.0)
    assert gone(broker, "q")


def test_an_auto_delete_queue_goes_when_its_last_link_goes() -> None:
    broker, queue = broker_with("q", **{"auto-delete": True})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.attached(queue, B, TWO, created=False)
    broker.lifetimes.detached(queue, A, now=1.0)
    assert not gone(broker, "q")
    broker.lifetimes.detached(queue, B, now=2.0)
    assert gone(broker, "q")


def test_an_auto_delete_queue_nobody_ever_used_stays() -> None:
    broker, _ = broker_with("q", **{"auto-delete": True})
    broker.lifetimes.check(now=100.0)
    assert not gone(broker, "q")


def test_an_auto_delete_queue_goes_with_its_messages() -> None:
    broker, queue = broker_with("q", **{"auto-delete": True})
    queue.enqueue(Message(data=b"left behind"))
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=1.0)
    assert gone(broker, "q")


def test_delete_if_empty_waits_for_the_messages_to_go() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-no-messages"})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    queue.enqueue(Message(data=b"one"))
    broker.lifetimes.detached(queue, A, now=1.0)
    assert not gone(broker, "q")
    consume_all(queue)
    broker.lifetimes.check(now=2.0)
    assert gone(broker, "q")


def test_delete_if_empty_stays_while_the_controlling_link_is_attached_even_when_empty() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-no-messages"})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.check(now=1.0)
    assert not gone(broker, "q")


def test_delete_if_unused_and_empty_needs_both() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-no-links-or-messages"})
    queue.enqueue(Message(data=b"one"))
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=1.0)
    assert not gone(broker, "q")
    broker.lifetimes.attached(queue, B, ONE, created=False)
    consume_all(queue)
    broker.lifetimes.check(now=2.0)
    assert not gone(broker, "q")  # a link is attached
    broker.lifetimes.detached(queue, B, now=3.0)
    assert gone(broker, "q")


def test_a_timed_deletion_waits_its_time() -> None:
    broker, queue = broker_with("q", **{"auto-delete": True, "qpid.auto_delete_timeout": 2})
    woken: list[float] = []
    broker.lifetimes.wake_at = woken.append
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=10.0)
    assert woken == [12.0] and not gone(broker, "q")
    broker.lifetimes.check(now=11.0)
    assert not gone(broker, "q")
    broker.lifetimes.check(now=12.0)
    assert gone(broker, "q")


def test_a_link_that_attaches_in_time_cancels_a_timed_deletion() -> None:
    broker, queue = broker_with("q", **{"auto-delete": True, "qpid.auto_delete_timeout": 2})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=10.0)
    broker.lifetimes.attached(queue, B, ONE, created=False)
    broker.lifetimes.check(now=13.0)
    assert not gone(broker, "q")
    broker.lifetimes.detached(queue, B, now=20.0)
    broker.lifetimes.check(now=21.0)
    assert not gone(broker, "q")  # a new wait started at 20
    broker.lifetimes.check(now=22.0)
    assert gone(broker, "q")


def test_a_link_attaching_does_not_save_a_delete_if_empty_queue_whose_creator_left() -> None:
    broker, queue = broker_with("q", **{"lifetime-policy": "delete-on-no-messages"})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    queue.enqueue(Message(data=b"one"))
    broker.lifetimes.detached(queue, A, now=1.0)
    broker.lifetimes.attached(queue, B, TWO, created=False)
    consume_all(queue)
    broker.lifetimes.check(now=2.0)
    assert gone(broker, "q")


def test_a_message_arriving_during_a_timed_wait_cancels_it_for_an_empty_policy() -> None:
    options = {"lifetime-policy": "delete-on-no-messages", "qpid.auto_delete_timeout": 2}
    broker, queue = broker_with("q", **options)
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=10.0)
    queue.enqueue(Message(data=b"late"))
    broker.lifetimes.check(now=12.0)
    assert not gone(broker, "q")
    consume_all(queue)
    broker.lifetimes.check(now=13.0)  # empty again: a new wait of 2 s starts
    broker.lifetimes.check(now=14.0)
    assert not gone(broker, "q")
    broker.lifetimes.check(now=15.0)
    assert gone(broker, "q")


def test_an_exclusive_queue_refuses_links_from_other_connections() -> None:
    broker, queue = broker_with("q", exclusive=True)
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.may_attach(queue, ONE)
    with pytest.raises(ResourceLocked, match="exclusive"):
        broker.lifetimes.may_attach(queue, TWO)


def test_the_owner_keeps_an_exclusive_queue_after_its_links_go() -> None:
    broker, queue = broker_with("q", exclusive=True)
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=1.0)
    with pytest.raises(ResourceLocked):
        broker.lifetimes.may_attach(queue, TWO)


def test_exclusive_ownership_ends_when_the_owning_connection_closes() -> None:
    broker, queue = broker_with("q", **{"qpid.exclusive": True})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=1.0)
    broker.lifetimes.connection_closed(ONE, now=2.0)
    broker.lifetimes.may_attach(queue, TWO)
    broker.lifetimes.attached(queue, B, TWO, created=False)
    with pytest.raises(ResourceLocked):
        broker.lifetimes.may_attach(queue, ONE)


def test_an_exclusive_auto_delete_queue_waits_for_its_owner_to_close() -> None:
    broker, queue = broker_with("q", exclusive=True, **{"auto-delete": True})
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.lifetimes.detached(queue, A, now=1.0)
    assert not gone(broker, "q")
    broker.lifetimes.connection_closed(ONE, now=2.0)
    assert gone(broker, "q")


def test_a_deleted_queue_is_forgotten_and_its_name_starts_afresh() -> None:
    broker, queue = broker_with("q", exclusive=True)
    broker.lifetimes.attached(queue, A, ONE, created=True)
    broker.delete_queue("q")
    again = broker.declare("q", {"exclusive": True})
    broker.lifetimes.may_attach(again, TWO)
    broker.lifetimes.detached(queue, A, now=1.0)  # the old queue's link: ignored
    assert broker.lifetimes.links_on(again) == 0


def test_the_idle_sweep_deletes_an_auto_created_queue_left_idle() -> None:
    broker, _ = broker_with("configured", idle=5.0)
    made = broker.resolve("made")
    assert made.auto_created
    broker.lifetimes.check(now=100.0)
    broker.lifetimes.check(now=104.0)
    assert not gone(broker, "made")
    broker.lifetimes.check(now=105.0)
    assert gone(broker, "made") and not gone(broker, "configured")


def test_the_idle_sweep_spares_queues_with_links_or_messages() -> None:
    broker, _ = broker_with("configured", idle=5.0)
    linked, full = broker.resolve("linked"), broker.resolve("full")
    full.enqueue(Message(data=b"kept"))
    broker.lifetimes.attached(linked, A, ONE, created=True)
    broker.lifetimes.check(now=100.0)
    broker.lifetimes.check(now=200.0)
    assert not gone(broker, "linked") and not gone(broker, "full")
    broker.lifetimes.detached(linked, A, now=300.0)
    broker.lifetimes.check(now=304.0)
    assert not gone(broker, "linked")
    broker.lifetimes.check(now=305.0)
    assert gone(broker, "linked")


def test_the_idle_sweep_is_off_by_default() -> None:
    broker, _ = broker_with("configured")
    broker.resolve("made")
    broker.lifetimes.check(now=100.0)
    broker.lifetimes.check(now=10_000.0)
    assert not gone(broker, "made")


def test_a_queue_declared_by_name_is_not_auto_created() -> None:
    broker, queue = broker_with("configured", idle=1.0)
    assert not queue.auto_created and not broker.resolve("configured").auto_created
