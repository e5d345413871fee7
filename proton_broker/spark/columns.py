"""Browsed messages straight into Arrow columns: the source's rows, built column-wise.

Rules this module owns:

* A message's bytes are read once with the broker's own codec
  (:mod:`proton_broker.codec.values`), section by section, and each field is appended to
  its column; no ``proton.Message`` and no per-row tuple is made. A batch is then one
  ``pyarrow.RecordBatch`` with the schema of :func:`proton_broker.spark.rows.arrow_fields`.
* The values are the ones :func:`proton_broker.spark.rows.message_to_row` gives for the
  same message decoded by Proton (the documented row rules; tests/spark/test_columns.py
  holds the two together): a header or properties field left out has Proton's default
  (not durable, priority 4, delivery count 0, a group sequence or time of 0 is null),
  times are UTC microseconds, bodies follow :func:`proton_broker.spark.rows.body_columns`,
  map values are text as :func:`proton_broker.spark.rows.value_text` makes it (a map or
  list as JSON), decimals included (Proton reads decimal32 and decimal64 as their integer
  bits), and the key is the broker's text of the key property
  (:func:`proton_broker.spark.rows.stored_key`; a string key, nearly every one, is itself
  and costs nothing more).
* Several data sections are one body, joined; several amqp-sequence sections one list.
"""

from __future__ import annotations

import struct
from typing import Any

from proton_broker.codec.values import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    decode_at,
    section_code,
    skip_section_value,
    skip_values,
)
from proton_broker.spark.rows import (
    COLUMNS,
    KEY_SEQUENCE,
    arrow_fields,
    body_columns,
    stored_key,
    text,
    value_text,
)

_U32 = struct.Struct(">I")
_NULLS13 = [None] * 13


class ColumnBatch:
    """The rows of one queue's range, accumulated column by column."""

    def __init__(self, queue: str, key_property: str | None = None) -> None:
        self.queue = queue
        self.key_property = key_property
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        # map columns: keys and values flat, with the offset where each row's entries start
        self.maps: dict[str, tuple[list[int], list[str], list[str | None]]] = {
            name: ([0], [], []) for name in ("application_properties", "annotations")
        }

    def __len__(self) -> int:
        return self.count

    def add(self, seq: int, data: bytes) -> None:
        """Append the row of one message (its bytes as browsed, its sequence number)."""
        header: list[Any] = []
        fields: list[Any] = _NULLS13
        app: list[tuple[Any, Any]] = []
        app_span: tuple[int, int] | None = None
        annotations: list[tuple[Any, Any]] = []
        content: Any = None
        pos, end = 0, len(data)
        while pos < end:
            code, at = section_code(data, pos, end)
            if code == DATA and data[at] == 0xA0:  # the usual body, read in place
                pos = at + 2 + data[at + 1]
                content = data[at + 2 : pos] if content is None else content + data[at + 2 : pos]
                continue
            pos = skip_section_value(data, at)
            if code == HEADER:
                header = _list(data, at, pos)
            elif code == PROPERTIES:
                fields = _list(data, at, pos) + _NULLS13
            elif code == APPLICATION_PROPERTIES:
                app = _pairs(data, at, pos)
                app_span = (at, pos)
            elif code == MESSAGE_ANNOTATIONS:
                annotations = _pairs(data, at, pos)
            elif code == DATA:
                raw = decode_at(data, at, pos)[0]
                content = raw if content is None else content + raw
            elif code == AMQP_SEQUENCE:
                items = decode_at(data, at, pos)[0]
                content = items if content is None else content + items
            elif code == AMQP_VALUE:
                content = decode_at(data, at, pos)[0]
        self._append(seq, header, fields, app, annotations, content)
        self.cols["key"].append(self._key(data, app, app_span))

    def _key(
        self, data: bytes, app: list[tuple[Any, Any]], span: tuple[int, int] | None
    ) -> str | None:
        """The key column: the key property's text as the broker's queues make it."""
        name = self.key_property
        if name is None:
            return None
        key = None
        for prop, value in app:
            if text(prop) == name:
                key = value
        if key is None or type(key) is str:
            return key
        return stored_key(data, name, span)

    def _append(
        self,
        seq: int,
        header: list[Any],
        fields: list[Any],
        app: list[tuple[Any, Any]],
        annotations: list[tuple[Any, Any]],
        content: Any,
    ) -> None:
        c = self.cols
        body, body_text = body_columns(content)
        c["queue"].append(self.queue)
        c["sequence_number"].append(seq)
        c["body"].append(body)
        c["body_text"].append(body_text)
        c["message_id"].append(text(fields[0]))
        c["user_id"].append(bytes(fields[1]) if fields[1] else None)
        c["to"].append(fields[2])
        c["subject"].append(fields[3])
        c["reply_to"].append(fields[4])
        c["correlation_id"].append(text(fields[5]))
        c["content_type"].append(text(fields[6]))
        c["content_encoding"].append(text(fields[7]))
        c["absolute_expiry_time"].append(fields[8] * 1000 if fields[8] else None)
        c["creation_time"].append(fields[9] * 1000 if fields[9] else None)
        c["group_id"].append(fields[10])
        c["group_sequence"].append(fields[11] or None)
        c["reply_to_group_id"].append(fields[12])
        header = header + [None] * (5 - len(header))
        c["durable"].append(bool(header[0]))
        c["priority"].append(4 if header[1] is None else header[1])
        c["delivery_count"].append(header[4] or 0)
        key_seq = None
        for name, value in annotations:
            if name == KEY_SEQUENCE:
                key_seq = int(value)
        c["key_sequence"].append(key_seq)
        _add_map(self.maps["application_properties"], app)
        _add_map(self.maps["annotations"], annotations)
        self.count += 1

    def batch(self) -> Any:
        """The rows added so far as one Arrow record batch (and start a new one)."""
        import pyarrow as pa

        fields = arrow_fields()
        arrays = []
        for field in fields:
            if field.name in self.maps:
                offsets, keys, values = self.maps[field.name]
                arrays.append(
                    pa.MapArray.from_arrays(
                        pa.array(offsets, pa.int32()),
                        pa.array(keys, pa.string()),
                        pa.array(values, pa.string()),
                        type=field.type,
                    )
                )
            else:
                arrays.append(pa.array(self.cols[field.name], type=field.type))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _list(data: bytes, at: int, stop: int) -> list[Any]:
    """A header or properties list, decoded (an empty list for list0 or null)."""
    value = decode_at(data, at, stop)[0]
    return value if isinstance(value, list) else []


def _pairs(data: bytes, at: int, stop: int) -> list[tuple[Any, Any]]:
    """The key/value pairs of the map at ``at`` (application properties, annotations),
    decoded as Proton decodes them (decimal32 and decimal64 as their integer bits)."""
    code = data[at]
    if code == 0xC1:
        count, pos = data[at + 2], at + 3
    elif code == 0xD1:
        count, pos = _U32.unpack_from(data, at + 5)[0], at + 9
    else:
        return []  # null: no map
    pairs = []
    for _ in range(count >> 1):
        key, pos = _value(data, pos, stop)
        value, pos = _value(data, pos, stop)
        pairs.append((key, value))
    return pairs


def _value(data: bytes, pos: int, stop: int) -> tuple[Any, int]:
    code = data[pos]
    if code == 0xA1 or code == 0xA3:  # str8 and sym8, the usual keys and values
        after = pos + 2 + data[pos + 1]
        return data[pos + 2 : after].decode("utf-8" if code == 0xA1 else "ascii"), after
    if code == 0x74 or code == 0x84:  # decimal32, decimal64
        after = skip_values(data, pos, 1)
        return int.from_bytes(data[pos + 1 : after], "big"), after
    return decode_at(data, pos, stop)


def _add_map(target: tuple[list[int], list[str], list[str | None]], pairs: list[Any]) -> None:
    """Append one row's map, as text (a key repeated keeps its last value, as a dict)."""
    offsets, keys, values = target
    if pairs:
        row = {str(text(k)): value_text(v) for k, v in pairs}
        keys.extend(row)
        values.extend(row.values())
    offsets.append(len(keys))
