"""How AMQP messages become Spark rows and rows become AMQP messages.

Rules this module owns (plain Python, no Spark, so it is unit-tested on its own):

* A row has one column per message property (flat, so SQL reads them without struct
  paths), the body twice (``body``: the bytes; ``body_text``: the text, where it is text),
  application properties and message annotations as ``map<string,string>`` (Spark maps
  hold one value type: values are turned into text, as queues compare them; a map or list
  value is its JSON text, as a body is), the queue, the sequence number, and the queue key
  and per-key sequence where present.
* The ``key`` column is the key property's text as the broker's queues make it
  (:func:`proton_broker.queues.keys.key_text`, qpidd's rules: the long ``2`` and the
  double ``2.0`` are the key ``"2"``, the boolean true ``"1"``), so one key of the queue is
  one key in Spark; the snapshot's ``group`` column (:mod:`proton_broker.spark.jobs`) too.
* Body as text: a string body is itself; a binary body is its UTF-8 text when it is valid
  UTF-8; any other AMQP value (map, list, number) is its JSON text. That never fails, so one
  odd message cannot fail a read for good: map keys become their text (as map columns
  make it, ``null`` for a null key; two keys of one text keep the later value), values JSON
  cannot hold (binary, uuid, a NaN or an infinity, a described value) are JSON strings of
  their text, and anything the JSON encoder still refuses (nesting too deep) is the
  body's ``str``.
* A row to write: the columns named below map to the body, the header and the message
  properties (``creation_time`` and ``absolute_expiry_time``: a timestamp, or seconds since
  the epoch); ``annotations`` (a map column) is the message annotations, symbol keys,
  without the numbers the source's queue gave the message (``x-opt-sequence-number``,
  ``x-opt-sequence``: the queue written to numbers it afresh); ``application_properties``
  (a map column) and every other column become application properties (the LVQ key or the
  group id column of a queue, for example), a value that is not an AMQP simple type as text
  (a map, list or struct as JSON). The columns only a source row has (:data:`SOURCE_ONLY`)
  are not written, so a DataFrame read from a queue copies to another. Nulls are left out.
  The message is durable unless a ``durable`` column says false (the sink's promise is
  at-least-once: an accepted message must survive a restart of the broker). A header or
  property value outside its AMQP type (priority a ubyte, ttl a uint of milliseconds,
  group-sequence a uint) is refused with :class:`RowError` naming the column and the value.
  The message id is the writer's deterministic id unless the row brings its own.
* :func:`message_to_row` and :func:`row_to_message` state these rules for one message or
  row with ``proton.Message``, in their plainest form. The connector's own paths do the
  same without Proton's message objects (:mod:`proton_broker.spark.columns` reads
  browsed bytes into Arrow columns, :mod:`proton_broker.spark.outgoing` encodes Arrow
  batches), and the tests hold them to these two functions.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from typing import Any

from cproton import pn_message_get_content_encoding, pn_message_get_content_type
from proton import Message, symbol

from proton_broker.codec.sections import parse_message
from proton_broker.codec.values import as_text as text
from proton_broker.message import Message as StoredMessage
from proton_broker.queues.keys import key_text

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
_WRITE_TIMES = {"creation_time": "creation_time", "absolute_expiry_time": "expiry_time"}
# Columns only a source row has: what the queue read said of the message, not the message.
SOURCE_ONLY = ("queue", "sequence_number", "delivery_count", "key", "key_sequence")
_WRITE_IGNORED = ("body_text", *SOURCE_ONLY)  # a source row carries both bodies
# The numbers the source's queue gave a message: the queue written to gives its own.
QUEUE_ANNOTATIONS = ("x-opt-sequence-number", KEY_SEQUENCE)
# The AMQP types of the header and property columns that are numbers: (low, high).
UBYTE, UINT = (0, 255), (0, 2**32 - 1)
TTL_SECONDS = (0, UINT[1] / 1000)  # ttl is a uint of milliseconds, given in seconds


class RowError(ValueError):
    """A row's value cannot be written as its message field (out of range, wrong type)."""


def check_range(column: str, value: Any, bounds: tuple[float, float], what: str) -> None:
    """:class:`RowError` naming ``column`` and ``value`` unless ``value`` lies in
    ``bounds`` (a NaN never does): the encoder would otherwise wrap it silently."""
    low, high = bounds
    try:
        inside = low <= value <= high
    except TypeError:
        raise RowError(f"column {column}: {value!r} is not a number") from None
    if not inside:
        raise RowError(
            f"column {column}: {value!r} is outside {what} ({low:g} to {high:g}); "
            "the message cannot carry it"
        )


def check_header(priority: Any, ttl: Any, group_sequence: Any) -> None:
    """Refuse (:class:`RowError`) header and property values outside their AMQP types."""
    if priority is not None:
        check_range("priority", priority, UBYTE, "a priority (an AMQP ubyte)")
    if ttl is not None:
        check_range("ttl", ttl, TTL_SECONDS, "a ttl in seconds (an AMQP uint of milliseconds)")
    if group_sequence is not None:
        check_range("group_sequence", group_sequence, UINT, "a group sequence (an AMQP uint)")


def epoch_seconds(column: str, value: Any) -> float:
    """A time column's value as seconds since the epoch: a timestamp (a naive one is local
    time, as a pyspark ``Row`` holds it), or a number of seconds."""
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise RowError(f"column {column}: {value!r} is not a timestamp nor seconds since the epoch")


def _text_map(values: Mapping[Any, Any] | None) -> dict[str, str | None]:
    return {str(text(k)): value_text(v) for k, v in (values or {}).items()}


def value_text(value: Any) -> str | None:
    """A map column's value: a map or list as its JSON text (as a body), else its text."""
    if isinstance(value, dict | list):
        return _json_text(value)
    return text(value)


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
    rendered = _json_text(body)
    return rendered.encode("utf-8"), rendered


def _json_text(value: Any) -> str:
    """``value`` as JSON text, never an error (see the module rules)."""
    try:
        return json.dumps(_jsonable(value), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _jsonable(value: Any) -> Any:
    """``value`` made of what JSON holds: text keys, values it cannot hold as text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else text(value)
    if isinstance(value, Mapping):
        return {_json_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _json_key(key: Any) -> str:
    return "null" if key is None else str(text(key))


def stored_key(data: bytes, name: str, span: tuple[int, int] | None = None) -> str | None:
    """The broker's key text (:func:`~proton_broker.queues.keys.key_text`) of the
    application property ``name`` of the message ``data``; ``span``: where its
    application-properties map sits (map start, section end), if already known."""
    if span is None:
        message = parse_message(data)
    else:
        message = StoredMessage(data)
        message.app_properties_span = span
    return key_text(message.application_property(name), message, name)


def _time(millis: Any) -> _dt.datetime | None:
    if not millis:
        return None
    return _dt.datetime.fromtimestamp(float(millis), tz=_dt.UTC)  # proton gives seconds


def message_to_row(
    queue: str,
    seq: int | None,
    message: Message,
    key_property: str | None = None,
    data: bytes | None = None,
) -> tuple[Any, ...]:
    """One source row, in :data:`SCHEMA` order (``data``: the message's bytes, if at hand)."""
    body, body_text = body_columns(message.body)
    props = message.properties or {}
    annotations = message.annotations or {}
    key_seq = annotations.get(KEY_SEQUENCE)
    key = props.get(key_property) if key_property else None
    if key is not None and type(key) is not str:
        assert key_property is not None
        key = stored_key(data if data is not None else bytes(message.encode()), key_property)
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
    message.durable = True  # unless the row says otherwise (see the module rules)
    check_header(row.get("priority"), row.get("ttl"), row.get("group_sequence"))
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
        elif column in _WRITE_TIMES:
            setattr(message, _WRITE_TIMES[column], epoch_seconds(column, value))
        elif column == "annotations":
            annotations = {
                symbol(annotation_key(k)): scalar(v)
                for k, v in value.items()
                if v is not None and k not in QUEUE_ANNOTATIONS
            }
            message.annotations = annotations or None
        elif column == "application_properties":
            app.update({str(k): scalar(v) for k, v in value.items() if v is not None})
        else:
            app[column] = scalar(value)
    if app:
        message.properties = app
    return message


def annotation_key(key: Any) -> str:
    """An ``annotations`` map key as a symbol's text (ASCII), or :class:`RowError`."""
    name = str(key)
    if not name.isascii():
        raise RowError(f"column annotations: the key {name!r} is not ASCII (a symbol)")
    return name


def scalar(value: Any) -> Any:
    """A column value an application property can carry (AMQP simple types). A timestamp
    is its ISO text in local time, as a pyspark ``Row`` holds it (Arrow gives it in UTC);
    a map, list or struct its JSON text (a map as Arrow gives it, pairs, already a dict);
    anything else its ``str``."""
    if isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone().replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict | list | tuple):
        return _json_text(value)
    return str(value)
