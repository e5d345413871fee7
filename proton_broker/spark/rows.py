"""How AMQP messages become Spark rows and rows become AMQP messages.

Rules this module owns (plain Python, no Spark, so it is unit-tested on its own):

* A row has one column per message property (flat, so SQL reads them without struct
  paths), the body twice (``body``: the bytes; ``body_text``: the text, where it is text),
  application properties and message annotations as ``map<string,string>`` (Spark maps
  hold one value type: values are turned into text, as queues compare them), the queue,
  the sequence number, and the queue key and per-key sequence where present.
* Body as text: a string body is itself; a binary body is its UTF-8 text when it is valid
  UTF-8; any other AMQP value (map, list, number) is its JSON text.
* A row to write: the columns named below map to the body and the message properties;
  ``application_properties`` (a map column) and every other column become application
  properties (the LVQ key or the group id column of a queue, for example). Nulls are left
  out. The message id is the writer's deterministic id unless the row brings its own.
* :func:`message_to_row` and :func:`row_to_message` state these rules for one message or
  row with ``proton.Message``, in their plainest form. The connector's own paths do the
  same without Proton's message objects (:mod:`proton_broker.spark.columns` reads
  browsed bytes into Arrow columns, :mod:`proton_broker.spark.outgoing` encodes Arrow
  batches), and the tests hold them to these two functions.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from cproton import pn_message_get_content_encoding, pn_message_get_content_type
from proton import Message

from proton_broker.codec.values import as_text as text

_FIELDS = (
    ("queue", "STRING"),
    ("sequence_number", "BIGINT"),
    ("body", "BINARY"),
    ("body_text", "STRING"),
    ("message_id", "STRING"),
    ("user_id", "BINARY"),
    ("to", "STRING"),
    ("subject", "STRING"),
    ("reply_to", "STRING"),
    ("correlation_id", "STRING"),
    ("content_type", "STRING"),
    ("content_encoding", "STRING"),
    ("absolute_expiry_time", "TIMESTAMP"),
    ("creation_time", "TIMESTAMP"),
    ("group_id", "STRING"),
    ("group_sequence", "BIGINT"),
    ("reply_to_group_id", "STRING"),
    ("durable", "BOOLEAN"),
    ("priority", "INT"),
    ("delivery_count", "BIGINT"),
    ("application_properties", "MAP<STRING, STRING>"),
    ("annotations", "MAP<STRING, STRING>"),
    ("key", "STRING"),
    ("key_sequence", "BIGINT"),
)
COLUMNS = [name for name, _ in _FIELDS]
SCHEMA = ", ".join(f"`{name}` {kind}" for name, kind in _FIELDS)  # Spark DDL
KEY_SEQUENCE = "x-opt-sequence"


def arrow_fields() -> list[Any]:
    """The source columns as pyarrow fields (read() hands Spark Arrow record batches, which
    cross into the JVM far cheaper than one pickled tuple per row)."""
    import pyarrow as pa

    text_map = pa.map_(pa.string(), pa.string())
    kinds = {
        "STRING": pa.string(),
        "BIGINT": pa.int64(),
        "BINARY": pa.binary(),
        "TIMESTAMP": pa.timestamp("us", "UTC"),
        "BOOLEAN": pa.bool_(),
        "INT": pa.int32(),
        "MAP<STRING, STRING>": text_map,
    }
    return [pa.field(name, kinds[kind]) for name, kind in _FIELDS]


# Columns a writer maps onto message fields (every other column is an application property).
_WRITE_PROPERTIES = (
    "to",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
    "user_id",
)
_WRITE_HEADER = ("durable", "priority", "ttl")
_WRITE_IGNORED = ("body_text",)  # a row read from the source carries both bodies


def _text_map(values: Mapping[Any, Any] | None) -> dict[str, str | None]:
    return {str(text(k)): text(v) for k, v in (values or {}).items()}


def body_columns(body: Any) -> tuple[bytes | None, str | None]:
    """The ``body`` and ``body_text`` columns of a message body (see the module rules)."""
    if body is None:
        return None, None
    if isinstance(body, str):
        return body.encode("utf-8"), str(body)
    if isinstance(body, bytes | bytearray | memoryview):
        raw = bytes(body)
        try:
            return raw, raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw, None
    rendered = json.dumps(body, default=_json_default, sort_keys=True)
    return rendered.encode("utf-8"), rendered


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _time(millis: Any) -> _dt.datetime | None:
    if not millis:
        return None
    return _dt.datetime.fromtimestamp(float(millis), tz=_dt.UTC)  # proton gives seconds


def message_to_row(
    queue: str, seq: int, message: Message, key_property: str | None = None
) -> tuple[Any, ...]:
    """One source row, in :data:`SCHEMA` order."""
    body, body_text = body_columns(message.body)
    props = message.properties or {}
    annotations = message.annotations or {}
    key_seq = annotations.get(KEY_SEQUENCE)
    key = text(props.get(key_property)) if key_property else None
    return (
        queue,
        seq,
        body,
        body_text,
        text(message.id),
        bytes(message.user_id) if message.user_id else None,
        message.address,
        message.subject,
        message.reply_to,
        text(message.correlation_id),
        _symbol_field(pn_message_get_content_type(message._msg)),
        _symbol_field(pn_message_get_content_encoding(message._msg)),
        _time(message.expiry_time),
        _time(message.creation_time),
        message.group_id,
        int(message.group_sequence) if message.group_sequence else None,
        message.reply_to_group_id,
        bool(message.durable),
        int(message.priority),
        int(message.delivery_count),
        _text_map(props),
        _text_map(annotations),
        key,
        int(key_seq) if key_seq is not None else None,
    )


def _symbol_field(raw: str | None) -> str | None:
    """content-type and content-encoding as set, or None: read with Proton's C getters,
    since ``Message.content_type`` turns an unset field into ``symbol(None)``, the text
    'None'."""
    return None if raw is None else str(raw)


def row_to_message(row: Mapping[str, Any], message_id: str) -> Message:
    """The message a sink sends for one row (see the module rules)."""
    message = Message()
    message.id = row.get("message_id") or message_id
    body = row.get("body")
    message.body = bytes(body) if isinstance(body, bytearray | memoryview) else body
    if message.body is None and row.get("body_text") is not None:
        message.body = row["body_text"]
    app: dict[str, Any] = {}
    for column, value in row.items():
        if value is None or column in ("message_id", "body", *_WRITE_IGNORED):
            continue
        if column in _WRITE_PROPERTIES:
            setattr(
                message,
                "address" if column == "to" else column,
                bytes(value) if column == "user_id" else value,
            )
        elif column in _WRITE_HEADER:
            setattr(message, column, value)
        elif column == "application_properties":
            app.update({str(k): v for k, v in value.items() if v is not None})
        else:
            app[column] = scalar(value)
    if app:
        message.properties = app
    return message


def scalar(value: Any) -> Any:
    """A column value an application property can carry (AMQP simple types). A timestamp
    is its ISO text in local time, as a pyspark ``Row`` holds it (Arrow gives it in UTC)."""
    if isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone().replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value)
