"""The AMQP 1.0 type system, in plain Python: walk, check and decode encoded values.

The rules this module owns: every encoding's widths and counts are checked before a value
is trusted (a compound's size must match its elements, a string must fit its bytes), a
string must be valid UTF-8 and a symbol ASCII even where it is only skipped (a client that
reads the message back would fail on it, and block the queue), values nest at most
:data:`MAX_DEPTH` levels (lists, maps, arrays and described values inside one another), a
value is skipped without building Python objects unless it is asked for, and message
sections are framed by their descriptor (a small ulong, a ulong or a symbol). It knows
nothing of the
broker's message record: :mod:`proton_broker.codec.sections` reads a message with it, and
:mod:`proton_broker.codec.encode` writes the few sections the broker changes.

It imports nothing from Proton; it runs once per message on the hot path. Two walks, the
quick check of application properties and the lookup of one key in a map, also have compiled
copies (``_simple_map.pyx``, built with Cython where a C compiler is at hand), which the codec
uses where they were built; the Python walks here are their reference and their fallback.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

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
SECTION_NAMES = {code: name.decode().split(":")[1] for name, code in _SECTION_SYMBOLS.items()}
# Order rank of each section: sections must appear in this order, body kinds not mixed.
SECTION_ORDER = {
    HEADER: 0,
    DELIVERY_ANNOTATIONS: 1,
    MESSAGE_ANNOTATIONS: 2,
    PROPERTIES: 3,
    APPLICATION_PROPERTIES: 4,
    DATA: 5,
    AMQP_SEQUENCE: 5,
    AMQP_VALUE: 5,
    FOOTER: 6,
}

# Width of the value after a fixed-width constructor.
_FIXED = {
    0x40: 0,
    0x41: 0,
    0x42: 0,
    0x43: 0,
    0x44: 0,
    0x45: 0,
    0x50: 1,
    0x51: 1,
    0x52: 1,
    0x53: 1,
    0x54: 1,
    0x55: 1,
    0x56: 1,
    0x60: 2,
    0x61: 2,
    0x70: 4,
    0x71: 4,
    0x72: 4,
    0x73: 4,
    0x74: 4,
    0x80: 8,
    0x81: 8,
    0x82: 8,
    0x83: 8,
    0x84: 8,
    0x94: 16,
    0x98: 16,
}
_VAR8 = frozenset((0xA0, 0xA1, 0xA3))
_VAR32 = frozenset((0xB0, 0xB1, 0xB3))
_COMPOUND8 = frozenset((0xC0, 0xC1))
_COMPOUND32 = frozenset((0xD0, 0xD1))
_ARRAYS = frozenset((0xE0, 0xF0))
_MAPS = frozenset((0xC1, 0xD1))

# How deeply compounds and described values may nest in a message. Clients nest a few
# levels (a JMS map message: two); this leaves room, and keeps the checking walk (which
# recurses) far from Python's recursion limit.
MAX_DEPTH = 100

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_SIZE_COUNT = struct.Struct(">II")  # a compound32's size and count
_U64 = struct.Struct(">Q")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class DecodeError(ValueError):
    """The bytes are not a well-formed AMQP message (the text says what and where)."""


class Described(NamedTuple):
    """A described value whose descriptor the broker does not interpret."""

    descriptor: Any
    value: Any


# ---- skipping (validation without building values) ------------------------------------


def skip(data: bytes, pos: int, end: int, depth: int = 0) -> int:
    """Return the offset just after the value that starts at ``pos``; validate it.
    ``depth``: how many compounds or described values enclose it."""
    if pos >= end:
        raise DecodeError(f"value missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos)
        return skip(data, skip(data, pos + 1, end, depth + 1), end, depth + 1)
    return _skip_body(data, code, pos + 1, end, depth)


def _skip_body(data: bytes, code: int, pos: int, end: int, depth: int = 0) -> int:
    """Skip the value of constructor ``code`` whose bytes start at ``pos``."""
    width = _FIXED.get(code)
    if width is not None:
        stop = pos + width
    elif code in _VAR8:
        stop = pos + 1 + data[pos] if pos < end else end + 1
    elif code in _VAR32:
        stop = pos + 4 + _U32.unpack_from(data, pos)[0] if pos + 4 <= end else end + 1
    elif code in _COMPOUND8 or code in _COMPOUND32:
        return _skip_compound(data, code, pos, end, depth)
    elif code in _ARRAYS:
        return _skip_array(data, code, pos, end, depth)
    else:
        raise DecodeError(f"unknown type constructor 0x{code:02x} at offset {pos - 1}")
    if stop > end:
        raise DecodeError(f"value of type 0x{code:02x} at offset {pos - 1} is truncated")
    if code in _TEXT:
        check_text(data, code, pos - 1, stop)
    return stop


_TEXT = frozenset((0xA1, 0xB1, 0xA3, 0xB3))  # str8, str32, sym8, sym32


def check_text(data: bytes, code: int, at: int, stop: int) -> None:
    """DecodeError unless the string (UTF-8) or symbol (ASCII) at ``at`` is well formed."""
    start = at + (2 if code == 0xA1 or code == 0xA3 else 5)
    if code == 0xA1 or code == 0xB1:
        _utf8(data, start, stop)
    elif not data[start:stop].isascii():
        raise DecodeError(f"symbol at offset {at} is not ASCII")


def _too_deep(pos: int) -> DecodeError:
    return DecodeError(f"value at offset {pos} is nested more than {MAX_DEPTH} levels deep")


def compound_header(data: bytes, code: int, pos: int, end: int) -> tuple[int, int, int]:
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


def _skip_compound(data: bytes, code: int, pos: int, end: int, depth: int = 0) -> int:
    if depth >= MAX_DEPTH:
        raise _too_deep(pos - 1)
    first, count, stop = compound_header(data, code, pos, end)
    if code in _MAPS and count % 2:
        raise DecodeError(f"map at offset {pos - 1} has an odd number of elements")
    at = first
    for _ in range(count):
        at = skip(data, at, stop, depth + 1)
    if at != stop:
        raise DecodeError(f"compound at offset {pos - 1}: size does not match its elements")
    return stop


def _element_constructor(data: bytes, pos: int, end: int, depth: int = 0) -> tuple[int, int]:
    """(element type code, offset after the constructor) of an array; descriptors skipped."""
    if pos >= end:
        raise DecodeError(f"array constructor missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        after = skip(data, pos + 1, end, depth + 1)
        if after >= end:
            raise DecodeError(f"array constructor truncated at offset {pos}")
        return data[after], after + 1
    return code, pos + 1


def _skip_array(data: bytes, code: int, pos: int, end: int, depth: int = 0) -> int:
    if depth >= MAX_DEPTH:
        raise _too_deep(pos - 1)
    first, count, stop = compound_header(data, code, pos, end)
    element, at = _element_constructor(data, first, stop, depth)
    for _ in range(count):
        at = _skip_body(data, element, at, stop, depth + 1)
    if at != stop:
        raise DecodeError(f"array at offset {pos - 1}: size does not match its elements")
    return stop


# ---- decoding values ---------------------------------------------------------------------


def decode_value(data: bytes, start: int, end: int | None = None) -> Any:
    """Decode the one AMQP value at ``start`` into Python (symbols become ``str``,
    timestamps int milliseconds, decimals their raw bytes, described values ``Described``)."""
    value, _ = decode_at(data, start, len(data) if end is None else end)
    return value


def decode_at(data: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos >= end:
        raise DecodeError(f"value missing at offset {pos}")
    code = data[pos]
    if code == 0x00:
        descriptor, at = decode_at(data, pos + 1, end)
        value, at = decode_at(data, at, end)
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
    first, count, stop = compound_header(data, code, pos, end)
    items = []
    at = first
    for _ in range(count):
        item, at = decode_at(data, at, stop)
        items.append(item)
    if at != stop:
        raise DecodeError(f"compound at offset {pos - 1}: size does not match its elements")
    if code in _MAPS:
        if count % 2:
            raise DecodeError(f"map at offset {pos - 1} has an odd number of elements")
        return dict(zip(items[::2], items[1::2], strict=True)), stop
    return items, stop


def _decode_array(data: bytes, code: int, pos: int, end: int) -> tuple[Any, int]:
    first, count, stop = compound_header(data, code, pos, end)
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
    0xA0: lambda d, p, s: bytes(d[p + 1 : s]),
    0xA1: lambda d, p, s: _utf8(d, p + 1, s),
    0xA3: lambda d, p, s: _ascii(d, p + 1, s),
    0xB0: lambda d, p, s: bytes(d[p + 4 : s]),
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


def find_in_map_python(data: bytes, start: int, stop: int, key: str) -> Any:
    """The value under the string ``key`` in the (already validated) map at ``start``, or
    None; only that value is decoded. Keys are compared as their UTF-8 bytes, so a key
    sent as a symbol matches too, as it does in the decoded map. Map keys are unique in
    AMQP; if a malformed map repeats one, the first wins here. A value that cannot be
    decoded (invalid UTF-8) reads as absent. A key sent first, as a string, is found
    without a walk (a last-value or group key is mostly a message's only property); a key
    whose bytes occur nowhere in the map is absent without one (the broker asks for the
    optional ``x-opt-sequence`` and ``x-opt-sequence-number`` of every message on some
    queues). The reference for its compiled copy (see :data:`find_in_map`)."""
    code = data[start]
    if code == 0xD1:  # a map32, as Proton's encoder writes every map
        at = start + 9
    elif code == 0xC1:
        at = start + 3
    else:
        value = decode_value(data, start, stop)
        return value.get(key) if isinstance(value, dict) else None
    first = _STR8_KEYS.get(key) or _str8_key(key)
    if data.startswith(first, at, stop):  # the first key (mostly the only one)
        return _found_value(data, at + len(first), stop)
    pairs = (data[start + 2] if code == 0xC1 else _U32.unpack_from(data, start + 5)[0]) >> 1
    want = key.encode("utf-8")
    if data.find(want, at, stop) < 0:
        return None  # its bytes are nowhere in the map: absent, found at C speed
    size = len(want)
    for _ in range(pairs):
        c = data[at]
        if c == 0xA1 or c == 0xA3:
            n = data[at + 1]
            at += 2 + n
            found = n == size and data[at - n : at] == want
        elif c == 0xB1 or c == 0xB3:
            length = _U32.unpack_from(data, at + 1)[0]
            found = length == size and data[at + 5 : at + 5 + size] == want
            at += 5 + length
        else:
            found = False
            at = skip_values(data, at, 1)
        if found:
            return _found_value(data, at, stop)
        at = skip_values(data, at, 1)
    return None


def value_code(data: bytes, start: int, stop: int, key: str) -> int | None:
    """The constructor of the value under the string ``key`` in the (already validated) map
    at ``start`` (the first, where a malformed map repeats a key, as
    :func:`find_in_map_python` answers), or None when the key is absent or the bytes at
    ``start`` are not a map. What a decoded value does not tell: whether a float was sent as AMQP's
    float or double, which the text of a key depends on (:mod:`proton_broker.queues.keys`).
    Not on the hot path: only a key sent as a float asks."""
    code = data[start]
    if code == 0xD1:
        at, count = start + 9, _U32.unpack_from(data, start + 5)[0]
    elif code == 0xC1:
        at, count = start + 3, data[start + 2]
    else:
        return None
    for _ in range(count >> 1):
        name, at = decode_at(data, at, stop)
        if name == key:
            return data[at]
        at = skip_values(data, at, 1)
    return None


# The keys queues ask maps for (last-value, group and sort keys, x-opt-sequence), encoded as
# str8 keys, as every client sends them; up to _KEY_FORMS of them.
_STR8_KEYS: dict[str, bytes] = {}
_KEY_FORMS = 1024


def _str8_key(key: str) -> bytes:
    """``key`` encoded as a string (a str8, or a str32 if it is too long for one)."""
    # encode.py imports this module, so its encoder is imported here, once per key.
    from proton_broker.codec.encode import encode_value

    form = encode_value(key)
    if len(_STR8_KEYS) < _KEY_FORMS:
        _STR8_KEYS[key] = form
    return form


def _found_value(data: bytes, at: int, stop: int) -> Any:
    if data[at] == 0xA1:  # the common case, a str8, decoded here
        n = data[at + 1]
        try:
            return data[at + 2 : at + 2 + n].decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        return decode_at(data, at, stop)[0]
    except (DecodeError, ValueError):
        return None


# ---- messages ----------------------------------------------------------------------------

# How the fast skipper steps over the value a constructor byte starts: > 0 is the value's
# whole size (constructor included); the negative kinds are read from the bytes; 0 is not a
# constructor at all.
_STEP_VAR8, _STEP_VAR32, _STEP_NESTED, _STEP_TEXT8, _STEP_TEXT32 = -1, -2, -3, -4, -5


def _step_table() -> list[int]:
    table = [0] * 256
    for code, width in _FIXED.items():
        table[code] = 1 + width
    for code in _VAR8:
        table[code] = _STEP_TEXT8 if code in _TEXT else _STEP_VAR8
    for code in _VAR32:
        table[code] = _STEP_TEXT32 if code in _TEXT else _STEP_VAR32
    for code in (0x00, *_COMPOUND8, *_COMPOUND32, *_ARRAYS):
        table[code] = _STEP_NESTED
    return table


_STEP = _step_table()
# The same for an application property's value, which must be of a simple type (AMQP 1.0
# 3.2.5: no list, even an empty one, no map, array or described value): those are 0 here.
_PROPERTY_STEP = [
    0 if width == _STEP_NESTED or code == 0x45 else width for code, width in enumerate(_STEP)
]
SECTION_RANK = [SECTION_ORDER.get(code, -1) for code in range(256)]


def skip_simple_map_python(data: bytes, at: int) -> int:  # noqa: C901 - the hot codec walk, measured
    """The offset just after the map at ``at`` if it is application properties of the
    usual kind: string keys (str8 or str32, valid UTF-8), each with a value of a
    fixed-width, binary, string or symbol type (AMQP 1.0 3.2.5). -1 as soon as anything
    else turns up, and the caller walks the map again with its checks, which say what.

    Runs for every message with application properties: one call for the map, the steps
    inline, each text checked with one ``isascii`` of its bytes (a decode only when it is
    not ASCII). Like :func:`skip_values` it raises IndexError or struct.error past the end
    of the data. The reference for its compiled copy (see :data:`skip_simple_map`)."""
    code = data[at]
    if code == 0xD1:  # a map32, as Proton's encoder writes every map
        size, count = _SIZE_COUNT.unpack_from(data, at + 1)
        stop, at = at + 5 + size, at + 9
    elif code == 0xC1:
        count, stop, at = data[at + 2], at + 2 + data[at + 1], at + 3
    else:
        return -1
    if count & 1:
        return -1
    pairs = count >> 1
    step = _PROPERTY_STEP
    while pairs:  # (a range object and its iterator cost as much as a pair's checks)
        pairs -= 1
        code = data[at]
        if code == 0xA1:
            start, at = at + 2, at + 2 + data[at + 1]
        elif code == 0xB1:
            start, at = at + 5, at + 5 + _U32.unpack_from(data, at + 1)[0]
        else:
            return -1  # not a string key
        if not data[start:at].isascii() and not _is_text(data, 0xA1, start, at):
            return -1
        code = data[at]
        width = step[code]
        if width == _STEP_TEXT8:  # a short string or symbol, the usual value, first
            start, at = at + 2, at + 2 + data[at + 1]
            if not data[start:at].isascii() and not _is_text(data, code, start, at):
                return -1
        elif width > 0:
            at += width
        elif width == _STEP_VAR8:
            at += 2 + data[at + 1]
        elif width == _STEP_VAR32:
            at += 5 + _U32.unpack_from(data, at + 1)[0]
        elif width == _STEP_TEXT32:
            start, at = at + 5, at + 5 + _U32.unpack_from(data, at + 1)[0]
            if not data[start:at].isascii() and not _is_text(data, code, start, at):
                return -1
        else:
            return -1  # not of a simple type, or no constructor at all
    return at if at == stop else -1


def _is_text(data: bytes, code: int, start: int, stop: int) -> bool:
    """Whether the bytes of a string (UTF-8) or symbol (ASCII: never, here, since the caller
    found them not ASCII) of constructor ``code`` are well formed."""
    if code != 0xA1 and code != 0xB1:
        return False
    try:
        data[start:stop].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def contains_python(data: bytes, needle: bytes, start: int, stop: int) -> bool:
    """Whether ``needle`` occurs in ``data`` within ``start:stop``. The reference for its
    compiled copy (see :data:`contains`), which does without ``bytes.find``'s argument
    parsing: a queue with a key looks for a custom number in every keyed message."""
    return data.find(needle, start, stop) >= 0


def find_unmarked_python(
    data: bytes, start: int, stop: int, key: str, since: int, marker: bytes
) -> Any:
    """The value under ``key`` in the map at ``start`` (as :func:`find_in_map_python`),
    unless ``marker`` occurs in ``data`` within ``since:stop``: then ``marker`` itself, the
    very object, which no value read from the bytes is. A queue with a key reads every
    keyed message's key this way, and in the same call learns whether a custom
    ``x-opt-sequence`` may be in its annotations or properties (the marker: the caller then
    reads them). The reference for its compiled copy (see :data:`find_unmarked`)."""
    if contains_python(data, marker, since, stop):
        return marker
    return find_in_map_python(data, start, stop, key)


def _compiled() -> ModuleType | None:
    """The compiled copies of :func:`skip_simple_map_python` and :func:`find_in_map_python`
    (the module ``codec/_simple_map.pyx``), given this module's step table and Python
    lookup, or None where they were not built."""
    try:
        from proton_broker.codec import _simple_map
    except ImportError:
        return None
    _simple_map.use_steps(_PROPERTY_STEP, _STEP_VAR8, _STEP_VAR32, _STEP_TEXT8, _STEP_TEXT32)
    _simple_map.use_find(find_in_map_python)
    return _simple_map


# The application-properties quick check and the one-key lookup as this installation runs
# them: compiled where a C compiler built them when the package was installed (about 5,400
# fewer instructions for each, docs/performance.md), else the Python walks. Both give the
# same answers.
COMPILED = _compiled()
skip_simple_map: Callable[[bytes, int], int] = (
    skip_simple_map_python if COMPILED is None else COMPILED.skip_simple_map
)
find_in_map: Callable[[bytes, int, int, str], Any] = (
    find_in_map_python if COMPILED is None else COMPILED.find_in_map
)
contains: Callable[[bytes, bytes, int, int], bool] = (
    contains_python if COMPILED is None else COMPILED.contains
)
find_unmarked: Callable[[bytes, int, int, str, int, bytes], Any] = (
    find_unmarked_python if COMPILED is None else COMPILED.find_unmarked
)


def skip_values(data: bytes, at: int, count: int) -> int:
    """The offset just after ``count`` consecutive values starting at ``at``.

    The hot path's skipper: a table lookup per value, no bounds checks. It may run past the
    enclosing compound (every caller checks that the result lands exactly on the compound's
    end, which no overrun can) and raises IndexError or struct.error past the end of the
    data, which :func:`parse_message` turns into a precise error. Nested compounds and
    described values go through the checking :func:`skip`.
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
        elif width == _STEP_TEXT8:
            stop = at + 2 + data[at + 1]
            check_text(data, data[at], at, stop)
            at = stop
        elif width == _STEP_TEXT32:
            stop = at + 5 + _U32.unpack_from(data, at + 1)[0]
            check_text(data, data[at], at, stop)
            at = stop
        elif width == _STEP_NESTED:
            at = skip(data, at, len(data), 1)
        else:
            raise DecodeError(f"unknown type constructor 0x{data[at]:02x} at offset {at}")
    return at


def skip_section_value(data: bytes, at: int) -> int:
    """Skip a section's value (a map, list or anything else); compounds checked for size."""
    code = data[at]
    if code == 0xC1 or code == 0xC0:
        count, first, stop = data[at + 2], at + 3, at + 2 + data[at + 1]
    elif code == 0xD1 or code == 0xD0:
        count, first = _U32.unpack_from(data, at + 5)[0], at + 9
        stop = at + 5 + _U32.unpack_from(data, at + 1)[0]
    else:
        return skip_values(data, at, 1)
    if first > stop:
        raise DecodeError(f"compound at offset {at} is too short for its count")
    if count & 1 and (code == 0xC1 or code == 0xD1):
        raise DecodeError(f"map at offset {at} has an odd number of elements")
    if skip_values(data, first, count) != stop:
        raise DecodeError(f"compound at offset {at}: size does not match its elements")
    return stop


def section_code(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(section code, offset of the section's value) for the section starting at ``pos``."""
    if data[pos] != 0x00 or pos + 2 > end:
        raise DecodeError(f"expected a message section at offset {pos}")
    kind = data[pos + 1]
    if kind == 0x53 and pos + 3 <= end:
        return data[pos + 2], pos + 3
    if kind == 0x80 and pos + 10 <= end:
        code = _U64.unpack_from(data, pos + 2)[0]
        return (code if code in SECTION_ORDER else -1), pos + 10
    if kind in (0xA3, 0xB3):
        after = _skip_body(data, kind, pos + 2, end)
        name = data[pos + 3 : after] if kind == 0xA3 else data[pos + 6 : after]
        return _SECTION_SYMBOLS.get(bytes(name), -1), after
    raise DecodeError(f"unreadable section descriptor at offset {pos}")


def decode_properties_field(data: bytes, pos: int, index: int) -> Any:
    """Field ``index`` of the properties section starting at ``pos`` of a validated
    message (None when unset, or when the section there is not properties): the fields
    before it skipped, only that one decoded."""
    end = len(data)
    if pos >= end:
        return None
    code, at = section_code(data, pos, end)
    if code != PROPERTIES or data[at] == 0x45:  # list0: every field unset
        return None
    first, count, stop = compound_header(data, data[at], at + 1, end)
    if index >= count:
        return None
    return decode_at(data, skip_values(data, first, index), stop)[0]


def decode_properties(data: bytes, pos: int) -> list[Any]:
    """The properties section starting at ``pos`` of a validated message, all thirteen
    fields decoded (None where unset, or when the section there is not properties).

    Not on the hot path: the parser reads only the fields queues use, and this serves the
    rest on demand (selectors naming correlation-id, user-id, reply-to or group-sequence).
    """
    fields: list[Any] = []
    if pos < len(data):
        code, at = section_code(data, pos, len(data))
        if code == PROPERTIES:
            value = decode_value(data, at)
            fields = value if isinstance(value, list) else []
    return fields[:13] + [None] * (13 - len(fields))


def as_text(value: Any) -> str | None:
    """A property or annotation value as text (None stays None). Numbers are their decimal
    text whatever AMQP type they had (Proton's ``ulong(5)`` is "5", not its repr)."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return str(float(value))
    return str(value)
