"""Durable queues across restarts, at random: a Hypothesis state machine drives a real
broker over AMQP (sends, transactions, consumers that accept, release, reject or fail,
restarts on the same data directory) and checks what the broker promises about durability
(docs/durability.md, docs/dead-letters.md, docs/sequence-history.md):

* a queue holds the messages the model says, in the order it says: consumers get FIFO,
  priority or last-value order, and so do browsers; after a restart exactly the
  durable ones it held before, with the same queue sequence numbers, and nothing a
  consumer accepted comes back;
* a message rejected, failed as often as its queue allows, pushed out of a full ring, or
  left on its queue when the queue was deleted (a consumer may hold it), is on the queue's
  dead-letter queue (and there after a restart if it was durable);
* a keyed queue's history holds the newest ``max_key_updates`` versions of each key; after
  a restart the newest of its stored versions, each with the number it had;
* no queue sequence number and no key sequence number is ever given to two messages, also
  across restarts, and a key's numbers grow by one, except where a transaction that was
  rolled back took one or a restart came between (numbers given to versions that were not
  stored are skipped then, by every key).

Every message body is unique, so a body says which message is meant. Each step talks to the
broker the way a client does; the model keeps only what a client could know.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from proton import Disposition, Link, Message, symbol

from proton_broker.cli.client import ManagementClient
from tests.amqp.models import BrokerModel, run_model
from tests.amqp.test_durability import DURABLE
from tests.engine_client import Received

KEY = "k"
QUEUE_TYPE = "org.apache.qpid.Queue"  # the management type of a queue
KEY_SEQUENCE, QUEUE_NUMBER = "x-opt-sequence", "x-opt-sequence-number"
QUEUES: dict[str, dict[str, Any]] = {
    "fifo": DURABLE,
    "prio": {**DURABLE, "qpid.priorities": 10},
    "lvq": {**DURABLE, "qpid.last_value_queue_key": KEY, "max_key_updates": 3},
    "keyed": {**DURABLE, "sequenceKey": KEY, "max_key_updates": 2},
    "work": {**DURABLE, "x-qpid-dlq-enabled": True, "maximumDeliveryAttempts": 2},
    # declared after "work", whose dead-letter queue it shares
    "ring": {
        **DURABLE,
        "qpid.max_count": 3,
        "qpid.policy_type": "ring",
        "alternate-exchange": "work_DLQ",
    },
}
RING = {"ring": 3}  # messages a ring queue holds at most: the oldest goes to make room
KEPT = {"lvq": 3, "keyed": 2}  # versions a key keeps, on the queues with a history
DEAD_LETTERS = {"work": "work_DLQ", "ring": "work_DLQ"}  # made with "work"
ATTEMPTS = {"work": 2}  # delivery attempts a queue makes at most (others: no maximum)
CONSUMED = sorted({*QUEUES, *DEAD_LETTERS.values()})
ACCEPT, RELEASE, COMMIT, ROLL_BACK = "accept", "release", "accept and commit", "roll back"
REJECT, FAIL = "reject", "modified, delivery failed"


@dataclass
class Sent:
    """A message the broker accepted, as its producer knows it."""

    body: str
    key: str | None
    priority: int
    durable: bool


@dataclass
class Numbers:
    """Every number a client saw, by queue: a message keeps the ones it got, and no two
    messages share one."""

    queue: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> body -> number
    key: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> body -> key's

    def saw(self, queue: str, got: Received) -> None:
        body, notes = got.message.body, got.message.annotations or {}
        self._one(self.queue.setdefault(queue, {}), body, notes.get(QUEUE_NUMBER), "queue")
        if queue in KEPT and KEY in (got.message.properties or {}):
            self._one(self.key.setdefault(queue, {}), body, notes.get(KEY_SEQUENCE), "key")

    @staticmethod
    def _one(seen: dict[str, int], body: str, number: int | None, kind: str) -> None:
        assert number is not None, f"{body} came without its {kind} number"
        assert seen.setdefault(body, number) == number, f"{body}'s {kind} number changed"


class RecoveryModel(BrokerModel):
    def __init__(self) -> None:
        super().__init__()
        self.client = self.broker.client()
        self.senders = self.declare()
        self.made = 0
        # Each queue's messages in the order they joined it (a released one keeps its place).
        self.queued: dict[str, list[Sent]] = {name: [] for name in CONSUMED}
        self.attempts: dict[str, int] = {}  # body -> failed deliveries, on its queue now
        # Each key's kept versions, oldest first, on the queues with a history.
        self.kept: dict[str, dict[str, list[Sent]]] = {name: {} for name in KEPT}
        # Each key's versions in the order they were numbered, with whether a restart (or a
        # rolled-back transaction's number) came between a version and the one before.
        self.numbered: dict[str, dict[str, list[tuple[str | None, bool]]]] = {
            name: {} for name in KEPT
        }
        self.numbers = Numbers()
        self.arrivals: dict[str, int] = {}  # body -> the order it joined its queue in
        self.links = 0  # coordinators made (each link its own name)
        self.restarts = 0

    # ---- steps --------------------------------------------------------------------------

    @rule(
        queue=st.sampled_from(sorted(QUEUES)),
        key=st.sampled_from(["a", "b", None]),
        priority=st.sampled_from([1, 4, 9]),
        durable=st.booleans(),
    )
    def send(self, queue: str, key: str | None, priority: int, durable: bool) -> None:
        sent = self.message(key, priority, durable)
        delivery = self.client.send(self.sender(queue), self.encode(sent), pump=False)
        assert self.client.wait_settled(delivery).remote_state == Disposition.ACCEPTED
        self.joined(queue, sent)

    @rule(
        queue=st.sampled_from(sorted(QUEUES)),
        keys=st.lists(st.sampled_from(["a", "b", None]), min_size=1, max_size=3),
        durable=st.booleans(),
        commit=st.booleans(),
    )
    def send_in_a_transaction(
        self, queue: str, keys: list[str | None], durable: bool, commit: bool
    ) -> None:
        coordinator, txn = self.transaction()
        staged = [self.message(key, 4, durable) for key in keys]
        for sent in staged:
            delivery = self.client.send(self.sender(queue), self.encode(sent), txn=txn)
            self.client.wait_settled(delivery)
            if sent.key is not None and queue in KEPT:  # numbered as it is sent
                self.number_order(queue, sent.key).append((sent.body, False))
        answer = self.client.discharge(coordinator, txn, fail=not commit)
        assert answer.remote_state == Disposition.ACCEPTED
        if commit:
            for sent in staged:
                self.joined(queue, sent, numbered=True)
        self.close(coordinator)

    @rule(
        queue=st.sampled_from(CONSUMED),
        count=st.integers(1, 3),
        outcome=st.sampled_from([ACCEPT, RELEASE, COMMIT, ROLL_BACK, REJECT, FAIL]),
    )
    def consume(self, queue: str, count: int, outcome: str) -> None:
        taken = self.in_order(queue)[:count]
        receiver = self.client.receiver(queue, credit=count)
        got = self.received(receiver, len(taken))
        assert [r.message.body for r in got] == [sent.body for sent in taken]
        for each in got:
            self.numbers.saw(queue, each)
        # Its credit left goes: a message it fails or releases would otherwise come straight
        # back to it, and be released once more as it closes (a delivery count more).
        receiver.drain(0)
        self.client.wait(lambda: not receiver.draining())
        if outcome in (COMMIT, ROLL_BACK):
            coordinator, txn = self.transaction()
            self.client.settle_all(got, Disposition.ACCEPTED, txn=txn, settle=False)
            answer = self.client.discharge(coordinator, txn, fail=outcome == ROLL_BACK)
            assert answer.remote_state == Disposition.ACCEPTED
            self.close(coordinator)
        elif outcome == FAIL:
            self.client.settle_all(got, Disposition.MODIFIED, failed=True)
        else:
            settled = {ACCEPT: Disposition.ACCEPTED, RELEASE: Disposition.RELEASED}
            self.client.settle_all(got, settled.get(outcome, Disposition.REJECTED))
        self.close(receiver)  # what it holds unsettled (a rolled-back acceptance) goes back
        for sent in taken:
            self.settled(queue, sent, outcome)

    def settled(self, queue: str, sent: Sent, outcome: str) -> None:
        """What becomes of ``sent``, taken from ``queue`` and given ``outcome`` (a rolled
        back acceptance is held until its consumer goes: a failed delivery; see
        docs/dead-letters.md)."""
        if outcome == RELEASE:
            return
        if outcome in (FAIL, ROLL_BACK):
            self.attempts[sent.body] = self.attempts.get(sent.body, 0) + 1
            if self.attempts[sent.body] < ATTEMPTS.get(queue, sys.maxsize):
                return  # back at its place
        self.queued[queue].remove(sent)
        if outcome not in (ACCEPT, COMMIT):
            self.dead_lettered(queue, sent)

    def dead_lettered(self, queue: str, sent: Sent) -> None:
        """``sent`` left ``queue`` as a dead letter: to the queue's alternate, if any."""
        self.attempts.pop(sent.body, None)
        alternate = DEAD_LETTERS.get(queue)
        if alternate is not None:
            self.queued[alternate].append(sent)
            self.arrivals[sent.body] = len(self.arrivals)

    @precondition(lambda self: any(self.queued[name] for name in DEAD_LETTERS))
    @rule(data=st.data(), hold=st.integers(0, 2))
    def delete(self, data: st.DataObject, hold: int) -> None:
        """A queue with an alternate, holding messages, deleted by management (``force``)
        while a consumer holds ``hold`` of them: every message left, the held ones included,
        goes to the alternate in arrival order, and the consumer is detached
        (docs/dead-letters.md). Declared again by its producer, the queue starts empty and
        numbers its messages from the start."""
        queue = data.draw(st.sampled_from([name for name in DEAD_LETTERS if self.queued[name]]))
        taken = self.in_order(queue)[:hold]
        receiver = self.client.receiver(queue, credit=len(taken)) if taken else None
        if receiver is not None:
            got = self.received(receiver, len(taken))
            assert [r.message.body for r in got] == [sent.body for sent in taken]
        with ManagementClient(self.broker.url) as admin:
            reply = admin.request("DELETE", QUEUE_TYPE, queue, force=True)
        assert reply.ok, reply
        if receiver is not None:
            self.client.wait_closed(receiver)
            assert receiver.remote_condition.name == "amqp:resource-deleted"
            receiver.close()
        for sent in self.queued[queue]:
            self.dead_lettered(queue, sent)
        self.queued[queue] = []
        self.numbers.queue.pop(queue, None)
        self.senders[queue] = self.client.sender(queue, node_properties=QUEUES[queue])

    @precondition(lambda self: self.made > 0)
    @rule()
    def restart(self) -> None:
        self.check()
        self.restarts += 1
        self.broker = self.brokers.restart()
        self.client = self.broker.client()
        self.senders = self.declare()
        for name in CONSUMED:
            self.queued[name] = [sent for sent in self.queued[name] if sent.durable]
        self.attempts = {}  # a delivery count is not stored (nor is it in Broker-J)
        for name, keys in self.kept.items():
            for key, versions in keys.items():
                keys[key] = self.recovered_history(name, key, versions)
            for numbered in self.numbered[name].values():
                numbered.append((None, True))  # the next number may be higher
        self.check()

    def number_order(self, queue: str, key: str) -> list[tuple[str | None, bool]]:
        """``key``'s versions in the order they were numbered. A key first seen after a
        restart may start above 1: numbers given to versions that were not stored are
        reserved, and every key goes on above them (docs/sequence-history.md)."""
        if key not in self.numbered[queue]:
            self.numbered[queue][key] = [(None, True)] if self.restarts else []
        return self.numbered[queue][key]

    def recovered_history(self, queue: str, key: str, versions: list[Sent]) -> list[Sent]:
        """A key's kept versions after a restart: the newest of its stored ones, which
        are its durable kept versions and its durable messages still on the queue (one the
        history had let go of for a newer version that was not durable comes back)."""
        queued = [sent for sent in self.queued[queue] if sent.key == key]
        stored = {sent.body: sent for sent in [*versions, *queued] if sent.durable}
        newest = sorted(stored.values(), key=lambda sent: self.arrivals[sent.body])
        return newest[-KEPT[queue] :]

    @rule()
    def check(self) -> None:
        """Browse every queue and replay every history: what the model says, in order."""
        for name in CONSUMED:
            self.check_queue(name)
        for name in KEPT:
            self.check_history(name)

    # ---- what the broker is expected to hold ------------------------------------------------

    def check_queue(self, queue: str) -> None:
        """A browser sees the queue's order (docs/queues.md): priority order on "prio"."""
        expected = [sent.body for sent in self.in_order(queue)]
        browser = self.client.receiver(queue, credit=1000, browse=True)
        got = self.received(browser, len(expected))
        assert [r.message.body for r in got] == expected, f"queue {queue}"
        for each in got:
            self.numbers.saw(queue, each)
        prio = queue == "prio"
        levels = {sent.body: sent.priority if prio else 0 for sent in self.queued[queue]}
        for level in set(levels.values()):  # numbers grow (within a level, on "prio")
            bodies = [r.message.body for r in got if levels[r.message.body] == level]
            self.check_numbers_grow(queue, bodies)
        self.close(browser)

    def check_history(self, queue: str) -> None:
        kept = [sent.body for versions in self.kept[queue].values() for sent in versions]
        expected = sorted(kept, key=self.arrivals.__getitem__)  # a replay: arrival order
        replay = self.client.receiver(queue, credit=1000, filters={symbol(KEY_SEQUENCE): "first"})
        got = self.received(replay, len(expected))
        assert [r.message.body for r in got] == expected, f"history of {queue}"
        for each in got:
            self.numbers.saw(queue, each)
        self.close(replay)
        self.check_key_numbers(queue)

    def check_numbers_grow(self, queue: str, bodies: list[str]) -> None:
        every = self.numbers.queue.get(queue, {})
        numbers = [every[body] for body in bodies]
        assert numbers == sorted(set(numbers)), f"queue {queue}: numbers out of order"
        assert len(set(every.values())) == len(every), f"queue {queue}: a number given twice"

    def check_key_numbers(self, queue: str) -> None:
        """Per key: numbers grow, by one where nothing came between (see the module doc)."""
        seen = self.numbers.key.get(queue, {})
        for key, numbered in self.numbered[queue].items():
            last, gap = 0, False
            for body, after_gap in numbered:
                gap = gap or after_gap
                if body is None:  # a restart
                    gap = True
                    continue
                number = seen.get(body)
                if number is None:
                    gap = True  # never seen (replaced and dropped before anyone looked)
                    continue
                if gap:
                    assert number > last, f"{queue}/{key}: {body} got {number} after {last}"
                else:
                    assert number == last + 1, f"{queue}/{key}: {body} got {number}, not {last + 1}"
                last, gap = number, False

    # ---- helpers ------------------------------------------------------------------------

    def message(self, key: str | None, priority: int, durable: bool) -> Sent:
        self.made += 1
        return Sent(f"m{self.made}", key, priority, durable)

    @staticmethod
    def encode(sent: Sent) -> Message:
        properties = {} if sent.key is None else {KEY: sent.key}
        return Message(
            body=sent.body, priority=sent.priority, durable=sent.durable, properties=properties
        )

    def declare(self) -> dict[str, Link]:
        """A sender to each queue, which declares it as a client would (a restart finds
        them declared already)."""
        return {name: self.client.sender(name, node_properties=QUEUES[name]) for name in QUEUES}

    def sender(self, queue: str) -> Link:
        return self.senders[queue]

    def joined(self, queue: str, sent: Sent, numbered: bool = False) -> None:
        """``sent`` joined ``queue``: a last value replaces its key's, a history keeps it."""
        queued = self.queued[queue]
        if queue == "lvq" and sent.key is not None:
            queued[:] = [other for other in queued if other.key != sent.key]
        queued.append(sent)
        self.arrivals[sent.body] = len(self.arrivals)
        if len(queued) > RING.get(queue, sys.maxsize):
            self.dead_lettered(queue, queued.pop(0))
        if queue in KEPT and sent.key is not None:
            versions = self.kept[queue].setdefault(sent.key, [])
            versions.append(sent)
            del versions[: -KEPT[queue]]
            if not numbered:  # (a transaction's was numbered as it was sent)
                self.number_order(queue, sent.key).append((sent.body, False))

    def in_order(self, queue: str) -> list[Sent]:
        """The order the broker hands ``queue``'s messages out in."""
        queued = self.queued[queue]
        if queue == "prio":
            return sorted(queued, key=lambda sent: -sent.priority)  # stable: FIFO within
        return list(queued)

    def transaction(self) -> tuple[Link, bytes]:
        """A coordinator link of its own, and a transaction declared on it."""
        self.links += 1
        coordinator = self.client.coordinator(f"txn-{self.links}")
        return coordinator, self.client.declare(coordinator)


def test_durable_queues_keep_their_promises_across_restarts_at_random() -> None:
    # About twelve seconds an example: every step waits for the broker's answers. The
    # default run keeps the whole suite under 20 minutes; the soak variant below runs 100.
    run_model(RecoveryModel, steps=20, examples=4)


@pytest.mark.soak
def test_durable_queues_keep_their_promises_across_many_restarts_at_random() -> None:
    run_model(RecoveryModel, steps=20, examples=100)
