"""The Qpid ACL file, read and asked without a broker: the grammar and its errors, first
match and default deny, groups and realms, wildcards and ``${user}``, topic routing keys,
queue limits, browse falling back to consume, connection hosts, and quotas."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proton_broker.queues.settings import parse_settings
from proton_broker.security.access import queue_properties
from proton_broker.security.acl import Acl, AclError
from tests.exchanges.reference import PATTERN_WORDS, WORDS, topic_reference


def acl(text: str) -> Acl:
    return Acl.parse(text, "test.acl")


def allowed(rules: Acl, user: str, action: str, obj: str, name: str | None = None, **props: str):
    return rules.authorise(user, action, obj, name, props or None).allowed


# ---- reading the file ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("acl allow alice consume queue\nfrobnicate all\n", 2, "starts with 'group', 'acl'"),
        ("acl permit alice consume queue", 1, "unknown permission 'permit'"),
        ("acl allow alice eat queue", 1, "unknown action 'eat'"),
        ("acl allow alice consume table", 1, "unknown object 'table'"),
        ("acl allow alice consume queue name", 1, "name=value"),
        ("acl allow alice consume queue colour=red", 1, "unknown property 'colour'"),
        ("acl allow alice create queue queuemaxcountupperlimit=ten", 1, "whole number"),
        ("acl allow alice create queue policytype=spill", 1, "policytype must be one of"),
        ("acl allow all all queue", 1, "nothing may follow 'acl ... all all'"),
        ("acl allow alice", 1, "needs a permission, a user or group, and an action"),
        ("\n\ngroup admins", 3, "needs a name and at least one member"),
        ("group admins alice\ngroup admins bob", 2, "defined twice"),
        ("group all alice", 1, "cannot be a group name"),
        ("group admins ali$ce", 1, "not a user or group name"),
        ("quota connections ten alice", 1, "whole number from 0 to 65530"),
        ("quota connections 65531 alice", 1, "whole number from 0 to 65530"),
        ("quota sessions 3 alice", 1, "connections or queues"),
        ("acl allow alice create connection", 1, "needs host="),
        ("acl allow alice create connection host=10.0.0.9,10.0.0.1", 1, "not an address"),
        ("acl allow alice create connection host=nowhere", 1, "not an address"),
        (
            "acl allow all create connection host=all\nacl deny all create connection host=all",
            2,
            "only one 'create connection host=all'",
        ),
        ("acl allow alice \\\n consume queue \\\n", 2, "ends inside a continued line"),
    ],
)
def test_a_bad_line_is_an_error_naming_the_file_and_the_line(text, line, says):
    with pytest.raises(AclError) as raised:
        acl(text)
    message = str(raised.value)
    assert message.startswith(f"ACL file test.acl, line {line}: "), message
    assert says in message


def test_a_file_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "missing.acl"
    with pytest.raises(AclError, match=re.escape(f"cannot read the ACL file {missing}")):
        Acl.load(missing)


def test_a_file_is_read_from_disk_with_comments_blank_lines_and_continuations(tmp_path):
    path = tmp_path / "broker.acl"
    path.write_text(
        "# who may do what\n\n"
        "group readers \\\n    alice \\\n    bob\n"
        "acl allow readers consume queue name=orders\n"
    )
    rules = Acl.load(path)
    assert rules.source == str(path)
    assert rules.groups == {"readers": frozenset({"alice", "bob"})}
    assert [r.line for r in rules.rules] == [6]
    assert allowed(rules, "bob", "consume", "queue", "orders")


def test_keywords_may_be_written_in_any_case_but_names_are_case_sensitive():
    rules = acl("ACL Allow alice CONSUME Queue NAME=Orders\nGroup Admins carol")
    assert allowed(rules, "alice", "consume", "queue", "Orders")
    assert not allowed(rules, "alice", "consume", "queue", "orders")
    assert rules.groups_of("carol") == ["Admins"]


# ---- deciding ------------------------------------------------------------------------------


def test_the_first_matching_rule_decides():
    rules = acl(
        "acl deny alice consume queue name=secret\n"
        "acl allow alice consume queue\n"
        "acl deny alice consume queue name=public\n"
    )
    assert not allowed(rules, "alice", "consume", "queue", "secret")
    decision = rules.authorise("alice", "consume", "queue", "public")
    assert decision.allowed
    assert decision.rule is not None and decision.rule.line == 2


def test_what_no_rule_allows_is_denied():
    rules = acl("acl allow alice consume queue name=orders")
    decision = rules.authorise("alice", "purge", "queue", "orders")
    assert not decision.allowed
    assert decision.rule is None
    assert decision.reason() == "no ACL rule allows it"
    assert not allowed(rules, "bob", "consume", "queue", "orders")


def test_acl_allow_all_all_at_the_end_turns_the_default_round():
    rules = acl("acl deny bob all queue name=payroll\nacl allow all all")
    assert allowed(rules, "bob", "consume", "queue", "orders")
    assert allowed(rules, "zed", "delete", "exchange", "amq.topic")
    assert not allowed(rules, "bob", "purge", "queue", "payroll")


def test_a_rule_for_everyone_applies_to_users_the_file_never_names():
    rules = acl(
        "acl allow alice consume queue name=orders\n"
        "acl deny all consume queue name=orders\n"
        "acl allow all consume queue\n"
    )
    assert allowed(rules, "alice", "consume", "queue", "orders")
    assert not allowed(rules, "stranger", "consume", "queue", "orders")
    assert allowed(rules, "stranger", "consume", "queue", "other")


def test_the_log_permissions_ask_for_a_log_line_and_the_reason_quotes_the_rule():
    rules = acl("acl allow-log alice consume queue\nacl deny-log bob consume queue")
    yes = rules.authorise("alice", "consume", "queue", "q")
    no = rules.authorise("bob", "consume", "queue", "q")
    assert (yes.allowed, yes.log) == (True, True)
    assert (no.allowed, no.log) == (False, True)
    assert no.reason() == "ACL rule at line 2: acl deny-log bob consume queue"


def test_an_action_or_object_the_broker_does_not_know_is_a_programming_error():
    rules = acl("acl allow all all")
    with pytest.raises(ValueError, match="no such ACL action or object"):
        rules.authorise("alice", "eat", "queue", "q")


def test_all_as_the_object_covers_every_object():
    rules = acl("acl allow alice access all")
    for obj in ("broker", "queue", "exchange", "method", "query"):
        assert allowed(rules, "alice", "access", obj, "x")
    assert not allowed(rules, "alice", "consume", "queue", "x")


# ---- users, groups and realms --------------------------------------------------------------


def test_a_group_rule_applies_to_each_member_including_members_of_nested_groups():
    rules = acl(
        "group readers alice bob\n"
        "group staff readers carol\n"
        "acl allow staff consume queue name=orders\n"
        "acl allow readers browse queue name=audit\n"
    )
    for user in ("alice", "bob", "carol"):
        assert allowed(rules, user, "consume", "queue", "orders")
    assert allowed(rules, "bob", "browse", "queue", "audit")
    assert not allowed(rules, "carol", "browse", "queue", "audit")
    assert not allowed(rules, "dave", "consume", "queue", "orders")
    assert rules.groups_of("alice") == ["readers", "staff"]
    assert rules.groups_of("dave") == []


def test_a_group_naming_itself_is_ignored_as_qpidd_does():
    rules = acl("group admins admins alice")
    assert rules.groups["admins"] == frozenset({"alice"})


def test_a_qpidd_realm_or_the_hosts_names_the_same_password_user():
    rules = acl(
        "group admins carol@QPID\nacl allow alice@QPID consume queue\n"
        f"acl allow admins purge queue\nacl allow dave@{socket.gethostname()} consume queue"
    )
    assert allowed(rules, "alice", "consume", "queue", "q")
    assert allowed(rules, "carol", "purge", "queue", "q")
    assert allowed(rules, "dave", "consume", "queue", "q")
    assert rules.groups_of("carol") == ["admins"]


def test_the_user_asking_is_matched_by_its_exact_name_realm_and_all():
    # a certificate's CN keeps its @: alice@evil.example (or alice@QPID) is not alice
    rules = acl(
        "group admins alice\nacl allow admins all\nacl allow bob@partner.example consume queue\n"
        "quota connections 3 alice\nacl deny all all"
    )
    for name in ("alice@evil.example", "alice@QPID"):
        assert not allowed(rules, name, "consume", "queue", "q")
        assert rules.groups_of(name) == []
        assert rules.connection_quota(name) is None
    assert allowed(rules, "bob@partner.example", "consume", "queue", "q")
    assert not allowed(rules, "bob", "consume", "queue", "q")


# ---- properties ----------------------------------------------------------------------------


def test_a_value_ending_in_a_star_matches_by_prefix():
    rules = acl("acl allow alice consume queue name=orders.*")
    assert allowed(rules, "alice", "consume", "queue", "orders.eu")
    assert allowed(rules, "alice", "consume", "queue", "orders.")
    assert not allowed(rules, "alice", "consume", "queue", "order")
    assert not allowed(rules, "alice", "consume", "queue", "my.orders.eu")


def test_user_substitutions_stand_for_the_user_asking():
    rules = acl(
        "acl allow all create queue name=tmp_${user}_*\n"
        "acl allow all consume queue name=inbox.${userdomain}\n"
        "acl allow all browse queue name=dept.${domain}\n"
    )
    assert allowed(rules, "alice", "create", "queue", "tmp_alice_1")
    assert not allowed(rules, "alice", "create", "queue", "tmp_bob_1")
    assert allowed(rules, "j.smith@example.com", "consume", "queue", "inbox.j_smith_example_com")
    assert allowed(rules, "j.smith@example.com", "browse", "queue", "dept.example_com")
    assert not allowed(rules, "j.smith@example.com", "browse", "queue", "dept.example.com")


def test_the_default_exchange_is_named_amq_default_in_the_file():
    rules = acl("acl allow alice publish exchange name=amq.default routingkey=orders")
    assert allowed(rules, "alice", "publish", "exchange", "", routingkey="orders")
    assert not allowed(rules, "alice", "publish", "exchange", "amq.topic", routingkey="orders")


def test_a_routing_key_property_matches_as_a_topic_pattern():
    rules = acl("acl allow alice publish exchange name=amq.default routingkey=orders.*.#")
    assert allowed(rules, "alice", "publish", "exchange", "", routingkey="orders.eu")
    assert allowed(rules, "alice", "publish", "exchange", "", routingkey="orders.eu.fr.paris")
    assert not allowed(rules, "alice", "publish", "exchange", "", routingkey="orders")
    assert not allowed(rules, "alice", "publish", "exchange", "", routingkey="stock.eu")


def test_a_routing_key_cannot_smuggle_in_a_substitution():
    rules = acl("acl allow all publish exchange name=amq.default routingkey=#")
    assert allowed(rules, "alice", "publish", "exchange", "", routingkey="a.b")
    assert not allowed(rules, "alice", "publish", "exchange", "", routingkey="a.${user}")


def test_a_rule_naming_a_property_the_request_does_not_carry_does_not_match_it():
    rules = acl("acl allow alice create queue durable=true\nacl deny alice create queue")
    assert allowed(rules, "alice", "create", "queue", "q", durable="true", exclusive="false")
    assert not allowed(rules, "alice", "create", "queue", "q", exclusive="false")
    assert not allowed(rules, "alice", "create", "queue", "q", durable="false")


def test_a_rule_with_properties_a_request_never_carries_may_deny_but_never_allow():
    # qpidd drops such rules at load; allowing on the name alone would widen the rule.
    rules = acl("acl allow alice consume queue name=orders durable=true")
    assert not allowed(rules, "alice", "consume", "queue", "orders")
    rules = acl("acl deny alice consume queue durable=true\nacl allow all all")
    assert not allowed(rules, "alice", "consume", "queue", "orders")
    assert allowed(rules, "bob", "consume", "queue", "orders")
    bounded = acl("acl allow alice consume queue queuemaxcountupperlimit=10")
    assert not allowed(bounded, "alice", "consume", "queue", "orders")


def test_the_last_allow_or_deny_all_all_line_is_the_default_wherever_it_stands():
    # qpidd (AclReader::loadDecisionData): the last "acl X all all" is the default mode.
    rules = acl("acl allow all all\nacl deny anonymous consume queue name=q")
    assert not allowed(rules, "anonymous", "consume", "queue", "q")
    assert allowed(rules, "anonymous", "consume", "queue", "other")
    rules = acl("acl deny all all\nacl allow anonymous all")
    assert allowed(rules, "anonymous", "consume", "queue", "q")
    assert not allowed(rules, "bob", "consume", "queue", "q")


def test_an_earlier_all_all_line_is_a_rule_in_its_place():
    rules = acl("acl allow all all\nacl deny bob consume queue\nacl deny all all")
    assert allowed(rules, "bob", "consume", "queue", "q")  # the first line matches first
    assert rules.default is not None and rules.default.line == 3


def test_a_broken_queue_limit_turns_an_allow_into_a_deny():
    rules = acl(
        "acl allow alice create queue queuemaxcountupperlimit=1000 queuemaxsizelowerlimit=10\n"
        "acl allow alice create queue\n"
    )
    within = rules.authorise(
        "alice", "create", "queue", "q", {"maxqueuecount": "1000", "maxqueuesize": "10"}
    )
    assert within.allowed
    over = rules.authorise(
        "alice", "create", "queue", "q", {"maxqueuecount": "1001", "maxqueuesize": "10"}
    )
    assert not over.allowed and over.rule is not None and over.rule.line == 1
    under = rules.authorise(
        "alice", "create", "queue", "q", {"maxqueuecount": "5", "maxqueuesize": "9"}
    )
    assert not under.allowed
    # no count asked for: the limited rule does not apply, the next one allows
    assert allowed(rules, "alice", "create", "queue", "q", maxqueuesize="10")


def test_qpidds_older_limit_names_are_upper_bounds():
    rules = acl("acl allow alice create queue maxqueuecount=10")
    assert allowed(rules, "alice", "create", "queue", "q", maxqueuecount="10")
    assert not allowed(rules, "alice", "create", "queue", "q", maxqueuecount="11")


# ---- browse ----------------------------------------------------------------------------------


def test_browsing_falls_back_to_the_consume_rules_when_no_rule_names_browse():
    rules = acl("acl allow alice consume queue name=orders\nacl deny bob consume queue")
    assert allowed(rules, "alice", "browse", "queue", "orders")
    assert not allowed(rules, "alice", "browse", "queue", "stock")
    assert not allowed(rules, "bob", "browse", "queue", "orders")


def test_a_rule_that_names_browse_decides_before_the_consume_rules():
    rules = acl(
        "acl deny alice browse queue name=orders\n"
        "acl allow carol browse queue\n"
        "acl allow all consume queue\n"
    )
    assert not allowed(rules, "alice", "browse", "queue", "orders")
    assert allowed(rules, "alice", "consume", "queue", "orders")
    assert allowed(rules, "carol", "browse", "queue", "x")
    assert allowed(rules, "alice", "browse", "queue", "stock")  # falls back to consume


def test_an_all_actions_rule_counts_as_a_consume_rule_for_browsing_not_as_a_browse_rule():
    rules = acl("acl deny alice all queue name=secret\nacl allow alice browse queue")
    assert allowed(rules, "alice", "browse", "queue", "secret")  # the browse rule says browse
    rules = acl("acl deny alice all queue name=secret\nacl allow alice consume queue")
    assert not allowed(rules, "alice", "browse", "queue", "secret")


# ---- connections and quotas ------------------------------------------------------------------


def test_connections_are_allowed_unless_a_host_rule_says_otherwise():
    rules = acl("acl deny all all")
    assert rules.connection("alice", "192.0.2.7").allowed


def test_a_users_own_host_rules_come_before_the_rules_for_everyone():
    rules = acl(
        "acl allow all create connection host=all\n"
        "acl deny all create connection host=10.0.0.0,10.0.0.255\n"
        "acl allow alice create connection host=10.0.0.5\n"
        "acl deny bob create connection host=all\n"
    )
    assert rules.connection("alice", "10.0.0.5").allowed
    assert not rules.connection("alice", "10.0.0.6").allowed  # the range before host=all
    assert rules.connection("carol", "192.0.2.1").allowed
    assert not rules.connection("bob", "127.0.0.1").allowed
    assert not rules.connection("carol", "10.0.0.200").allowed
    assert rules.connection("carol", "::1").allowed  # an IPv6 peer is outside an IPv4 range


def test_quotas_name_users_groups_and_everyone_else_and_the_last_value_counts():
    rules = acl(
        "group ops carol dave\n"
        "quota connections 10 all\n"
        "quota connections 2 alice ops\n"
        "quota connections 0 dave\n"
        "quota queues 5 alice\n"
    )
    assert rules.connection_quota("alice") == 2
    assert rules.connection_quota("carol") == 2
    assert rules.connection_quota("dave") == 0
    assert rules.connection_quota("erin") == 10
    assert rules.queue_quota("alice") == 5
    assert rules.queue_quota("erin") is None


# ---- routing keys against a reference -------------------------------------------------------


@given(
    st.lists(PATTERN_WORDS, min_size=1, max_size=5),
    st.lists(WORDS, min_size=1, max_size=6),
)
def test_a_routingkey_rule_allows_exactly_the_keys_its_pattern_matches(pattern, key):
    rules = acl(f"acl allow all publish exchange routingkey={'.'.join(pattern)}")
    expected = topic_reference(pattern, key)
    assert allowed(rules, "alice", "publish", "exchange", "", routingkey=".".join(key)) == expected


def test_the_example_file_in_the_docs_reads_and_means_what_the_page_says():
    text = Path(__file__).resolve().parents[2].joinpath("docs", "acl.md").read_text()
    files = re.findall(r"<<'ACL'\n(.*?)\nACL\n", text, re.S)
    assert files, "docs/acl.md shows an ACL file"
    for example in files:
        rules = Acl.parse(example, "docs/acl.md")
        assert allowed(rules, "carol", "consume", "queue", "orders")
        assert not allowed(rules, "bob", "consume", "queue", "orders")


def test_a_queue_s_policy_type_reads_as_qpidd_spells_it() -> None:
    """qpidd's rule values are ``ring``, ``reject`` and ``self-destruct``: a self-destruct
    queue's settings (self_destruct here) match ``policytype=self-destruct``."""
    rules = acl("acl allow alice create queue policytype=self-destruct\nacl deny all all")
    for policy, expected in (("self-destruct", True), ("ring", False)):
        settings = parse_settings({"qpid.policy_type": policy, "qpid.max_count": 5})
        properties = queue_properties(settings)
        assert allowed(rules, "alice", "create", "queue", "q", **properties) is expected
