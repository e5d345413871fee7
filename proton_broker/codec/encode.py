"""Writing the few bytes the broker changes in a message it forwards.

The rules this module owns: every byte of a message is forwarded as received except the
header (re-encoded on a redelivery, to carry the new delivery count) and the
message-annotations section, which gains the queue's sequence number
(``x-opt-sequence-number``, replacing one the producer set), the number of the message in
its key (``x-opt-sequence``, a long, unless the producer set it) or another broker
annotation; a message without annotations gets a new section in its right place, after
the header and delivery-annotations.

A message's number in its key is added as it leaves, not when it arrives: a queue keeps
the message's bytes as the producer sent them (31 bytes less a key on a last-value queue,
and no copy of the bytes as it joins), and the record knows the number
(``Message.sequence``). A message written to the store is the exception: its bytes carry
the number (``sections.annotate``), so that its row is read back, at a restart or as flow
to disk brings it back, with its number and as the same bytes as the record's.

The messages the broker makes itself (the HTTP gateway's, the management node's answers)
are encoded here too, with no limit but memory on how many values they hold: Proton's
``Data``, which an adapter could use, stops at 65,535 values (``PN_OUT_OF_MEMORY``), a
QUERY of a thousand queues. A plain Python value has one encoding (an int is a long, a str
a string, bytes a binary, a list or tuple a list, a dict a map); a caller with values of
other types (Proton's symbol, ulong, described...) hands :func:`encode_tree` a ``leaf``
encoder for those, and the lists and maps around them are still written here.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from proton_broker.codec.values import (
    DecodeError,
    decode_value,
    find_in_map,
    skip_values,
)

if TYPE_CHECKING:
    from proton_broker.message import Message

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


def encode_header(
    durable: bool, priority: int, ttl: int | None, first_acquirer: bool, delivery_count: int
) -> bytes:
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


def with_annotation_at(
    data: bytes, span: tuple[int, int] | None, place: int, key: str, value: int
) -> bytes:
    """``data`` (a parsed message) with the message annotation ``key`` (a symbol) set to
    ``value`` (a long), added to its message-annotations map at ``span`` (value start,
    section end) or, when it has none (``span`` None), in a new section at ``place`` (after
    the header and delivery-annotations); a message that already carries ``key`` is returned
    unchanged. Every other byte is kept, and nothing is scanned: the record knows where."""
    pair, section = _annotation_prefixes(key)
    number = _I64.pack(value)
    if span is not None:
        at, stop = span
        if data[at] != 0x40 and find_in_map(data, at, stop, key) is not None:
            return data
        return data[:at] + _map_with(data, at, stop, pair + number) + data[stop:]
    return b"".join((data[:place], section, number, data[place:]))


@functools.lru_cache(maxsize=32)
def _annotation_prefixes(key: str) -> tuple[bytes, bytes]:
    """For the annotation ``key`` holding a long: its pair's bytes up to the number, and
    those of a whole message-annotations section holding only that pair (a map8)."""
    name = key.encode("ascii")
    pair = b"\xa3" + bytes((len(name),)) + name + b"\x81"
    return pair, b"\x00\x53\x72" + _encode_map(2, pair + bytes(8))[:-8]


def _map_with(data: bytes, at: int, stop: int, pairs: bytes, added: int = 1) -> bytes:
    """The map at ``at`` (or null) re-encoded with ``added`` more key/value ``pairs``."""
    code = data[at]
    if code == 0xC1:
        count, body = data[at + 2], data[at + 3 : stop]
    elif code == 0xD1:
        count, body = _U32.unpack_from(data, at + 5)[0], data[at + 9 : stop]
    elif code == 0x40:
        count, body = 0, b""
    else:
        raise DecodeError(f"message-annotations at offset {at} is not a map")
    return _encode_map(count + 2 * added, body + pairs)


def _encode_map(count: int, body: bytes) -> bytes:
    """A map of ``count`` keys and values (``body``, encoded): a map8 when it fits."""
    if len(body) + 1 <= 255 and count <= 255:
        return bytes((0xC1, len(body) + 1, count)) + body
    return b"\xd1" + _U32.pack(len(body) + 4) + _U32.pack(count) + body


def with_annotations(
    message: Message, values: Mapping[str, bytes], header: bytes | None = None
) -> bytes:
    """``message``'s bytes with each message annotation in ``values`` (symbol key -> its
    value, already encoded) set, replacing any it had under those keys, and with ``header``
    in place of its header section when given. Every other byte is kept; the record says
    where the sections are, as for :func:`with_sequence_number`. For the broker's own
    annotations on a message it moves (dead-lettering)."""
    pairs = b"".join(_symbol(key) + value for key, value in values.items())
    return _with_pairs(message, values, pairs, len(values), header)


def with_annotation_map(message: Message, annotations: bytes) -> bytes | None:
    """``message``'s bytes with the pairs of ``annotations``, an encoded map with symbol
    keys (what a ``modified`` outcome's message-annotations field holds), merged into its
    message annotations: a key it has already takes the new value (AMQP 1.0 3.4.5). None
    when there is nothing to merge: an empty map, or anything but a map of symbol keys."""
    if not annotations or annotations[0] not in (0xC1, 0xD1):
        return None
    pairs = _map_pairs(annotations, 0)
    if not pairs or any(annotations[k] not in (0xA3, 0xB3) for k, _, _ in pairs):
        return None
    keys = [decode_value(annotations, k, k_end) for k, k_end, _ in pairs]
    merged = b"".join(annotations[k:end] for k, _, end in pairs)
    return _with_pairs(message, keys, merged, len(pairs))


def _with_pairs(
    message: Message, keys: Collection[str], pairs: bytes, count: int, header: bytes | None = None
) -> bytes:
    """``message``'s bytes with ``count`` encoded annotation ``pairs`` (whose keys are
    ``keys``) in its message annotations, in place of any pair it had under those keys."""
    data = message.data
    start = message.header_end
    span = message.annotations_span
    if span is None:  # a new section after the header and delivery-annotations
        at = stop = message.delivery_annotations_end or start
        middle = b"\x00\x53\x72" + _encode_map(2 * count, pairs)
    else:
        at, stop = span
        kept = _pairs_without(data, at, keys)
        middle = _encode_map(2 * (len(kept) + count), b"".join(kept) + pairs)
    head = data[:at] if header is None else header + data[start:at]
    return b"".join((head, middle, data[stop:]))


def encode_timestamp(ms: int) -> bytes:
    """An AMQP timestamp (milliseconds since the epoch)."""
    return b"\x83" + _I64.pack(ms)


def encode_symbol(text: str) -> bytes:
    return _symbol(text)


# ---- the queue sequence number, stamped on every delivery ------------------------------

SEQUENCE_NUMBER = "x-opt-sequence-number"
_NUMBER_NAME = SEQUENCE_NUMBER.encode()
_NUMBER_PAIR = b"\xa3" + bytes((len(SEQUENCE_NUMBER),)) + _NUMBER_NAME + b"\x80"
_number_pair = struct.Struct(f">{len(_NUMBER_PAIR)}sQ").pack  # (prefix, number): the pair
# A whole message-annotations section holding only the number (a map8 of one pair), up to
# the number's eight bytes: what a message without annotations gets.
_NUMBER_SECTION = b"\x00\x53\x72\xc1" + bytes((1 + len(_NUMBER_PAIR) + 8, 2)) + _NUMBER_PAIR
# The whole section, packed in one call: number_section(prefix, number).
number_section = struct.Struct(f">{len(_NUMBER_SECTION)}sQ").pack
NUMBER_SECTION_PREFIX = _NUMBER_SECTION

KEY_SEQUENCE = "x-opt-sequence"  # a message's number in its key (queues/history.py)
_KEY_NAME = KEY_SEQUENCE.encode()
_KEY_PAIR = b"\xa3" + bytes((len(KEY_SEQUENCE),)) + _KEY_NAME + b"\x81"  # the value: a long
# The section a keyed message without annotations gets: its key's number, then the queue's.
_KEYED_SECTION = (
    b"\x00\x53\x72\xc1" + bytes((1 + len(_KEY_PAIR) + 8 + len(_NUMBER_PAIR) + 8, 4)) + _KEY_PAIR
)
# _keyed_section(prefix, key number, number pair prefix, number): the whole section.
_keyed_section = struct.Struct(f">{len(_KEYED_SECTION)}sq{len(_NUMBER_PAIR)}sQ").pack
# For the delivery path, which packs them itself (amqp/links.py):
# keyed_section(KEYED_SECTION_PREFIX, key number, NUMBER_PAIR, number).
keyed_section, KEYED_SECTION_PREFIX, NUMBER_PAIR = _keyed_section, _KEYED_SECTION, _NUMBER_PAIR


def with_sequence_number(message: Message, number: int, header: bytes | None = None) -> bytes:
    """The bytes to deliver: ``message`` with the message annotation
    ``x-opt-sequence-number`` (a ulong) set to ``number``, replacing one the producer may
    have set, with ``x-opt-sequence`` when the message has a number in its key (see the
    module rules), and with ``header`` in place of its own header section when given (a
    redelivery). Runs once per delivery: a message without annotations (the usual case)
    costs two slices and a join; every other byte is kept."""
    data = message.data
    start = message.header_end
    span = message.annotations_span
    sequence = message.sequence
    if span is None:  # after the header and delivery-annotations: see parse_message
        at = stop = message.delivery_annotations_end or start
        if sequence is None:
            middle = number_section(_NUMBER_SECTION, number)
        else:
            middle = _keyed_section(_KEYED_SECTION, sequence, _NUMBER_PAIR, number)
    else:
        at, stop = span
        middle = _map_with_number(data, at, stop, number, sequence)
    head = data[:at] if header is None else header + data[start:at]
    return b"".join((head, middle, data[stop:]))


def with_stamped_number(
    message: Message, number: int, stamp: str, header: bytes | None = None
) -> bytes:
    """:func:`with_sequence_number`'s bytes with qpidd's ``qpid.queue_msg_sequence``
    annotation too: ``stamp`` set to ``number`` as a uint (qpidd's ``uint32_t``, so modulo
    2^32), replacing one the message had. Only queues that ask for it pay for this."""
    values = {}
    if message.sequence is not None:
        values[KEY_SEQUENCE] = b"\x81" + _I64.pack(message.sequence)
    values[SEQUENCE_NUMBER] = b"\x80" + _U64.pack(number)
    values[stamp] = b"\x70" + _U32.pack(number & 0xFFFFFFFF)
    return with_annotations(message, values, header)


def _map_with_number(
    data: bytes, at: int, stop: int, number: int, sequence: int | None = None
) -> bytes:
    """The annotations map at ``at`` re-encoded with our number (any earlier one gone) and,
    given a ``sequence`` the map does not hold yet, ``x-opt-sequence`` before it."""
    pairs, count = _number_pair(_NUMBER_PAIR, number), 1
    if sequence is not None and not _holds(data, at, stop, _KEY_NAME, KEY_SEQUENCE):
        pairs, count = _KEY_PAIR + _I64.pack(sequence) + pairs, 2
    # Its bytes nowhere in the map: no number to replace, known without the call; a null
    # map has none either.
    if not _holds(data, at, stop, _NUMBER_NAME, SEQUENCE_NUMBER):
        return _map_with(data, at, stop, pairs, count)  # the pairs go at the end
    kept = _pairs_without(data, at, (SEQUENCE_NUMBER,))
    return _encode_map(2 * (len(kept) + count), b"".join(kept) + pairs)


def _holds(data: bytes, at: int, stop: int, name: bytes, key: str) -> bool:
    """Whether the map (or null) at ``at`` has the symbol key ``key`` (``name``, encoded):
    mostly answered by a search of its bytes, at C speed."""
    return data.find(name, at, stop) >= 0 and find_in_map(data, at, stop, key) is not None


def _pairs_without(data: bytes, at: int, keys: Collection[str]) -> list[bytes]:
    """The encoded key/value pairs of the map (or null) at ``at`` whose key is not in
    ``keys``."""
    if data[at] == 0x40:
        return []
    return [
        data[k:v_end]
        for k, k_end, v_end in _map_pairs(data, at)
        if decode_value(data, k, k_end) not in keys
    ]


def _map_pairs(data: bytes, at: int) -> list[tuple[int, int, int]]:
    """(key start, key end, value end) of each pair of the validated map at ``at``."""
    if data[at] == 0xC1:
        count, pos = data[at + 2], at + 3
    else:
        count, pos = _U32.unpack_from(data, at + 5)[0], at + 9
    pairs = []
    for _ in range(count // 2):
        key_end = skip_values(data, pos, 1)
        value_end = skip_values(data, key_end, 1)
        pairs.append((pos, key_end, value_end))
        pos = value_end
    return pairs


# ---- whole messages, for the messages the broker itself makes (the HTTP gateway) --------


def encode_message(
    body: Any, content_type: str | None = None, application_properties: dict[str, Any] | None = None
) -> bytes:
    """An AMQP message: a properties section with ``content_type`` (when given),
    ``application_properties`` (string keys, simple values) and ``body`` as an amqp-value."""
    sections = []
    if content_type is not None:
        # properties is a list whose seventh field is content-type (a symbol)
        sections.append(b"\x00\x53\x73" + _list([b"\x40"] * 6 + [_symbol(content_type)]))
    if application_properties:
        sections.append(
            b"\x00\x53\x74"
            + _map(
                [
                    item
                    for key, value in application_properties.items()
                    for item in (encode_value(key), encode_value(value))
                ]
            )
        )
    sections.append(b"\x00\x53\x77" + encode_value(body))
    return b"".join(sections)


def encode_value(value: Any) -> bytes:
    """One value in its AMQP encoding: null, boolean, long, double, string, binary, list
    or map (with keys and values of these types); TypeError for anything else."""
    if value is None:
        return b"\x40"
    if value is True or value is False:
        return b"\x41" if value else b"\x42"
    if isinstance(value, int):
        return b"\x81" + _I64.pack(value)  # struct.error past the long range
    if isinstance(value, float):
        return b"\x82" + _F64.pack(value)
    if isinstance(value, str):
        return _variable(0xA1, 0xB1, value.encode("utf-8"))
    if isinstance(value, bytes | bytearray):
        return _variable(0xA0, 0xB0, bytes(value))
    if isinstance(value, list | tuple):
        return _list([encode_value(item) for item in value])
    if isinstance(value, dict):
        return _map(
            [item for key, v in value.items() for item in (encode_value(key), encode_value(v))]
        )
    raise TypeError(f"no AMQP encoding here for {type(value).__name__}")


# The types encode_value writes, by exact type (a subclass may mean another AMQP type).
PLAIN_TYPES = frozenset((type(None), bool, int, float, str, bytes, bytearray, list, tuple, dict))


def encode_tree(value: Any, leaf: Callable[[Any], bytes]) -> bytes:
    """``value`` in its AMQP encoding, as :func:`encode_value` writes it, except that a
    value whose type is not one of :data:`PLAIN_TYPES` and is neither a list, a tuple nor a
    dict is encoded by ``leaf``; lists and maps of any size are written here (see the
    module rules)."""
    kind = type(value)
    if isinstance(value, list | tuple):
        return _list([encode_tree(item, leaf) for item in value])
    if isinstance(value, dict):
        return _map(
            [
                item
                for key, v in value.items()
                for item in (encode_tree(key, leaf), encode_tree(v, leaf))
            ]
        )
    if kind in PLAIN_TYPES:
        return encode_value(value)
    return leaf(value)


def _symbol(text: str) -> bytes:
    return _variable(0xA3, 0xB3, text.encode("ascii"))


def _variable(small: int, large: int, raw: bytes) -> bytes:
    if len(raw) <= 255:
        return bytes((small, len(raw))) + raw
    return bytes((large,)) + _U32.pack(len(raw)) + raw


def _list(items: list[bytes]) -> bytes:
    body = b"".join(items)
    if len(body) + 1 <= 255 and len(items) <= 255:
        return bytes((0xC0, len(body) + 1, len(items))) + body
    return b"\xd0" + _U32.pack(len(body) + 4) + _U32.pack(len(items)) + body


def _map(items: list[bytes]) -> bytes:
    return _encode_map(len(items), b"".join(items))
