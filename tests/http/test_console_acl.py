"""The web console takes the broker's users and ACL: a password checked by Cyrus SASL, no
anonymous where ``sasl.anonymous`` says never, and every denial a 403 that changes
nothing. Brokers run as processes, because Cyrus reads its configuration once per
process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proton_broker.testing import BrokerProcess
from tests.amqp.test_acl import PASSWORD, TEMPORARY, start_secured
from tests.http.console_client import ConsoleClient, queue_path

RULES = (
    TEMPORARY
    + """\
acl allow alice all
acl allow bob access broker
acl allow bob access query name=queue
acl allow bob access queue
acl deny all all
"""
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_secured(tmp_path_factory.mktemp("console-acl"), RULES, "--http-port", "0")
    yield process
    process.stop()


def logged_in(process: BrokerProcess, user: str) -> ConsoleClient:
    client = ConsoleClient(process.http_base)
    status, body = client.login(user, PASSWORD)
    assert status == 200 and body["user"] == user
    return client


@pytest.fixture(scope="module")
def alice(secured: BrokerProcess) -> ConsoleClient:
    admin = logged_in(secured, "alice")
    admin.change("POST", "/console/api/queues", {"name": "guarded", "options": {}})
    admin.change("POST", queue_path("guarded", "/messages"), {"body": "kept"})
    return admin


def depth(admin: ConsoleClient) -> int:
    return int(admin.get(queue_path("guarded"))[1]["attributes"]["queueDepthMessages"])


def test_a_wrong_password_is_refused_and_no_session_starts(secured: BrokerProcess) -> None:
    client = ConsoleClient(secured.http_base)
    status, body = client.login("alice", "not-it")
    assert status == 401 and "wrong user name or password" in body["error"]
    assert client.get("/console/api/overview")[0] == 401


def test_no_anonymous_session_where_sasl_anonymous_is_never(secured: BrokerProcess) -> None:
    client = ConsoleClient(secured.http_base)
    assert client.get("/console/api/session")[1]["anonymous"] is False
    status, body = client.login()
    assert status == 403 and "without a password" in body["error"]


def test_a_reader_sees_the_queues_and_may_change_none(
    secured: BrokerProcess, alice: ConsoleClient
) -> None:
    bob = logged_in(secured, "bob")
    assert bob.get("/console/api/overview")[0] == 200
    assert [q["name"] for q in bob.get("/console/api/queues")[1]["queues"]] == ["guarded"]
    refused = [
        bob.change("POST", "/console/api/queues", {"name": "bobs", "options": {}}),
        bob.change("POST", queue_path("guarded", "/purge")),
        bob.change("DELETE", queue_path("guarded") + "?force=true"),
        bob.change("POST", queue_path("guarded", "/messages"), {"body": "more"}),
        bob.get(queue_path("guarded", "/messages")),
        bob.get("/console/api/connections"),
        bob.change("DELETE", "/console/api/connections/1"),
    ]
    assert [status for status, _ in refused] == [403] * len(refused)
    assert all("bob" in body["error"] or "denied" in body["error"].lower() for _, body in refused)
    assert depth(alice) == 1 and alice.get(queue_path("bobs"))[0] == 404


def test_an_administrator_may_do_it_all(alice: ConsoleClient) -> None:
    assert alice.get(queue_path("guarded", "/messages"))[1]["messages"][0]["body"] == "kept"
    assert alice.get("/console/api/connections")[0] == 200
    assert alice.change("POST", queue_path("guarded", "/purge"))[1] == {"purged": 1}
    assert depth(alice) == 0


def test_a_user_the_acl_gives_nothing_sees_nothing(secured: BrokerProcess) -> None:
    carol = logged_in(secured, "carol")  # a user of the broker, with no rule of her own
    for path in ("/console/api/overview", "/console/api/queues", "/console/api/logs"):
        status, body = carol.get(path)
        assert status == 403 and "carol" in body["error"], path
