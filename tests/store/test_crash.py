"""Crash tests with real processes: the broker is killed (SIGKILL, or ended at a chosen point
of a commit) and restarted on the same data directory. No message the broker accepted may be
lost; nothing that was never sent may appear; duplicates come only from the in-flight window
(a consumer's accept that had not reached the disk)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from proton import Described, Disposition, Endpoint, Message, ulong

from proton_broker.broker import CRASH_EXIT_CODE
from proton_broker.store.base import StoredMessage, Unit
from proton_broker.store.sqlite import SqliteStore
from proton_broker.testing import BrokerProcess
from tests.amqp.test_management import Node, entity, status
from tests.engine_client import EngineClient

DURABLE = {"durable": True}


def start(data_dir: Path, **env: str) -> BrokerProcess:
    return BrokerProcess(data_dir=str(data_dir), env=env).start()


def drain(broker: BrokerProcess, address: str, node_properties: dict) -> list[int]:
    """Every message left on the queue (received and accepted), in order."""
    client = EngineClient(broker.host, broker.port)
    receiver = client.receiver(address, credit=100_000, node_properties=node_properties)
    last = -1
    while len(client.received(receiver)) != last:
        last = len(client.received(receiver))
        client.pump(0.5)
    got = client.received(receiver)
    client.settle_all(got)
    client.close()
    return [r.message.body for r in got]


def load_until_killed(
    broker: BrokerProcess,
    address: str,
    node_properties: dict,
    messages: list[Message],
    consume: bool,
) -> tuple[set, set]:
    """Send ``messages`` unsettled (and consume, accepting) until the broker dies at a
    random moment; returns (bodies the broker accepted, bodies the consumer accepted)."""
    producer = EngineClient(broker.host, broker.port)
    sender = producer.sender(address, node_properties=node_properties)
    consumer = EngineClient(broker.host, broker.port)
    receiver = (
        consumer.receiver(address, credit=200, node_properties=node_properties) if consume else None
    )
    killer = threading.Timer(random.uniform(0.5, 1.5), broker.proc.kill)  # type: ignore[union-attr]
    killer.start()
    deliveries, consumed = [], set()
    try:
        for start_at in range(0, len(messages), 50):
            if producer.closed:
                break
            deliveries += [
                (m.body, producer.send(sender, m, pump=False))
                for m in messages[start_at : start_at + 50]
            ]
            producer.pump(0.02)
            if receiver is not None and not consumer.closed:
                consumer.pump(0.01)
                for received in consumer.received(receiver)[len(consumed) :]:
                    consumer.settle(received, pump=False)  # the loop pumps
                    consumed.add(received.message.body)
                receiver.flow(200 - receiver.credit) if receiver.credit < 100 else None
        deadline = time.monotonic() + 10
        while not producer.closed and time.monotonic() < deadline:
            producer.pump(0.05)
    finally:
        killer.join()
    broker.proc.wait()  # type: ignore[union-attr]
    accepted = {body for body, d in deliveries if d.remote_state == Disposition.ACCEPTED}
    return accepted, consumed


@pytest.mark.parametrize(
    "kind, options",
    [
        ("standard", {}),
        ("priority", {"qpid.priorities": 10}),
        ("groups", {"qpid.group_header_key": "g", "qpid.shared_msg_group": 1}),
    ],
)
def test_no_accepted_message_is_lost_when_the_broker_is_killed(
    tmp_path: Path, kind: str, options: dict
) -> None:
    properties = {**DURABLE, **options}
    messages = [
        Message(body=i, durable=True, priority=i % 10, properties={"g": f"g{i % 7}"})
        for i in range(20_000)
    ]
    broker = start(tmp_path)
    accepted, consumed = load_until_killed(broker, kind, properties, messages, consume=True)
    assert accepted, "the broker was killed before it accepted anything: no test"
    broker = start(tmp_path)
    try:
        recovered = drain(broker, kind, properties)
    finally:
        broker.stop()
    assert len(recovered) == len(set(recovered)), "a message was recovered twice"
    assert set(recovered) <= {m.body for m in messages}, "a message nobody sent appeared"
    lost = accepted - set(recovered) - consumed
    assert not lost, f"{len(lost)} accepted messages lost, e.g. {sorted(lost)[:5]}"


def test_the_last_accepted_value_of_each_key_survives_a_kill(tmp_path: Path) -> None:
    properties = {**DURABLE, "qpid.last_value_queue_key": "k"}
    messages = [
        Message(body=i, durable=True, properties={"k": f"k{i % 10}"}) for i in range(20_000)
    ]
    broker = start(tmp_path)
    accepted, _ = load_until_killed(broker, "lvq", properties, messages, consume=False)
    assert accepted
    broker = start(tmp_path)
    try:
        recovered = drain(broker, "lvq", properties)
    finally:
        broker.stop()
    for key in range(10):
        accepted_for_key = [b for b in accepted if b % 10 == key]
        if accepted_for_key:  # the recovered value is the last accepted one, or a later one
            value = [b for b in recovered if b % 10 == key]
            assert value and value[0] >= max(accepted_for_key), f"key k{key}: {value}"


def transact_until_killed(broker: BrokerProcess, address: str) -> tuple[set, set]:
    """Send durable messages in transactions of 10, committing two in three and rolling the
    third back, until the broker dies at a random moment; returns (transactions whose
    commit the broker answered accepted, transactions rolled back or not discharged)."""
    client = EngineClient(broker.host, broker.port)
    coordinator = client.coordinator()
    sender = client.sender(address, node_properties=DURABLE)
    killer = threading.Timer(random.uniform(0.5, 1.5), broker.proc.kill)  # type: ignore[union-attr]
    killer.start()
    committed, not_committed = set(), set()
    try:
        for t in range(100_000):
            txn = client.declare(coordinator)
            for i in range(10):
                client.send(sender, Message(body=f"{t}:{i}", durable=True), pump=False, txn=txn)
            fail = t % 3 == 2
            answer = client.discharge(coordinator, txn, fail=fail)
            if answer.remote_state == Disposition.ACCEPTED and not fail:
                committed.add(t)
            else:
                not_committed.add(t)
    except (TimeoutError, OSError, AssertionError):
        pass  # the broker died under us
    finally:
        killer.join()
    broker.proc.wait()  # type: ignore[union-attr]
    return committed, not_committed


def test_committed_transactions_survive_a_kill_whole_and_the_others_leave_nothing(
    tmp_path: Path,
) -> None:
    broker = start(tmp_path)
    committed, not_committed = transact_until_killed(broker, "txq")
    assert committed, "the broker was killed before a transaction committed: no test"
    broker = start(tmp_path)
    try:
        recovered = drain(broker, "txq", DURABLE)
    finally:
        broker.stop()
    by_txn: dict[int, list[int]] = {}
    for body in recovered:
        t, i = map(int, body.split(":"))
        by_txn.setdefault(t, []).append(i)
    for t in committed:
        assert by_txn.get(t) == list(range(10)), f"committed transaction {t}: {by_txn.get(t)}"
    for t in not_committed:
        assert t not in by_txn, f"transaction {t} was not committed, yet {by_txn[t]} appeared"
    in_flight = set(by_txn) - committed - not_committed  # the discharge the kill cut off
    assert len(in_flight) <= 1 and all(by_txn[t] == list(range(10)) for t in in_flight)
    assert recovered == sorted(recovered, key=lambda b: tuple(map(int, b.split(":"))))


@pytest.mark.parametrize("where, kept", [("before_commit", False), ("after_commit", True)])
def test_a_crash_around_the_commit_keeps_exactly_what_was_committed(
    tmp_path: Path, where: str, kept: bool
) -> None:
    broker = start(tmp_path, PROTON_TEST_CRASH_AT=where)
    client = EngineClient(broker.host, broker.port)
    sender = client.sender("edge", node_properties=DURABLE)
    delivery = client.send(sender, Message(body="only", durable=True))
    assert broker.proc.wait(10) == CRASH_EXIT_CODE  # type: ignore[union-attr]
    client.pump(0.2)
    assert delivery.remote_state != Disposition.ACCEPTED  # never told: it crashed first
    broker = start(tmp_path)
    try:
        assert drain(broker, "edge", DURABLE) == (["only"] if kept else [])
    finally:
        broker.stop()


def browsing_from_1(broker: BrokerProcess):  # type: ignore[no-untyped-def]
    """A client browsing the durable queue 'numbered' from number 1, attached."""
    client = EngineClient(broker.host, broker.port)
    browser = client.receiver(
        "numbered", credit=10, node_properties=DURABLE, filters={"x-opt-sequence-number": ulong(1)}
    )
    client.wait(lambda: browser.state & Endpoint.REMOTE_ACTIVE)
    return client, browser


def test_a_browser_is_not_shown_a_durable_message_whose_write_a_crash_cut_short(
    tmp_path: Path,
) -> None:
    # A producer's durable message joins its queue with number 1 and is written, with that
    # number, by the first commit, at which this broker dies. Had a browser been given it as
    # number 1, the producer's retry (it was never answered) would come back as another
    # number, and a reader that counts by numbers (the Spark source) would read it twice.
    broker = start(tmp_path, PROTON_TEST_CRASH_AT="before_commit:1")
    client, browser = browsing_from_1(broker)
    sent = client.send(
        client.sender("numbered", node_properties=DURABLE), Message(body="m", durable=True)
    )
    assert broker.proc.wait(10) == CRASH_EXIT_CODE  # type: ignore[union-attr]
    client.pump(0.2)
    assert client.received(browser) == []  # nothing was shown under a number not on disk
    assert sent.remote_state != Disposition.ACCEPTED  # so the producer sends it again
    broker = start(tmp_path)
    try:
        assert drain(broker, "numbered", DURABLE) == []
    finally:
        broker.stop()


def test_a_browser_never_sees_the_number_of_a_committed_transactional_message_a_crash_changes(
    tmp_path: Path,
) -> None:
    # A transaction's durable message is written (commit 1), then joins its queue with
    # number 1, and its number is written by a later commit (2), at which this broker dies.
    # The restarted broker numbers it afresh, so no browser may have seen number 1.
    broker = start(tmp_path, PROTON_TEST_CRASH_AT="before_commit:2")
    client, browser = browsing_from_1(broker)
    coordinator = client.coordinator()
    txn = client.declare(coordinator)
    sender = client.sender("numbered", node_properties=DURABLE)
    client.send(sender, Message(body="m", durable=True), txn=txn)
    # The discharge, not waiting for its answer: commit 2 comes moments after commit 1, so
    # the broker may die before or after that answer leaves it (a crash there is either).
    client.send(coordinator, Message(body=Described(ulong(0x32), [txn, False])))
    assert broker.proc.wait(10) == CRASH_EXIT_CODE  # type: ignore[union-attr]
    client.pump(0.2)
    assert client.received(browser) == []  # nothing was shown under a number not on disk
    broker = start(tmp_path)
    try:
        assert drain(broker, "numbered", DURABLE) == ["m"]
    finally:
        broker.stop()


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 4 MB tmpfs (needs root and permission to mount; skipped otherwise)."""
    import os
    import subprocess

    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_rejects_durable_messages_and_recovers_when_space_is_freed(
    small_disk: Path,
) -> None:
    filler = small_disk / "filler"
    broker = start(small_disk / "data")
    try:
        fill(small_disk, leave=512 * 1024)
        client = EngineClient(broker.host, broker.port)
        sender = client.sender("full", node_properties=DURABLE)
        outcomes = []
        for _ in range(40):
            delivery = client.send(sender, Message(body=b"x" * 65536, durable=True))
            client.wait_settled(delivery, timeout=10)
            outcomes.append(delivery.remote_state)
            if delivery.remote_state == Disposition.REJECTED:
                break
        assert outcomes[-1] == Disposition.REJECTED, "the disk never filled up"
        condition = delivery.remote.condition
        assert condition is not None and condition.name == "amqp:resource-limit-exceeded"
        assert "full" in condition.description
        filler.unlink()  # space freed: the same producer carries on
        again = client.wait_settled(
            client.send(sender, Message(body="after", durable=True), pump=False), timeout=10
        )
        assert again.remote_state == Disposition.ACCEPTED
        assert broker.alive()
    finally:
        broker.stop()


def fill(disk: Path, leave: int) -> Path:
    """Write a file that leaves about ``leave`` bytes free on ``disk`` (none: a full disk)."""
    import shutil

    filler = disk / "filler"
    with filler.open("ab") as out:
        while (free := shutil.disk_usage(disk).free) > leave:
            try:
                out.write(b"\0" * min(free - leave, 1 << 20))
                out.flush()
            except OSError:
                break
    return filler


def test_acknowledgements_a_full_disk_held_back_are_finished_after_a_kill(
    small_disk: Path,
) -> None:
    broker = start(small_disk / "data")
    client = EngineClient(broker.host, broker.port)
    sender = client.sender("acked", node_properties=DURABLE)
    for i in range(6):
        client.wait_settled(
            client.send(sender, Message(body=i, durable=True), pump=False), timeout=10
        )
    filler = fill(small_disk, leave=0)
    receiver = client.receiver("acked", credit=4, node_properties=DURABLE)
    got = client.wait_received(receiver, 4)
    client.settle_all(got)  # accepted: the store cannot write the removals
    held = "MST-1011 : 4 acknowledged messages could not be removed"
    deadline = time.monotonic() + 10
    while not any(held in line for line in broker.output) and time.monotonic() < deadline:
        client.pump(0.1)
    assert any(held in line for line in broker.output), "".join(broker.output)
    broker.proc.kill()  # type: ignore[union-attr]
    broker.proc.wait()  # type: ignore[union-attr]
    filler.unlink()
    broker = start(small_disk / "data")
    try:
        said = "MST-1013 : 4 acknowledged messages whose removal a full disk held back"
        assert any(said in line for line in broker.output), "".join(broker.output)
        assert drain(broker, "acked", DURABLE) == [4, 5]  # not 0..3 again
    finally:
        broker.stop()


def test_a_disk_too_full_for_the_lock_file_stops_start_up_saying_the_disk_is_full(
    small_disk: Path,
) -> None:
    import subprocess
    import sys

    data = small_disk / "data"
    data.mkdir()
    fill(small_disk, leave=0)
    result = subprocess.run(
        [sys.executable, "-m", "proton_broker", "--port", "0", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    said = f"proton-broker: cannot open the store: the disk holding {data.resolve()} is full"
    assert said in result.stderr
    assert "Traceback" not in result.stderr


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def settled_rss_mb(pid: int, seconds: float = 3.0) -> float:
    """The lowest RSS over a few seconds: pages still being written are still in memory."""
    lowest = rss_mb(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.2)
        lowest = min(lowest, rss_mb(pid))
    return lowest


def test_flow_to_disk_keeps_the_broker_memory_bounded_while_the_queue_grows(tmp_path: Path) -> None:
    """200 MB of messages onto a flow-to-disk queue limited to 16 MB: the broker's RSS grows
    by far less than the queue, and every message comes back whole."""
    options = {"qpid.policy_type": "flow_to_disk", "qpid.max_size": 16 * 1024 * 1024}
    body = b"m" * (256 * 1024)
    count = 800  # 200 MB
    # glibc's dynamic mmap threshold would keep freed 256 KB blocks in the heap (RSS that
    # is free inside the process); a fixed threshold shows what the broker really holds.
    broker = start(tmp_path, MALLOC_MMAP_THRESHOLD_=str(128 * 1024))
    try:
        client = EngineClient(broker.host, broker.port)
        sender = client.sender("paged", node_properties=options)
        before = rss_mb(broker.pid)
        deliveries = []
        for i in range(count):
            deliveries.append(client.send(sender, Message(body=body + b"%06d" % i), pump=False))
            if i % 20 == 19:
                client.wait(lambda d=deliveries[-1]: d.remote_state, timeout=30)
        client.wait(lambda: all(d.remote_state for d in deliveries), timeout=60)
        assert {d.remote_state for d in deliveries} == {Disposition.ACCEPTED}
        grown = settled_rss_mb(broker.pid) - before
        assert grown < 100, f"the broker grew by {grown:.0f} MB holding 200 MB paged out"
        receive_in_order(client, client.receiver("paged", credit=50), body, count)
    finally:
        broker.stop()


def receive_in_order(client: EngineClient, receiver: Any, body: bytes, count: int) -> None:
    """Take ``count`` messages from ``receiver``, 50 credits at a time, each ``body`` and
    its number in six digits, in order."""
    seen = 0
    while seen < count:
        got = client.wait_received(receiver, seen + 1, timeout=30)
        for received in got[seen:]:
            assert received.message.body == body + b"%06d" % seen
            client.settle(received, pump=False)  # the next wait pumps
            seen += 1
        receiver.flow(50 - receiver.credit) if receiver.credit < 25 else None


def store_directly(data_dir: Path, queue: str, bodies: Iterable[Any], batch: int) -> None:
    """Write durable messages of ``bodies`` for ``queue`` straight through the store (a
    broker stopped), ``batch`` a write: a deep backlog in seconds, where sending it over
    AMQP would take most of a test's time for nothing it checks."""
    store = SqliteStore(data_dir, lambda fn: fn())
    store.open()
    pending: list[StoredMessage] = []
    for body in bodies:
        data = Message(body=body, durable=True).encode()
        pending.append(StoredMessage(store.next_id(), queue, data, time.time()))
        if len(pending) == batch:
            store.commit(Unit(enqueues=pending))
            pending = []
    if pending:
        store.commit(Unit(enqueues=pending))
    store.close()


def peak_mb(pid: int) -> float:
    """The process's peak RSS so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_recovering_a_flow_to_disk_queue_keeps_the_broker_memory_bounded(tmp_path: Path) -> None:
    """200 MB stored on a flow-to-disk queue limited to 8 MB: the restarted broker's peak
    memory grows by far less than the backlog while it recovers (each message is paged out
    as it comes back), and every message comes back whole, in order."""
    options = {"durable": True, "qpid.policy_type": "flow_to_disk", "qpid.max_size": 8 << 20}
    body = b"r" * (200 * 1024)
    count = 1024  # 200 MB, read back in more than one chunk of rows
    broker = start(tmp_path)  # declares the queue, as a client would
    client = EngineClient(broker.host, broker.port)
    client.answered(client.sender("paged", node_properties=options))
    client.close()
    idle = peak_mb(broker.pid)
    broker.stop()
    store_directly(tmp_path, "paged", (body + b"%06d" % i for i in range(count)), batch=64)
    broker = start(tmp_path)  # listening: recovery is over
    try:
        grown = peak_mb(broker.pid) - idle
        assert grown < 50, f"the broker peaked {grown:.0f} MB higher recovering 200 MB paged out"
        assert "MST-1005 : Recovered 1024 messages for queue 'paged'" in "\n".join(broker.output)
        client = EngineClient(broker.host, broker.port)
        receiver = client.receiver("paged", credit=50, node_properties=options)
        receive_in_order(client, receiver, body, count)
    finally:
        broker.stop()


def test_a_durable_queue_deleted_with_force_into_its_alternate_loses_nothing_to_a_kill(
    tmp_path: Path,
) -> None:
    """A durable queue deleted with force sends its messages to its alternate: killed right
    after the answer, the restarted broker has each of them on the deleted queue (its
    deletion not yet written) or on the alternate, never neither and never both."""
    count, graveyard = 30_000, {"durable": True}
    doomed = {"durable": True, "alternate-exchange": "graveyard"}
    broker = start(tmp_path)
    client = EngineClient(broker.host, broker.port)
    client.answered(client.sender("graveyard", node_properties=graveyard))
    client.answered(client.sender("doomed", node_properties=doomed))
    client.close()
    broker.stop()
    store_directly(tmp_path, "doomed", range(count), batch=1000)
    broker = start(tmp_path)
    reply = Node(EngineClient(broker.host, broker.port)).ask(entity("DELETE", "doomed", force=True))
    broker.proc.kill()  # type: ignore[union-attr]
    broker.proc.wait()  # type: ignore[union-attr]
    assert status(reply)[0] in (200, 204)
    broker = start(tmp_path)
    try:
        listed = Node(EngineClient(broker.host, broker.port)).ask(entity("QUERY"))
        stored = "doomed" in json.dumps(listed.body)
        left = drain(broker, "doomed", doomed) if stored else []
        moved = drain(broker, "graveyard", graveyard)
        assert sorted(left + moved) == list(range(count))
    finally:
        broker.stop()


@pytest.mark.soak
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("round_", range(25))
def test_soak_repeated_kills_never_lose_an_accepted_message(tmp_path: Path, round_: int) -> None:
    """The SIGKILL test, many times over on one data directory that keeps its history
    (run with ``pytest -m soak``)."""
    data = tmp_path.parent / "soak-data"
    properties = {**DURABLE, "qpid.priorities": 10}
    messages = [
        Message(body=round_ * 100_000 + i, durable=True, priority=i % 10) for i in range(20_000)
    ]
    broker = start(data)
    accepted, consumed = load_until_killed(broker, "soak", properties, messages, consume=True)
    broker = start(data)
    try:
        recovered = drain(broker, "soak", properties)
    finally:
        broker.stop()
    assert len(recovered) == len(set(recovered))
    assert not accepted - set(recovered) - consumed
