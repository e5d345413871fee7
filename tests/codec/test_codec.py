"""The message codec: the inline branches for common encodings agree with the general decoder."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, symbol, timestamp, ubyte, uint

from proton_broker.codec import sections
from proton_broker.codec.sections import _list_fields, parse_message
from proton_broker.codec.values import DecodeError, decode_value, find_in_map, section_code, skip


def all_properties(message: object) -> list[object]:
    return [message.properties_field(i) for i in range(13)]  # type: ignore[attr-defined]


def _encoded(message: Message, inferred: bool = False) -> bytes:
    message.inferred = inferred
    return bytes(message.encode())


def test_common_message_fields() -> None:
    data = _encoded(Message(id="m-1", body=b"x" * 100), inferred=True)
    message = parse_message(data)
    assert message.message_id == "m-1"
    assert message.header_end == 4  # an empty header list: 00 53 70 45
    assert (message.durable, message.priority, message.ttl, message.delivery_count) == (
        False,
        4,
        None,
        0,
    )
    assert message.to is None and message.app_properties_span is None


def test_full_message_fields() -> None:
    data = _encoded(
        Message(
            id=7,
            durable=True,
            priority=9,
            ttl=1.5,
            delivery_count=2,
            address="q",
            subject="s",
            group_id="g",
            creation_time=12.0,
            expiry_time=99.0,
            properties={"a": 1},
            annotations={symbol("x-k"): "v"},
            body="hello",
        )
    )
    message = parse_message(data)
    assert (message.durable, message.priority, message.ttl, message.delivery_count) == (
        True,
        9,
        1500,
        2,
    )
    assert (message.message_id, message.to, message.subject, message.group_id) == (7, "q", "s", "g")
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
                    [0x00, 0x40, 0x41, 0x50, 0x53, 0x70, 0xA1, 0xA3, 0xC0, 0xFF, rnd.randrange(256)]
                )
            data = bytes(data[: rnd.randrange(len(data) - 3, len(data) + 1)])
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


def _checked_walk(data: bytes) -> list[tuple[int, int, int]]:
    """(section code, value start, end) of each section, every value checked for size."""
    sections, pos, end = [], 0, len(data)
    while pos < end:
        code, at = section_code(data, pos, end)
        if code < 0:
            raise DecodeError("unknown section")
        stop = skip(data, at, end)
        sections.append((code, at, stop))
        pos = stop
    return sections


_SAMPLES = [
    Message(id="loadgen-msg", body=b"x" * 100),
    Message(
        id=7,
        durable=True,
        priority=9,
        ttl=1.5,
        address="q",
        subject="s",
        group_id="g",
        creation_time=12.0,
        expiry_time=99.0,
        properties={"a": 1, "b": "two"},
        annotations={symbol("x-opt-jms-msg-type"): 5},
        body="hello",
    ),
    Message(id="ID:c-1:1:1:1-1", body=["a", 1, None], properties={"k": b"v", "n": 2.5}),
    Message(body={"map": [1, 2, {"x": None}]}, properties={"big": "y" * 300}),
]


@pytest.mark.parametrize("seed", range(3))
def test_fast_walk_accepts_only_what_the_checking_walk_accepts(seed: int) -> None:
    """Mutated and truncated messages: parse_message raises DecodeError (never anything
    else) whenever the checked walk finds a bad size, and finds the same sections."""
    rnd = random.Random(seed)
    for sample in _SAMPLES:
        original = _encoded(sample, inferred=isinstance(sample.body, bytes))
        for _ in range(1500):
            data = bytearray(original)
            for _ in range(rnd.randrange(1, 3)):
                data[rnd.randrange(len(data))] = rnd.choice(
                    [
                        0x00,
                        0x40,
                        0x45,
                        0x53,
                        0x70,
                        0xA0,
                        0xA1,
                        0xC0,
                        0xC1,
                        0xD1,
                        0xFF,
                        rnd.randrange(256),
                    ]
                )
            data = bytes(data[: rnd.randrange(len(data) - 8, len(data) + 1)])
            try:
                sections = _checked_walk(data)
            except DecodeError:
                sections = None
            try:
                message = parse_message(data)
            except DecodeError:
                continue
            assert sections is not None, data.hex()
            spans = {code: (at, stop) for code, at, stop in sections}
            assert message.app_properties_span == spans.get(0x74), data.hex()
            assert message.annotations_span == spans.get(0x72), data.hex()


@pytest.mark.parametrize(
    "properties",
    [
        {"k": "v", "n": 5, "key": b"bin"},
        {"a" * 300: 1, "key": "after a long key"},
        {"key": None, "x": 2.5},
        {"other": 1},
        {"other": "key", "keys": 1, "x-key": 2},  # the key's bytes, but not as a key
        {"keyed": "first", "key": "second"},  # the first key starts with the one asked for
        {"ke": "first", "key": "second"},  # and the other way round
        {},
    ],
)
def test_find_in_map_reads_one_key_as_the_decoded_map_has_it(properties: dict) -> None:
    data = _encoded(Message(body="b", properties=properties))
    message = parse_message(data)
    start, stop = message.app_properties_span or (0, 0)
    for key in [*properties, "key", "missing"]:
        expected = decode_value(data, start, stop).get(key) if properties else None
        got = find_in_map(data, start, stop, key) if properties else None
        assert got == expected
        assert message.application_property(key) == expected


@pytest.mark.parametrize("empty", [b"\xc1\x01\x00", b"\xd1\x00\x00\x00\x04\x00\x00\x00\x00"])
def test_an_empty_map_holds_no_key_whatever_follows_it(empty: bytes) -> None:
    data = empty + b"\xa1\x03key\xa1\x05value"  # a pair after the map, not in it
    assert find_in_map(data, 0, len(empty), "key") is None
    assert decode_value(data, 0, len(empty)) == {}


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "only-an-id"},
        {"id": "m", "group_id": "g-1"},
        {"id": "m", "group_id": "g-1", "group_sequence": 0},
        {"id": "m", "group_id": "g-1", "group_sequence": 5},
        {"id": "m", "group_id": "g-1", "reply_to_group_id": "r"},
        {"id": "m", "group_id": "g-1", "user_id": b"u"},
        {"id": "é-id", "group_id": "grüppe"},
        {"id": 42, "group_id": "g-1"},
        {"id": "m", "address": "q", "group_id": "g-1"},
        {"group_id": "g-1"},
    ],
)
def test_properties_of_every_common_shape_read_as_proton_decodes_them(fields: dict) -> None:
    sent = Message(body=b"x", **fields)
    message = parse_message(_encoded(sent, inferred=True))
    decoded = Message()
    decoded.decode(_encoded(sent, inferred=True))
    assert (message.message_id, message.group_id, message.to) == (
        decoded.id,
        decoded.group_id,
        decoded.address,
    )


def test_a_properties_list_whose_group_id_overruns_it_is_a_decode_error() -> None:
    data = bytearray(_encoded(Message(id="m", group_id="g-1", body=b"x"), inferred=True))
    at = data.index(b"\xa1\x03g-1")
    data[at + 1] = 0x09  # the group-id claims more bytes than its list holds
    with pytest.raises(DecodeError):
        parse_message(bytes(data))


def test_a_properties_list_with_an_invalid_utf8_group_id_is_a_decode_error() -> None:
    data = bytearray(_encoded(Message(id="m", group_id="g-1", body=b"x"), inferred=True))
    at = data.index(b"g-1")
    data[at] = 0xFF
    with pytest.raises(DecodeError):
        parse_message(bytes(data))


_ALL_PROPERTIES = {
    "id": "m",
    "user_id": b"bob",
    "address": "q",
    "subject": "s",
    "reply_to": "r",
    "correlation_id": "c",
    "content_type": "text/plain",
    "content_encoding": "utf-8",
    "expiry_time": 9.0,
    "creation_time": 8.0,
    "group_id": "g",
    "group_sequence": 3,
    "reply_to_group_id": "rg",
}


@pytest.mark.parametrize(
    "sections",
    [
        {},
        {"durable": True},
        {"annotations": {symbol("x-k"): "v"}},
        {"durable": True, "instructions": {symbol("x-d"): 1}},
        {"durable": True, "instructions": {symbol("x-d"): 1}, "annotations": {symbol("x-k"): 1}},
    ],
)
def test_decode_properties_finds_the_section_after_whatever_precedes_it(sections: dict) -> None:
    message = parse_message(_encoded(Message(body=b"x", **_ALL_PROPERTIES, **sections)))
    assert all_properties(message) == [
        "m",
        b"bob",
        "q",
        "s",
        "r",
        "c",
        "text/plain",
        "utf-8",
        9000,
        8000,
        "g",
        3,
        "rg",
    ]


def test_decode_properties_pads_a_short_list_and_a_message_without_one_reads_all_none() -> None:
    short = parse_message(_encoded(Message(id="m", body=b"x"), inferred=True))
    assert all_properties(short) == ["m"] + [None] * 12
    bare = parse_message(b"\x00\x53\x77\xa1\x01x")  # an amqp-value body alone
    assert all_properties(bare) == [None] * 13


def test_properties_field_decodes_once_and_caches_but_not_while_paged() -> None:
    message = parse_message(_encoded(Message(correlation_id="c", body=b"x")))
    assert message.properties_cache is None  # parse_message does not pay for it
    assert message.properties_field(5) == "c" and message.properties_field(13) is None
    assert message.properties_cache is not None
    paged = parse_message(_encoded(Message(correlation_id="c", body=b"x")))
    paged.data, paged.paged = b"", True
    assert paged.properties_field(5) is None and paged.properties_cache is None


@pytest.mark.parametrize("repeat", [1, 2])  # the second time from the header cache
def test_each_header_reads_as_its_own_fields_the_first_time_and_again(repeat: int) -> None:
    headers = [
        dict(durable=True),
        dict(durable=True, priority=7),
        dict(durable=False, priority=3, ttl=5.0),  # Proton: seconds
        dict(first_acquirer=True, delivery_count=2),
    ]
    for _ in range(repeat):
        for fields in headers:
            message = parse_message(_encoded(Message(body="b", **fields)))
            assert message.durable is fields.get("durable", False)
            assert message.priority == fields.get("priority", 4)
            assert message.ttl == (5000 if "ttl" in fields else None)
            assert message.first_acquirer is fields.get("first_acquirer", False)
            assert message.delivery_count == fields.get("delivery_count", 0)


def test_a_header_with_a_wrong_type_is_refused_every_time_not_remembered() -> None:
    good = _encoded(Message(body="b", durable=True))
    durable_true = b"\x00\x53\x70\xc0\x02\x01\x41"
    bad = good.replace(durable_true, durable_true[:-1] + b"\x44", 1)  # durable: uint 0
    assert bad != good
    for _ in range(2):
        with pytest.raises(DecodeError, match="durable must be a boolean"):
            parse_message(bad)


def test_shared_positions_and_fields_stop_growing_at_their_bounds_and_stay_correct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The codec shares section positions and properties fields among messages (see
    message.py); what it remembers is bounded, and a message past the bound gets its own."""
    monkeypatch.setattr(sections, "_SPANS", {})
    monkeypatch.setattr(sections, "_SPAN_CACHE", 8)
    monkeypatch.setattr(sections, "_FIELDS", {})
    monkeypatch.setattr(sections, "_FIELDS_CACHE", 8)
    for n in range(40):
        sent = Message(body="b", subject="s" * n, annotations={symbol("x-a"): "y" * n})
        message = parse_message(_encoded(sent))
        assert message.subject == "s" * n
        assert message.message_annotations == {symbol("x-a"): "y" * n}
    assert len(sections._SPANS) <= 8 and len(sections._FIELDS) <= 8


_PROPERTY_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.binary(max_size=300),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20).map(symbol),
    st.integers(0, 2**32 - 1).map(uint),
    st.integers(0, 255).map(ubyte),
    st.integers(0, 2**40).map(timestamp),
)


@given(st.dictionaries(st.text(max_size=300), _PROPERTY_VALUES, max_size=8))
@settings(max_examples=300, deadline=None)
def test_application_properties_of_every_simple_type_are_taken_as_sent(
    properties: dict,  # type: ignore[type-arg]
) -> None:
    message = parse_message(_encoded(Message(body="b", properties=properties)))
    assert message.application_properties == properties
