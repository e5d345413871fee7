"""The queue option parser: both brokers' names, value types, combinations and echoes."""

from __future__ import annotations

from typing import Any

import pytest

from proton_broker.codec.values import Described
from proton_broker.errors import InvalidField, NotImplementedByBroker
from proton_broker.queues.settings import (
    DELETE_IF_UNUSED,
    DELETE_ON_CLOSE,
    GROUPS_NONE,
    GROUPS_SHARED,
    GROUPS_STANDARD,
    LEGACY_LVQ_KEY,
    PERMANENT,
    QueueSettings,
    differences,
    option_names,
    parse_options,
    parse_settings,
)

# (setting, aliases, value as given, value expected in the settings)
ALIASES: list[tuple[str, tuple[str, ...], Any, Any]] = [
    ("lvq_key", ("qpid.last_value_queue_key", "lvqKey"), "ticker", "ticker"),
    ("priorities", ("qpid.priorities", "x-qpid-priorities", "priorities"), 5, 5),
    ("priorities", ("qpid.priorities", "x-qpid-priorities", "priorities"), "3", 3),
    ("sort_key", ("qpid.queue_sort_key", "sortKey"), "rank", "rank"),
    ("max_count", ("qpid.max_count", "maximumQueueDepthMessages"), 10, 10),
    ("max_count", ("qpid.max_count", "maximumQueueDepthMessages"), "10", 10),
    ("max_size", ("qpid.max_size", "maximumQueueDepthBytes"), 2048, 2048),
    ("max_size", ("qpid.max_size", "maximumQueueDepthBytes"), "2048", 2048),
    ("overflow_policy", ("qpid.policy_type", "overflowPolicy"), "ring", "ring"),
    (
        "group_key",
        ("qpid.group_header_key", "messageGroupKeyOverride", "messageGroupKey"),
        "user",
        "user",
    ),
    ("group_mode", ("qpid.shared_msg_group", "messageGroupSharedGroups"), True, GROUPS_SHARED),
    ("default_group", ("qpid.default-message-group", "messageGroupDefaultGroup"), "g", "g"),
    ("flow_stop_size", ("qpid.flow_stop_size", "x-qpid-capacity"), 100, 100),
    ("flow_resume_size", ("qpid.flow_resume_size", "x-qpid-flow-resume-capacity"), 50, 50),
    ("flow_resume_percent", ("queueFlowResumeLimit", "qpid.flow_resume_limit"), "80", 80),
    (
        "ensure_nondestructive",
        (
            "ensureNondestructiveConsumers",
            "qpid.ensure_nondestructive_consumers",
            "qpid.browse-only",
        ),
        "true",
        True,
    ),
    ("min_ttl", ("minimumMessageTtl", "qpid.minimum_message_ttl"), 1000, 1000),
    ("max_ttl", ("maximumMessageTtl", "qpid.maximum_message_ttl"), "5000", 5000),
    ("hold_on_publish", ("holdOnPublishEnabled", "qpid.hold_on_publish"), 1, True),
    ("exclusive", ("exclusive", "qpid.exclusive", "qpid.exclusivity_policy"), "CONNECTION", True),
    ("description", ("description", "x-qpid-description"), "prices", "prices"),
    ("max_live_consumers", ("maximumLiveConsumers",), 1, 1),
    ("max_live_consumers", ("x-single-active-consumer",), True, 1),
    (
        "lifetime_policy",
        ("qpid.lifetime-policy", "qpid.lifetime_policy", "lifetimePolicy", "lifetime-policy"),
        "delete-on-close",
        DELETE_ON_CLOSE,
    ),
    ("lifetime_policy", ("auto-delete", "auto_delete", "autoDelete"), True, DELETE_IF_UNUSED),
]


def _alias_cases() -> list[Any]:
    return [
        pytest.param(target, name, value, expected, id=f"{name}={value!r}")
        for target, names, value, expected in ALIASES
        for name in names
    ]


@pytest.mark.parametrize(("target", "name", "value", "expected"), _alias_cases())
def test_every_alias_sets_the_same_setting(
    target: str, name: str, value: Any, expected: Any
) -> None:
    parsed = parse_options({name: value})
    assert getattr(parsed.settings, target) == expected
    assert parsed.given[target] == name
    assert parsed.unknown == {}


@pytest.mark.parametrize(
    ("target", "names", "value", "expected"),
    [pytest.param(*case, id=case[1][0] + "-all") for case in ALIASES],
)
def test_all_aliases_of_a_setting_together_agree(
    target: str, names: tuple[str, ...], value: Any, expected: Any
) -> None:
    settings = parse_settings({name: value for name in names})
    assert getattr(settings, target) == expected


@pytest.mark.parametrize("value", [1, "1", True, "true"])
def test_shared_msg_group_as_long_string_or_bool_turns_on_shared_groups(value: Any) -> None:
    settings = parse_settings({"qpid.group_header_key": "user", "qpid.shared_msg_group": value})
    assert settings.group_mode == GROUPS_SHARED
    assert settings.group_key == "user"


@pytest.mark.parametrize(
    ("value", "mode"),
    [("SHARED_GROUPS", GROUPS_SHARED), ("standard", GROUPS_STANDARD), ("NONE", GROUPS_NONE)],
)
def test_message_group_type_names_the_mode(value: str, mode: str) -> None:
    assert parse_settings({"messageGroupType": value}).group_mode == mode


def test_shared_msg_group_and_message_group_type_are_aliases() -> None:
    settings = parse_settings({"qpid.shared_msg_group": "1", "messageGroupType": "SHARED_GROUPS"})
    assert settings.group_mode == GROUPS_SHARED
    with pytest.raises(InvalidField):
        parse_settings({"qpid.shared_msg_group": 1, "messageGroupType": "STANDARD"})


def test_a_group_key_alone_means_standard_groups() -> None:
    settings = parse_settings({"messageGroupKeyOverride": "user"})
    assert settings.grouped and settings.group_mode == GROUPS_STANDARD


def test_shared_msg_group_off_does_not_make_a_grouped_queue() -> None:
    # Qpid C++ ignores a false qpid.shared_msg_group without a group key, and Broker-J maps
    # only the value "1" (to SHARED_GROUPS): 0 must not turn message groups on.
    settings = parse_settings({"qpid.shared_msg_group": 0})
    assert not settings.grouped


def test_shared_msg_group_off_is_allowed_on_a_priority_queue() -> None:
    settings = parse_settings({"qpid.priorities": 10, "qpid.shared_msg_group": "0"})
    assert settings.kind == "priority" and not settings.grouped


def test_shared_msg_group_off_does_not_conflict_with_standard_groups() -> None:
    # 0 asks for nothing, so it cannot contradict an explicit STANDARD.
    settings = parse_settings(
        {"qpid.shared_msg_group": 0, "messageGroupType": "STANDARD", "messageGroupKeyOverride": "g"}
    )
    assert settings.group_mode == GROUPS_STANDARD and settings.group_key == "g"


def test_an_explicit_message_group_type_none_keeps_groups_off_even_with_a_key() -> None:
    # Broker-J: messageGroupType NONE means no grouping, whatever the key override says.
    settings = parse_settings({"messageGroupKeyOverride": "g", "messageGroupType": "NONE"})
    assert not settings.grouped


@pytest.mark.parametrize("alias", ["JMSXGroupID", "JMSXGroupId"])
def test_jmsx_group_id_as_the_group_key_means_the_group_id_property(alias: str) -> None:
    settings = parse_settings({"qpid.group_header_key": alias})
    assert settings.group_key is None
    assert settings.grouped and settings.group_mode == GROUPS_STANDARD


def test_lifetime_takes_broker_js_policy_names_that_are_ours() -> None:
    assert (
        parse_settings({"lifetimePolicy": "DELETE_ON_NO_LINKS"}).lifetime_policy
        == "delete-if-unused"
    )
    made = parse_settings({"lifetimePolicy": "DELETE_ON_CREATING_LINK_CLOSE"})
    assert made.lifetime_policy == "delete-on-close"
    with pytest.raises(InvalidField):
        parse_settings({"lifetimePolicy": "DELETE_ON_SESSION_END"})


def test_exclusive_takes_broker_js_exclusivity_policy_names_too() -> None:
    assert parse_settings({"exclusive": "NONE"}).exclusive is False
    assert parse_settings({"exclusive": "connection"}).exclusive is True
    assert parse_settings({"exclusive": True}).exclusive is True
    with pytest.raises(NotImplementedByBroker):
        parse_settings({"exclusive": "PRINCIPAL"})


def test_zero_priority_levels_is_a_plain_queue_as_qpidd_reads_it() -> None:
    settings = parse_settings({"qpid.priorities": 0})
    assert settings.priorities is None and settings.kind == "standard"


# ---- wrong types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("qpid.max_count", "ten"),
        ("maximumQueueDepthBytes", "lots"),
        ("qpid.max_count", True),
        ("qpid.max_count", 1.5),
        ("qpid.priorities", -1),
        ("x-qpid-priorities", 11),
        ("qpid.last_value_queue_key", ""),
        ("sortKey", 7),
        ("qpid.policy_type", "self-destructing"),
        ("durable", "maybe"),
        ("qpid.flow_stop_count", -1),
        ("queueFlowResumeLimit", 101),
        ("messageGroupType", "SOMETIMES"),
        ("lifetime-policy", "forever"),
        ("defaultFilters", ["x"]),
        ("supported-dist-modes", "teleport"),
    ],
)
def test_a_wrong_value_is_refused_naming_key_and_value(key: str, value: Any) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_options({key: value})
    assert caught.value.field == key
    assert key in caught.value.description
    assert repr(value) in caught.value.description


def test_ten_as_text_for_max_count_is_refused() -> None:
    with pytest.raises(InvalidField) as caught:
        parse_settings({"qpid.max_count": "ten"})
    assert caught.value.field == "qpid.max_count"
    assert "'qpid.max_count'" in caught.value.description and "'ten'" in caught.value.description


def test_numbers_with_surrounding_spaces_are_read() -> None:
    assert parse_settings({"qpid.max_count": " 7 "}).max_count == 7


# ---- unknown keys ------------------------------------------------------------------------


def test_unknown_keys_are_handed_back_by_parse_options() -> None:
    parsed = parse_options({"qpid.max_count": 5, "x-custom": "a", "qpid.nonsense": 1})
    assert parsed.unknown == {"x-custom": "a", "qpid.nonsense": 1}
    assert parsed.settings.max_count == 5
    assert "x-custom" not in parsed.echo


def test_unknown_keys_are_refused_by_parse_settings_naming_them() -> None:
    with pytest.raises(InvalidField) as caught:
        parse_settings({"qpid.max_count": 5, "x-custom": "a", "qpid.nonsense": 1}, "orders")
    text = caught.value.description
    assert "'x-custom'" in text and "'qpid.nonsense'" in text and "'orders'" in text
    assert caught.value.field in ("x-custom", "qpid.nonsense")


@pytest.mark.parametrize("policy", ["SESSION", "CONTAINER", "PRINCIPAL", "LINK"])
def test_broker_js_exclusivity_policies_the_broker_lacks_are_not_implemented(policy: str) -> None:
    with pytest.raises(NotImplementedByBroker) as caught:
        parse_options({"exclusive": policy})
    assert "exclusive" in caught.value.description and policy in caught.value.description


@pytest.mark.parametrize("key", ["no-local", "noLocal"])
def test_no_local_is_qpidds_option_and_broker_js_attribute(key: str) -> None:
    assert parse_options({key: True}).settings.no_local
    assert parse_options({key: "false"}).settings == QueueSettings()


@pytest.mark.parametrize(
    ("value", "kept"),
    [("DEFAULT", (False, True)), ("always", (True, True)), ("NEVER", (False, False))],
)
@pytest.mark.parametrize("key", ["messageDurability", "qpid.message_durability"])
def test_message_durability_says_which_messages_a_durable_queue_keeps(
    key: str, value: str, kept: tuple[bool, bool]
) -> None:
    settings = parse_options({key: value, "durable": True}).settings
    assert settings.kept == kept and settings.messages_kept == value.lower()


def test_a_queue_that_is_not_durable_keeps_no_message_whatever_it_was_given() -> None:
    settings = parse_options({"messageDurability": "ALWAYS"}).settings
    assert settings.message_durability == "always"
    assert settings.messages_kept == "never" and settings.kept == (False, False)


def test_message_durability_is_one_of_broker_js_three_names() -> None:
    with pytest.raises(InvalidField) as caught:
        parse_options({"messageDurability": "SOMETIMES"})
    assert caught.value.field == "messageDurability"
    assert "DEFAULT, ALWAYS or NEVER" in caught.value.description


@pytest.mark.parametrize(
    "key",
    [
        "alertThresholdQueueDepthMessages",
        "alertRepeatGap",
        "maximumDistinctGroups",
        "x-qpid-maximum-message-age",  # Broker-J's wire names of its alert thresholds
        "x-qpid-maximum-queue-depth",
        "qpid.group_timestamp",  # qpidd's, for its QMF group query only
    ],
)
def test_broker_j_alerts_and_group_buckets_are_taken_and_said_to_have_no_effect(key: str) -> None:
    parsed = parse_options({key: 255})
    assert not parsed.unknown and parsed.settings == QueueSettings()
    assert parsed.notices == [f"queue option '{key}' has no effect here"]


def test_description_and_context_are_kept_and_read_from_json_text() -> None:
    settings = parse_options({"description": "d", "context": '{"a": 1}'}).settings
    assert (settings.description, settings.context) == ("d", {"a": "1"})
    with pytest.raises(InvalidField):
        parse_options({"context": "[1]"})


def test_a_number_an_earlier_version_kept_as_the_text_of_its_type_is_read_back() -> None:
    """Stores written before numbers of AMQP types were kept as numbers hold "uint(5)"."""
    settings = parse_options({"qpid.max_count": "uint(5)", "qpid.max_size": "ulong(100)"})
    assert (settings.settings.max_count, settings.settings.max_size) == (5, 100)
    with pytest.raises(InvalidField):
        parse_options({"qpid.max_count": "uint(five)"})


def test_symbol_keys_are_read_as_their_text() -> None:
    class Symbol(str):
        pass

    assert parse_settings({Symbol("qpid.max_count"): 3}).max_count == 3


# ---- conflicts and combinations ----------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"qpid.max_count": 10, "maximumQueueDepthMessages": 20},
        {"qpid.last_value_queue_key": "a", "lvqKey": "b"},
        {"qpid.priorities": 10, "x-qpid-priorities": 5},
        {"qpid.policy_type": "ring", "overflowPolicy": "reject"},
        {"auto-delete": True, "lifetime-policy": "delete-on-close"},
        {"qpid.last_value_queue": 1, "qpid.last_value_queue_key": "ticker"},
    ],
)
def test_aliases_given_different_values_conflict(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_settings(options)
    first, second = options
    assert f"'{first}'" in caught.value.description
    assert f"'{second}'" in caught.value.description


def test_aliases_given_the_same_value_in_different_types_agree() -> None:
    settings = parse_settings({"qpid.max_count": 10, "maximumQueueDepthMessages": "10"})
    assert settings.max_count == 10


@pytest.mark.parametrize(
    "options",
    [
        {"qpid.queue_sort_key": "s", "qpid.last_value_queue_key": "k"},
        {"sortKey": "s", "lvqKey": "k"},
        {"qpid.priorities": 10, "qpid.last_value_queue_key": "k"},
        {"qpid.priorities": 10, "qpid.queue_sort_key": "s"},
        {"qpid.last_value_queue_key": "k", "qpid.group_header_key": "g"},
        {
            "qpid.last_value_queue_key": "k",
            "qpid.group_header_key": "g",
            "qpid.shared_msg_group": 1,
        },
        {"qpid.priorities": 10, "qpid.group_header_key": "g"},
        {"qpid.queue_sort_key": "s", "messageGroupType": "SHARED_GROUPS"},
        {"minimumMessageTtl": 5000, "maximumMessageTtl": 1000},
    ],
)
def test_impossible_combinations_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidField):
        parse_settings(options)


def test_the_queue_kind_follows_the_one_type_option_given() -> None:
    assert parse_settings({}).kind == "standard"
    assert parse_settings({"qpid.priorities": 3}).kind == "priority"
    assert parse_settings({"sortKey": "s"}).kind == "sorted"
    assert parse_settings({"lvqKey": "k"}).kind == "lvq"


# ---- limits and policies -----------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, "-1", -100])
def test_a_negative_limit_disables_it(value: Any) -> None:
    settings = parse_settings({"qpid.max_count": value, "maximumQueueDepthBytes": value})
    assert settings.max_count is None and settings.max_size is None


def test_a_zero_limit_under_a_broker_j_name_is_a_limit_of_zero() -> None:
    settings = parse_settings({"maximumQueueDepthMessages": 0, "maximumQueueDepthBytes": "0"})
    assert settings.max_count == 0 and settings.max_size == 0


def test_a_zero_limit_under_a_qpid_cpp_name_means_no_limit() -> None:
    settings = parse_settings({"qpid.max_count": 0, "qpid.max_size": "0"})
    assert settings.max_count is None and settings.max_size is None


@pytest.mark.parametrize(
    "key",
    ["qpid.flow_stop_count", "qpid.flow_stop_size", "qpid.flow_resume_count", "x-qpid-capacity"],
)
def test_a_zero_flow_threshold_turns_it_off(key: str) -> None:
    settings = parse_settings({key: 0})
    assert settings.flow_stop_count is settings.flow_stop_size is None
    assert settings.flow_resume_count is settings.flow_resume_size is None


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 11}, "qpid.flow_resume_count"),
        (
            {"qpid.flow_stop_size": 100, "x-qpid-flow-resume-capacity": 200},
            "x-qpid-flow-resume-capacity",
        ),
        (
            {
                "overflowPolicy": "producer_flow_control",
                "maximumQueueDepthMessages": 10,
                "qpid.flow_resume_count": 20,
            },
            "qpid.flow_resume_count",
        ),
        (
            {"qpid.policy_type": "reject", "qpid.max_count": 10, "qpid.flow_stop_count": 20},
            "qpid.flow_stop_count",
        ),
        (
            {
                "overflowPolicy": "producer_flow_control",
                "maximumQueueDepthBytes": 10,
                "x-qpid-capacity": 20,
            },
            "x-qpid-capacity",
        ),
    ],
)
def test_flow_thresholds_that_contradict_each_other_are_refused(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_settings(options)
    assert caught.value.field == named
    assert named in caught.value.description


def test_a_flow_stop_no_higher_than_a_reject_limit_is_accepted() -> None:
    settings = parse_settings(
        {
            "qpid.policy_type": "reject",
            "qpid.max_count": 10,
            "qpid.flow_stop_count": 8,
            "qpid.flow_resume_count": 6,
        }
    )
    assert (settings.flow_stop_count, settings.flow_resume_count) == (8, 6)


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("ring", "ring"),
        ("RING", "ring"),
        ("Reject", "reject"),
        (" none ", "none"),
        ("producer-flow-control", "producer_flow_control"),
        ("PRODUCER_FLOW_CONTROL", "producer_flow_control"),
        ("Flow-To-Disk", "flow_to_disk"),
    ],
)
def test_policy_names_are_read_whatever_the_case_and_separator(value: str, policy: str) -> None:
    assert parse_settings({"qpid.policy_type": value}).overflow_policy == policy


# ---- the deprecated LVQ modes -------------------------------------------------------------


@pytest.mark.parametrize("key", ["qpid.last_value_queue", "qpid.last_value_queue_no_browse"])
def test_the_deprecated_lvq_option_keys_by_qpid_lvq_key_with_a_notice(key: str) -> None:
    """The notice is for whoever creates the queue to log (once: options are read several
    times on their way)."""
    parsed = parse_options({key: 1})
    assert parsed.settings.lvq_key == LEGACY_LVQ_KEY == "qpid.LVQ_key"
    assert parsed.settings.kind == "lvq"
    assert parsed.echo[key] == "1"
    (notice,) = parsed.notices
    assert key in notice and "deprecated" in notice


@pytest.mark.parametrize("value", [0, False, "false"])
def test_the_deprecated_lvq_option_makes_a_last_value_queue_whatever_its_value(value: Any) -> None:
    """Both anchors look for the key only (qpidd's QueueSettings::handle, Broker-J's
    QueueArgumentsConverter)."""
    parsed = parse_options({"qpid.last_value_queue": value})
    assert parsed.settings.lvq_key == LEGACY_LVQ_KEY


def test_the_deprecated_lvq_option_agrees_with_the_legacy_key_given_explicitly() -> None:
    settings = parse_settings(
        {"qpid.last_value_queue": "true", "qpid.last_value_queue_key": "qpid.LVQ_key"}
    )
    assert settings.lvq_key == "qpid.LVQ_key"


# ---- lifetime policies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        (Described("amqp:delete-on-close:list", []), DELETE_ON_CLOSE),
        ("delete-on-close", DELETE_ON_CLOSE),
        ("manual", PERMANENT),
        ("delete_if_unused", DELETE_IF_UNUSED),
        ("DELETE-ON-CLOSE", DELETE_ON_CLOSE),
    ],
)
def test_lifetime_policy_is_read_by_name_or_as_a_described_value(value: Any, policy: str) -> None:
    parsed = parse_options({"lifetime-policy": value})
    assert parsed.settings.lifetime_policy == policy


def test_a_described_lifetime_policy_is_echoed_as_its_descriptor() -> None:
    parsed = parse_options({"lifetime-policy": Described("amqp:delete-on-close:list", [])})
    assert parsed.echo["lifetime-policy"] == "amqp:delete-on-close:list"


def test_a_lifetime_policy_with_a_numeric_descriptor_is_understood() -> None:
    # Qpid JMS (proton-j DeleteOnCloseType) encodes delete-on-close with the ulong
    # descriptor 0x2b for its temporary queues; the codec hands that over as an int.
    parsed = parse_options({"lifetime-policy": Described(0x2B, [])})
    assert parsed.settings.lifetime_policy == DELETE_ON_CLOSE


def test_the_amqp_delete_on_no_links_policy_is_delete_if_unused() -> None:
    # The AMQP 1.0 name of delete-if-unused (qpid::messaging and the C++ broker's
    # NodeProperties map one to the other).
    parsed = parse_options({"lifetime-policy": Described("amqp:delete-on-no-links:list", [])})
    assert parsed.settings.lifetime_policy == DELETE_IF_UNUSED


@pytest.mark.parametrize(("value", "policy"), [(True, DELETE_IF_UNUSED), ("0", PERMANENT)])
def test_auto_delete_maps_to_a_lifetime_policy(value: Any, policy: str) -> None:
    assert parse_settings({"auto-delete": value}).lifetime_policy == policy


# ---- understood, not settings --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "echo"),
    [
        ("move", "move"),
        ("copy", "copy"),
        (["move", "copy"], "move copy"),
        ("move,copy", "move,copy"),
    ],
)
def test_supported_dist_modes_is_understood_and_echoed(value: Any, echo: str) -> None:
    parsed = parse_options({"supported-dist-modes": value})
    assert parsed.unknown == {}
    assert parsed.echo["supported-dist-modes"] == echo
    assert parsed.settings == QueueSettings()
    assert parsed.given == {}


def test_recognised_options_are_echoed_as_strings() -> None:
    parsed = parse_options(
        {
            "qpid.max_count": 10,
            "qpid.last_value_queue_key": "ticker",
            "durable": True,
            "x-unknown": 1,
        }
    )
    assert parsed.echo == {
        "qpid.max_count": "10",
        "qpid.last_value_queue_key": "ticker",
        "durable": "True",
    }
    assert all(isinstance(v, str) for v in parsed.echo.values())


def test_option_names_lists_every_alias_and_the_deprecated_keys() -> None:
    names = option_names()
    for _, aliases, _, _ in ALIASES:
        assert set(aliases) <= set(names)
    assert "qpid.last_value_queue" in names and "qpid.shared_msg_group" in names
    assert names == sorted(names)


# ---- differences ---------------------------------------------------------------------------


def test_differences_name_each_given_setting_that_differs() -> None:
    existing = parse_settings({"qpid.max_count": 10, "lvqKey": "ticker"})
    request = parse_options({"maximumQueueDepthMessages": 20, "qpid.last_value_queue_key": "t"})
    found = differences(existing, request)
    assert len(found) == 2
    assert any("'maximumQueueDepthMessages'" in d and "10" in d and "20" in d for d in found)
    assert any("'qpid.last_value_queue_key'" in d and "'ticker'" in d for d in found)


def test_differences_are_empty_for_the_same_settings_by_other_names() -> None:
    existing = parse_settings({"qpid.max_count": 10, "lvqKey": "ticker"})
    request = parse_options(
        {"maximumQueueDepthMessages": "10", "qpid.last_value_queue_key": "ticker"}
    )
    assert differences(existing, request) == []


def test_differences_ignore_settings_the_request_does_not_give() -> None:
    existing = parse_settings({"qpid.max_count": 10, "durable": True})
    assert differences(existing, parse_options({})) == []
    assert differences(existing, parse_options({"durable": "false"})) == [
        "'durable' is True on the queue, not False"
    ]


# ---- dead-lettering ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"alternate-exchange": "dlx"},
        {"alternateExchange": "dlx"},
        {"qpid.alternate_exchange": "dlx"},
        {"alternateBinding": {"destination": "dlx"}},
        {"alternateBinding": '{"destination": "dlx"}'},
        {"alternateBinding": "dlx"},
    ],
)
def test_the_alternate_is_read_under_both_brokers_names(options: dict[str, Any]) -> None:
    assert parse_settings(options).alternate == "dlx"


def test_an_alternate_without_a_destination_is_refused_naming_the_option() -> None:
    with pytest.raises(InvalidField, match="alternateBinding"):
        parse_settings({"alternateBinding": {"arguments": {}}})


def test_broker_js_dlq_arguments_are_read() -> None:
    settings = parse_settings({"x-qpid-dlq-enabled": "true", "x-qpid-maximum-delivery-count": 5})
    assert (settings.dead_letter_queue, settings.max_delivery_attempts) == (True, 5)


def test_a_dead_letter_queue_and_a_named_alternate_conflict() -> None:
    with pytest.raises(InvalidField, match="a queue has one alternate"):
        parse_settings({"x-qpid-dlq-enabled": True, "alternate-exchange": "dlx"})


def test_the_expiry_policy_is_delete_or_route_to_alternate() -> None:
    assert parse_settings({}).expiry_policy == "delete"
    assert parse_settings({"expiryPolicy": "ROUTE_TO_ALTERNATE"}).expiry_policy == (
        "route_to_alternate"
    )
    with pytest.raises(InvalidField, match="expiryPolicy"):
        parse_settings({"expiryPolicy": "KEEP"})


def test_a_negative_maximum_delivery_count_is_refused() -> None:
    with pytest.raises(InvalidField, match="maximumDeliveryAttempts"):
        parse_settings({"maximumDeliveryAttempts": -1})
