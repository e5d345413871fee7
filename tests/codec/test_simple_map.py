"""The compiled application-properties walks answer as the Python ones do, on every map: the
quick check and the lookup of one key."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message

from proton_broker.codec import values
from proton_broker.codec.sections import parse_message
from proton_broker.codec.values import (
    contains_python,
    find_in_map_python,
    find_unmarked_python,
    skip_simple_map_python,
)

compiled = pytest.importorskip("proton_broker.codec._simple_map")  # scripts/test builds it


def python_answer(data: bytes, at: int) -> int:
    """The Python walk's answer, with running off the end read as -1, the compiled walk's
    answer for it. The Python walk raises, or (where only a string's bytes are missing, as
    a slice comes back short without complaint) answers an offset past the end, which the
    parser refuses as it would any section that overruns the message. Either way the
    message is a decode error, with the careful walk's description."""
    try:
        answer = skip_simple_map_python(data, at)
    except (IndexError, struct.error):
        return -1
    return answer if answer <= len(data) else -1


def text(code: int, raw: bytes) -> bytes:
    """A string or symbol of constructor ``code`` (0xA1/0xA3 short, 0xB1/0xB3 long)."""
    if code in (0xA1, 0xA3):
        return bytes([code, len(raw) % 256]) + raw
    return bytes([code]) + struct.pack(">I", len(raw)) + raw


RAW_TEXT = st.one_of(
    st.text(max_size=12).map(lambda s: s.encode()),  # ASCII and UTF-8
    st.binary(max_size=12),  # mostly not UTF-8
    st.just("é".encode()[:1]),  # cut inside a character
)
KEY = st.builds(text, st.sampled_from([0xA1, 0xB1, 0xA3, 0xB3]), RAW_TEXT)
VALUE = st.one_of(
    st.builds(text, st.sampled_from([0xA1, 0xB1, 0xA3, 0xB3, 0xA0, 0xB0]), RAW_TEXT),
    # any constructor at all, followed by whatever bytes
    st.builds(lambda code, rest: bytes([code]) + rest, st.integers(0, 255), st.binary(max_size=17)),
)


def encoded_map(pairs: list[tuple[bytes, bytes]], small: bool, extra: int) -> bytes:
    body = b"".join(key + value for key, value in pairs)
    count = 2 * len(pairs) + extra  # extra: an odd or a wrong count
    if small:
        return bytes([0xC1, (len(body) + 1) % 256, count % 256]) + body
    return b"\xd1" + struct.pack(">II", len(body) + 4, count) + body


@given(
    pairs=st.lists(st.tuples(KEY, VALUE), max_size=5),
    small=st.booleans(),
    extra=st.sampled_from([0, 0, 0, 1, 2, -2]),
    cut=st.integers(0, 6),
    tail=st.binary(max_size=4),
    at=st.integers(0, 3),
)
@settings(max_examples=3000, deadline=None)
def test_the_compiled_check_answers_as_the_python_walk_on_any_map(
    pairs: list[tuple[bytes, bytes]], small: bool, extra: int, cut: int, tail: bytes, at: int
) -> None:
    data = b"\x00" * at + encoded_map(pairs, small, max(extra, -len(pairs) * 2))
    data = data[: len(data) - cut] + tail if cut else data + tail
    assert compiled.skip_simple_map(data, at) == python_answer(data, at), data.hex()


@given(
    st.dictionaries(
        st.text(max_size=300),
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=300), st.binary()),
    ),
    st.integers(0, 2**32),
)
@settings(max_examples=300, deadline=None)
def test_proton_encoded_properties_pass_both_checks_and_any_cut_fails_both(
    properties: dict[str, object], seed: int
) -> None:
    data = bytes(Message(body="b", properties=properties).encode())
    message = parse_message(data)
    start, stop = message.app_properties_span or (0, 0)
    if not properties:
        return
    assert compiled.skip_simple_map(data, start) == python_answer(data, start) == stop
    cut = data[: start + seed % (stop - start)]  # the map cut short anywhere
    assert compiled.skip_simple_map(cut, start) == python_answer(cut, start) == -1


@pytest.mark.parametrize(("at", "answer"), [(0, 3), (-1, -1), (5, -1), (100, -1)])
def test_an_empty_map_is_passed_and_an_offset_outside_the_data_is_not_a_map(
    at: int, answer: int
) -> None:
    assert compiled.skip_simple_map(b"\xc1\x01\x00", at) == answer


def test_the_codec_uses_the_compiled_walks_where_they_were_built() -> None:
    assert values.skip_simple_map is compiled.skip_simple_map
    assert values.find_in_map is compiled.find_in_map
    assert values.contains is compiled.contains
    assert values.find_unmarked is compiled.find_unmarked


def python_lookup(data: bytes, start: int, stop: int, key: str) -> object:
    try:
        return find_in_map_python(data, start, stop, key)
    except Exception as exc:  # the compiled lookup must raise the same
        return type(exc)


def compiled_lookup(data: bytes, start: int, stop: int, key: str) -> object:
    try:
        return compiled.find_in_map(data, start, stop, key)
    except Exception as exc:  # compared with the Python lookup's
        return type(exc)


KEYS = st.one_of(st.sampled_from(["k", "", "key", "x-opt-sequence", "é"]), st.text(max_size=8))


@given(
    pairs=st.lists(st.tuples(KEY, VALUE), max_size=4),
    small=st.booleans(),
    key=KEYS,
    first=st.booleans(),
    cut=st.integers(0, 4),
    stop_short=st.integers(0, 3),
)
@settings(max_examples=3000, deadline=None)
def test_the_compiled_lookup_answers_as_the_python_lookup_on_any_map(
    pairs: list[tuple[bytes, bytes]],
    small: bool,
    key: str,
    first: bool,
    cut: int,
    stop_short: int,
) -> None:
    if first:  # the key asked for, first, as a short string
        pairs = [(text(0xA1, key.encode()), pairs[0][1] if pairs else text(0xA1, b"v")), *pairs]
    data = encoded_map(pairs, small, 0) + b"\x40"
    data = data[: len(data) - cut] if cut else data
    stop = max(0, len(data) - stop_short)
    compiled, python = compiled_lookup(data, 0, stop, key), python_lookup(data, 0, stop, key)
    assert same_value(compiled, python), data.hex()


def same_value(one: object, other: object) -> bool:
    """Equal, or both a NaN of the same type (a float value may be any bit pattern)."""
    if isinstance(one, float) and isinstance(other, float) and one != one and other != other:
        return type(one) is type(other)
    return one == other and type(one) is type(other)


@given(
    st.dictionaries(
        st.text(max_size=300),
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=300), st.binary()),
        max_size=6,
    ),
    KEYS,
)
@settings(max_examples=500, deadline=None)
def test_a_key_of_proton_encoded_properties_reads_the_same_compiled(
    properties: dict[str, object], key: str
) -> None:
    data = bytes(Message(body="b", properties=properties).encode())
    start, stop = parse_message(data).app_properties_span or (0, 0)
    if not properties:
        return
    for each in (key, *properties):
        assert compiled.find_in_map(data, start, stop, each) == properties.get(each)
        assert compiled.find_in_map(data, start, stop, each) == find_in_map_python(
            data, start, stop, each
        )


@given(
    data=st.binary(max_size=40),
    needle=st.one_of(st.binary(max_size=4), st.just(b"x-opt-sequence")),
    start=st.integers(-50, 50),
    stop=st.integers(-50, 50),
    planted=st.booleans(),
)
def test_the_compiled_search_answers_as_bytes_find_in_any_range(
    data: bytes, needle: bytes, start: int, stop: int, planted: bool
) -> None:
    if planted:  # the needle somewhere in the data, so that ranges find it or cut it
        data = data[: len(data) // 2] + needle + data[len(data) // 2 :]
    assert compiled.contains(data, needle, start, stop) is contains_python(
        data, needle, start, stop
    )


MARKER = b"x-opt-sequence"


@given(
    pairs=st.lists(st.tuples(KEY, VALUE), max_size=3),
    key=KEYS,
    before=st.binary(max_size=6),
    planted=st.sampled_from(["no", "before", "in the map", "after"]),
    since=st.integers(0, 30),
)
@settings(max_examples=2000, deadline=None)
def test_the_compiled_lookup_with_a_marker_answers_as_the_python_one(
    pairs: list[tuple[bytes, bytes]], key: str, before: bytes, planted: str, since: int
) -> None:
    """The marker's bytes anywhere (before the map, as a key or value in it, after it) or
    nowhere; the search starting anywhere up to the map's end."""
    if planted == "before":
        before += MARKER
    elif planted == "in the map":
        pairs = [(text(0xA1, MARKER), text(0xA1, b"v")), *pairs]
    elif planted == "after":
        pairs = [*pairs, (text(0xA1, b"n"), text(0xA1, MARKER))]
    start = len(before)
    data = before + encoded_map(pairs, False, 0)
    stop = len(data)
    data += b"\x40" + MARKER  # what follows the map is never searched
    since = min(since, stop)

    def answer(find: object) -> object:
        try:
            return find(data, start, stop, key, since, MARKER)  # type: ignore[operator]
        except Exception as exc:  # the compiled lookup must raise the same
            return type(exc)

    compiled_answer, python_answer = answer(compiled.find_unmarked), answer(find_unmarked_python)
    assert same_value(compiled_answer, python_answer), data.hex()
    assert (compiled_answer is MARKER) is (MARKER in data[since:stop])
    if compiled_answer is not MARKER:
        assert same_value(compiled_answer, python_lookup(data, start, stop, key))


def test_the_step_table_must_name_every_constructor() -> None:
    with pytest.raises(ValueError, match="256"):
        compiled.use_steps([0] * 255, -1, -2, -4, -5)


def test_the_compiled_walks_refuse_to_run_before_the_codec_configures_them() -> None:
    """codec/values.py hands the compiled module its step table and its Python lookup as it
    imports it; a walk asked before that says so instead of failing somewhere inside."""
    alone = (
        "from proton_broker.codec import _simple_map as compiled\n"
        "data = bytes.fromhex('d10000000a00000002a1016ba10176')\n"
        "for walk, args in ((compiled.skip_simple_map, (data, 0)),\n"
        "                   (compiled.find_in_map, (data, 0, len(data), 'other'))):\n"
        "    try:\n"
        "        walk(*args)\n"
        "    except RuntimeError as error:\n"
        "        print(error)\n"
    )
    ran = subprocess.run([sys.executable, "-c", alone], capture_output=True, text=True, check=True)
    assert ran.stdout.splitlines() == ["use_steps was not called", "use_find was not called"]
