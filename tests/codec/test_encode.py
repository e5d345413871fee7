"""Stamping the queue sequence number on a delivery (codec/encode.py): whatever annotations
the message carries, the result decodes (with Proton) to the same message plus
``x-opt-sequence-number``, which replaces one the producer set. And a consumer's annotations
merged into a message it gives back with ``modified``."""

from __future__ import annotations

import pytest
from proton import Data, Message, symbol, ulong

from proton_broker.codec.encode import encode_header, with_sequence_number
from proton_broker.codec.sections import annotate, merge_annotations, parse_message

NUMBER = symbol("x-opt-sequence-number")


def _stamped(message: Message, number: int, header: bytes | None = None) -> Message:
    record = parse_message(bytes(message.encode()))
    out = Message()
    out.decode(with_sequence_number(record, number, header))
    return out


@pytest.mark.parametrize(
    "annotations",
    [
        None,
        {symbol("x-opt-a"): "b"},
        {symbol("x-opt-a"): "b", NUMBER: ulong(7)},  # the producer's number is replaced
        {symbol("x-opt-big"): "v" * 230},  # the pair no longer fits a map8
        {symbol("x-opt-huge"): "v" * 400},  # already a map32
    ],
)
def test_the_number_is_added_and_everything_else_kept(annotations: dict | None) -> None:
    sent = Message(id="m", body="body", properties={"k": "v"}, annotations=annotations)
    got = _stamped(sent, 2**40 + 5)
    expected = dict(annotations or {})
    expected[NUMBER] = 2**40 + 5
    assert got.annotations == expected
    assert (got.id, got.body, got.properties) == ("m", "body", {"k": "v"})


def test_a_number_on_top_of_the_brokers_own_sequence_annotation() -> None:
    record = parse_message(bytes(Message(body="b", properties={"k": "v"}).encode()))
    annotate(record, "x-opt-sequence", 3)  # what a last-value queue stamps on arrival
    out = Message()
    out.decode(with_sequence_number(record, 9))
    assert out.annotations == {symbol("x-opt-sequence"): 3, NUMBER: 9}
    assert out.properties == {"k": "v"} and out.body == "b"


def test_a_redelivery_gets_the_new_header_and_the_number() -> None:
    header = encode_header(True, 4, None, False, 2)
    got = _stamped(Message(body="b", durable=True, annotations={symbol("x"): 1}), 5, header)
    assert got.delivery_count == 2 and got.durable
    assert got.annotations == {symbol("x"): 1, NUMBER: 5}


# ---- a modified outcome's annotations merged into the message (codec/sections.py) ----------


def _encoded_map(value: object) -> bytes:
    data = Data()
    data.put_object(value)
    return data.encode()


@pytest.mark.parametrize(
    "own",
    [
        None,
        {symbol("x-a"): "kept", symbol("x-b"): "old"},
        {symbol("x-huge"): "v" * 400, symbol("x-b"): "old"},  # a map32 of its own
    ],
)
def test_merged_annotations_replace_the_same_keys_and_keep_the_rest(own: dict | None) -> None:
    sent = Message(id="m", body="body", properties={"k": "v"}, annotations=own)
    record = parse_message(bytes(sent.encode()))
    given = {symbol("x-b"): "new", symbol("x-c"): ulong(3)}
    grown = merge_annotations(record, _encoded_map(given))
    out = Message()
    out.decode(record.data)
    assert out.annotations == {**(own or {}), **given}
    assert (out.id, out.body, out.properties) == ("m", "body", {"k": "v"})
    assert grown == len(record.data) - len(sent.encode())
    again = parse_message(record.data)  # the record's offsets moved with the bytes
    assert (record.annotations_span, record.app_properties_span) == (
        again.annotations_span,
        again.app_properties_span,
    )
    assert record.application_property("k") == "v"


@pytest.mark.parametrize(
    "annotations",
    [
        b"",
        _encoded_map({}),
        _encoded_map(["a list"]),
        _encoded_map({"a string key": 1}),
        _encoded_map({symbol("x-a"): "b"})[:-1],  # cut short
    ],
)
def test_nothing_is_merged_but_a_map_of_symbol_keys(annotations: bytes) -> None:
    record = parse_message(bytes(Message(body=1).encode()))
    before = record.data
    assert merge_annotations(record, annotations) == 0
    assert record.data is before
