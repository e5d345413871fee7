"""JMS message selectors (javax.jms.Message, "Message Selectors"), on real parsed messages.

Messages are built with Proton, encoded and read by the broker's own codec, so the
identifiers are looked up in the record queues hold. ``truth`` tells FALSE from UNKNOWN by
also evaluating the selector's negation: neither matches when it is UNKNOWN.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import proton
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proton_broker.codec.sections import parse_message
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.selector import Selector, parse_selector

PROPERTIES = {"i": 5, "f": 2.5, "s": "hello", "t": True, "no": False, "neg": -3}


def msg(properties: dict[str, Any] | None = None, **fields: Any) -> Message:
    """A parsed message with these application properties and Proton message fields."""
    sent = proton.Message(
        body="x", properties=PROPERTIES if properties is None else properties, **fields
    )
    return parse_message(sent.encode())


def selects(text: str, message: Message | None = None) -> bool:
    return parse_selector(text).matches(msg() if message is None else message)


def truth(condition: str, message: Message | None = None) -> str:
    """TRUE, FALSE or UNKNOWN: the value of ``condition`` on ``message``."""
    if selects(condition, message):
        return "TRUE"
    return "FALSE" if selects(f"NOT ({condition})", message) else "UNKNOWN"


T, F, U = "1 = 1", "1 = 2", "missing = 1"  # conditions that are TRUE, FALSE, UNKNOWN


# ---- the interface ----------------------------------------------------------------------


def test_a_selector_keeps_its_text_as_given() -> None:
    selector = parse_selector(" i = 5 ")
    assert isinstance(selector, Selector) and selector.text == " i = 5 "


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_an_empty_or_blank_selector_matches_every_message(text: str) -> None:
    selector = parse_selector(text)
    assert selector.text == text
    assert selector.matches(msg()) and selector.matches(msg({}))


def test_a_syntax_error_names_the_selector_the_problem_and_the_position() -> None:
    with pytest.raises(InvalidField) as caught:
        parse_selector("a = ")
    assert caught.value.field == "filter"
    assert caught.value.description == 'invalid selector "a = ": expected a value at position 4'


# ---- comparison --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("i = 5", "TRUE"),
        ("i = 6", "FALSE"),
        ("i <> 6", "TRUE"),
        ("i <> 5", "FALSE"),
        ("i > 4", "TRUE"),
        ("i > 5", "FALSE"),
        ("i >= 5", "TRUE"),
        ("i >= 6", "FALSE"),
        ("i < 6", "TRUE"),
        ("i < 5", "FALSE"),
        ("i <= 5", "TRUE"),
        ("i <= 4", "FALSE"),
        ("s = 'hello'", "TRUE"),
        ("s <> 'hello'", "FALSE"),
        ("t = TRUE", "TRUE"),
        ("no <> FALSE", "FALSE"),
    ],
)
def test_every_comparison_operator_compares_like_values(condition: str, expected: str) -> None:
    assert truth(condition) == expected


@pytest.mark.parametrize(
    "condition",
    ["i = 0x5", "i = 0X05L", "i = 05", "i = 5L", "i = 5l", "010 = 8", "0 = 0", "0.5 = .5"],
)
def test_exact_literals_are_decimal_hexadecimal_or_octal_as_both_qpid_brokers_read_them(
    condition: str,
) -> None:
    """A leading 0 is octal (010 is 8), 0x hexadecimal, and L a long suffix."""
    assert truth(condition) == "TRUE"


def test_a_double_quoted_name_is_an_identifier_so_any_property_name_can_be_selected() -> None:
    message = msg({"order id": 7, 'say "hi"': "yes"})
    assert selects('"order id" = 7', message)
    assert selects('"say ""hi""" = \'yes\'', message)
    assert truth('"order id" = 8', message) == "FALSE"


def test_numbers_compare_across_integers_and_floats() -> None:
    assert truth("i = 5.0") == "TRUE" and truth("f > 2") == "TRUE" and truth("f < 2") == "FALSE"


@pytest.mark.parametrize(
    "condition",
    ["s = 5", "s <> 5", "i = '5'", "t = 1", "i <> TRUE", "s > 'a'", "s <= 'z'", "t > FALSE"],
)
def test_comparing_different_types_or_ordering_strings_or_booleans_is_false(
    condition: str,
) -> None:
    """As the JMS specification says and qpidd evaluates it: FALSE, ``<>`` included, so
    ``NOT`` of such a comparison is TRUE."""
    assert truth(condition) == "FALSE"
    assert truth(f"NOT ({condition})") == "TRUE"


def test_a_missing_property_makes_a_comparison_unknown_so_it_does_not_match() -> None:
    assert truth("missing = 1") == "UNKNOWN" and truth("missing <> 1") == "UNKNOWN"


def test_a_comparison_with_the_null_literal_is_unknown() -> None:
    assert truth("i = NULL") == "UNKNOWN"


def test_string_comparison_is_case_sensitive_and_quotes_are_doubled_in_literals() -> None:
    assert truth("s = 'Hello'") == "FALSE"
    assert selects("q = 'it''s'", msg({"q": "it's"}))


# ---- arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "condition",
    [
        "i + 1 = 6",
        "i - 7 = -2",
        "i * 2 = 10",
        "i / 2 = 2",
        "neg / 2 = -1",
        "f * 2 = 5",
        "i + f = 7.5",
        "i / 2.0 = 2.5",
        "-i = -5",
        "+i = 5",
        "- -i = 5",
        "7E3 = 7000",
        "-57.9E2 = -5790",
        ".5 = 0.5",
        "1. = 1",
        "2.5e-1 = 0.25",
    ],
)
def test_arithmetic_mixes_integers_and_floats_and_integer_division_truncates(
    condition: str,
) -> None:
    assert truth(condition) == "TRUE"


@pytest.mark.parametrize(
    "condition",
    [
        "i / 0 = 1",
        "f / 0 = 1",
        "i / 0.0 > 0",
        "missing + 1 = 1",
        "-missing = 1",
        "s + 1 = 1",
        "t * 1 = 1",
    ],
)
def test_division_by_zero_and_arithmetic_on_null_or_non_numbers_is_unknown(condition: str) -> None:
    assert truth(condition) == "UNKNOWN"


def test_a_huge_integer_meeting_a_float_is_unknown_not_an_overflow() -> None:
    assert truth("1" + "0" * 400 + " + f > 0") == "UNKNOWN"


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("1 + 2 * 3 = 7", "TRUE"),
        ("(1 + 2) * 3 = 9", "TRUE"),
        ("10 - 4 - 3 = 3", "TRUE"),
        ("12 / 2 / 3 = 2", "TRUE"),
        ("-2 * -3 = 6", "TRUE"),
        ("2 + 3 > 4", "TRUE"),
    ],
)
def test_arithmetic_binds_tighter_than_comparison_and_is_left_associative(
    condition: str, expected: str
) -> None:
    assert truth(condition) == expected


# ---- three-valued logic ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (T, T, "TRUE"),
        (T, F, "FALSE"),
        (T, U, "UNKNOWN"),
        (F, T, "FALSE"),
        (F, F, "FALSE"),
        (F, U, "FALSE"),
        (U, T, "UNKNOWN"),
        (U, F, "FALSE"),
        (U, U, "UNKNOWN"),
    ],
)
def test_and_follows_the_jms_table(left: str, right: str, expected: str) -> None:
    assert truth(f"{left} AND {right}") == expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (T, T, "TRUE"),
        (T, F, "TRUE"),
        (T, U, "TRUE"),
        (F, T, "TRUE"),
        (F, F, "FALSE"),
        (F, U, "UNKNOWN"),
        (U, T, "TRUE"),
        (U, F, "UNKNOWN"),
        (U, U, "UNKNOWN"),
    ],
)
def test_or_follows_the_jms_table(left: str, right: str, expected: str) -> None:
    assert truth(f"{left} OR {right}") == expected


@pytest.mark.parametrize(("operand", "expected"), [(T, "FALSE"), (F, "TRUE"), (U, "UNKNOWN")])
def test_not_follows_the_jms_table_so_not_unknown_does_not_match(
    operand: str, expected: str
) -> None:
    assert truth(f"NOT {operand}") == expected


def test_long_chains_of_and_and_or_keep_the_table() -> None:
    assert truth(" AND ".join([T] * 5 + [U] + [T] * 5)) == "UNKNOWN"
    assert truth(" OR ".join([F] * 5 + [U] + [T])) == "TRUE"
    assert truth(" OR ".join([F] * 300)) == "FALSE"  # flattened: no deep recursion


def test_and_binds_tighter_than_or_and_not_tighter_than_and() -> None:
    assert truth(f"{T} OR {F} AND {F}") == "TRUE"
    assert truth(f"({T} OR {F}) AND {F}") == "FALSE"
    assert truth(f"NOT {F} AND {F}") == "FALSE"  # (NOT F) AND F
    assert truth(f"NOT {T} OR {T}") == "TRUE"  # (NOT T) OR T


def test_boolean_properties_and_literals_are_conditions_and_others_are_unknown() -> None:
    assert truth("t") == "TRUE" and truth("no") == "FALSE" and truth("NOT no") == "TRUE"
    assert truth("TRUE") == "TRUE" and truth("FALSE") == "FALSE"
    assert truth("i") == "UNKNOWN" and truth("missing") == "UNKNOWN"
    assert truth("t AND i = 5") == "TRUE" and truth("(i = 5) = TRUE") == "TRUE"


def test_not_applies_to_a_whole_comparison() -> None:
    assert truth("NOT i = 5") == "FALSE" and truth("NOT i + 1 = 5") == "TRUE"


def test_the_and_of_between_is_not_taken_for_a_logical_and() -> None:
    assert truth("i BETWEEN 1 AND 5 AND s = 'hello'") == "TRUE"
    assert truth("i BETWEEN 1 AND 5 AND s = 'x' OR t") == "TRUE"
    assert truth("i NOT BETWEEN 1 AND 5 OR i BETWEEN 1 + 1 AND 2 * 3") == "TRUE"


def test_unary_minus_binds_tighter_than_multiplication() -> None:
    assert truth("-i * 2 = -10") == "TRUE" and truth("2 - -i = 7") == "TRUE"


def test_properties_compare_with_each_other_and_with_expressions() -> None:
    assert truth("i = neg + 8") == "TRUE" and truth("f * 2 = i") == "TRUE"
    assert truth("s = s AND t = t") == "TRUE"


def test_nesting_not_too_deeply_is_refused_at_parse_time() -> None:
    assert truth("NOT " * 20 + T) == "TRUE"
    with pytest.raises(InvalidField, match="nested too deeply"):
        parse_selector("NOT " * 150 + T)


# ---- BETWEEN, IN, LIKE, IS NULL ----------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("i BETWEEN 1 AND 5", "TRUE"),
        ("i BETWEEN 5 AND 9", "TRUE"),
        ("i BETWEEN 6 AND 9", "FALSE"),
        ("f BETWEEN 2 AND 3", "TRUE"),
        ("i NOT BETWEEN 6 AND 9", "TRUE"),
        ("i NOT BETWEEN 1 AND 9", "FALSE"),
        ("i BETWEEN i - 1 AND i + 1", "TRUE"),
        ("missing BETWEEN 1 AND 2", "UNKNOWN"),
        ("missing NOT BETWEEN 1 AND 2", "UNKNOWN"),
        ("i BETWEEN missing AND 2", "FALSE"),
        ("i BETWEEN missing AND 9", "UNKNOWN"),
        ("s BETWEEN 1 AND 2", "FALSE"),
    ],
)
def test_between_is_inclusive_and_unknown_with_null(condition: str, expected: str) -> None:
    assert truth(condition) == expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("s IN ('a', 'hello')", "TRUE"),
        ("s IN ('a', 'b')", "FALSE"),
        ("s NOT IN ('a', 'b')", "TRUE"),
        ("s NOT IN ('hello')", "FALSE"),
        ("i IN (4, 5.0)", "TRUE"),
        ("i IN (-5, 6)", "FALSE"),
        ("neg IN (-3)", "TRUE"),
        ("s IN (1, 2)", "FALSE"),
        ("s IN ('a', 1)", "FALSE"),
        ("s IN ('hello', 1)", "TRUE"),
        ("t IN ('true')", "FALSE"),
    ],
)
def test_in_matches_any_listed_value_of_the_same_type(condition: str, expected: str) -> None:
    assert truth(condition) == expected


def test_in_and_not_in_with_a_null_identifier_are_unknown() -> None:
    assert truth("missing IN ('a')") == "UNKNOWN"
    assert truth("missing NOT IN ('a')") == "UNKNOWN"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("'hello'", True),
        ("'h%'", True),
        ("'%llo'", True),
        ("'%'", True),
        ("'h_llo'", True),
        ("'h_lo'", False),
        ("'H%'", False),
        ("'%l%l%'", True),
        ("'_____'", True),
        ("'______'", False),
        ("'hell'", False),
    ],
)
def test_like_matches_percent_as_any_run_and_underscore_as_one_character(
    pattern: str, expected: bool
) -> None:
    assert selects(f"s LIKE {pattern}") is expected
    assert selects(f"s NOT LIKE {pattern}") is not expected


def test_like_escape_makes_percent_and_underscore_literal() -> None:
    message = msg({"p": "50%_off", "q": "50 percent off"})
    assert selects(r"p LIKE '50\%\_off' ESCAPE '\'", message)
    assert not selects(r"q LIKE '50\%%' ESCAPE '\'", message)
    assert selects("p LIKE '50!%!_%' ESCAPE '!'", message)
    assert selects("p LIKE '%!_o%' ESCAPE '!'", message)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ("a.c", "a.c"),
        ("a+b*", "a+b*"),
        ("(x)[y]{2}", "(x)[y]{2}"),
        ("^$|?\\", "^$|?\\"),
        ("line\nbreak", "line_break"),
    ],
)
def test_like_takes_regex_metacharacters_in_the_pattern_literally(value: str, pattern: str) -> None:
    assert selects(f"v LIKE '{pattern}'", msg({"v": value}))
    assert not selects("v LIKE 'a.c'", msg({"v": "abc"}))


def _like_by_regex(pattern: str, value: str) -> bool:
    """What LIKE means, as a backtracking regular expression (fine for short values)."""
    text = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(text, value, re.DOTALL) is not None


@settings(max_examples=400, deadline=None)
@given(st.text("ab%_", max_size=8), st.text("ab\n", max_size=10))
def test_like_answers_as_the_regular_expression_it_stands_for(pattern: str, value: str) -> None:
    quoted = pattern.replace("'", "''")
    assert selects(f"v LIKE '{quoted}'", msg({"v": value})) is _like_by_regex(pattern, value)


def test_like_with_many_wildcards_on_a_long_value_does_not_backtrack() -> None:
    # As a regular expression this pattern backtracks for minutes on one message, on the
    # loop that serves every client; matched piece by piece it is linear.
    selector = parse_selector("p LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%b'")
    assert not selector.matches(msg({"p": "a" * 10_000}))
    assert selector.matches(msg({"p": "a" * 10_000 + "b"}))


def test_like_escape_may_be_a_regex_metacharacter_itself() -> None:
    message = msg({"p": "a%b", "q": "axb"})
    assert selects("p LIKE 'a.%b' ESCAPE '.'", message)
    assert not selects("q LIKE 'a.%b' ESCAPE '.'", message)
    assert selects("q LIKE 'a%b' ESCAPE '.'", message)


def test_percent_and_underscore_are_literal_outside_like() -> None:
    assert truth("s = 'h%'") == "FALSE" and selects("p = '5_%'", msg({"p": "5_%"}))


def test_strings_may_hold_any_unicode_and_whitespace() -> None:
    message = msg({"city": "Zürich", "note": "two  spaces\n"})
    assert selects("city = 'Zürich' AND note LIKE 'two  spaces_'", message)


def test_like_on_a_non_string_or_null_is_unknown() -> None:
    assert truth("i LIKE '5'") == "UNKNOWN" and truth("missing LIKE '%'") == "UNKNOWN"
    assert truth("missing NOT LIKE 'x'") == "UNKNOWN"


def test_is_null_and_is_not_null_are_never_unknown() -> None:
    assert truth("missing IS NULL") == "TRUE" and truth("i IS NULL") == "FALSE"
    assert truth("missing IS NOT NULL") == "FALSE" and truth("s IS NOT NULL") == "TRUE"
    assert truth("i / 0 IS NULL") == "TRUE"


# ---- identifiers and keywords ------------------------------------------------------------


def test_keywords_are_case_insensitive() -> None:
    assert selects("i between 1 and 9 aNd s like 'h%' escape '!' Or s iN ('x')")
    assert selects("missing is null AND NOT t = false And t = True AND s not in ('a')")


def test_identifiers_are_case_sensitive() -> None:
    message = msg({"Color": "red", "color": "blue"})
    assert selects("Color = 'red' AND color = 'blue'", message)
    assert truth("COLOR = 'red'", message) == "UNKNOWN"


def test_identifiers_follow_java_rules_with_dollar_underscore_digits_and_letters() -> None:
    message = msg({"$price": 3, "_x1": "y", "größe": 2})
    assert selects("$price = 3 AND _x1 = 'y' AND größe = 2", message)


@pytest.mark.parametrize(
    ("value", "condition"),
    [
        (proton.symbol("sym"), "p = 'sym'"),
        (proton.char("c"), "p = 'c'"),
        (proton.ulong(2**63), "p > 9223372036854775806"),
        (proton.ubyte(3), "p = 3"),
        (proton.ushort(3), "p = 3"),
        (proton.uint(3), "p = 3"),
        (proton.byte(-3), "p = -3"),
        (proton.float32(1.5), "p = 1.5"),
        (proton.timestamp(1000), "p = 1000"),
    ],
)
def test_symbols_and_chars_are_strings_and_amqp_integer_types_are_numbers(
    value: Any, condition: str
) -> None:
    assert truth(condition, msg({"p": value})) == "TRUE"


@pytest.mark.parametrize(
    "value",
    [
        b"bytes",
        uuid.UUID(int=1),
        proton.decimal128(b"\0" * 16),
    ],
)
def test_a_property_of_another_type_is_null_and_evaluation_does_not_raise(value: Any) -> None:
    """Simple types the selector language has no use for (lists, maps, arrays and
    described values never reach it: the parser refuses them, see tests/codec)."""
    message = msg({"p": value})
    assert truth("p IS NULL", message) == "TRUE"
    for text in ("p = 1", "p LIKE '%'", "p IN ('a')", "p + 1 > 0", "p BETWEEN 1 AND 2", "p"):
        assert truth(text, message) == "UNKNOWN"


def test_a_paged_out_message_reads_as_null_rather_than_raising() -> None:
    message = msg(correlation_id="c")
    message.data, message.paged = b"", True
    assert truth("i IS NULL", message) == "TRUE"
    assert truth("JMSCorrelationID IS NULL", message) == "TRUE"


# ---- JMS header identifiers --------------------------------------------------------------


def test_jms_message_id_is_a_string_id_as_is_or_another_id_as_text() -> None:
    assert selects("JMSMessageID = 'ID:abc'", msg(id="ID:abc"))
    assert selects("JMSMessageID = '42'", msg(id=proton.ulong(42)))
    some = uuid.UUID(int=7)
    assert selects(f"JMSMessageID = '{some}'", msg(id=some))
    assert selects("JMSMessageID IS NULL", msg())


def test_jms_correlation_id_is_decoded_lazily_from_the_properties() -> None:
    message = msg(correlation_id="corr-1")
    assert message.properties_cache is None
    assert selects("JMSCorrelationID = 'corr-1'", message)
    assert message.properties_cache is not None
    assert selects("JMSCorrelationID = '9'", msg(correlation_id=proton.ulong(9)))
    assert selects("JMSCorrelationID IS NULL", msg())


def test_jms_priority_defaults_to_four() -> None:
    assert selects("JMSPriority = 4", msg())
    assert selects("JMSPriority > 6", msg(priority=7))


def test_jms_delivery_mode_is_persistent_for_durable_messages() -> None:
    assert selects("JMSDeliveryMode = 'PERSISTENT'", msg(durable=True))
    assert selects("JMSDeliveryMode = 'NON_PERSISTENT'", msg())


def test_jms_timestamp_and_expiration_are_milliseconds_or_0_as_broker_j_reads_them() -> None:
    """JMSExpiration is when the broker expires the message: its arrival plus its ttl (the
    producer's absolute-expiry-time is not read), 0 without a ttl."""
    message = msg(creation_time=1700000000.5, expiry_time=1800000000.0, ttl=60)
    message.arrival = 1700000001.0
    assert selects("JMSTimestamp = 1700000000500 AND JMSExpiration = 1700000061000", message)
    assert selects("JMSTimestamp = 0 AND JMSExpiration = 0", msg(expiry_time=1800000000.0))


def test_jms_type_is_the_subject_or_the_jms_type_annotation_when_present() -> None:
    assert selects("JMSType = 'order'", msg(subject="order"))
    annotated = msg(subject="order", annotations={proton.symbol("x-opt-jms-type"): "refund"})
    assert selects("JMSType = 'refund'", annotated)
    assert selects("JMSType IS NULL", msg())


def test_jmsx_group_id_and_group_seq_read_the_group_fields() -> None:
    message = msg(group_id="g-1", group_sequence=3)
    assert message.properties_cache is None
    assert selects("JMSXGroupID = 'g-1' AND JMSXGroupSeq = 3", message)
    assert selects("JMSXGroupID IS NULL AND JMSXGroupSeq IS NULL", msg())


def test_jmsx_user_id_is_the_user_id_decoded_as_utf8() -> None:
    assert selects("JMSXUserID = 'bob'", msg(user_id=b"bob"))
    assert selects("JMSXUserID IS NULL", msg())


def test_jmsx_delivery_count_counts_this_delivery_and_redelivered_follows_it() -> None:
    first = msg()
    assert selects("JMSXDeliveryCount = 1 AND NOT JMSRedelivered", first)
    again = msg(delivery_count=2)
    assert selects("JMSXDeliveryCount = 3 AND JMSRedelivered = TRUE", again)


def test_jms_destination_and_reply_to_are_the_addresses_as_text() -> None:
    message = msg(address="orders", reply_to="replies")
    assert selects("JMSDestination = 'orders' AND JMSReplyTo = 'replies'", message)
    assert selects("JMSReplyTo IS NULL", msg())


def test_other_jms_like_names_are_application_properties() -> None:
    assert selects("JMSXOther = 1 AND JMS_AMQP_X = 'y'", msg({"JMSXOther": 1, "JMS_AMQP_X": "y"}))


def test_a_selector_naming_only_header_fields_decodes_nothing_more() -> None:
    message = msg(priority=6, durable=True)
    assert selects("JMSPriority = 6 AND JMSDeliveryMode = 'PERSISTENT'", message)
    assert message.app_properties_cache is None and message.properties_cache is None
    assert message.annotations_cache is None


def test_an_application_property_is_found_without_decoding_the_whole_map() -> None:
    message = msg()
    assert selects("s = 'hello'", message) and message.app_properties_cache is None


def test_whitespace_of_every_kind_separates_tokens() -> None:
    assert selects("\ti\n=\r\n5\tAND(s='hello')")


def test_a_selector_evaluates_afresh_on_each_message() -> None:
    selector = parse_selector("i > 2 AND JMSCorrelationID = 'c'")
    assert selector.matches(msg({"i": 3}, correlation_id="c"))
    assert not selector.matches(msg({"i": 1}, correlation_id="c"))
    assert not selector.matches(msg({"i": 3}, correlation_id="d"))


# ---- invalid selectors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("(a = 1", "expected ')', found end of selector at position 6"),
        ("a = 1)", "unexpected ')' at position 5"),
        ("((a = 1)", "expected ')'"),
        ("a =", "expected a value at position 3"),
        ("a = 1 AND", "expected a value at position 9"),
        ("a = 1 OR OR b = 2", "reserved word OR at position 9"),
        ("* a = 1", "expected a value, found '*' at position 0"),
        ("a # 1", "unexpected character '#' at position 2"),
        ("a != 1", "unexpected character '!' at position 2"),
        ("a = 'abc", "unterminated string at position 4"),
        ("a LIKE 5", "expected a string pattern after LIKE, found 5 at position 7"),
        ("a LIKE b", "expected a string pattern after LIKE"),
        ("a LIKE 'x' ESCAPE 'ab'", "expected one character in quotes after ESCAPE"),
        ("a LIKE 'x!' ESCAPE '!'", "ends with its ESCAPE character"),
        ("a IN ()", "expected a string or number in the IN list, found ')' at position 6"),
        ("a IN ('x',)", "expected a string or number"),
        ("a IN 'x'", "expected '(' after IN"),
        ("a IN (b)", "expected a string or number"),
        ("NOT", "expected a value at position 3"),
        ("a = b = c", "comparisons do not chain"),
        ("a < b > c", "comparisons do not chain"),
        ("a IS NULL = TRUE", "unexpected '='"),
        ("and = 1", "reserved word AND at position 0"),
        ("a = 1 AND like = 2", "reserved word LIKE"),
        ("a IS 5", "expected NULL after IS"),
        ("a IS NOT 5", "expected NULL after IS NOT"),
        ("a NOT 5", "unexpected NOT"),
        ("a NOT IS NULL", "expected BETWEEN, LIKE or IN after NOT"),
        ("a BETWEEN 1 5", "expected AND in BETWEEN"),
        ("a BETWEEN 'x' AND 'y'", "expected a number, found a string"),
        ("a + 'x' = 1", "expected a number, found a string"),
        ("-'x' = 1", "expected a number, found a string"),
        ("1 AND 2", "expected a condition, found a number"),
        ("a + 1", "expected a condition, found a number"),
        ("'x'", "expected a condition, found a string"),
        ("5 LIKE 'x'", "expected a string, found a number"),
        ("1.2.3 = 1", "malformed number"),
        ("08 = 8", "malformed octal number at position 0"),
        ("0x = 0", "malformed number"),
        ('"unclosed = 1', "unterminated name"),
        ("a = 1 b", "unexpected identifier b at position 6"),
        ("(" * 40 + "a" + ")" * 40, "nested too deeply"),
        (" + ".join(["1"] * 150) + " = 1", "nested too deeply"),
    ],
)
def test_an_invalid_selector_is_refused_naming_it_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_selector(text)
    assert caught.value.field == "filter"
    assert caught.value.description.startswith(f'invalid selector "{text}": ')
    assert problem in caught.value.description
