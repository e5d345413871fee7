"""The sink's messages: Arrow record batches of a task's rows, encoded as message bytes.

Rules this module owns:

* The mapping is the row rules of :mod:`proton_broker.spark.rows` (as
  :func:`~proton_broker.spark.rows.row_to_message` states them for one row, which
  tests/spark/test_outgoing.py holds this module to): ``body`` (or ``body_text`` when
  ``body`` is null) is the body, the property, time and header columns fill those fields
  (durable unless the row says not), the ``annotations`` map the message annotations, the
  ``application_properties`` map and every other column become application properties
  (a later column replacing an earlier key), the source-only columns are not written,
  nulls are left out, and the message id is the row's own ``message_id`` or
  ``prefix/row``.
* A batch's header and property values are checked before any of its rows is sent: one
  outside its AMQP type fails the task (:class:`~proton_broker.spark.rows.RowError`,
  naming the column and the value) instead of being wrapped into another value.
* Spark hands the rows over as Arrow record batches (``DataSourceArrowWriter``), so a row is
  never made a ``pyspark.sql.Row`` nor a ``proton.Message``: each column is read into a
  Python list once and the messages are joined from their encoded pieces
  (:mod:`proton_broker.spark.encoding`). Values that are not AMQP simple types become
  application properties as :func:`~proton_broker.spark.rows.row_to_message` makes them
  (a timestamp as the ISO text of the local time a ``Row`` would hold, a map, list or
  struct as JSON, anything else its ``str``); a map column is a dict, as in a ``Row``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from proton_broker.spark import encoding
from proton_broker.spark.rows import (
    QUEUE_ANNOTATIONS,
    SOURCE_ONLY,
    annotation_key,
    check_header,
    epoch_seconds,
    scalar,
)

# Property columns: their place in the properties list, and how a value is encoded.
_TEXT = encoding.string
_PROPERTY_COLUMNS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "to": (encoding.TO, lambda v: _TEXT(str(v))),
    "subject": (encoding.SUBJECT, lambda v: _TEXT(str(v))),
    "reply_to": (encoding.REPLY_TO, lambda v: _TEXT(str(v))),
    "correlation_id": (encoding.CORRELATION_ID, encoding.identifier),
    "content_type": (encoding.CONTENT_TYPE, lambda v: encoding.symbol(str(v))),
    "content_encoding": (encoding.CONTENT_ENCODING, lambda v: encoding.symbol(str(v))),
    "group_id": (encoding.GROUP_ID, lambda v: _TEXT(str(v))),
    "group_sequence": (encoding.GROUP_SEQUENCE, lambda v: encoding.uint(int(v))),
    "reply_to_group_id": (encoding.REPLY_TO_GROUP_ID, lambda v: _TEXT(str(v))),
    "user_id": (encoding.USER_ID, lambda v: encoding.binary(bytes(v))),
    "absolute_expiry_time": (
        encoding.ABSOLUTE_EXPIRY_TIME,
        lambda v: encoding.timestamp(int(epoch_seconds("absolute_expiry_time", v) * 1000)),
    ),
    "creation_time": (
        encoding.CREATION_TIME,
        lambda v: encoding.timestamp(int(epoch_seconds("creation_time", v) * 1000)),
    ),
}
_HEADER_COLUMNS = ("durable", "priority", "ttl")
_NOT_PROPERTIES = (
    "message_id",
    "body",
    "body_text",
    "annotations",
    *_HEADER_COLUMNS,
    *_PROPERTY_COLUMNS,
    *SOURCE_ONLY,
)


def messages(batches: Iterator[Any], prefix: str) -> Iterator[bytes]:
    """The encoded message of every row of ``batches``, in order; row ``n`` of the task
    gets the id ``prefix/n`` unless it has its own."""
    index = 0
    for batch in batches:
        columns = {name: _column(batch, i) for i, name in enumerate(batch.schema.names)}
        _check(columns, batch.num_rows)
        yield from _batch_messages(columns, batch.num_rows, prefix, index)
        index += batch.num_rows


def _column(batch: Any, index: int) -> list[Any]:
    """One column's values; a map column's as dicts (Arrow gives lists of pairs)."""
    values: list[Any] = batch.column(index).to_pylist()
    if str(batch.schema.field(index).type).startswith("map<"):
        return [None if value is None else dict(value) for value in values]
    return values


def _check(columns: dict[str, list[Any]], rows: int) -> None:
    """Refuse the batch if a header or property value lies outside its AMQP type."""
    checked = [columns.get(name) for name in ("priority", "ttl", "group_sequence")]
    if any(checked):
        nulls = [None] * rows
        for priority, ttl, group_sequence in zip(*(c or nulls for c in checked), strict=True):
            check_header(priority, ttl, group_sequence)


def _batch_messages(
    columns: dict[str, list[Any]], rows: int, prefix: str, first: int
) -> Iterator[bytes]:
    bodies = _bodies(columns, rows)
    ids = columns.get("message_id") or [None] * rows
    properties = [
        (place, code, columns[name])
        for name, (place, code) in _PROPERTY_COLUMNS.items()
        if name in columns
    ]
    header = [columns.get(name) for name in _HEADER_COLUMNS]
    annotations = columns.get("annotations") or [None] * rows
    app = _application_columns(columns)
    for row in range(rows):
        fields = [encoding.NULL] * 13
        own_id = ids[row]
        fields[encoding.MESSAGE_ID] = (
            encoding.identifier(own_id) if own_id else _TEXT(f"{prefix}/{first + row}")
        )
        for place, code, values in properties:
            if values[row] is not None:
                fields[place] = code(values[row])
        yield b"".join(
            (
                _header(header, row),
                _annotations(annotations[row]),
                encoding.properties(fields),
                _application_properties(app, row),
                bodies[row],
            )
        )


def _bodies(columns: dict[str, list[Any]], rows: int) -> list[bytes]:
    """Each row's body section: ``body``, else ``body_text``, else none."""
    body = columns.get("body") or [None] * rows
    fallback = columns.get("body_text") or [None] * rows
    return [
        encoding.body(value if value is not None else fallback[n]) for n, value in enumerate(body)
    ]


def _header(header: list[list[Any] | None], row: int) -> bytes:
    """The header: durable unless the row's ``durable`` is false (see the module rules)."""
    durable, priority, ttl = (None if values is None else values[row] for values in header)
    return encoding.header(durable is None or bool(durable), priority, ttl)


def _annotations(values: dict[Any, Any] | None) -> bytes:
    """The ``annotations`` map as message annotations, without the source queue's numbers."""
    if not values:
        return b""
    kept = {
        annotation_key(key): scalar(value)
        for key, value in values.items()
        if value is not None and key not in QUEUE_ANNOTATIONS
    }
    return encoding.MESSAGE_ANNOTATIONS + encoding.symbol_map(kept) if kept else b""


def _application_columns(columns: dict[str, list[Any]]) -> list[tuple[str | None, list[Any]]]:
    """The columns that become application properties, in column order: (name, values),
    or (None, values) for the ``application_properties`` map column."""
    out: list[tuple[str | None, list[Any]]] = []
    for name, values in columns.items():
        if name == "application_properties":
            out.append((None, values))
        elif name not in _NOT_PROPERTIES:
            out.append((name, values))
    return out


def _application_properties(app: list[tuple[str | None, list[Any]]], row: int) -> bytes:
    values: dict[str, Any] = {}
    for name, column in app:
        value = column[row]
        if value is None:
            continue
        if name is not None:
            values[name] = scalar(value)
        else:  # the application_properties map column
            values.update((str(k), scalar(v)) for k, v in value.items() if v is not None)
    if not values:
        return b""
    return encoding.APPLICATION_PROPERTIES + encoding.string_map(values)
