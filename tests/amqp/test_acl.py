"""The ACL file over AMQP: who may attach, send, receive, browse, create, delete, use the
anonymous relay and the management node, and connect; a denied operation changes nothing.
Brokers run as processes (Cyrus reads its configuration once per process) with users made
by the CLI; clients are Proton's, over real sockets."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Disposition, Message
from proton.utils import BlockingConnection, LinkDetached

from proton_broker.cli.client import ManagementClient, Reply
from proton_broker.testing import BrokerProcess, add_user
from tests.amqp.test_subscriptions import durable_subscriber
from tests.amqp.test_transactions import REJECTED, outcome_in
from tests.engine_client import TRANSACTIONAL_STATE, EngineClient

PASSWORD = "acl-pass"
UNAUTHORIZED = "amqp:unauthorized-access"
QUEUE = "org.apache.qpid.Queue"
LIMITED = {"qpid.max_count": 10}  # carol may create queues only with a max count
USERS = ("alice", "bob", "carol", "dave", "erin")

# Temporary queues (dynamic nodes: reply queues, the CLI's) for everyone, as docs/acl.md says
TEMPORARY = """\
acl allow all create queue name=TempQueue*
acl allow all access queue name=TempQueue*
acl allow all consume queue name=TempQueue*
"""

RULES = f"""\
# The ACL of these tests: alice administers, bob and carol are applications.
group admins alice@QPID
group apps bob \\
           carol
acl allow admins all
{TEMPORARY}acl allow apps access queue name=app.*
acl allow bob consume queue name=app.in
acl allow bob publish exchange name=amq.default routingkey=app.out
acl allow carol browse queue name=app.in
acl deny carol consume queue name=app.in
acl allow carol create queue name=app.carol.* durable=false queuemaxcountupperlimit=100
acl allow carol consume queue name=app.carol.*
acl allow carol update queue name=app.carol.* queuemaxcountupperlimit=100
acl allow carol publish exchange routingkey=app.carol.#
acl allow carol access method name=get-types
acl allow carol access query name=queue
acl allow bob access broker
quota connections 2 carol
quota queues 2 carol
acl deny-log dave create connection host=127.0.0.1
acl deny-log all all
"""


def url(process: BrokerProcess, user: str) -> str:
    return f"amqp://{user}:{PASSWORD}@127.0.0.1:{process.port}"


def start_secured(data_dir: Path, rules: str, *args: str, **env: str) -> BrokerProcess:
    """A broker with the users of USERS, the ACL ``rules``, no anonymous clients."""
    for user in USERS:
        add_user(data_dir, user, PASSWORD)
    acl = data_dir / "broker.acl"
    acl.write_text(rules)
    variables = {
        "PROTON_BROKER_ACL_FILE": str(acl),
        "PROTON_BROKER_SASL_ANONYMOUS": "never",
        **{f"PROTON_BROKER_{k.upper()}": v for k, v in env.items()},
    }
    return BrokerProcess("--store", "memory", *args, data_dir=str(data_dir), env=variables).start()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_secured(tmp_path_factory.mktemp("acl"), RULES)
    with ManagementClient(url(process, "alice")) as admin:
        for name in ("app.in", "app.out", "private"):
            assert admin.request("CREATE", QUEUE, name, {}).ok
    yield process
    process.stop()


def manage(process: BrokerProcess, user: str) -> ManagementClient:
    return ManagementClient(url(process, user))


def depth(process: BrokerProcess, name: str) -> int | None:
    """The queue's depth as the administrator reads it; None if there is no such queue."""
    with manage(process, "alice") as admin:
        reply = admin.request("READ", QUEUE, name)
    return int(reply.body["queueDepthMessages"]) if reply.ok else None


def fill(process: BrokerProcess, name: str, *bodies: str) -> None:
    conn = BlockingConnection(url(process, "alice"), timeout=10)
    try:
        sender = conn.create_sender(name)
        for body in bodies:
            sender.send(Message(body=body))
    finally:
        conn.close()


def refused(attach: Callable[[], Any]) -> str | None:
    """The condition an attach is refused with (None: it was not refused)."""
    try:
        attach()
    except LinkDetached as exc:
        return str(exc.condition)
    return None


def client(process: BrokerProcess, user: str) -> EngineClient:
    engine = EngineClient("127.0.0.1", process.port, user=user, password=PASSWORD)
    engine.wait(lambda: engine.conn.state & engine.conn.REMOTE_ACTIVE)
    return engine


# ---- attach: consume, publish, browse, create -------------------------------------------


def test_a_user_consumes_and_publishes_where_the_acl_allows(secured: BrokerProcess) -> None:
    fill(secured, "app.in", "for bob")
    conn = BlockingConnection(url(secured, "bob"), timeout=10)
    try:
        receiver = conn.create_receiver("app.in")
        assert receiver.receive(timeout=10).body == "for bob"
        receiver.accept()
        conn.create_sender("app.out").send(Message(body="from bob"))
    finally:
        conn.close()
    assert depth(secured, "app.out") == 1


def test_a_denied_link_is_refused_with_unauthorized_access_and_the_connection_goes_on(
    secured: BrokerProcess,
) -> None:
    conn = BlockingConnection(url(secured, "bob"), timeout=10)
    try:
        assert refused(lambda: conn.create_receiver("app.out")) == UNAUTHORIZED
        assert refused(lambda: conn.create_sender("app.in")) == UNAUTHORIZED
        before = depth(secured, "app.out")
        conn.create_sender("app.out").send(Message(body="still served"))
    finally:
        conn.close()
    assert depth(secured, "app.out") == (before or 0) + 1


def test_a_user_the_acl_does_not_name_is_denied_everything(secured: BrokerProcess) -> None:
    conn = BlockingConnection(url(secured, "erin"), timeout=10)
    try:  # erin authenticates; the final "deny all all" is all the file says of her
        assert refused(lambda: conn.create_sender("app.out")) == UNAUTHORIZED
        assert refused(lambda: conn.create_receiver("app.in")) == UNAUTHORIZED
    finally:
        conn.close()
    with manage(secured, "erin") as erin:  # even her reply queue is TempQueue*, allowed
        assert erin.node("GET-TYPES").status == 403


def test_a_denied_attach_to_a_new_name_creates_nothing(secured: BrokerProcess) -> None:
    conn = BlockingConnection(url(secured, "bob"), timeout=10)
    try:
        assert refused(lambda: conn.create_sender("app.new")) == UNAUTHORIZED
        assert refused(lambda: conn.create_receiver("elsewhere")) == UNAUTHORIZED
    finally:
        conn.close()
    assert depth(secured, "app.new") is None and depth(secured, "elsewhere") is None


def test_create_is_allowed_only_within_the_rules_name_properties_and_limits(
    secured: BrokerProcess,
) -> None:
    engine = client(secured, "carol")
    try:
        small = engine.receiver("app.carol.small", node_properties={"qpid.max_count": 50})
        big = engine.receiver("app.carol.big", node_properties={"qpid.max_count": 500})
        durable = engine.receiver("app.carol.kept", node_properties={"durable": True})
        engine.wait_closed(big)
        engine.wait_closed(durable)
        assert big.remote_condition.name == UNAUTHORIZED
        assert durable.remote_condition.name == UNAUTHORIZED
        assert small.state & small.REMOTE_ACTIVE and not small.remote_condition
    finally:
        engine.close()
    assert depth(secured, "app.carol.small") == 0
    assert depth(secured, "app.carol.big") is None and depth(secured, "app.carol.kept") is None
    with manage(secured, "alice") as admin:
        assert admin.request("DELETE", QUEUE, "app.carol.small").ok


def test_a_browse_rule_lets_a_browser_in_and_a_consumer_rule_lets_browsers_in_too(
    secured: BrokerProcess,
) -> None:
    drain(secured, "app.in")
    fill(secured, "app.in", "look")
    for user in ("carol", "bob"):  # carol: a browse rule; bob: only consume
        engine = client(secured, user)
        try:
            browser = engine.receiver("app.in", credit=10, browse=True)
            assert engine.wait_received(browser, 1)[0].message.body == "look"
        finally:
            engine.close()
    conn = BlockingConnection(url(secured, "carol"), timeout=10)
    try:  # carol's consume is denied even though she may browse
        assert refused(lambda: conn.create_receiver("app.in")) == UNAUTHORIZED
    finally:
        conn.close()
    assert depth(secured, "app.in") == 1
    drain(secured, "app.in")


def drain(process: BrokerProcess, name: str) -> None:
    """Take every message off ``name`` as the administrator."""
    conn = BlockingConnection(url(process, "alice"), timeout=10)
    try:
        receiver = conn.create_receiver(name)
        for _ in range(depth(process, name) or 0):
            receiver.receive(timeout=10)
            receiver.accept()
    finally:
        conn.close()


# ---- the anonymous relay, transactions ----------------------------------------------------


def test_the_relay_rejects_each_denied_message_and_takes_the_allowed_ones(
    secured: BrokerProcess,
) -> None:
    before_in, before_out = depth(secured, "app.in"), depth(secured, "app.out")
    engine = client(secured, "bob")
    try:
        relay = engine.sender(None)
        engine.wait(lambda: relay.credit > 0)
        denied = engine.wait_settled(
            engine.send(relay, Message(address="app.in", body="no"), pump=False)
        )
        allowed = engine.wait_settled(
            engine.send(relay, Message(address="app.out", body="ok"), pump=False)
        )
        assert denied.remote_state == Disposition.REJECTED
        assert denied.remote.condition.name == UNAUTHORIZED
        assert "bob" in denied.remote.condition.description
        assert allowed.remote_state == Disposition.ACCEPTED
        assert relay.state & relay.REMOTE_ACTIVE  # the link goes on
    finally:
        engine.close()
    assert depth(secured, "app.in") == before_in
    assert depth(secured, "app.out") == (before_out or 0) + 1


def test_a_transaction_cannot_carry_a_denied_send(secured: BrokerProcess) -> None:
    before = depth(secured, "app.in")
    engine = client(secured, "bob")
    try:
        coordinator = engine.coordinator()
        txn = engine.declare(coordinator)
        relay = engine.sender(None)
        engine.wait(lambda: relay.credit > 0)
        sent = engine.wait_settled(
            engine.send(relay, Message(address="app.in"), txn=txn, pump=False)
        )
        ok = engine.send(relay, Message(address="app.out", body="in txn"), txn=txn)
        engine.wait(lambda: ok.remote_state)
        assert outcome_in(sent, txn) == (REJECTED, UNAUTHORIZED)
        assert ok.remote_state == TRANSACTIONAL_STATE
        assert engine.discharge(coordinator, txn).remote_state == Disposition.ACCEPTED
    finally:
        engine.close()
    assert depth(secured, "app.in") == before


def test_another_user_may_not_look_up_nor_steal_a_durable_subscription(
    secured: BrokerProcess,
) -> None:
    """A subscription is named by container id and link name, which any client can send:
    looking it up (to unsubscribe) or taking it over is a consume, checked as one."""
    owner = EngineClient(
        "127.0.0.1", secured.port, container="jms-app", user="alice", password=PASSWORD
    )
    stranger = EngineClient(
        "127.0.0.1", secured.port, container="jms-app", user="bob", password=PASSWORD
    )
    try:
        held = durable_subscriber(owner, "audit")
        assert held.remote_source.address == "amq.topic"
        lookup = stranger.receiver(None, name="audit", null_source=True)
        stranger.wait_closed(lookup)
        assert lookup.remote_condition.name == UNAUTHORIZED
        lookup.close()  # the name is free again in this session
        stranger.pump(0.1)
        thief = durable_subscriber(stranger, "audit")
        stranger.wait_closed(thief)
        assert thief.remote_condition.name == UNAUTHORIZED
        owner.pump(0.2)
        assert held.remote_condition is None  # still the owner's
    finally:
        owner.close()
        stranger.close()


def test_an_unsubscribe_is_a_delete_of_the_queue_which_the_acl_must_allow(
    tmp_path: Path,
) -> None:
    rules = f"""\
{TEMPORARY}acl allow alice all
acl allow all access exchange name=amq.topic
acl allow all bind exchange name=amq.topic
acl allow all create queue name=jms_*
acl allow all consume queue name=jms_*
acl allow all access queue name=jms_*
acl deny-log all all
"""
    process = start_secured(tmp_path, rules)
    try:
        for user, kept in (("bob", True), ("alice", False)):
            engine = EngineClient(
                "127.0.0.1", process.port, container="jms", user=user, password=PASSWORD
            )
            try:
                engine.receiver(
                    "amq.topic", name="s", capabilities=["topic"], durable=True, expiry_never=True
                ).detach()
                engine.pump(0.2)
                lookup = engine.receiver(None, name="s", null_source=True)
                assert lookup.remote_source.address == "amq.topic"  # the attach is waited for
                lookup.close()
                engine.wait_closed(lookup)
                condition = lookup.remote_condition
                assert (condition.name if condition else None) == (
                    None if not kept else UNAUTHORIZED
                )
            finally:
                engine.close()
            with manage(process, "alice") as admin:
                assert admin.request("READ", QUEUE, "jms_s").ok == kept
    finally:
        process.stop()


# ---- management ------------------------------------------------------------------------


def test_management_operations_are_checked_and_a_denied_one_changes_nothing(
    secured: BrokerProcess,
) -> None:
    fill(secured, "app.out", "kept")
    before = depth(secured, "app.out")
    with manage(secured, "bob") as bob:
        deleted = bob.request("DELETE", QUEUE, "app.out", force=True)
        created = bob.request("CREATE", QUEUE, "app.bob", {})
        read = bob.request("READ", QUEUE, "private")
        query = bob.node("QUERY", {})
        cleared = bob.request("clearQueue", QUEUE, "app.out")  # purge queue: not bob's
        assert bob.request("READ", QUEUE, "app.out").ok  # access queue name=app.*
        assert bob.request("getStatistics", QUEUE, "app.out").ok  # access queue too
        reset = bob.request("resetStatistics", QUEUE, "app.out")  # update queue: not bob's
        exchange = bob.request("resetStatistics", "org.apache.qpid.Exchange", "amq.direct")
        shown = bob.request("getMessageInfo", QUEUE, "app.out")  # as a browser: not bob's
        pruned = bob.request("deleteMessages", QUEUE, "app.out")  # purge queue: not bob's
        assert bob.request("getMessageInfo", QUEUE, "app.in").ok  # browse falls to consume
    for reply in (deleted, created, read, query, cleared, reset, exchange, shown, pruned):
        assert reply.status == 403, reply
        assert "bob" in reply.description
    assert depth(secured, "app.out") == before and depth(secured, "app.bob") is None
    with manage(secured, "carol") as carol:
        assert carol.node("GET-TYPES").ok
        assert carol.node("GET-ATTRIBUTES").status == 403
        assert carol.node("QUERY", {}, entityType=QUEUE).ok
        every = carol.node("QUERY", {})  # every kind of entity: bindings are asked first
        assert every.status == 403 and "query bindings" in every.description
    with manage(secured, "alice") as alice:
        assert alice.node("QUERY", {}).ok
        assert alice.request("READ", QUEUE, "app.out").ok


def test_a_management_reply_goes_only_where_the_requester_may_send(
    secured: BrokerProcess,
) -> None:
    """A reply carries the request's properties: to a queue bob may not publish to it
    would put a message of his making there; to a new name it would make a queue."""
    before = depth(secured, "private")
    engine = client(secured, "bob")
    try:
        requests = engine.sender("$management")
        engine.wait(lambda: requests.credit > 0)
        asks = {"operation": "GET-TYPES", "type": "org.amqp.management", "name": "self"}
        answers = {}
        for reply_to in ("private", "brand.new.queue"):
            request = Message(reply_to=reply_to, properties={**asks, "evil": "injected"})
            delivery = engine.wait_settled(engine.send(requests, request, pump=False))
            answers[reply_to] = delivery.remote.condition.name
    finally:
        engine.close()
    assert answers == {"private": UNAUTHORIZED, "brand.new.queue": "amqp:not-found"}
    assert depth(secured, "private") == before
    assert depth(secured, "brand.new.queue") is None


def test_an_update_is_checked_against_the_limits_it_asks_for(secured: BrokerProcess) -> None:
    """The ACL's limit properties bound an UPDATE as they bound a create: a user may not
    raise a queue past what it may create."""
    with manage(secured, "carol") as carol:
        limited = {"durable": False, "maximumQueueDepthMessages": 50}
        assert carol.request("CREATE", QUEUE, "app.carol.limited", limited).ok
        assert carol.request(
            "UPDATE", QUEUE, "app.carol.limited", {"maximumQueueDepthMessages": 80}
        ).ok
        raised = carol.request(
            "UPDATE", QUEUE, "app.carol.limited", {"maximumQueueDepthMessages": 500}
        )
        assert raised.status == 403 and "carol" in raised.description
        kept = carol.request("READ", QUEUE, "app.carol.limited").body
    assert kept["maximumQueueDepthMessages"] == 80
    with manage(secured, "alice") as alice:  # out of carol's queue quota again
        assert alice.request("DELETE", QUEUE, "app.carol.limited").ok


def config(process: BrokerProcess, user: str, *words: str) -> subprocess.CompletedProcess[str]:
    """``proton-broker-config -b URL WORDS`` as ``user``."""
    command = [sys.executable, "-m", "proton_broker.cli", "-b", url(process, user), *words]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def test_the_cli_is_refused_what_its_user_may_not_do(secured: BrokerProcess) -> None:
    denied = config(secured, "bob", "del", "queue", "app.out", "--force")
    assert denied.returncode == 1 and "Failed: 403" in denied.stderr
    assert depth(secured, "app.out") is not None
    listed = config(secured, "alice", "queues", "--interval", "0")
    assert listed.returncode == 0 and "app.out" in listed.stdout


# ---- connections and quotas ----------------------------------------------------------


def test_a_create_connection_rule_refuses_a_user_from_a_host(secured: BrokerProcess) -> None:
    with pytest.raises(ConnectionException) as caught:
        BlockingConnection(url(secured, "dave"), timeout=10)
    assert UNAUTHORIZED in str(caught.value)
    assert secured.logged("ACL-1002", "dave")


def test_a_connection_quota_limits_the_users_open_connections(secured: BrokerProcess) -> None:
    first = BlockingConnection(url(secured, "carol"), timeout=10)
    second = BlockingConnection(url(secured, "carol"), timeout=10)
    try:
        with pytest.raises(ConnectionException) as caught:
            BlockingConnection(url(secured, "carol"), timeout=10)
        assert "amqp:resource-limit-exceeded" in str(caught.value)
        assert "ACL quota" in str(caught.value)
        BlockingConnection(url(secured, "bob"), timeout=10).close()  # others are not counted
    finally:
        first.close()
        second.close()
    BlockingConnection(url(secured, "carol"), timeout=10).close()  # room again


def test_a_queue_quota_counts_the_queues_the_user_created_that_exist(
    secured: BrokerProcess,
) -> None:
    engine = client(secured, "carol")
    try:
        made = [engine.receiver(f"app.carol.q{i}", node_properties=LIMITED) for i in range(3)]
        engine.wait_closed(made[2])
        assert made[2].remote_condition.name == "amqp:resource-limit-exceeded"
        assert all(link.state & link.REMOTE_ACTIVE for link in made[:2])
    finally:
        engine.close()
    with manage(secured, "alice") as alice:
        assert alice.request("DELETE", QUEUE, "app.carol.q0").ok
    engine = client(secured, "carol")
    try:
        again = engine.receiver("app.carol.q2", node_properties=LIMITED)
        engine.wait(lambda: again.state & again.REMOTE_ACTIVE)
        assert not again.remote_condition
    finally:
        engine.close()
    with manage(secured, "alice") as alice:
        for name in ("app.carol.q1", "app.carol.q2"):
            assert alice.request("DELETE", QUEUE, name).ok


# ---- reloading, start-up -----------------------------------------------------------------


@pytest.fixture
def reloadable(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_secured(tmp_path, TEMPORARY + "acl allow alice all\nacl deny all all\n")
    yield process
    process.stop()


def bob_may_send(process: BrokerProcess) -> bool:
    conn = BlockingConnection(url(process, "bob"), timeout=10)
    try:
        return refused(lambda: conn.create_sender("reload.q")) is None
    finally:
        conn.close()


def test_the_management_reload_reads_the_file_again_and_keeps_the_rules_if_it_is_wrong(
    reloadable: BrokerProcess,
) -> None:
    acl = Path(reloadable.data_dir) / "broker.acl"
    assert not bob_may_send(reloadable)
    acl.write_text(
        TEMPORARY + "acl allow alice all\nacl allow bob all queue\nacl allow bob publish\n"
    )
    with manage(reloadable, "bob") as bob:
        assert bob.node("RELOAD-ACL").status == 403  # bob may not reload
    with manage(reloadable, "alice") as alice:
        reply: Reply = alice.node("RELOAD-ACL")
        assert reply.ok and reply.body == {"rules": 6}
        assert bob_may_send(reloadable)
        acl.write_text(TEMPORARY + "acl allow alice all\nacl alow bob all\n")
        wrong = alice.node("RELOAD-ACL")
    assert wrong.status == 400 and "line 5" in wrong.description
    assert bob_may_send(reloadable)  # the rules in force stayed


def test_the_cli_reloads_the_acl_file(reloadable: BrokerProcess) -> None:
    acl = Path(reloadable.data_dir) / "broker.acl"
    acl.write_text("acl allow all all\n")
    assert config(reloadable, "bob", "acl", "reload").returncode == 1  # not bob's to do
    done = config(reloadable, "alice", "acl", "reload")
    assert done.returncode == 0 and "1 rule" in done.stdout
    assert bob_may_send(reloadable)
    as_qpid_config_says_it = config(reloadable, "alice", "reload-acl")
    assert as_qpid_config_says_it.returncode == 0 and "1 rule" in as_qpid_config_says_it.stdout


def test_sighup_reloads_the_acl_file(reloadable: BrokerProcess) -> None:
    acl = Path(reloadable.data_dir) / "broker.acl"
    acl.write_text("acl allow all all\n")  # bob's sender needs no temporary queue
    reloadable.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while not bob_may_send(reloadable):
        assert time.monotonic() < deadline, "SIGHUP did not reload the ACL"
        time.sleep(0.1)
    assert reloadable.logged("ACL-1003")


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ("acl allow all all\nacl allow bob consme queue\n", "line 2: unknown action 'consme'"),
        ("group g a b \\\n c\nacl allow g conume\n", "line 3: unknown action"),
        (None, "cannot read the ACL file"),
    ],
)
def test_a_wrong_acl_file_stops_start_up_naming_the_file_and_line(
    tmp_path: Path, rules: str | None, says: str
) -> None:
    acl = tmp_path / "broker.acl"
    if rules is not None:
        acl.write_text(rules)
    process = BrokerProcess(
        "--store", "memory", data_dir=str(tmp_path), env={"PROTON_BROKER_ACL_FILE": str(acl)}
    )
    with pytest.raises(RuntimeError):
        process.start()
    output = "".join(process.output)
    assert process.proc is not None and process.proc.returncode == 2
    assert str(acl) in output and says in output


def test_an_allow_all_all_line_anywhere_is_the_default_as_qpidd_reads_the_file(
    tmp_path: Path,
) -> None:
    # qpidd takes the last "acl allow|deny all all" as the default, not as a first rule.
    process = start_secured(tmp_path, "acl allow all all\nacl deny bob consume queue name=kept\n")
    try:
        conn = BlockingConnection(url(process, "bob"), timeout=10)
        try:
            assert refused(lambda: conn.create_receiver("kept")) == UNAUTHORIZED
            assert refused(lambda: conn.create_receiver("other")) is None
        finally:
            conn.close()
    finally:
        process.stop()
