"""AMQP messages as bytes, written by the connector without ``proton.Message``.

Rules this module owns:

* A message is written as Proton's ``Message.encode`` would write it, section for section,
  so a receiver decodes the same message: a header only when a field differs from the
  defaults (not durable, priority 4, no ttl), the message annotations as a map with symbol
  keys, a properties list with its trailing nulls left out, the application properties as
  a map with string keys, and the body as one
  ``data`` section (bytes) or one ``amqp-value`` section (any other value). Python values
  take Proton's types: ``int`` a long, ``float`` a double, ``str`` a string, ``bytes`` a
  binary, ``bool``, ``None`` (a null, or no body), ``list``, ``dict``, ``uuid.UUID``; message-id and
  correlation-id keep theirs (an ``int`` id is a ulong, as Proton sends it); content-type
  and content-encoding are symbols, the times timestamps (milliseconds), group-sequence a
  uint, ttl milliseconds (given in seconds, as ``proton.Message.ttl`` takes it).
* It runs once per row of a sink task, so each section is joined from pre-built pieces.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from proton_broker.codec.encode import encode_value

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")

HEADER = b"\x00\x53\x70"
MESSAGE_ANNOTATIONS = b"\x00\x53\x72"
PROPERTIES = b"\x00\x53\x73"
APPLICATION_PROPERTIES = b"\x00\x53\x74"
DATA = b"\x00\x53\x75"
AMQP_VALUE = b"\x00\x53\x77"
NULL = b"\x40"

# Positions in the properties list (AMQP 1.0 3.2.4).
MESSAGE_ID, USER_ID, TO, SUBJECT, REPLY_TO, CORRELATION_ID = 0, 1, 2, 3, 4, 5
CONTENT_TYPE, CONTENT_ENCODING, ABSOLUTE_EXPIRY_TIME, CREATION_TIME = 6, 7, 8, 9
GROUP_ID, GROUP_SEQUENCE, REPLY_TO_GROUP_ID = 10, 11, 12


def string(text: str) -> bytes:
    return _variable(0xA1, text.encode("utf-8"))


def binary(raw: bytes) -> bytes:
    return _variable(0xA0, raw)


def symbol(text: str) -> bytes:
    return _variable(0xA3, text.encode("ascii"))


def _variable(code8: int, raw: bytes) -> bytes:
    """A variable-width value: the one-byte-size constructor ``code8`` when it fits, else
    its four-byte-size twin (``code8 + 0x10``)."""
    if len(raw) <= 255:
        return bytes((code8, len(raw))) + raw
    return bytes((code8 + 0x10,)) + _U32.pack(len(raw)) + raw


def value(item: Any) -> bytes:
    """Any value Proton's ``Message`` takes, with Proton's types (module rules)."""
    if type(item) is str:
        return string(item)
    if isinstance(item, uuid.UUID):
        return b"\x98" + item.bytes
    if isinstance(item, bytearray | memoryview):
        return binary(bytes(item))
    if isinstance(item, tuple):
        return encode_value(list(item))
    return encode_value(item)


def identifier(item: Any) -> bytes:
    """A message-id or correlation-id: a string, ulong (``int``), uuid or binary."""
    if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
        return b"\x80" + _U64.pack(item)
    return value(item)


def timestamp(millis: int) -> bytes:
    return b"\x83" + _I64.pack(millis)


def uint(number: int) -> bytes:
    return b"\x70" + _U32.pack(number & 0xFFFFFFFF)


def compound_list(items: Sequence[bytes]) -> bytes:
    """A list of encoded items (a list8 when it fits)."""
    body = b"".join(items)
    if len(body) < 255 and len(items) <= 255:
        return b"\xc0" + bytes((len(body) + 1, len(items))) + body
    return b"\xd0" + _U32.pack(len(body) + 4) + _U32.pack(len(items)) + body


def string_map(values: Mapping[str, Any]) -> bytes:
    """A map with string keys (application properties), values as :func:`value`."""
    return _map(b"".join(string(str(key)) + value(item) for key, item in values.items()), values)


def symbol_map(values: Mapping[str, Any]) -> bytes:
    """A map with symbol keys (message annotations; ASCII), values as :func:`value`."""
    return _map(b"".join(symbol(str(key)) + value(item) for key, item in values.items()), values)


def _map(body: bytes, values: Mapping[str, Any]) -> bytes:
    count = 2 * len(values)
    if len(body) < 255 and count <= 255:
        return b"\xc1" + bytes((len(body) + 1, count)) + body
    return b"\xd1" + _U32.pack(len(body) + 4) + _U32.pack(count) + body


def header(durable: bool, priority: int | None, ttl_seconds: float | None) -> bytes:
    """The header section, or nothing when every field has its default."""
    if not durable and (priority is None or priority == 4) and ttl_seconds is None:
        return b""
    fields = [
        b"\x41" if durable else b"\x42",
        b"\x50" + bytes((4 if priority is None else priority & 0xFF,)),
    ]
    if ttl_seconds is not None:
        fields.append(uint(int(ttl_seconds * 1000)))
    return HEADER + compound_list(fields)


def properties(fields: list[bytes]) -> bytes:
    """The properties section from its encoded fields (``NULL`` where unset), trailing
    nulls dropped; nothing when every field is unset."""
    last = len(fields)
    while last and fields[last - 1] == NULL:
        last -= 1
    return PROPERTIES + compound_list(fields[:last]) if last else b""


def body(content: Any) -> bytes:
    """Bytes as a data section, anything else as an amqp-value; ``None`` as no body
    section at all (as Proton writes a message whose body is ``None``)."""
    if content is None:
        return b""
    if isinstance(content, bytes | bytearray | memoryview):
        return DATA + binary(bytes(content))
    return AMQP_VALUE + value(content)


def message(
    properties_fields: list[bytes] | None = None,
    application_properties: Mapping[str, Any] | None = None,
    content: Any = None,
    head: bytes = b"",
) -> bytes:
    """A whole message: ``head`` (see :func:`header`), properties, application properties
    (none when empty) and the body."""
    return b"".join(
        (
            head,
            properties(properties_fields) if properties_fields else b"",
            APPLICATION_PROPERTIES + string_map(application_properties)
            if application_properties
            else b"",
            body(content),
        )
    )
