"""Browsed messages into Arrow columns: the same rows as the documented mapping of a
Proton-decoded message (rows.message_to_row), for every section and value kind."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import Message, char, decimal32, decimal64, float32, symbol, timestamp, ubyte, ulong

from proton_broker.spark.client import browse_range, queue_bounds, send_all
from proton_broker.spark.columns import ColumnBatch
from proton_broker.spark.rows import COLUMNS, message_to_row


def _message(**fields: Any) -> Message:
    message = Message()
    for name, value in fields.items():
        setattr(message, name, value)
    return message


MESSAGES = [
    _message(body=b"x" * 100, properties={"n": 1}),
    _message(body="text", id="m-1", subject="s", group_id="g", group_sequence=3),
    _message(body={"a": [1, 2.5, None], "b": b"\xff"}, correlation_id=ulong(7)),
    _message(body=[1, "two"], address="to-here", reply_to="back", reply_to_group_id="rg"),
    _message(body=ulong(5), content_type="text/plain", content_encoding="gzip"),
    _message(body=b"\xff\xfe", user_id=b"alice", id=uuid.UUID(int=5)),
    _message(body=None, durable=True, priority=9, delivery_count=3, ttl=2.0),
    _message(body="t", creation_time=1_700_000_000.5, expiry_time=4_000_000_000.25),
    _message(
        body="props",
        properties={
            "s": "v",
            "b": True,
            "f": 1.5,
            "i": -3,
            "u": ulong(2**63),
            "bin": b"caf\xc3\xa9",
            "sym": symbol("sy"),
            "c": char("z"),
            "t": timestamp(1_700_000_000_000),
            "d32": decimal32(12345),
            "d64": decimal64(2**40),
            "id": uuid.UUID(int=1),
            "none": None,
        },
        annotations={symbol("x-opt-sequence"): 4, symbol("x-opt-other"): "o"},
    ),
    _message(body="keyed", properties={"sensor": "a"}, annotations={"x-opt-sequence": ulong(2)}),
    _message(body="", id=ulong(0), group_sequence=0, priority=ubyte(0)),
]


def _reference(data: bytes, seq: int, key: str | None) -> dict[str, Any]:
    message = Message()
    message.decode(data)
    return dict(zip(COLUMNS, message_to_row("q", seq, message, key), strict=True))


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    """Maps as dicts (Arrow gives them as lists of pairs)."""
    return {k: dict(v) if isinstance(v, list) else v for k, v in row.items()}


@pytest.mark.parametrize("key", [None, "sensor"])
def test_every_message_gives_the_row_the_documented_mapping_gives(key: str | None) -> None:
    rows = ColumnBatch("q", key)
    encoded = [bytes(m.encode()) for m in MESSAGES]
    for seq, data in enumerate(encoded, start=10):
        rows.add(seq, data)
    batch = rows.batch()
    assert batch.schema.names == COLUMNS
    assert len(rows) == 0  # the builder starts again after a batch
    got = batch.to_pylist()
    for seq, (data, row) in enumerate(zip(encoded, got, strict=True), start=10):
        assert _normal(row) == _reference(data, seq, key), MESSAGES[seq - 10]


def test_a_browsed_message_keeps_its_values_and_its_sequence_number(
    broker_url: str, queue_name: str
) -> None:
    send_all(broker_url, queue_name, MESSAGES)
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    rows = ColumnBatch(queue_name)
    browsed = list(browse_range(broker_url, queue_name, bounds.earliest, bounds.next))
    for seq, data in browsed:
        rows.add(seq, data)
    got = rows.batch().to_pylist()
    assert [r["sequence_number"] for r in got] == list(range(bounds.earliest, bounds.next))
    for (seq, data), row in zip(browsed, got, strict=True):
        expected = _reference(data, seq, None) | {"queue": queue_name}
        assert _normal(row) == expected
        assert row["annotations"] and dict(row["annotations"])["x-opt-sequence-number"] == str(seq)


def test_several_data_sections_are_one_body() -> None:
    data = b"\x00\x53\x75\xa0\x02ab" + b"\x00\x53\x75\xa0\x02cd"
    rows = ColumnBatch("q")
    rows.add(1, data)
    [row] = rows.batch().to_pylist()
    assert (row["body"], row["body_text"]) == (b"abcd", "abcd")


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({1: "a", "b": 2}, '{"1": "a", "b": 2}'),
        ({b"k": 1}, '{"k": 1}'),
        ({uuid.UUID(int=4): [None, float("nan")]}, f'{{"{uuid.UUID(int=4)}": [null, "nan"]}}'),
        ({None: True, False: 1.5}, '{"false": 1.5, "null": true}'),
    ],
    ids=["mixed-keys", "binary-key", "uuid-key-nan", "null-and-boolean-keys"],
)
def test_a_map_body_json_cannot_hold_as_it_is_is_read_as_json_text(body: Any, text: str) -> None:
    data = bytes(_message(body=body).encode())
    rows = ColumnBatch("q")
    rows.add(1, data)
    [row] = rows.batch().to_pylist()
    assert (row["body"], row["body_text"]) == (text.encode(), text)
    if not isinstance(next(iter(body)), bytes):  # Proton cannot decode a binary map key
        assert _normal(row) == _reference(data, 1, None)


def test_annotation_and_property_values_that_are_maps_or_lists_are_json() -> None:
    message = _message(
        body="b", annotations={symbol("x-opt-foo"): {"nested": [1, 2]}, symbol("x-opt-l"): [True]}
    )
    data = bytes(message.encode())
    rows = ColumnBatch("q")
    rows.add(1, data)
    [row] = rows.batch().to_pylist()
    assert dict(row["annotations"]) == {"x-opt-foo": '{"nested": [1, 2]}', "x-opt-l": "[true]"}
    assert _normal(row) == _reference(data, 1, None)


def test_the_key_column_is_the_key_the_broker_holds_for_numbers_and_booleans(
    broker_url: str, queue_name: str
) -> None:
    sent = [2, 2.0, True, "1", float32(0.1), 0.1]
    send_all(
        broker_url,
        queue_name,
        [_message(body=f"v{n}", properties={"k": value}) for n, value in enumerate(sent)],
        node_options={"sequenceKey": "k"},
    )
    bounds = queue_bounds(broker_url, [queue_name])[queue_name]
    assert bounds.key == "k"
    rows = ColumnBatch(queue_name, "k")
    browsed = list(browse_range(broker_url, queue_name, bounds.earliest, bounds.next))
    for seq, data in browsed:
        rows.add(seq, data)
    got = rows.batch().to_pylist()
    assert [(r["key"], r["key_sequence"]) for r in got] == [
        ("2", 1),
        ("2", 2),  # the broker numbers the long 2 and the double 2.0 as one key
        ("1", 1),
        ("1", 2),
        ("0.100000001", 1),  # a float, not a double: qpidd's %.9g
        ("0.10000000000000001", 1),
    ]
    for (seq, data), row in zip(browsed, got, strict=True):
        assert _normal(row) == _reference(data, seq, "k") | {"queue": queue_name}
