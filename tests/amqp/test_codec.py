"""The message codec: the inline branches for common encodings agree with the general decoder."""

from __future__ import annotations

import random

import pytest
from proton import Message, symbol

from proton_broker.amqp.codec import DecodeError, _list_fields, decode_value, parse_message


def _encoded(message: Message, inferred: bool = False) -> bytes:
    message.inferred = inferred
    return bytes(message.encode())


def test_common_message_fields() -> None:
    data = _encoded(Message(id="m-1", body=b"x" * 100), inferred=True)
    message = parse_message(data)
    assert message.message_id == "m-1"
    assert message.header_end == 4  # an empty header list: 00 53 70 45
    assert (message.durable, message.priority, message.ttl, message.delivery_count) == (
        False, 4, None, 0)
    assert message.to is None and message.app_properties_span is None


def test_full_message_fields() -> None:
    data = _encoded(Message(id=7, durable=True, priority=9, ttl=1.5, delivery_count=2,
                            address="q", subject="s", group_id="g", creation_time=12.0,
                            expiry_time=99.0, properties={"a": 1},
                            annotations={symbol("x-k"): "v"}, body="hello"))
    message = parse_message(data)
    assert (message.durable, message.priority, message.ttl, message.delivery_count) == (
        True, 9, 1500, 2)
    assert (message.message_id, message.to, message.subject, message.group_id) == (
        7, "q", "s", "g")
    assert (message.creation_time, message.absolute_expiry_time) == (12000, 99000)
    assert message.application_properties == {"a": 1}
    assert message.message_annotations == {"x-k": "v"}


def test_unknown_section_code_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="unknown section descriptor"):
        parse_message(b"\x00\x53\x79\x45")


@pytest.mark.parametrize("seed", range(3))
def test_list_fields_agrees_with_the_general_decoder(seed: int) -> None:
    """Mutated header and properties lists: the same values, or a DecodeError either way."""
    rnd = random.Random(seed)
    lists = [
        bytes.fromhex("c00f05") + b"\x41\x50\x09\x70\x00\x00\x05\xdc\x42\x52\x02",
        bytes.fromhex("c00e01a10b") + b"loadgen-msg",
        bytes.fromhex("c01a0640a30173a1027161a10173a00162a1027271"),
        bytes.fromhex("d0000000090000000241a00142"),
    ]
    for original in lists:
        for _ in range(2000):
            data = bytearray(original)
            for _ in range(rnd.randrange(1, 3)):
                data[rnd.randrange(len(data))] = rnd.choice(
                    [0x00, 0x40, 0x41, 0x50, 0x53, 0x70, 0xA1, 0xA3, 0xC0, 0xFF,
                     rnd.randrange(256)])
            data = bytes(data[:rnd.randrange(len(data) - 3, len(data) + 1)])
            try:
                expected = decode_value(data, 0, len(data))
            except DecodeError:
                expected = DecodeError
            except ValueError:  # e.g. a char outside Unicode: not this test's business
                continue
            try:
                got = _list_fields(data, 0, len(data), "header")[0]
            except DecodeError:
                got = DecodeError
            if expected is not DecodeError and not isinstance(expected, list):
                expected = DecodeError  # not a list: _list_fields refuses it
            assert got == expected, data.hex()
