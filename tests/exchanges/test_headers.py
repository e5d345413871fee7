"""Headers bindings select by application properties: x-match all or any, presence with a
null value, numbers by value whatever their width, text and booleans exactly."""

from __future__ import annotations

import pytest

from proton_broker.errors import InvalidField
from proton_broker.exchanges.headers import HeadersMatch


@pytest.mark.parametrize("arguments", [None, {}, {"colour": "red"}, {"x-match": "some"}])
def test_a_binding_without_all_or_any_is_refused_naming_x_match(arguments):
    with pytest.raises(InvalidField, match="x-match") as refused:
        HeadersMatch.parse(arguments)
    assert refused.value.field == "x-match"


def test_all_needs_every_property_to_match():
    match = HeadersMatch.parse({"x-match": "all", "colour": "red", "size": 3})
    assert match.matches({"colour": "red", "size": 3, "extra": True})
    assert not match.matches({"colour": "red"})
    assert not match.matches({"colour": "red", "size": 4})


def test_any_needs_one_property_to_match():
    match = HeadersMatch.parse({"x-match": "any", "colour": "red", "size": 3})
    assert match.matches({"size": 3})
    assert match.matches({"colour": "red", "size": 9})
    assert not match.matches({"colour": "blue"})
    assert not match.matches({})


def test_a_null_value_asks_only_that_the_property_be_present():
    match = HeadersMatch.parse({"x-match": "all", "trace": None})
    assert match.matches({"trace": "anything"})
    assert match.matches({"trace": None})
    assert not match.matches({"other": 1})


def test_numbers_compare_by_value_but_booleans_and_text_do_not_pass_for_numbers():
    match = HeadersMatch.parse({"x-match": "all", "n": 1})
    assert match.matches({"n": 1}) and match.matches({"n": 1.0})
    assert not match.matches({"n": True})
    assert not match.matches({"n": "1"})
    flag = HeadersMatch.parse({"x-match": "all", "ok": True})
    assert flag.matches({"ok": True}) and not flag.matches({"ok": 1})


def test_an_all_binding_with_no_properties_matches_every_message_and_any_matches_none():
    assert HeadersMatch.parse({"x-match": "all"}).matches({"a": 1})
    assert not HeadersMatch.parse({"x-match": "any"}).matches({"a": 1})
