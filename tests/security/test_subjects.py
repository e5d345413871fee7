"""Certificate subjects read as RFC 4514 strings (as OpenSSL writes them for Proton): the CN
a certificate names its holder by, or no one."""

from __future__ import annotations

import pytest

from proton_broker.security.subjects import common_name


@pytest.mark.parametrize(
    "subject, user",
    [
        ("CN=alice,O=Example", "alice"),
        ("cn=alice", "alice"),
        ("2.5.4.3=alice", "alice"),  # the CN's object identifier
        ("CN=eve\\,CN=alice,O=Example", "eve,CN=alice"),  # an escaped comma is in the value
        ("CN=caf\\C3\\A9", "café"),  # hex pairs are UTF-8 bytes
        ("CN=\\ a\\+b\\ ", " a+b "),
        ("CN=bob,OU=x,CN=alice", "bob"),  # the most specific CN (Broker-J)
        ("OU=ops+CN=bob,O=Example", "bob"),  # a multi-valued RDN
    ],
)
def test_the_user_is_the_most_specific_cn_with_its_escapes_undone(subject: str, user: str):
    assert common_name(subject) == user


@pytest.mark.parametrize(
    "subject",
    [
        "OU=ops/CN=alice,O=Example",  # '/' separates nothing: no CN
        "O=Example",
        "CN=,O=Example",
        "CN=#0c05616c696365",  # BER, not a string
        "CN=alice\\00.evil",  # a NUL
        "CN=alice\\0Aforged log line",
        "CN=a;b",  # an unescaped special character
        "CN=alice\\",
        "CN=alice\\FF",  # not UTF-8
        "CN=alice,",
        "alice",
    ],
)
def test_a_subject_without_a_usable_cn_names_no_one(subject: str):
    assert common_name(subject) is None
