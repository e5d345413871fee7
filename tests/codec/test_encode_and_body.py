"""The messages the broker makes itself (the HTTP gateway's) and the bodies it reads back:
checked against Proton's own codec, which every client uses."""

from __future__ import annotations

import pytest
from proton import Data, Message

from proton_broker.codec.encode import (
    encode_header,
    encode_message,
    encode_timestamp,
    encode_value,
    with_annotations,
)
from proton_broker.codec.sections import annotate, body_of, parse_message
from proton_broker.codec.values import decode_value

VALUES = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    1.5,
    "",
    "text",
    "é" * 300,
    b"\x00\xff",
    b"x" * 300,
    [],
    [1, "a", None],
    {"k": 1, "nested": {"x": [1.5]}},
    list(range(300)),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_an_encoded_value_decodes_to_itself_here_and_in_proton(value: object) -> None:
    encoded = encode_value(value)
    assert decode_value(encoded, 0) == value
    data = Data()
    data.decode(encoded)
    assert data.get_object() == value


def test_a_value_without_an_amqp_encoding_here_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_value(object())


def test_an_encoded_message_reads_the_same_in_proton() -> None:
    data = encode_message('{"a":1}', "application/json", {"key": "k-1", "x-opt-sequence": 7})
    message = Message()
    message.decode(data)
    assert message.body == '{"a":1}'
    assert message.content_type == "application/json"
    assert message.properties == {"key": "k-1", "x-opt-sequence": 7}
    record = parse_message(data)
    assert record.properties_field(6) == "application/json"
    assert body_of(record) == '{"a":1}'


@pytest.mark.parametrize("body", ["text", b"bytes", {"map": [1, 2]}, ["a", "sequence"], None])
def test_body_of_reads_what_proton_wrote(body: object) -> None:
    message = Message(body=body, properties={"p": 1})
    if isinstance(body, list):
        message.inferred = True  # a list body as amqp-sequence sections
    elif isinstance(body, bytes):
        message.inferred = True  # bytes as a data section
    assert body_of(parse_message(bytes(message.encode()))) == body


# ---- the broker's own annotations (dead-lettering) ----------------------------------------


def test_annotations_are_added_and_replaced_and_every_other_byte_kept() -> None:
    sent = Message(
        body="b",
        ttl=5,
        durable=True,
        annotations={"x-a": 1, "x-reason": "old"},
        properties={"p": 1},
    )
    data = with_annotations(
        parse_message(sent.encode()),
        {"x-reason": encode_value("new"), "x-when": encode_timestamp(1000)},
        header=encode_header(True, 4, None, False, 0),
    )
    got = Message()
    got.decode(data)
    assert {str(k): v for k, v in got.annotations.items()} == {
        "x-a": 1,
        "x-reason": "new",
        "x-when": 1000,
    }
    assert (got.body, got.properties, got.durable, got.ttl) == ("b", {"p": 1}, True, 0)


def test_a_message_without_annotations_gets_the_section_in_its_place() -> None:
    record = parse_message(Message(body="b", subject="s").encode())
    data = with_annotations(record, {"x-k": encode_value(1)})
    got = Message()
    got.decode(data)
    assert (got.annotations, got.subject, got.body) == ({"x-k": 1}, "s", "b")
    assert parse_message(data).annotations_span is not None


@pytest.mark.parametrize(
    "message",
    [
        Message(body="b"),
        Message(body="b", properties={"k": "v"}),
        Message(body="b", durable=True, ttl=5, properties={"k": "v"}),
        Message(body="b", annotations={"x-a": 1}, properties={"k": "v"}, subject="s"),
        Message(body="b", durable=True, annotations={"x-a": "y" * 300}, properties={"k": 1}),
        Message(body="b", instructions={"x-d": 1}, properties={"k": "v"}),
        Message(body="b", instructions={"x-d": 1}, annotations={"x-a": 1}),
    ],
)
def test_annotating_a_record_moves_its_offsets_as_parsing_the_new_bytes_would(
    message: Message,
) -> None:
    record = parse_message(message.encode())
    annotate(record, "x-opt-sequence", 42)
    again = parse_message(record.data)
    assert (record.header_end, record.delivery_annotations_end) == (
        again.header_end,
        again.delivery_annotations_end,
    )
    assert record.annotations_span == again.annotations_span
    assert record.app_properties_span == again.app_properties_span
    assert record.message_annotation("x-opt-sequence") == 42
