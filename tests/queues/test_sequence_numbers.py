"""Queue sequence numbers: given at enqueue, strictly increasing from 1, never reused; browse
from a number finds its start by bisection; earliest and next as queue properties."""

from __future__ import annotations

from collections.abc import Callable

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.entries import ArrivalLog
from proton_broker.queues.factory import build_queue
from proton_broker.queues.history import KEY_BLOCK
from proton_broker.queues.numbering import NUMBER_BLOCK
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from tests.queues.consumers import Taker


def msg(body: object, priority: int = 4) -> Message:
    return parse_message(proton.Message(body=body, priority=priority).encode())


def fill(q: Queue, count: int) -> None:
    for i in range(count):
        q.enqueue(msg(i))


def numbers(taker: Taker) -> list[int | None]:
    return [e.message.number for e in taker.got]


def test_messages_are_numbered_from_one_in_arrival_order() -> None:
    q = build_queue("numbered")
    fill(q, 3)
    assert [e.message.number for e in q.entries()] == [1, 2, 3]
    assert [e.seq for e in q.entries()] == [1, 2, 3]
    assert q.next_sequence_number == 4


def test_an_empty_queue_reports_earliest_equal_to_next() -> None:
    q = build_queue("empty")
    assert (q.earliest_sequence_number, q.next_sequence_number) == (1, 1)
    fill(q, 2)
    taker = Taker(credit=2)
    q.subscribe(taker)
    for entry in taker.got:
        q.settle(entry)
    assert (q.earliest_sequence_number, q.next_sequence_number) == (3, 3)


def test_earliest_is_the_lowest_number_still_on_the_queue() -> None:
    q = build_queue("earliest")
    fill(q, 5)
    taker = Taker(credit=2)
    q.subscribe(taker)
    assert q.earliest_sequence_number == 1  # acquired, not settled: still on the queue
    q.settle(taker.got[1])
    assert q.earliest_sequence_number == 1
    q.settle(taker.got[0])
    assert q.earliest_sequence_number == 3


def test_numbers_are_not_reused_after_messages_leave() -> None:
    q = build_queue("no-reuse")
    fill(q, 2)
    taker = Taker(credit=2)
    q.subscribe(taker)
    for entry in taker.got:
        q.settle(entry)
    q.enqueue(msg("later"))
    assert [e.message.number for e in q.entries()] == [3]


def test_a_browser_from_n_gets_numbers_at_or_above_n_then_new_ones() -> None:
    q = build_queue("from-n")
    fill(q, 5)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=3)
    assert numbers(browser) == [3, 4, 5]
    q.enqueue(msg("new"))
    assert numbers(browser) == [3, 4, 5, 6]
    assert q.depth == 6  # browsing takes nothing


def test_browsing_from_a_number_that_has_left_starts_at_the_next_one_still_there() -> None:
    q = build_queue("ring", parse_settings({"qpid.max_count": 3, "qpid.policy_type": "ring"}))
    fill(q, 6)  # the ring dropped 1, 2 and 3
    assert q.earliest_sequence_number == 4
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=2)
    assert numbers(browser) == [4, 5, 6]


def test_a_browser_from_a_future_number_waits_for_it() -> None:
    q = build_queue("future")
    fill(q, 2)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=4)
    q.enqueue(msg("three"))
    assert browser.got == []
    q.enqueue(msg("four"))
    assert numbers(browser) == [4]


def test_on_a_priority_queue_browsing_from_a_number_sees_the_numbers_from_it_by_level() -> None:
    q = build_queue("prio", parse_settings({"qpid.priorities": 10}))
    for priority in (1, 9, 5, 7):
        q.enqueue(msg(priority, priority))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=2)
    assert numbers(browser) == [2, 4, 3]
    assert [body(e.message) for e in browser.got] == [9, 7, 5]


def body(message: Message) -> object:
    decoded = proton.Message()
    decoded.decode(message.data)
    return decoded.body


def test_browsing_from_n_finds_its_start_without_walking_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = build_queue("big")
    fill(q, 5_000)
    reads = []
    at = ArrivalLog.at
    monkeypatch.setattr(ArrivalLog, "at", lambda log, index: reads.append(index) or at(log, index))
    browser = Taker(credit=1, browse=True)
    q.subscribe(browser, from_number=3_000)
    assert numbers(browser) == [3_000]
    assert len(reads) == 1  # bisection found the index: one entry read, not 3,000


def test_a_consumer_that_does_not_browse_cannot_start_from_a_number() -> None:
    q = build_queue("move")
    with pytest.raises(InvalidField, match="x-opt-sequence-number"):
        q.subscribe(Taker(credit=1), from_number=1)
    assert q.consumer_count == 0


class Journal:
    """What the broker's store journal records, kept in lists."""

    def __init__(self, at_once: bool = True) -> None:
        self.numbers: list[tuple[int, int]] = []
        self.reserved: list[int] = []
        self.keys_reserved: list[int] = []  # key numbers (a keyed queue's history)
        self.at_once = at_once  # complete each write at once, as the memory store does
        self.writing: list[Callable[[BaseException | None], object]] = []
        self.gone: list[int] = []  # store ids of messages that left the queue

    def numbered(
        self, queue: Queue, message: Message, done: Callable[[BaseException | None], object]
    ) -> None:
        self.numbers.append((message.store_id, message.number))  # type: ignore[arg-type]
        if self.at_once:
            done(None)
        else:
            self.writing.append(done)

    def finish_one(self) -> None:
        """The oldest number write reaches the disk."""
        self.writing.pop(0)(None)

    def reserve(self, queue: Queue, upto: int) -> None:
        self.reserved.append(upto)

    def reserve_keys(self, queue: Queue, upto: int) -> None:
        self.keys_reserved.append(upto)

    def forgot(self, queue: Queue, key: str, floor: int) -> None:
        pass

    def seen(self, queue: Queue, key: str, when: float) -> None:
        pass

    def unseen(self, queue: Queue, key: str) -> None:
        pass

    def removed(self, queue: Queue, store_id: int) -> None:
        self.gone.append(store_id)

    def retired(self, queue: Queue, store_id: int) -> None:
        self.gone.append(store_id)


def test_a_durable_queue_reserves_numbers_a_block_ahead_and_writes_stored_ones() -> None:
    q = build_queue("durable", parse_settings({"durable": True}))
    journal = Journal()
    q.make_durable(journal)
    stored = msg("stored")
    stored.store_id = 41
    q.enqueue(stored)
    q.enqueue(msg("transient"))
    assert journal.numbers == [(41, 1)]  # only a stored message's number is written
    assert len(journal.reserved) == 1 and journal.reserved[0] > NUMBER_BLOCK
    for i in range(NUMBER_BLOCK // 2):
        q.enqueue(msg(i))
    assert len(journal.reserved) == 2 and journal.reserved[1] > journal.reserved[0]
    assert q.next_sequence_number < journal.reserved[-1]


def keyed(key: str, durable: bool, store_id: int | None = None) -> Message:
    message = parse_message(proton.Message(durable=durable, properties={"id": key}).encode())
    message.store_id = store_id  # the broker gives a durable message on a durable queue one
    return message


def test_a_durable_keyed_queue_reserves_key_numbers_only_for_versions_not_stored() -> None:
    q = build_queue("keyed", parse_settings({"durable": True, "sequenceKey": "id"}))
    journal = Journal()
    q.make_durable(journal)
    for store_id in (1, 2, 3):
        q.enqueue(keyed("a", durable=True, store_id=store_id))  # its key's row goes with it
    assert journal.keys_reserved == []
    q.enqueue(keyed("a", durable=False))  # number 4, which no stored row will say
    assert journal.keys_reserved == [4 + KEY_BLOCK]
    for _ in range(5 + KEY_BLOCK // 2):  # "b" goes past the reservation's first half
        q.enqueue(keyed("b", durable=False))
    assert journal.keys_reserved == [4 + KEY_BLOCK, 4 + KEY_BLOCK // 2 + 1 + KEY_BLOCK]


def test_a_queue_that_is_not_durable_reserves_no_key_numbers() -> None:
    q = build_queue("keyed", parse_settings({"sequenceKey": "id"}))
    q.enqueue(keyed("a", durable=False))
    assert q.history is not None and q.history.current("a") == 1  # numbered, nothing kept


def test_restoring_numbers_continues_above_the_floor_and_reserves_at_once() -> None:
    q = build_queue("restored")
    journal = Journal()
    q.make_durable(journal)
    q.enqueue(msg("kept"), number=7)  # as recovery gives a stored message its number back
    q.numbers.restore(70_000)
    q.enqueue(msg("new"))
    assert [e.seq for e in q.entries()] == [7, 70_000]
    assert q.earliest_sequence_number == 7
    assert journal.reserved[-1] == 70_000 + NUMBER_BLOCK


def stored_queue(journal: Journal) -> Queue:
    q = build_queue("durable", parse_settings({"durable": True}))
    q.make_durable(journal)
    return q


def stored_msg(body: object, store_id: int) -> Message:
    message = msg(body)
    message.store_id = store_id
    return message


def test_a_browser_waits_at_a_stored_message_until_its_number_is_on_disk() -> None:
    journal = Journal(at_once=False)
    q = stored_queue(journal)
    q.enqueue(msg("before"))
    q.enqueue(stored_msg("stored", 1))
    q.enqueue(msg("after"))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=1)
    assert numbers(browser) == [1]  # not past number 2: a crash could still renumber it
    assert q.next_sequence_number == 2  # readers plan no further than that either
    journal.finish_one()
    assert numbers(browser) == [1, 2, 3]
    assert q.next_sequence_number == 4


def test_a_consumer_takes_a_stored_message_before_its_number_is_on_disk() -> None:
    journal = Journal(at_once=False)
    q = stored_queue(journal)
    q.enqueue(stored_msg("stored", 1))
    consumer = Taker(credit=10)
    q.subscribe(consumer)
    assert numbers(consumer) == [1]  # only browsers wait: a consumer's copy is its own


def test_a_stored_message_consumed_before_its_number_is_written_does_not_hold_browsers() -> None:
    journal = Journal(at_once=False)
    q = stored_queue(journal)
    q.enqueue(stored_msg("gone", 1))
    consumer = Taker(credit=1)
    q.subscribe(consumer)
    q.settle(consumer.got[0])
    q.enqueue(msg("next"))
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=1)
    assert numbers(browser) == [2]


def test_a_message_renumbered_at_recovery_waits_for_its_new_number_to_be_written() -> None:
    journal = Journal(at_once=False)
    q = stored_queue(journal)
    recovered = stored_msg("came back without a number", 7)
    q.enqueue(recovered, number=5)  # as recovery gives it a new number
    q.numbers.write(recovered)
    browser = Taker(credit=10, browse=True)
    q.subscribe(browser, from_number=1)
    assert numbers(browser) == []  # another crash now could give it yet another number
    assert q.next_sequence_number == 5
    journal.finish_one()
    assert numbers(browser) == [5]
    assert journal.numbers[-1] == (7, 5)
