"""A message is refused unless every value in it can be read back by any client: strings
valid UTF-8 and symbols ASCII in every section, application-properties keyed by strings
with simple values (AMQP 1.0 3.2.5), header fields of their types, and values nested at
most MAX_DEPTH levels. The refusal names the section."""

from __future__ import annotations

import struct
import uuid

import proton
import pytest

from proton_broker.codec.sections import parse_message
from proton_broker.codec.values import MAX_DEPTH, DecodeError


def str8(raw: bytes) -> bytes:
    return b"\xa1" + bytes([len(raw)]) + raw


def sym8(raw: bytes) -> bytes:
    return b"\xa3" + bytes([len(raw)]) + raw


def compound8(code: int, items: list[bytes]) -> bytes:
    body = b"".join(items)
    return bytes([code, len(body) + 1, len(items)]) + body


def section(code: int, value: bytes) -> bytes:
    return b"\x00\x53" + bytes([code]) + value


def nested_lists(depth: int) -> bytes:
    value = b"\x40"
    for _ in range(depth):
        value = b"\xd0" + struct.pack(">II", len(value) + 4, 1) + value
    return value


NULL_BODY = section(0x77, b"\x40")
MAP, LIST = 0xC1, 0xC0


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (section(0x77, str8(b"\xff\xfe")), "amqp-value section: string at offset 5 is not valid"),
        (
            section(0x76, compound8(LIST, [str8(b"ok"), str8(b"\xc3")])),
            "amqp-sequence section: string",
        ),
        (
            section(0x72, compound8(MAP, [sym8(b"x-opt-k"), str8(b"\xff")])) + NULL_BODY,
            "message-annotations section: string",
        ),
        (
            section(0x71, compound8(MAP, [sym8(b"k\xe9"), str8(b"v")])) + NULL_BODY,
            "delivery-annotations section: symbol at offset 6 is not ASCII",
        ),
        (
            section(0x74, compound8(MAP, [str8(b"k"), str8(b"\xed\xa0\x80")])) + NULL_BODY,
            "application-properties section: string",
        ),
        (
            section(0x74, compound8(MAP, [b"\xa0\x01k", str8(b"v")])) + NULL_BODY,
            "application-properties section: the key at offset 6 is a binary, not a string",
        ),
        (
            section(0x74, compound8(MAP, [sym8(b"k"), str8(b"v")])) + NULL_BODY,
            "the key at offset 6 is a symbol, not a string",
        ),
        (
            section(0x74, compound8(MAP, [str8(b"k"), compound8(LIST, [b"\x40"])])) + NULL_BODY,
            "application-properties section: the value of 'k' is a list, not a simple type",
        ),
        (
            section(0x74, compound8(MAP, [str8(b"m"), compound8(MAP, [])])) + NULL_BODY,
            "the value of 'm' is a map",
        ),
        (
            section(0x74, compound8(MAP, [str8(b"e"), b"\x45"])) + NULL_BODY,
            "the value of 'e' is a list, not a simple type",
        ),
        (
            section(
                0x74, compound8(MAP, [str8(b"ok"), str8(b"v"), str8(b"s"), b"\xe0\x02\x00\x40"])
            )
            + NULL_BODY,
            "the value of 's' is an array",
        ),
        (
            section(0x74, compound8(MAP, [str8(b"d"), b"\x00\xa3\x01d\x40"])) + NULL_BODY,
            "the value of 'd' is a described value",
        ),
        (
            section(0x74, compound8(LIST, [str8(b"k")])) + NULL_BODY,
            "application-properties section: it is a list, not a map",
        ),
        (
            section(0x72, b"\x45") + NULL_BODY,
            "message-annotations section: the value at offset 3 is a list, not a map",
        ),
        (
            section(0x71, str8(b"x")) + NULL_BODY,
            "delivery-annotations section: the value at offset 3 is a string",
        ),
        (
            NULL_BODY + section(0x78, b"\x45"),
            "footer section: the value at offset 7 is a list, not a map",
        ),
        (
            section(0x75, str8(b"text")),
            "data section: the value at offset 3 is a string, not a binary",
        ),
        (
            section(0x75, b"\xa0\x01x") + section(0x75, str8(b"y")),
            "data section: the value at offset 9 is a string, not a binary",
        ),
        (
            section(0x76, compound8(MAP, [])),
            "amqp-sequence section: the value at offset 3 is a map, not a list",
        ),
        (
            section(0x70, compound8(LIST, [str8(b"yes")])) + NULL_BODY,
            "header section: durable must be a boolean, got 'yes'",
        ),
        (
            section(0x70, compound8(LIST, [b"\x40", b"\x40", b"\x40", b"\x52\x01"])) + NULL_BODY,
            "header section: first-acquirer must be a boolean, got 1",
        ),
        (
            section(0x77, nested_lists(10_000)),
            f"amqp-value section: value at offset {3 + 9 * MAX_DEPTH} is nested more "
            f"than {MAX_DEPTH} levels deep",
        ),
        (
            section(0x73, b"\xd0" + struct.pack(">II", 4 + 45_001, 1) + nested_lists(5_000))
            + NULL_BODY,
            f"nested more than {MAX_DEPTH} levels deep",
        ),
    ],
)
def test_a_message_no_client_could_read_back_is_refused_naming_the_section(
    data: bytes, complaint: str
) -> None:
    with pytest.raises(DecodeError) as refused:
        parse_message(data)
    assert complaint in str(refused.value)


def test_values_nested_up_to_the_limit_are_accepted() -> None:
    parse_message(section(0x77, nested_lists(MAX_DEPTH)))
    with pytest.raises(DecodeError):
        parse_message(section(0x77, nested_lists(MAX_DEPTH + 1)))


def test_every_simple_type_is_accepted_as_an_application_property() -> None:
    properties = {
        "null": None,
        "bool": True,
        "ubyte": proton.ubyte(1),
        "int": proton.int32(-5),
        "long": 1 << 40,
        "float": proton.float32(1.5),
        "double": 2.5,
        "decimal": proton.decimal128(b"\0" * 16),
        "char": proton.char("é"),
        "timestamp": proton.timestamp(1000),
        "uuid": uuid.UUID(int=7),
        "binary": b"\x00\xff",
        "string": "été",
        "symbol": proton.symbol("sym"),
    }
    message = proton.Message(body="b", properties=properties)
    parsed = parse_message(message.encode())
    assert parsed.application_property("string") == "été"
    assert parsed.application_property("binary") == b"\x00\xff"


def test_lists_and_maps_stay_allowed_in_bodies_and_annotations() -> None:
    message = proton.Message(
        body={"list": [1, ["a", {"b": None}]]},
        annotations={proton.symbol("x-opt-list"): [1, 2]},
    )
    parsed = parse_message(message.encode())
    assert parsed.message_annotation("x-opt-list") == [1, 2]


HEADER, PROPERTIES, FOOTER = section(0x70, b"\x45"), section(0x73, b"\x45"), section(0x78, b"\x40")
DATA, SEQUENCE = section(0x75, b"\xa0\x01x"), section(0x76, b"\x45")


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (
            HEADER + FOOTER + NULL_BODY,
            "footer section (0x78) at offset 4 comes before the amqp-value section (0x77) "
            "at offset 8 (the body)",
        ),
        (
            PROPERTIES + HEADER + NULL_BODY,
            "header section (0x70) at offset 4 comes after the properties section (0x73) "
            "at offset 0",
        ),
        (
            NULL_BODY + NULL_BODY,
            "amqp-value section (0x77) at offset 4 repeats the amqp-value section (0x77) "
            "at offset 0",
        ),
        (
            DATA + SEQUENCE,
            "amqp-sequence section (0x76) at offset 6 follows the data section (0x75) at offset 0",
        ),
    ],
    ids=["footer-first", "header-late", "two-values", "bodies-mixed"],
)
def test_a_section_out_of_order_is_named_with_the_one_it_came_before_or_after(
    data: bytes, complaint: str
) -> None:
    with pytest.raises(DecodeError) as refused:
        parse_message(data)
    assert str(refused.value).startswith(complaint)
