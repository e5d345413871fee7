"""Reading a message once: validate every section and fill the broker's message record.

The rules this module owns: a message is accepted only as a whole, well-formed AMQP message
(sections in order, body kinds not mixed, nothing after the last section, each value
checked by :mod:`proton_broker.codec.values`); the record keeps the header and the few
properties fields queues use, and where the application-properties and message-annotations
are, so they can be decoded later only when a feature asks. When the fast walk finds the
bytes short, a second, checked walk says where.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from proton_broker.codec.encode import (
    encode_value,
    with_annotation_at,
    with_annotation_map,
    with_annotations,
)
from proton_broker.codec.values import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MAX_DEPTH,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    SECTION_NAMES,
    SECTION_RANK,
    DecodeError,
    compound_header,
    decode_at,
    section_code,
    skip,
    skip_section_value,
    skip_simple_map,
    skip_values,
)
from proton_broker.message import Fields, Header, Message

_U32 = struct.Struct(">I")
_SIZE_COUNT = struct.Struct(">II")  # a compound32's size and count
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_NULL_RUN = re.compile(b"\x40*")
# A list8 holds at most 255 elements; longer runs of nulls take several steps.
_NULLS: list[Any] = [None] * 256
_AT_RUNS = [b"\x40" * n for n in range(11)]  # runs of n nulls


def _null_run(data: bytes, at: int, stop: int) -> int:
    """How many nulls (0x40) follow ``at``, before ``stop``."""
    # \x40* always matches (perhaps nothing), so there is always a match object
    return _NULL_RUN.match(data, at, stop).end() - at  # type: ignore[union-attr]


_NULLS_THEN_STR8 = b"\x40" * 9 + b"\xa1"  # properties fields 1-9 unset, a str8 group-id


def parse_message(data: bytes) -> Message:
    """Validate ``data`` as a whole AMQP message and read the fields the broker uses.

    Runs once per message on the hot path, so it walks the sections with the lenient
    :func:`skip_values` and checks sizes where compounds and the message end; when the
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
    except RecursionError:  # a deep value inside header or properties, decoded there
        raise DecodeError(f"a value is nested more than {MAX_DEPTH} levels deep") from None


def _parse(data: bytes, message: Message) -> Message:  # noqa: C901 - the hot codec walk, measured
    end = len(data)
    ranks = SECTION_RANK
    pos, rank, body, code = 0, -1, -1, -1
    try:
        while pos < end:
            if data[pos] == 0x00 and data[pos + 1] == 0x53:  # descriptor as a smallulong
                code, at = data[pos + 2], pos + 3
                new_rank = ranks[code]
            else:
                code, at = section_code(data, pos, end)
                new_rank = ranks[code] if 0 <= code < 256 else -1
            if new_rank < 0:
                raise DecodeError(f"unknown section descriptor at offset {pos}")
            if new_rank <= rank and (
                new_rank < rank or new_rank != 5 or code != body or code == AMQP_VALUE
            ):
                raise _OutOfOrder(_out_of_order(data, pos, code))
            rank = new_rank
            kind = data[at]
            if new_rank == 5:  # a body section
                body = code
                if code == DATA and kind == 0xA0:
                    pos = at + 2 + data[at + 1]
                elif code == DATA and kind == 0xB0:
                    pos = at + 5 + _U32.unpack_from(data, at + 1)[0]
                else:
                    _expect_kind(code, kind, at)
                    pos = skip_section_value(data, at)
            elif code == HEADER:
                # list0 is an all-defaults header, which the Message defaults already say.
                pos = at + 1 if kind == 0x45 else _read_header(message, data, at, end)
                message.header_end = pos
            elif code == PROPERTIES:
                pos = at + 1 if kind == 0x45 else _read_properties(message, data, at, end)
            elif code == APPLICATION_PROPERTIES:
                pos = skip_simple_map(data, at)
                if pos < 0:  # not the usual map: walked again, to say what is wrong
                    pos = _application_properties(data, at)
                span = (at, pos)  # _span's usual case, written out: a keyed message's
                message.app_properties_span = _SPANS.get(span) or _span(at, pos)
            else:
                if kind not in _MAP_OR_NULL:  # annotations and footer: maps (AMQP 1.0 3.2)
                    _expect_kind(code, kind, at)
                pos = skip_section_value(data, at)
                if code == MESSAGE_ANNOTATIONS:
                    message.annotations_span = _span(at, pos)
                elif code == DELIVERY_ANNOTATIONS:
                    message.delivery_annotations_end = pos
    except _OutOfOrder:
        raise  # it names its sections itself
    except DecodeError as exc:
        raise _in_section(exc, code) from None
    if pos != end:
        raise _explain(data)
    return message


class _OutOfOrder(DecodeError):
    """A section out of its place: the description names the sections concerned, so it is
    not prefixed with the section the walk had reached."""


def _out_of_order(data: bytes, at: int, code: int) -> str:
    """Why section ``code`` at offset ``at`` cannot follow the sections before it, naming
    the section out of place: a footer that came early (rhea's ``message.encode`` puts a
    footer before the body) rather than the body after it. The error path only: it walks
    the sections before ``at`` again, which the hot walk has already checked."""
    earlier: list[tuple[int, int]] = []  # (offset, code) of each section before ``at``
    pos = 0
    while pos < at:
        section, value = section_code(data, pos, at)
        earlier.append((pos, section))
        pos = skip(data, value, at)
    here = _section_label(code, at)
    rank = SECTION_RANK[code]
    after = [(pos, section) for pos, section in earlier if SECTION_RANK[section] > rank]
    footer = next((pos for pos, section in after if section == FOOTER), None)
    if footer is not None:
        body = " (the body)" if rank == SECTION_RANK[AMQP_VALUE] else ""
        return (
            f"footer section (0x78) at offset {footer} comes before the {here}{body}: "
            "the footer is a message's last section (AMQP 1.0 3.2)"
        )
    if after:
        pos, section = after[0]
        return (
            f"{here} comes after the {_section_label(section, pos)}: "
            "sections go header, delivery-annotations, message-annotations, properties, "
            "application-properties, body, footer (AMQP 1.0 3.2)"
        )
    pos, section = earlier[-1]  # of the same rank: a section repeated, or bodies mixed
    if section == code:
        return f"{here} repeats the {_section_label(section, pos)}: a message has one"
    return (
        f"{here} follows the {_section_label(section, pos)}: a body is data sections, "
        "amqp-sequence sections or one amqp-value section, not a mix (AMQP 1.0 3.2)"
    )


def _section_label(code: int, at: int) -> str:
    """``code``'s section at offset ``at``, as an error names it."""
    return f"{SECTION_NAMES.get(code, 'unknown')} section (0x{code:02x}) at offset {at}"


_MAP_OR_NULL = (0xC1, 0xD1, 0x40)
# What each section's value must be (AMQP 1.0 3.2), where the hot walk would not notice:
# a data section binary, an amqp-sequence a list, annotations and the footer maps (null
# allowed). A message that breaks this is refused, not stored: delivered, it could not be
# stamped with its number (annotations) nor shown (management, the console).
_SECTION_KINDS = {
    DATA: ((0xA0, 0xB0), "a binary"),
    AMQP_SEQUENCE: ((0x45, 0xC0, 0xD0), "a list"),
    MESSAGE_ANNOTATIONS: (_MAP_OR_NULL, "a map"),
    DELIVERY_ANNOTATIONS: (_MAP_OR_NULL, "a map"),
    FOOTER: (_MAP_OR_NULL, "a map"),
}


def _expect_kind(code: int, kind: int, at: int) -> None:
    """DecodeError unless the value at ``at`` (constructor ``kind``) is what section
    ``code`` must hold."""
    wanted = _SECTION_KINDS.get(code)
    if wanted is not None and kind not in wanted[0]:
        found = _TYPE_NAMES.get(kind, f"a value of type 0x{kind:02x}")
        raise DecodeError(f"the value at offset {at} is {found}, not {wanted[1]}")


# Constructors of the simple types an application property's value may have (AMQP 1.0
# 3.2.5: no map, list or array; Broker-J refuses described values too).
_SIMPLE_VALUE = [
    code not in (0x00, 0x45, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0) for code in range(256)
]
_TYPE_NAMES = {0x00: "a described value", 0x45: "a list", 0xA0: "a binary", 0xB0: "a binary"}
_TYPE_NAMES |= {0xA3: "a symbol", 0xB3: "a symbol", 0xC0: "a list", 0xD0: "a list"}
_TYPE_NAMES |= {0xC1: "a map", 0xD1: "a map", 0xE0: "an array", 0xF0: "an array"}
_TYPE_NAMES |= {0xA1: "a string", 0xB1: "a string"}


def _application_properties(data: bytes, at: int) -> int:
    """Check the application-properties map at ``at`` (keys strings, values of simple
    types: AMQP 1.0 3.2.5), one :func:`skip_simple_map` did not pass, and say what is wrong
    with it; the offset after it if nothing is (a text it could not check quickly)."""
    code = data[at]
    if code == 0xC1:
        count, first, stop = data[at + 2], at + 3, at + 2 + data[at + 1]
    elif code == 0xD1:  # a map32, as Proton's encoder writes every map
        size, count = _SIZE_COUNT.unpack_from(data, at + 1)
        first, stop = at + 9, at + 5 + size
    else:
        raise DecodeError(f"it is {_type_name(code)}, not a map")
    if count & 1:
        raise DecodeError(f"map at offset {at} has an odd number of elements")
    pos = first
    for _ in range(count >> 1):
        key = data[pos]
        if key != 0xA1 and key != 0xB1:
            raise DecodeError(
                f"the key at offset {pos} is {_type_name(key)}, not a string (AMQP 1.0 3.2.5)"
            )
        value = skip_values(data, pos, 1)
        if not _SIMPLE_VALUE[data[value]]:
            raise DecodeError(
                f"the value of {decode_at(data, pos, value)[0]!r} is "
                f"{_type_name(data[value])}, not a simple type (AMQP 1.0 3.2.5)"
            )
        pos = skip_values(data, value, 1)
    if pos != stop:
        raise DecodeError(f"compound at offset {at}: size does not match its elements")
    return stop


def _type_name(code: int) -> str:
    return _TYPE_NAMES.get(code, f"of type 0x{code:02x}")


def _in_section(exc: DecodeError, code: int) -> DecodeError:
    """``exc``, saying which section it is in (when the walk had reached one)."""
    name = SECTION_NAMES.get(code)
    return exc if name is None else DecodeError(f"{name} section: {exc}")


def _explain(data: bytes) -> DecodeError:
    """The precise error for bytes the fast walk found short: the same walk, checked."""
    pos, end = 0, len(data)
    try:
        while pos < end:
            code, at = section_code(data, pos, end)
            if code < 0:
                return DecodeError(f"unknown section descriptor at offset {pos}")
            pos = skip(data, at, end)
    except DecodeError as exc:
        return exc
    return DecodeError(f"message of {end} bytes is truncated")


def _list_fields(data: bytes, pos: int, end: int, section: str) -> tuple[list[Any], int]:  # noqa: C901 - the hot codec walk, measured
    """The elements of the list at ``pos`` (header, properties), decoded.

    Elements of the common simple types are decoded inline; any other element, and any
    element whose bytes do not check out here, goes through :func:`decode_at`, which decodes
    it the same way or raises the error.
    """
    code = data[pos] if pos < end else -1
    if code != 0xC0 and code != 0xD0:
        value, stop = decode_at(data, pos, end)
        if not isinstance(value, list):
            raise DecodeError(f"the {section} section at offset {pos} is not a list")
        return value, stop
    if code == 0xC0 and pos + 3 <= end and pos + 3 <= pos + 2 + data[pos + 1] <= end:
        at, count, stop = pos + 3, data[pos + 2], pos + 2 + data[pos + 1]  # list8 that fits
    else:
        at, count, stop = compound_header(data, code, pos + 1, end)
    fields: list[Any] = []
    append = fields.append
    while len(fields) < count:
        c = data[at] if at < stop else -1
        if c == 0x40:  # nulls come in runs (unused properties fields): take the run at once
            run = min(_null_run(data, at, stop), count - len(fields))
            fields += _NULLS[:run]
            at += run
            continue
        if (c == 0xA1 or c == 0xA3) and at + 1 < stop and at + 2 + data[at + 1] <= stop:
            after = at + 2 + data[at + 1]
            try:
                append(data[at + 2 : after].decode("utf-8" if c == 0xA1 else "ascii"))
            except UnicodeDecodeError:
                pass  # decode_at below raises the error
            else:
                at = after
                continue
        if (c == 0x80 or c == 0x83) and at + 9 <= stop:
            append(
                _U64.unpack_from(data, at + 1)[0]
                if c == 0x80
                else _I64.unpack_from(data, at + 1)[0]
            )
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
        value, at = decode_at(data, at, stop)
        append(value)
    if at != stop:
        raise DecodeError(f"compound at offset {pos}: size does not match its elements")
    return fields, stop


def _read_header(message: Message, data: bytes, pos: int, end: int) -> int:
    """Read the header section's list at ``pos`` into ``message``; the offset after it.

    Producers send the same few headers over and over (``durable`` set, a priority), so a
    list8 header's fields are kept by its bytes once read (up to _HEADER_CACHE of them): a
    repeated header costs a slice and a lookup instead of the walk."""
    key = None
    values = None
    if data[pos] == 0xC0 and pos + 2 + data[pos + 1] <= end:  # a list8 that fits
        stop = pos + 2 + data[pos + 1]
        key = data[pos:stop]
        values = _HEADERS.get(key)
    if values is None:
        values, stop = _header_values(data, pos, end)
        if key is not None and len(_HEADERS) < _HEADER_CACHE:
            _HEADERS[key] = values
    message.header = values
    return stop


def _header_values(data: bytes, pos: int, end: int) -> tuple[Header, int]:
    """The header list's five fields, checked and with their defaults; the offset after."""
    fields, stop = _list_fields(data, pos, end, "header")
    fields += [None] * (5 - len(fields))
    durable, priority, ttl, first_acquirer, delivery_count = fields[:5]
    values = Header(
        _bool_field(durable, "durable"),
        4 if priority is None else _int_field(priority, "priority"),
        None if ttl is None else _int_field(ttl, "ttl"),
        _bool_field(first_acquirer, "first-acquirer"),
        0 if delivery_count is None else _int_field(delivery_count, "delivery-count"),
    )
    return values, stop


def _span(start: int, end: int) -> tuple[int, int]:
    """Where a section sits, as a pair shared by every message with that section at the
    same offsets (a producer's messages mostly have the same shape): a queued message
    would otherwise hold 56 bytes a section for it."""
    span = (start, end)
    kept = _SPANS.get(span)
    if kept is not None:  # the usual case, answered first
        return kept
    if len(_SPANS) < _SPAN_CACHE:
        _SPANS[span] = span
    return span


_SPAN_CACHE = 16384  # distinct section positions remembered (about 150 bytes each)
_SPANS: dict[tuple[int, int], tuple[int, int]] = {}
_HEADER_CACHE = 4096  # distinct header encodings remembered (a few bytes each)
_HEADERS: dict[bytes, Header] = {}


def _read_properties(message: Message, data: bytes, pos: int, end: int) -> int:  # noqa: C901 - the hot codec walk, measured
    """Check the properties list and read the fields the record keeps into
    ``message.fields``: to, subject, absolute-expiry-time and group-id (fields 2, 3, 8 and
    10); the offset after the list.

    Every field is checked as :func:`_list_fields` checks it, but a list8 (what every
    client sends) is walked here without building the list: a grouped message's properties
    are typically message-id, nine nulls, group-id and group-sequence, and this runs once
    per message.
    """
    size = data[pos + 1] if pos + 1 < end else -1
    kept: list[Any] = [None] * 4  # the Fields, in order
    if data[pos] != 0xC0 or pos + 3 > end or not 1 <= size <= end - pos - 2:
        fields, stop = _list_fields(data, pos, end, "properties")
        for index, field in enumerate(fields[:11]):
            if field is not None:
                _keep_property(kept, index, field)
        _set_fields(message, kept)
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
                run = min(_null_run(data, at, stop), count - index)
            index += run
            at += run
            continue
        if (c == 0xA1 or c == 0xA3) and at + 1 < stop and at + 2 + data[at + 1] <= stop:
            after = at + 2 + data[at + 1]
            value: Any
            try:
                value = data[at + 2 : after].decode("utf-8" if c == 0xA1 else "ascii")
            except UnicodeDecodeError:
                value, at = decode_at(data, at, stop)  # raises the error
            else:
                at = after
        elif c == 0x43:  # uint0, as group-sequence usually is
            value = 0
            at += 1
        else:
            value, at = decode_at(data, at, stop)
        if 2 <= index <= 10:
            _keep_property(kept, index, value)
        index += 1
    if at != stop:
        raise DecodeError(f"compound at offset {pos}: size does not match its elements")
    _set_fields(message, kept)
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
        data[at + 2 : after].decode()  # the message-id: checked, read again when asked
    except UnicodeDecodeError:
        return False
    if group_id is not None:
        _set_fields(message, [None, None, None, group_id])
    return True


# Where each properties field the record keeps goes in Fields (by its index in the list).
_KEPT = {2: 0, 3: 1, 8: 2, 10: 3}


def _keep_property(kept: list[Any], index: int, value: Any) -> None:
    """Field ``index`` of the properties list into ``kept`` (the Fields), if it is one."""
    slot = _KEPT.get(index)
    if slot is None or value is None:
        return
    if slot == 2:  # absolute-expiry-time
        kept[2] = value if type(value) is int else None
    else:
        kept[slot] = _str_field(value)


def _set_fields(message: Message, kept: list[Any]) -> None:
    """The record's Fields: one shared by every message with the same values (see
    message.py), unless they hold an expiry time, which is mostly each message's own."""
    if kept.count(None) == len(kept):
        return  # the record's default, NO_FIELDS
    if kept[2] is not None:
        message.fields = _new_fields(Fields, kept)
        return
    key = tuple(kept)
    fields = _FIELDS.get(key)
    if fields is None:
        fields = _new_fields(Fields, kept)
        if len(_FIELDS) < _FIELDS_CACHE:
            _FIELDS[key] = fields
    message.fields = fields


# Fields made straight from their values, without the named tuple's keyword handling (a
# third of the time; this runs once per message).
_new_fields = tuple.__new__
_FIELDS_CACHE = 4096  # distinct Fields remembered (addresses, subjects, groups)
_FIELDS: dict[tuple[Any, ...], Fields] = {}


def _int_field(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{name} must be an integer, got {value!r}")
    return value


def _bool_field(value: Any, name: str) -> bool:
    if value is None:
        return False
    if type(value) is not bool:
        raise DecodeError(f"{name} must be a boolean, got {value!r}")
    return value


def _str_field(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def annotate(message: Message, key: str, value: int) -> None:
    """Add the message annotation ``key`` (a long) to ``message``'s bytes, unless it is
    there already (the broker stamps sequence numbers this way), and move the record's
    section offsets with them."""
    old = message.data
    span = message.annotations_span
    place = message.delivery_annotations_end or message.header_end
    data = with_annotation_at(old, span, place, key, value)
    if data is old:
        return
    # The offsets move by arithmetic, not by parsing the message again (a last-value queue
    # stamps every message): what follows the annotations shifts by the bytes added.
    grown = len(data) - len(old)
    if span is None:  # a new section at ``place``
        message.annotations_span = _span(place + 3, place + grown)  # after its descriptor
    else:
        place = span[1]
        message.annotations_span = _span(span[0], span[1] + grown)
    properties = message.app_properties_span
    if properties is not None and properties[0] >= place:
        message.app_properties_span = _span(properties[0] + grown, properties[1] + grown)
    message.data = data
    if message.extras is not None:  # a decoded copy of the old section is stale now
        message.annotations_cache = None


def stamp(message: Message, key: str, value: int) -> None:
    """Set the message annotation ``key`` (a long) in ``message``'s bytes, replacing one it
    has, and move the record's section offsets with them: :func:`annotate` keeps one there,
    this is for the few messages the broker numbers afresh (a copy it moves to a queue with
    a key), so the message is parsed again."""
    data = with_annotations(message, {key: encode_value(value)})
    fresh = parse_message(data)  # only the annotations and what follows them moved
    message.data = data
    message.annotations_span = fresh.annotations_span
    message.app_properties_span = fresh.app_properties_span
    if message.extras is not None:  # a decoded copy of the old section is stale now
        message.annotations_cache = None


def merge_annotations(message: Message, annotations: bytes) -> int:
    """Merge ``annotations`` (an encoded map, as a ``modified`` outcome carries it: see
    :func:`with_annotation_map`) into ``message``'s bytes and move the record's section
    offsets with them; returns how many bytes the message grew by (0: nothing merged, also
    for annotations that do not decode: Proton encoded them, so that would be a bug)."""
    try:
        data = with_annotation_map(message, annotations)
        if data is None:
            return 0
        fresh = parse_message(data)  # only the annotations and what follows them moved
    except (DecodeError, IndexError, struct.error):
        return 0
    grown = len(data) - len(message.data)
    message.data = data
    message.annotations_span = fresh.annotations_span
    message.app_properties_span = fresh.app_properties_span
    if message.extras is not None:  # a decoded copy of the old section is stale now
        message.annotations_cache = None
    return grown


def body_start(data: bytes) -> int:
    """Where the body of ``data``, a whole parsed message, begins: the offset of its first
    body section (data, amqp-sequence or amqp-value), or its end without one."""
    pos, end = 0, len(data)
    while pos < end:
        code, at = section_code(data, pos, end)
        if code in (DATA, AMQP_SEQUENCE, AMQP_VALUE):
            return pos
        pos = skip(data, at, end)
    return end


def body_of(message: Message) -> Any:
    """The decoded body of a parsed message: an amqp-value's value, the bytes of its data
    sections joined, or the lists of its amqp-sequence sections joined; None without one."""
    data, pos, end = message.data, 0, len(message.data)
    body: Any = None
    while pos < end:
        code, at = section_code(data, pos, end)
        pos = skip(data, at, end)
        if code == AMQP_VALUE:
            return decode_at(data, at, pos)[0]
        if code == DATA:
            body = (body or b"") + decode_at(data, at, pos)[0]
        elif code == AMQP_SEQUENCE:
            body = (body or []) + decode_at(data, at, pos)[0]
    return body
