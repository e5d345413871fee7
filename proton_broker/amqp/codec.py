"""A validating, partial decoder of encoded AMQP 1.0 messages, in plain Python.

The broker forwards each message as the bytes it received, so it must know those bytes are
a well-formed message before accepting them (``proton.Message.decode`` accepts some garbage
silently, and python-qpid-proton 0.40 crashes on maps with binary keys). This module walks
every section once, checking each encoding's widths and counts without building Python
values, and decodes only what queue semantics need: the header, a few properties fields,
and (lazily, through :func:`decode_value`) application-properties and message-annotations.

It imports nothing from Proton; it runs once per message on the hot path.
"""

from __future__ import annotations

import re
import struct
import uuid
from typing import Any, NamedTuple

from proton_broker.message import Message

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78

_SECTION_SYMBOLS = {
    b"amqp:header:list": HEADER,
    b"amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    b"amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    b"amqp:properties:list": PROPERTIES,
    b"amqp:application-properties:map": APPLICATION_PROPERTIES,
    b"amqp:data:binary": DATA,
    b"amqp:amqp-sequence:list": AMQP_SEQUENCE,
    b"amqp:amqp-value:*": AMQP_VALUE,
    b"amqp:footer:map": FOOTER,
}
_BODY = (DATA, AMQP_SEQUENCE, AMQP_VALUE)
# Order rank of each section: sections must appear in this order, body kinds not mixed.
_RANK = {HEADER: 0, DELIVERY_ANNOTATIONS: 1, MESSAGE_ANNOTATIONS: 2, PROPERTIES: 3,
         APPLICATION_PROPERTIES: 4, DATA: 5, AMQP_SEQUENCE: 5, AMQP_VALUE: 5, FOOTER: 6}

# Width of the value after a fixed-width constructor.
_FIXED = {0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
          0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
          0x60: 2, 0x61: 2,
          0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
          0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
          0x94: 16, 0x98: 16}
_VAR8 = frozenset((0xA0, 0xA1, 0xA3))
_VAR32 = frozenset((0xB0, 0xB1, 0xB3))
_COMPOUND8 = frozenset((0xC0, 0xC1))
_COMPOUND32 = frozenset((0xD0, 0xD1))
_ARRAYS = frozenset((0xE0, 0xF0))
_MAPS = frozenset((0xC1, 0xD1))

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NULL_RUN = re.compile(b"\x40*")
_NULLS = [None] * 256  # a list8 holds at most 255 elements; longer runs take several steps
_AT_RUNS = [b"\x40" * n for n in range(11)]  # runs of n nulls
_NULLS_THEN_STR8 = b"\x40" * 9 + b"\xa1"  # properties fields 1-9 unset, a str8 group-id
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class DecodeError(ValueError):
    """The bytes are not a well-formed AMQP message (the text says what and where)."""


class Described(NamedTuple):
    """A described value whose descriptor the broker does not interpret."""

    descriptor: Any
    value: Any


# ---- skipping (validation without building values) ------------------------------------


def _skip(data: bytes, pos: int, end: int) -> int:
    """Return the offset just after the value that starts at ``pos``; validate it."""
    if pos >= end:
        raise DecodeError(f"value missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        return _skip(data, _skip(data, pos + 1, end), end)
    return _skip_body(data, code, pos + 1, end)


def _skip_body(data: bytes, code: int, pos: int, end: int) -> int:
    """Skip the value of constructor ``code`` whose bytes start at ``pos``."""
    width = _FIXED.get(code)
    if width is not None:
        stop = pos + width
    elif code in _VAR8:
        stop = pos + 1 + data[pos] if pos < end else end + 1
    elif code in _VAR32:
        stop = pos + 4 + _U32.unpack_from(data, pos)[0] if pos + 4 <= end else end + 1
    elif code in _COMPOUND8 or code in _COMPOUND32:
        return _skip_compound(data, code, pos, end)
    elif code in _ARRAYS:
        return _skip_array(data, code, pos, end)
    else:
        raise DecodeError(f"unknown type constructor 0x{code:02x} at offset {pos - 1}")
    if stop > end:
        raise DecodeError(f"value of type 0x{code:02x} at offset {pos - 1} is truncated")
    return stop


def _compound_header(data: bytes, code: int, pos: int, end: int) -> tuple[int, int, int]:
    """(offset of the first element, count, offset just after the compound)."""
    if code in _COMPOUND8 or code == 0xE0:
        if pos + 2 > end:
            raise DecodeError(f"compound at offset {pos - 1} is truncated")
        size, count, first = data[pos], data[pos + 1], pos + 2
        stop = pos + 1 + size
    else:
        if pos + 8 > end:
            raise DecodeError(f"compound at offset {pos - 1} is truncated")
        size, count = _U32.unpack_from(data, pos)[0], _U32.unpack_from(data, pos + 4)[0]
        first, stop = pos + 8, pos + 4 + size
    if stop > end or first > stop:
        raise DecodeError(f"compound at offset {pos - 1} declares {size} bytes past the end")
    return first, count, stop


def _skip_compound(data: bytes, code: int, pos: int, end: int) -> int:
    first, count, stop = _compound_header(data, code, pos, end)
    if code in _MAPS and count % 2:
        raise DecodeError(f"map at offset {pos - 1} has an odd number of elements")
    at = first
    for _ in range(count):
        at = _skip(data, at, stop)
    if at != stop:
        raise DecodeError(f"compound at offset {pos - 1}: size does not match its elements")
    return stop


def _element_constructor(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(element type code, offset after the constructor) of an array; descriptors skipped."""
    if pos >= end:
        raise DecodeError(f"array constructor missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        after = _skip(data, pos + 1, end)
        if after >= end:
            raise DecodeError(f"array constructor truncated at offset {pos}")
        return data[after], after + 1
    return code, pos + 1


def _skip_array(data: bytes, code: int, pos: int, end: int) -> int:
    first, count, stop = _compound_header(data, code, pos, end)
    element, at = _element_constructor(data, first, stop)
    for _ in range(count):
        at = _skip_body(data, element, at, stop)
    if at != stop:
        raise DecodeError(f"array at offset {pos - 1}: size does not match its elements")
    return stop


# ---- decoding values ---------------------------------------------------------------------


def decode_value(data: bytes, start: int, end: int | None = None) -> Any:
    """Decode the one AMQP value at ``start`` into Python (symbols become ``str``,
    timestamps int milliseconds, decimals their raw bytes, described values ``Described``)."""
    value, _ = _decode(data, start, len(data) if end is None else end)
    return value


def _decode(data: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos >= end:
        raise DecodeError(f"value missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        descriptor, at = _decode(data, pos + 1, end)
        value, at = _decode(data, at, end)
        return Described(descriptor, value), at
    return _decode_body(data, code, pos + 1, end)


def _decode_body(data: bytes, code: int, pos: int, end: int) -> tuple[Any, int]:
    width = _FIXED.get(code)
    if width is not None:
        stop = pos + width
    elif code in _VAR8:
        stop = pos + 1 + data[pos] if pos < end else end + 1
    elif code in _VAR32:
        stop = pos + 4 + _U32.unpack_from(data, pos)[0] if pos + 4 <= end else end + 1
    elif code in _COMPOUND8 or code in _COMPOUND32:
        return _decode_compound(data, code, pos, end)
    elif code in _ARRAYS:
        return _decode_array(data, code, pos, end)
    else:
        raise DecodeError(f"unknown type constructor 0x{code:02x} at offset {pos - 1}")
    if stop > end:
        raise DecodeError(f"value of type 0x{code:02x} at offset {pos - 1} is truncated")
    return _SIMPLE[code](data, pos, stop), stop


def _decode_compound(data: bytes, code: int, pos: int, end: int) -> tuple[Any, int]:
    first, count, stop = _compound_header(data, code, pos, end)
    items = []
    at = first
    for _ in range(count):
        item, at = _decode(data, at, stop)
        items.append(item)
    if at != stop:
        raise DecodeError(f"compound at offset {pos - 1}: size does not match its elements")
    if code in _MAPS:
        if count % 2:
            raise DecodeError(f"map at offset {pos - 1} has an odd number of elements")
        return dict(zip(items[::2], items[1::2], strict=True)), stop
    return items, stop


def _decode_array(data: bytes, code: int, pos: int, end: int) -> tuple[Any, int]:
    first, count, stop = _compound_header(data, code, pos, end)
    element, at = _element_constructor(data, first, stop)
    items = []
    for _ in range(count):
        item, at = _decode_body(data, element, at, stop)
        items.append(item)
    if at != stop:
        raise DecodeError(f"array at offset {pos - 1}: size does not match its elements")
    return items, stop


_SIMPLE: dict[int, Any] = {
    0x40: lambda d, p, s: None,
    0x41: lambda d, p, s: True,
    0x42: lambda d, p, s: False,
    0x43: lambda d, p, s: 0,
    0x44: lambda d, p, s: 0,
    0x45: lambda d, p, s: [],
    0x50: lambda d, p, s: d[p],
    0x51: lambda d, p, s: _I8.unpack_from(d, p)[0],
    0x52: lambda d, p, s: d[p],
    0x53: lambda d, p, s: d[p],
    0x54: lambda d, p, s: _I8.unpack_from(d, p)[0],
    0x55: lambda d, p, s: _I8.unpack_from(d, p)[0],
    0x56: lambda d, p, s: d[p] != 0,
    0x60: lambda d, p, s: _U16.unpack_from(d, p)[0],
    0x61: lambda d, p, s: _I16.unpack_from(d, p)[0],
    0x70: lambda d, p, s: _U32.unpack_from(d, p)[0],
    0x71: lambda d, p, s: _I32.unpack_from(d, p)[0],
    0x72: lambda d, p, s: _F32.unpack_from(d, p)[0],
    0x73: lambda d, p, s: _char(d, p),
    0x74: lambda d, p, s: d[p:s],
    0x80: lambda d, p, s: _U64.unpack_from(d, p)[0],
    0x81: lambda d, p, s: _I64.unpack_from(d, p)[0],
    0x82: lambda d, p, s: _F64.unpack_from(d, p)[0],
    0x83: lambda d, p, s: _I64.unpack_from(d, p)[0],
    0x84: lambda d, p, s: d[p:s],
    0x94: lambda d, p, s: d[p:s],
    0x98: lambda d, p, s: uuid.UUID(bytes=bytes(d[p:s])),
    0xA0: lambda d, p, s: bytes(d[p + 1:s]),
    0xA1: lambda d, p, s: _utf8(d, p + 1, s),
    0xA3: lambda d, p, s: _ascii(d, p + 1, s),
    0xB0: lambda d, p, s: bytes(d[p + 4:s]),
    0xB1: lambda d, p, s: _utf8(d, p + 4, s),
    0xB3: lambda d, p, s: _ascii(d, p + 4, s),
}


def _char(data: bytes, start: int) -> str:
    code = _U32.unpack_from(data, start)[0]
    if code > 0x10FFFF:
        raise DecodeError(f"char at offset {start - 1} is not a Unicode code point")
    return chr(code)


def _utf8(data: bytes, start: int, stop: int) -> str:
    try:
        return data[start:stop].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string at offset {start} is not valid UTF-8") from exc


def _ascii(data: bytes, start: int, stop: int) -> str:
    try:
        return data[start:stop].decode("ascii")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"symbol at offset {start} is not ASCII") from exc


def find_in_map(data: bytes, start: int, stop: int, key: str) -> Any:
    """The value under the string ``key`` in the (already validated) map at ``start``, or
    None; only that value is decoded. Keys are compared as their UTF-8 bytes, so a key
    sent as a symbol matches too, as it does in the decoded map. Map keys are unique in
    AMQP; if a malformed map repeats one, the first wins here. A value that cannot be
    decoded (invalid UTF-8) reads as absent."""
    code = data[start]
    if code == 0xC1:
        pairs, at = data[start + 2] >> 1, start + 3
    elif code == 0xD1:
        pairs, at = _U32.unpack_from(data, start + 5)[0] >> 1, start + 9
    else:
        value = decode_value(data, start, stop)
        return value.get(key) if isinstance(value, dict) else None
    want = key.encode("utf-8")
    size = len(want)
    for _ in range(pairs):
        c = data[at]
        if c == 0xA1 or c == 0xA3:
            n = data[at + 1]
            at += 2 + n
            found = n == size and data[at - n:at] == want
        elif c == 0xB1 or c == 0xB3:
            length = _U32.unpack_from(data, at + 1)[0]
            found = length == size and data[at + 5:at + 5 + size] == want
            at += 5 + length
        else:
            found = False
            at = _skip_values(data, at, 1)
        if found:
            return _found_value(data, at, stop)
        at = _skip_values(data, at, 1)
    return None


def _found_value(data: bytes, at: int, stop: int) -> Any:
    if data[at] == 0xA1:  # the common case, a str8, decoded here
        n = data[at + 1]
        try:
            return data[at + 2:at + 2 + n].decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        return _decode(data, at, stop)[0]
    except (DecodeError, ValueError):
        return None


# ---- messages ----------------------------------------------------------------------------

# How the fast skipper steps over the value a constructor byte starts: > 0 is the value's
# whole size (constructor included); the negative kinds are read from the bytes; 0 is not a
# constructor at all.
_STEP_VAR8, _STEP_VAR32, _STEP_NESTED = -1, -2, -3


def _step_table() -> list[int]:
    table = [0] * 256
    for code, width in _FIXED.items():
        table[code] = 1 + width
    for code in _VAR8:
        table[code] = _STEP_VAR8
    for code in _VAR32:
        table[code] = _STEP_VAR32
    for code in (0x00, *_COMPOUND8, *_COMPOUND32, *_ARRAYS):
        table[code] = _STEP_NESTED
    return table


_STEP = _step_table()
_SECTION_RANK = [_RANK.get(code, -1) for code in range(256)]


def _skip_values(data: bytes, at: int, count: int) -> int:
    """The offset just after ``count`` consecutive values starting at ``at``.

    The hot path's skipper: a table lookup per value, no bounds checks. It may run past the
    enclosing compound (every caller checks that the result lands exactly on the compound's
    end, which no overrun can) and raises IndexError or struct.error past the end of the
    data, which :func:`parse_message` turns into a precise error. Nested compounds and
    described values go through the checking :func:`_skip`.
    """
    step = _STEP
    for _ in range(count):
        width = step[data[at]]
        if width > 0:
            at += width
        elif width == _STEP_VAR8:
            at += 2 + data[at + 1]
        elif width == _STEP_VAR32:
            at += 5 + _U32.unpack_from(data, at + 1)[0]
        elif width == _STEP_NESTED:
            at = _skip(data, at, len(data))
        else:
            raise DecodeError(f"unknown type constructor 0x{data[at]:02x} at offset {at}")
    return at


def _skip_section_value(data: bytes, at: int) -> int:
    """Skip a section's value (a map, list or anything else); compounds checked for size."""
    code = data[at]
    if code == 0xC1 or code == 0xC0:
        count, first, stop = data[at + 2], at + 3, at + 2 + data[at + 1]
    elif code == 0xD1 or code == 0xD0:
        count, first = _U32.unpack_from(data, at + 5)[0], at + 9
        stop = at + 5 + _U32.unpack_from(data, at + 1)[0]
    else:
        return _skip_values(data, at, 1)
    if first > stop:
        raise DecodeError(f"compound at offset {at} is too short for its count")
    if count & 1 and (code == 0xC1 or code == 0xD1):
        raise DecodeError(f"map at offset {at} has an odd number of elements")
    if _skip_values(data, first, count) != stop:
        raise DecodeError(f"compound at offset {at}: size does not match its elements")
    return stop


def _section_code(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(section code, offset of the section's value) for the section starting at ``pos``."""
    if data[pos] != 0x00 or pos + 2 > end:
        raise DecodeError(f"expected a message section at offset {pos}")
    kind = data[pos + 1]
    if kind == 0x53 and pos + 3 <= end:
        return data[pos + 2], pos + 3
    if kind == 0x80 and pos + 10 <= end:
        code = _U64.unpack_from(data, pos + 2)[0]
        return (code if code in _RANK else -1), pos + 10
    if kind in (0xA3, 0xB3):
        after = _skip_body(data, kind, pos + 2, end)
        name = data[pos + 3:after] if kind == 0xA3 else data[pos + 6:after]
        return _SECTION_SYMBOLS.get(bytes(name), -1), after
    raise DecodeError(f"unreadable section descriptor at offset {pos}")


def parse_message(data: bytes) -> Message:
    """Validate ``data`` as a whole AMQP message and read the fields the broker uses.

    Runs once per message on the hot path, so it walks the sections with the lenient
    :func:`_skip_values` and checks sizes where compounds and the message end; when the
    bytes run out, :func:`_explain` walks them again with the checking helpers to say where.
    """
    if type(data) is not bytes:
        data = bytes(data)
    if not data:
        raise DecodeError("empty message")
    try:
        return _parse(data, Message(data))
    except (IndexError, struct.error):
        raise _explain(data) from None


def _parse(data: bytes, message: Message) -> Message:
    end = len(data)
    ranks = _SECTION_RANK
    pos, rank, body = 0, -1, -1
    while pos < end:
        if data[pos] == 0x00 and data[pos + 1] == 0x53:  # descriptor as a smallulong
            code, at = data[pos + 2], pos + 3
            new_rank = ranks[code]
        else:
            code, at = _section_code(data, pos, end)
            new_rank = ranks[code] if 0 <= code < 256 else -1
        if new_rank < 0:
            raise DecodeError(f"unknown section descriptor at offset {pos}")
        if new_rank <= rank and (new_rank < rank or new_rank != 5 or code != body
                                 or code == AMQP_VALUE):
            raise DecodeError(f"section 0x{code:02x} at offset {pos} is out of order")
        rank = new_rank
        kind = data[at]
        if new_rank == 5:  # a body section
            body = code
            if code == DATA and kind == 0xA0:
                pos = at + 2 + data[at + 1]
            elif code == DATA and kind == 0xB0:
                pos = at + 5 + _U32.unpack_from(data, at + 1)[0]
            else:
                pos = _skip_section_value(data, at)
        elif code == HEADER:
            # list0 is an all-defaults header, which the Message defaults already say.
            pos = at + 1 if kind == 0x45 else _read_header(message, data, at, end)
            message.header_end = pos
        elif code == PROPERTIES:
            pos = at + 1 if kind == 0x45 else _read_properties(message, data, at, end)
        else:
            pos = _skip_section_value(data, at)
            if code == APPLICATION_PROPERTIES:
                message.app_properties_span = (at, pos)
            elif code == MESSAGE_ANNOTATIONS:
                message.annotations_span = (at, pos)
            elif code == DELIVERY_ANNOTATIONS:
                message.delivery_annotations_end = pos
    if pos != end:
        raise _explain(data)
    return message


def decode_properties(message: Message) -> list[Any]:
    """The properties section of the parsed ``message``, all thirteen fields decoded
    (None where unset or when there is no section).

    Not on the hot path: :func:`parse_message` reads only the fields queues use, and this
    serves the rest on demand (selectors naming correlation-id, user-id, reply-to or
    group-sequence). Properties follow the message-annotations, delivery-annotations and
    header sections, whose ends the record already knows, so nothing else is walked.
    """
    data = message.data
    span = message.annotations_span
    pos = span[1] if span is not None else message.delivery_annotations_end or message.header_end
    fields: list[Any] = []
    if pos < len(data):
        code, at = _section_code(data, pos, len(data))
        if code == PROPERTIES:
            value = decode_value(data, at)
            fields = value if isinstance(value, list) else []
    return fields[:13] + [None] * (13 - len(fields))


def _explain(data: bytes) -> DecodeError:
    """The precise error for bytes the fast walk found short: the same walk, checked."""
    pos, end = 0, len(data)
    try:
        while pos < end:
            code, at = _section_code(data, pos, end)
            if code < 0:
                return DecodeError(f"unknown section descriptor at offset {pos}")
            pos = _skip(data, at, end)
    except DecodeError as exc:
        return exc
    return DecodeError(f"message of {end} bytes is truncated")


def _list_fields(data: bytes, pos: int, end: int, section: str) -> tuple[list[Any], int]:
    """The elements of the list at ``pos`` (header, properties), decoded.

    Elements of the common simple types are decoded inline; any other element, and any
    element whose bytes do not check out here, goes through :func:`_decode`, which decodes
    it the same way or raises the error.
    """
    code = data[pos] if pos < end else -1
    if code != 0xC0 and code != 0xD0:
        value, stop = _decode(data, pos, end)
        if not isinstance(value, list):
            raise DecodeError(f"the {section} section at offset {pos} is not a list")
        return value, stop
    if code == 0xC0 and pos + 3 <= end and pos + 3 <= pos + 2 + data[pos + 1] <= end:
        at, count, stop = pos + 3, data[pos + 2], pos + 2 + data[pos + 1]  # list8 that fits
    else:
        at, count, stop = _compound_header(data, code, pos + 1, end)
    fields: list[Any] = []
    append = fields.append
    while len(fields) < count:
        c = data[at] if at < stop else -1
        if c == 0x40:  # nulls come in runs (unused properties fields): take the run at once
            run = min(_NULL_RUN.match(data, at, stop).end() - at, count - len(fields))
            fields += _NULLS[:run]
            at += run
            continue
        if (c == 0xA1 or c == 0xA3) and at + 1 < stop and at + 2 + data[at + 1] <= stop:
            after = at + 2 + data[at + 1]
            try:
                append(data[at + 2:after].decode("utf-8" if c == 0xA1 else "ascii"))
            except UnicodeDecodeError:
                pass  # _decode below raises the error
            else:
                at = after
                continue
        if (c == 0x80 or c == 0x83) and at + 9 <= stop:
            append(_U64.unpack_from(data, at + 1)[0] if c == 0x80
                   else _I64.unpack_from(data, at + 1)[0])
            at += 9
            continue
        if c == 0x41 or c == 0x42:
            append(c == 0x41)
            at += 1
            continue
        if c == 0x43 or c == 0x44:
            append(0)
            at += 1
            continue
        if (c == 0x50 or c == 0x52 or c == 0x53) and at + 2 <= stop:
            append(data[at + 1])
            at += 2
            continue
        if c == 0x70 and at + 5 <= stop:
            append(_U32.unpack_from(data, at + 1)[0])
            at += 5
            continue
        value, at = _decode(data, at, stop)
        append(value)
    if at != stop:
        raise DecodeError(f"compound at offset {pos}: size does not match its elements")
    return fields, stop


def _read_header(message: Message, data: bytes, pos: int, end: int) -> int:
    fields, stop = _list_fields(data, pos, end, "header")
    fields += [None] * (5 - len(fields))
    durable, priority, ttl, first_acquirer, delivery_count = fields[:5]
    message.durable = bool(durable)
    message.priority = 4 if priority is None else _int_field(priority, "priority")
    message.ttl = None if ttl is None else _int_field(ttl, "ttl")
    message.first_acquirer = bool(first_acquirer)
    message.delivery_count = 0 if delivery_count is None else _int_field(delivery_count,
                                                                         "delivery-count")
    return stop


def _read_properties(message: Message, data: bytes, pos: int, end: int) -> int:
    """Read the properties the broker uses into ``message``: message-id, to, subject,
    absolute-expiry-time, creation-time and group-id (fields 0, 2, 3, 8, 9 and 10).

    Every field is checked as :func:`_list_fields` checks it, but a list8 (what every
    client sends) is walked here without building the list: a grouped message's properties
    are typically message-id, nine nulls, group-id and group-sequence, and this runs once
    per message.
    """
    size = data[pos + 1] if pos + 1 < end else -1
    if data[pos] != 0xC0 or pos + 3 > end or not 1 <= size <= end - pos - 2:
        fields, stop = _list_fields(data, pos, end, "properties")
        for index, value in enumerate(fields[:11]):
            if value is not None:
                _set_property(message, index, value)
        return stop
    at, count, stop = pos + 3, data[pos + 2], pos + 2 + size
    if data[at] == 0xA1 and _common_properties(message, data, at, count, stop):
        return stop
    index = 0
    while index < count:
        c = data[at] if at < stop else -1
        if c == 0x40:  # unused fields come in runs of nulls: step over the run at once
            if count > 10 and index < 10 and data.startswith(_AT_RUNS[10 - index], at):
                run = 10 - index  # the usual run, up to group-id (cheaper than the regex)
            else:
                run = min(_NULL_RUN.match(data, at, stop).end() - at, count - index)
            index += run
            at += run
            continue
        if (c == 0xA1 or c == 0xA3) and at + 1 < stop and at + 2 + data[at + 1] <= stop:
            after = at + 2 + data[at + 1]
            try:
                value: Any = data[at + 2:after].decode("utf-8" if c == 0xA1 else "ascii")
            except UnicodeDecodeError:
                value, at = _decode(data, at, stop)  # raises the error
            else:
                at = after
        elif c == 0x43:  # uint0, as group-sequence usually is
            value = 0
            at += 1
        else:
            value, at = _decode(data, at, stop)
        if index == 0:
            message.message_id = value
        elif index == 10:
            message.group_id = value if isinstance(value, str) else None
        elif 2 <= index <= 9:
            _set_property(message, index, value)
        index += 1
    if at != stop:
        raise DecodeError(f"compound at offset {pos}: size does not match its elements")
    return stop


def _common_properties(message: Message, data: bytes, at: int, count: int, stop: int) -> bool:
    """Read the two shapes most clients send, straight through, if the list at ``at`` is
    one of them: a str8 message-id alone, or a str8 message-id, nine nulls, a str8
    group-id and perhaps a uint0 group-sequence (a grouped message). Returns False, having
    set nothing, for anything else, which the general walk then reads."""
    after = at + 2 + data[at + 1]
    if after > stop:
        return False
    group_id = None
    if count == 1:
        if after != stop:
            return False
    elif 11 <= count <= 12 and data.startswith(_NULLS_THEN_STR8, after):
        start = after + 11
        end = start + data[after + 10]
        if not (end == stop if count == 11 else end + 1 == stop and data[end] == 0x43):
            return False
        try:
            group_id = data[start:end].decode()
        except UnicodeDecodeError:
            return False
    else:
        return False
    try:
        message.message_id = data[at + 2:after].decode()
    except UnicodeDecodeError:
        return False
    message.group_id = group_id
    return True


def _set_property(message: Message, index: int, value: Any) -> None:
    """Field ``index`` of the properties list, not null, into ``message`` (if used)."""
    if index == 0:
        message.message_id = value
    elif index == 2:
        message.to = _str_field(value)
    elif index == 3:
        message.subject = _str_field(value)
    elif index == 8:
        message.absolute_expiry_time = value if type(value) is int else None
    elif index == 9:
        message.creation_time = value if type(value) is int else None
    elif index == 10:
        message.group_id = _str_field(value)


def _int_field(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"header {name} must be an integer, got {value!r}")
    return value


def _str_field(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---- encoding the header on redelivery ------------------------------------------------


def encode_header(durable: bool, priority: int, ttl: int | None, first_acquirer: bool,
                  delivery_count: int) -> bytes:
    """A complete header section carrying these values (trailing defaults omitted)."""
    fields = [
        b"\x41" if durable else b"\x42",
        b"\x50" + bytes((priority & 0xFF,)),
        b"\x40" if ttl is None else b"\x70" + _U32.pack(ttl),
        b"\x41" if first_acquirer else b"\x42",
        b"\x70" + _U32.pack(delivery_count),
    ]
    body = b"".join(fields)
    return b"\x00\x53\x70\xc0" + bytes((len(body) + 1, len(fields))) + body


# ---- adding a message annotation (sequence numbers) ------------------------------------


def with_annotation(data: bytes, key: str, value: int) -> bytes:
    """``data`` (a valid message) with the message annotation ``key`` (a symbol) set to
    ``value`` (a long), added to its message-annotations section or in a new one; a message
    that already carries ``key`` is returned unchanged. Every other byte is kept."""
    name = key.encode("ascii")
    pair = b"\xa3" + bytes((len(name),)) + name + b"\x81" + _I64.pack(value)
    pos, end = 0, len(data)
    while pos < end:
        code, at = _section_code(data, pos, end)
        stop = _skip(data, at, end)
        if code == MESSAGE_ANNOTATIONS:
            if data[at] != 0x40 and find_in_map(data, at, stop, key) is not None:
                return data
            return data[:at] + _map_with(data, at, stop, pair) + data[stop:]
        if _RANK.get(code, len(_RANK)) > _RANK[MESSAGE_ANNOTATIONS]:
            break  # the section goes here, before properties and everything after
        pos = stop
    return data[:pos] + b"\x00\x53\x72" + _map_with(b"\xc1\x01\x00", 0, 3, pair) + data[pos:]


def _map_with(data: bytes, at: int, stop: int, pair: bytes) -> bytes:
    """The map at ``at`` (or null) re-encoded with one more key/value ``pair``."""
    code = data[at]
    if code == 0xC1:
        count, body = data[at + 2], data[at + 3:stop]
    elif code == 0xD1:
        count, body = _U32.unpack_from(data, at + 5)[0], data[at + 9:stop]
    elif code == 0x40:
        count, body = 0, b""
    else:
        raise DecodeError(f"message-annotations at offset {at} is not a map")
    return _encode_map(count + 2, body + pair)


def _encode_map(count: int, body: bytes) -> bytes:
    """A map of ``count`` keys and values (``body``, encoded): a map8 when it fits."""
    if len(body) + 1 <= 255 and count <= 255:
        return bytes((0xC1, len(body) + 1, count)) + body
    return b"\xd1" + _U32.pack(len(body) + 4) + _U32.pack(count) + body


# ---- the queue sequence number, stamped on every delivery ------------------------------

SEQUENCE_NUMBER = "x-opt-sequence-number"
_NUMBER_PAIR = b"\xa3" + bytes((len(SEQUENCE_NUMBER),)) + SEQUENCE_NUMBER.encode() + b"\x80"
# A whole message-annotations section holding only the number (a map8 of one pair), up to
# the number's eight bytes: what a message without annotations gets.
_NUMBER_SECTION = b"\x00\x53\x72\xc1" + bytes((1 + len(_NUMBER_PAIR) + 8, 2)) + _NUMBER_PAIR
# The whole section, packed in one call: number_section(prefix, number).
number_section = struct.Struct(f">{len(_NUMBER_SECTION)}sQ").pack
NUMBER_SECTION_PREFIX = _NUMBER_SECTION


def with_sequence_number(message: Message, number: int, header: bytes | None = None) -> bytes:
    """The bytes to deliver: ``message`` with the message annotation
    ``x-opt-sequence-number`` (a ulong) set to ``number``, replacing one the producer may
    have set, and with ``header`` in place of its own header section when given (a
    redelivery). Runs once per delivery: a message without annotations (the usual case)
    costs two slices and a join; every other byte is kept."""
    data = message.data
    start = message.header_end
    span = message.annotations_span
    if span is None:  # after the header and delivery-annotations: see parse_message
        at = stop = message.delivery_annotations_end or start
        middle = number_section(_NUMBER_SECTION, number)
    else:
        at, stop = span
        middle = _map_with_number(data, at, stop, number)
    head = data[:at] if header is None else header + data[start:at]
    return b"".join((head, middle, data[stop:]))


def _map_with_number(data: bytes, at: int, stop: int, number: int) -> bytes:
    """The annotations map at ``at`` re-encoded with our number (any earlier one gone)."""
    pair = _NUMBER_PAIR + _U64.pack(number)
    if data[at] == 0x40 or find_in_map(data, at, stop, SEQUENCE_NUMBER) is None:
        return _map_with(data, at, stop, pair)
    pairs = _map_pairs(data, at)
    kept = [data[k:v_end] for k, k_end, v_end in pairs
            if decode_value(data, k, k_end) != SEQUENCE_NUMBER]
    return _encode_map(2 * (len(kept) + 1), b"".join(kept) + pair)


def _map_pairs(data: bytes, at: int) -> list[tuple[int, int, int]]:
    """(key start, key end, value end) of each pair of the validated map at ``at``."""
    if data[at] == 0xC1:
        count, pos = data[at + 2], at + 3
    else:
        count, pos = _U32.unpack_from(data, at + 5)[0], at + 9
    pairs = []
    for _ in range(count // 2):
        key_end = _skip_values(data, pos, 1)
        value_end = _skip_values(data, key_end, 1)
        pairs.append((pos, key_end, value_end))
        pos = value_end
    return pairs
