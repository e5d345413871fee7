"""The message record: one slotted object, its header and arrival-time properties fields
shared as one tuple each, the message-id read from the bytes when asked, and what few
messages need in a side record made on first use."""

from __future__ import annotations

import copy

import proton

from proton_broker.codec.sections import parse_message
from proton_broker.message import NO_FIELDS, Message


def parsed(**fields: object) -> Message:
    return parse_message(proton.Message(body=b"x", **fields).encode())  # type: ignore[arg-type]


def test_messages_sent_with_the_same_header_share_one_header_record() -> None:
    first, second = parsed(durable=True, priority=7), parsed(durable=True, priority=7)
    assert first.header is second.header
    assert (first.durable, first.priority, first.ttl, first.delivery_count) == (True, 7, None, 0)


def test_a_message_setting_none_of_the_kept_properties_shares_the_empty_fields() -> None:
    message = parsed(user_id=b"u", reply_to="r")
    assert message.fields is NO_FIELDS
    assert message.properties_field(4) == "r"  # reply-to, read from the bytes on demand


def test_messages_to_the_same_address_share_one_fields_record() -> None:
    first, second = (
        parsed(id="a", address="q", subject="s"),
        parsed(id="b", address="q", subject="s"),
    )
    assert first.fields is second.fields
    assert (first.message_id, second.message_id) == ("a", "b")  # read from each one's bytes


def test_a_message_id_alone_keeps_no_fields_record() -> None:
    assert parsed(id="m1").fields is NO_FIELDS


def test_the_properties_fields_read_as_attributes_empty_strings_included() -> None:
    message = parsed(id="m1", subject="", address="q", group_id="g", creation_time=5.0)
    assert message.fields is not NO_FIELDS
    assert (message.message_id, message.subject, message.to, message.group_id) == (
        "m1",
        "",
        "q",
        "g",
    )
    assert message.creation_time == 5000 and message.absolute_expiry_time is None


def test_a_record_makes_its_side_record_only_when_a_feature_needs_one() -> None:
    message = parsed(properties={"k": "v"})
    message.page_id = None  # the default: still nothing to keep
    assert message.extras is None
    assert message.application_properties == {"k": "v"}
    assert message.extras is not None and message.app_properties_cache == {"k": "v"}


def test_a_copy_for_another_queue_shares_the_decoded_sections_but_pages_on_its_own() -> None:
    message = parsed(properties={"k": "v"})
    decoded = message.application_properties
    twin = copy.copy(message)
    twin.page_id, twin.paged_size = 9, 100
    assert message.page_id is None and message.paged_size == 0
    assert twin.application_properties is decoded
    assert all(
        getattr(twin, name) is getattr(message, name)
        for name in Message.__slots__
        if name != "extras"
    )
