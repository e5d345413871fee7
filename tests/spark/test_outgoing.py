"""Arrow record batches into message bytes: the same messages the documented row mapping
(rows.row_to_message) makes, decoded by Proton."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
from proton import Message

from proton_broker.spark.outgoing import messages
from proton_broker.spark.rows import row_to_message

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
