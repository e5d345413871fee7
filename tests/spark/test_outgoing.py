"""Arrow record batches into message bytes: the same messages the documented row mapping
(rows.row_to_message) makes, decoded by Proton; durable by default, header values checked,
and a row read from a queue written back as the same message (a real broker)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from proton import Message, symbol, ulong
from proton.utils import BlockingConnection

from proton_broker.spark import rows as mapping
from proton_broker.spark.client import browse_range, queue_bounds, send_all
from proton_broker.spark.columns import ColumnBatch
from proton_broker.spark.outgoing import messages
from proton_broker.spark.rows import row_to_message
from proton_broker.testing import BrokerProcess

FIELDS = (
    "id",
    "body",
    "properties",
    "address",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
    "user_id",
    "durable",
    "priority",
    "ttl",
)


def _view(message: Message) -> dict[str, Any]:
    return {name: getattr(message, name) for name in FIELDS}


def _decoded(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


ROWS = pa.table(
    {
        "body": pa.array([b"raw", None, None, b""], pa.binary()),
        "body_text": pa.array(["ignored", "from text", None, None]),
        "message_id": pa.array([None, "own-id", None, None]),
        "to": pa.array(["there", None, None, None]),
        "subject": pa.array(["s", None, None, None]),
        "reply_to": pa.array([None, "r", None, None]),
        "correlation_id": pa.array(["c", None, None, None]),
        "content_type": pa.array(["text/plain", None, None, None]),
        "content_encoding": pa.array([None, "gzip", None, None]),
        "group_id": pa.array(["g", None, None, None]),
        "group_sequence": pa.array([5, None, None, None], pa.int64()),
        "reply_to_group_id": pa.array([None, "rg", None, None]),
        "user_id": pa.array([b"u", None, None, None], pa.binary()),
        "durable": pa.array([True, False, None, None]),
        "priority": pa.array([7, None, None, 4], pa.int32()),
        "ttl": pa.array([1.5, None, None, None]),
        "ticker": pa.array(["IBM", None, "X", None]),
        "price": pa.array([1.5, 2.0, None, None]),
        "count": pa.array([1, 2, 3, None], pa.int64()),
        "flag": pa.array([True, None, False, None]),
        "amount": pa.array([Decimal("1.25"), None, None, None], pa.decimal128(5, 2)),
        "day": pa.array([dt.date(2026, 1, 2), None, None, None]),
        "application_properties": pa.array(
            [[("extra", "e"), ("ticker", "map-wins")], None, [("skip", None)], []],
            pa.map_(pa.string(), pa.string()),
        ),
    }
)


def test_each_row_is_the_message_the_row_mapping_makes() -> None:
    batches = ROWS.to_batches(max_chunksize=3)  # two batches: row numbers go on across them
    got = [_decoded(data) for data in messages(iter(batches), "w/0")]
    for n, row in enumerate(ROWS.to_pylist()):
        row = {k: dict(v) if isinstance(v, list) else v for k, v in row.items()}
        expected = _decoded(bytes(row_to_message(row, f"w/0/{n}").encode()))
        assert _view(got[n]) == _view(expected), n


def test_ids_bodies_and_properties_are_what_the_docs_say() -> None:
    got = [_decoded(data) for data in messages(iter(ROWS.to_batches()), "q/3/1")]
    assert [m.id for m in got] == ["q/3/1/0", "own-id", "q/3/1/2", "q/3/1/3"]
    assert [m.body for m in got] == [b"raw", "from text", None, b""]
    assert got[0].properties == {
        "ticker": "map-wins",  # the map comes after the column: a later column wins
        "price": 1.5,
        "count": 1,
        "flag": True,
        "amount": "1.25",
        "day": "2026-01-02",
        "extra": "e",
    }
    assert got[2].properties == {"ticker": "X", "count": 3, "flag": False}
    assert (got[0].durable, got[0].priority, got[0].ttl) == (True, 7, 1.5)
    assert got[3].properties is None


def test_a_timestamp_column_is_the_local_time_a_row_would_hold() -> None:
    moment = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    batch = pa.record_batch(
        {"body": pa.array(["b"]), "at": pa.array([moment], pa.timestamp("us", "UTC"))}
    )
    [data] = messages(iter([batch]), "p")
    local = moment.astimezone().replace(tzinfo=None)
    assert _decoded(data).properties == {"at": local.isoformat()}


def _sent(url: str, queue: str, table: pa.Table, **node: Any) -> None:
    send_all(url, queue, messages(iter(table.to_batches()), "t/0"), timeout=10, node_options=node)


def _received(url: str, queue: str, count: int) -> list[Message]:
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(queue, credit=count)
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=10))
            receiver.accept()
        return got
    finally:
        conn.close()


def test_rows_without_a_durable_column_survive_a_broker_restart(tmp_path: Path) -> None:
    rows = pa.table(
        {"body": pa.array(["kept", "also kept", "lost"]), "durable": [None, True, False]}
    )
    with BrokerProcess("--store", "sqlite", data_dir=str(tmp_path)) as broker:
        _sent(broker.url, "sink.durable", rows.select(["body"]).slice(0, 1), durable=True)
        _sent(broker.url, "sink.durable", rows.slice(1), durable=True)
    with BrokerProcess("--store", "sqlite", data_dir=str(tmp_path)) as broker:
        got = _received(broker.url, "sink.durable", 2)
    assert [(m.body, m.durable) for m in got] == [("kept", True), ("also kept", True)]


@pytest.mark.parametrize(
    ("column", "value", "kind"),
    [
        ("priority", 300, pa.int32()),
        ("priority", -1, pa.int32()),
        ("ttl", -1.0, pa.float64()),
        ("ttl", 5e6, pa.float64()),
        ("ttl", float("nan"), pa.float64()),
        ("group_sequence", -1, pa.int64()),
        ("group_sequence", 2**32, pa.int64()),
    ],
)
def test_a_header_value_outside_its_amqp_type_fails_naming_the_column_and_the_value(
    column: str, value: Any, kind: Any
) -> None:
    batch = pa.record_batch(
        {"body": pa.array(["fine", "bad"]), column: pa.array([None, value], kind)}
    )
    with pytest.raises(
        mapping.RowError, match=rf"column {column}: {re.escape(repr(value))} is outside"
    ):
        next(messages(iter([batch]), "p"))  # refused before the batch's first row is sent
    with pytest.raises(mapping.RowError, match=f"column {column}"):
        row_to_message({"body": "bad", column: value}, "p/0")


def test_a_row_read_from_a_queue_is_written_to_another_as_the_same_message(
    broker_url: str, queue_name: str
) -> None:
    original = Message(
        body="orig",
        id="id-1",
        subject="s",
        durable=True,
        properties={"amount": 12, "flag": True},
        annotations={symbol("x-opt-custom"): "v"},
    )
    original.creation_time, original.expiry_time = 1_700_000_000.25, 4_102_444_800.5
    send_all(broker_url, queue_name, [original])
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    read = ColumnBatch(queue_name)
    for seq, data in browse_range(broker_url, queue_name, bounds.earliest, bounds.next):
        read.add(seq, data)
    source = pa.Table.from_batches([read.batch()])
    amount = pc.cast(pc.map_lookup(source["application_properties"], "amount", "first"), "int64")
    copy = source.append_column("amount_long", amount)  # a typed column keeps its type
    _sent(broker_url, queue_name + ".copy", copy)
    [got] = _received(broker_url, queue_name + ".copy", 1)
    assert (got.id, got.body, got.subject, got.durable) == ("id-1", b"orig", "s", True)
    assert (got.creation_time, got.expiry_time) == (1_700_000_000.25, 4_102_444_800.5)
    assert got.properties == {"amount": "12", "flag": "true", "amount_long": 12}
    assert got.annotations == {
        "x-opt-custom": "v",  # the copy's own number, not the original's:
        "x-opt-sequence-number": ulong(1),
    }


def test_map_columns_are_maps_and_json_never_python_text() -> None:
    rows = pa.table(
        {
            "body": pa.array(["b"]),
            "application_properties": pa.array([[("n", 7)]], pa.map_(pa.string(), pa.int64())),
            "annotations": pa.array(
                [[("x-opt-a", "1"), ("x-opt-sequence", "9")]], pa.map_(pa.string(), pa.string())
            ),
            "meta": pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string())),
            "tags": pa.array([["x", "y"]], pa.list_(pa.string())),
            "creation_time": pa.array(
                [dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)], pa.timestamp("us", "UTC")
            ),
            "sequence_number": pa.array([3], pa.int64()),
            "queue": pa.array(["elsewhere"]),
            "delivery_count": pa.array([2], pa.int64()),
        }
    )
    [data] = messages(iter(rows.to_batches()), "p")
    got = _decoded(data)
    assert got.properties == {"n": 7, "meta": '{"k": "v"}', "tags": '["x", "y"]'}
    assert got.annotations == {"x-opt-a": "1"}
    assert got.creation_time == dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC).timestamp()
    row = {
        k: dict(v) if k in ("application_properties", "annotations", "meta") else v
        for k, v in rows.to_pylist()[0].items()
    }
    expected = _decoded(bytes(row_to_message(row, "p/0").encode()))
    assert _view(got) | {"annotations": got.annotations} == _view(expected) | {
        "annotations": expected.annotations
    }
