"""The collector's rules (proton_broker/collector.py): message records and a key's lists of
versions are out of the cyclic collector's view, no cycle can pass through a record, and
what they hold is never freed early."""

from __future__ import annotations

import copy
import gc
import subprocess
import sys
from typing import Any

from proton import Disposition
from proton import Message as ProtonMessage

from proton_broker import collector
from proton_broker.codec.sections import parse_message
from proton_broker.message import Extras, Fields, Header, Message, unpack
from proton_broker.queues.entries import Entry, GroupedEntry, KeyedEntry, RankedEntry
from proton_broker.queues.history import FIRST, History
from tests.amqp.test_selectors import jms_selector
from tests.amqp.test_sequence import LVQ, replay_receiver, seen
from tests.conftest import RunningBroker

# What each slot of a record may hold, checked to be values only (bytes, numbers, text,
# tuples shared by many records, the side record of decoded AMQP values): a slot added to
# the record must be checked too, and added here.
NONE = type(None)
RECORD_SLOTS: dict[str, tuple[type, ...]] = {
    "annotations_span": (tuple, NONE),
    "app_properties_span": (tuple, NONE),
    "arrival": (float,),
    "data": (bytes,),
    "delivery_annotations_end": (int,),
    "extras": (Extras, NONE),
    "fields": (Fields,),
    "header": (Header,),
    "header_end": (int,),
    "in_history": (bool,),
    "number": (int, NONE),
    "number_unwritten": (bool,),
    "on_queue": (bool,),
    "paged": (bool,),
    "sequence": (int, NONE),
    "store_id": (int, NONE),
}

# An entry's slots, each checked the same way (its rank: a priority level or a sort key's
# value; a grouped entry's rank is its group, so a grouped entry stays in view).
ENTRY_VALUE_SLOTS = {
    "seq",
    "message",
    "arrival",
    "state",
    "delivery_count",
    "expires_at",
    "excluded",
    "rank",
    "key",
}


def a_record() -> Message:
    sent = ProtonMessage(id="m-1", subject="quote", body=b"x" * 100, properties={"id": "IBM"})
    return parse_message(sent.encode())


def test_the_helper_was_built_where_the_tests_run() -> None:
    assert collector.COMPILED is not None


def test_a_record_is_out_of_the_collectors_view_however_it_is_made() -> None:
    record = a_record()
    layout = (
        record.header_end,
        record.header,
        record.fields,
        record.app_properties_span,
        record.annotations_span,
        record.delivery_annotations_end,
    )
    made = {
        "parsed": record,
        "copied for another queue": copy.copy(record),
        "unpacked": unpack(record.data, layout, 1.0, 7),
        "made from bytes": Message(b"\x00Sw\xa1\x01x"),
    }
    assert {how: gc.is_tracked(each) for how, each in made.items()} == dict.fromkeys(made, False)


def test_an_entry_is_out_of_the_collectors_view_unless_its_rank_is_a_group() -> None:
    kinds = (Entry, RankedEntry, KeyedEntry, GroupedEntry)
    tracked = {kind.__name__: gc.is_tracked(kind(1, a_record(), None)) for kind in kinds}
    assert tracked == {
        "Entry": False,
        "RankedEntry": False,
        "KeyedEntry": False,
        "GroupedEntry": True,
    }


def test_a_key_with_two_versions_keeps_them_in_a_list_out_of_the_collectors_view() -> None:
    for keep in (100, None):  # a list, and a deque where there is no bound
        history = History(keep, "id")
        for order in (1, 2):
            record = a_record()
            key = history.numbered(record)
            assert key == "IBM"
            history.arrived(key, record, order)
        versions = history._versions["IBM"]
        assert len(versions) == 2  # type: ignore[arg-type]
        assert not gc.is_tracked(versions)


def test_every_slot_of_a_record_is_one_checked_to_hold_values_only() -> None:
    assert set(Message.__slots__) == set(RECORD_SLOTS), (
        "a new slot must hold values only, never anything that can refer back to the "
        "record (proton_broker/collector.py), and be added to RECORD_SLOTS once checked"
    )


def test_every_slot_of_an_entry_out_of_view_is_one_checked_to_hold_values_only() -> None:
    slots = {
        slot
        for kind in (Entry, RankedEntry, KeyedEntry)
        for klass in kind.__mro__
        for slot in getattr(klass, "__slots__", ())
    }
    assert slots == ENTRY_VALUE_SLOTS, (
        "a new slot of an entry out of the collector's view must hold values only "
        "(proton_broker/queues/entries.py), and be added to ENTRY_VALUE_SLOTS once checked"
    )


def reachable_from(start: object) -> list[object]:
    """Everything ``start`` refers to, and what that refers to, and so on (not ``start``
    itself unless a cycle leads back to it)."""
    seen_ids: set[int] = set()
    found: list[object] = []
    todo = list(gc.get_referents(start))
    while todo:
        each = todo.pop()
        if id(each) in seen_ids or isinstance(each, type):
            continue
        seen_ids.add(id(each))
        found.append(each)
        todo.extend(gc.get_referents(each))
    return found


def not_values(objects: list[object]) -> set[str]:
    """The types among ``objects`` that are not values: not built-in, not the record's own
    parts, not what the codec decodes to."""
    value_modules = ("builtins", "proton_broker.message", "proton_broker.codec.values")
    return {
        f"{type(each).__module__}.{type(each).__qualname__}"
        for each in objects
        if type(each).__module__ not in value_modules
    }


def test_what_a_kept_record_refers_to_never_leads_back_to_it(broker: RunningBroker) -> None:
    client = broker.client()
    sender = client.sender("prices", node_properties=LVQ)
    for price in (100, 101, 102):
        message = ProtonMessage(
            id=f"m-{price}",
            subject="quote",
            group_id="g",
            ttl=60,
            durable=True,
            body=price,
            properties={"id": "IBM", "colour": "red"},
            annotations={"x-opt-note": "a note"},
        )
        client.send(sender, message)
    selecting = client.receiver(
        "prices", credit=10, filters=jms_selector("JMSReplyTo IS NULL AND colour = 'red'")
    )
    client.wait_received(selecting, 1)  # the selector decoded the properties into the record
    browsing = replay_receiver(client, "prices", FIRST, key="IBM")
    client.wait_received(browsing, 3)
    assert [body for body, _ in seen(client, browsing)] == [100, 101, 102]

    def kept_records() -> list[Any]:
        """The kept versions' records, every section decoded into the side record (as a
        headers exchange and the web console decode them)."""
        records = [v.message for v in broker.broker.queues["prices"].history.replay(FIRST)]
        for record in records:
            assert record.application_properties["colour"] == "red"
            assert record.message_annotations["x-opt-note"] == "a note"
        return records

    records = broker.call(kept_records)
    assert len(records) == 3
    assert all(record.extras is not None for record in records)  # the side record is walked too
    assert any(record.properties_cache is not None for record in records)  # the selector's
    for record in records:
        held = {slot: getattr(record, slot) for slot in RECORD_SLOTS}
        assert {
            slot: type(value)
            for slot, value in held.items()
            if not isinstance(value, RECORD_SLOTS[slot])
        } == {}
        reached = reachable_from(record)
        assert all(each is not record for each in reached)
        assert not_values(reached) == set()


def test_versions_out_of_the_collectors_view_outlive_a_full_collection(
    broker: RunningBroker,
) -> None:
    client = broker.client()
    sender = client.sender("prices", node_properties=LVQ)
    for price in (100, 101, 102):
        client.send(sender, ProtonMessage(body=price, properties={"id": "IBM"}))
    client.wait(lambda: broker.call(lambda: broker.broker.queues["prices"].depth) == 1)
    broker.call(gc.collect)
    replay = replay_receiver(client, "prices", FIRST, key="IBM")
    client.wait_received(replay, 3)
    assert seen(client, replay) == [(100, 1), (101, 2), (102, 3)]


def test_without_the_helper_a_record_stays_in_the_collectors_view() -> None:
    hide_the_helper = (
        "import sys, gc; sys.modules['proton_broker._collector'] = None\n"
        "from proton_broker import collector\n"
        "from proton_broker.message import Message\n"
        "print(collector.COMPILED, gc.is_tracked(Message(b'')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", hide_the_helper], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["None", "True"]


def test_the_thresholds_are_the_brokers_once_configured() -> None:
    before = gc.get_threshold()
    try:
        collector.configure()
        assert gc.get_threshold() == collector.GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)


def test_what_a_queued_entry_refers_to_never_leads_back_to_it(broker: RunningBroker) -> None:
    kinds = {
        "plain": {},
        "ranked": {"qpid.priorities": 10},
        "sorted": {"qpid.queue_sort_key": "colour"},
        "keyed": LVQ,
    }
    client = broker.client()
    for name, node_properties in kinds.items():
        sender = client.sender(name, node_properties=node_properties)
        for colour in ("red", "blue"):
            message = ProtonMessage(
                id=colour,
                ttl=60,
                priority=7,
                body=colour,
                properties={"id": colour, "colour": colour},
            )
            client.send(sender, message)
        # one entry acquired and released as undeliverable here (its excluded set)
        taker = client.receiver(name, credit=1)
        (received,) = client.wait_received(taker, 1)
        client.settle(received, Disposition.MODIFIED, failed=True, undeliverable=True)

    def queued_entries() -> dict[str, list[Any]]:
        return {name: list(broker.broker.queues[name].entries()) for name in kinds}

    queued = broker.call(queued_entries)
    assert {name: len(entries) for name, entries in queued.items()} == dict.fromkeys(kinds, 2)
    assert all(any(entry.excluded for entry in entries) for entries in queued.values())
    for entries in queued.values():
        for entry in entries:
            assert not gc.is_tracked(entry)
            reached = reachable_from(entry)
            assert all(each is not entry for each in reached)
            assert not_values(reached) == set()
