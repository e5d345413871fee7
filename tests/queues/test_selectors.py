"""Consumers and browsers with a JMS selector, on a plain Queue (the selector language has
its own tests in tests/test_selector.py). No sockets: consumers are ``Taker`` objects."""

from __future__ import annotations

import time
from typing import Any

import proton
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from proton_broker.codec.sections import parse_message
from proton_broker.message import Message
from proton_broker.queues.entries import Entry
from proton_broker.queues.factory import build_queue
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import parse_settings
from proton_broker.selector import Selector, parse_selector
from tests.queues.compaction import compact_as_usual, compact_early
from tests.queues.consumers import Taker, Told, check_figures


def msg(color: str, n: int, group: str | None = None, **fields: Any) -> Message:
    properties: dict[str, Any] = {"color": color, "n": n}
    if group is not None:
        properties["group"] = group
    return parse_message(proton.Message(body=n, properties=properties, **fields).encode())


def queue(**options: Any) -> Queue:
    return build_queue("q", parse_settings(options))


def numbers(taker: Taker) -> list[int]:
    return [m.application_property("n") for m in taker.messages]  # as delivered


class Counting:
    """A selector that counts the messages it is asked about."""

    def __init__(self, selector: Selector) -> None:
        self.selector = selector
        self.asked: list[int] = []

    def matches(self, message: Message) -> bool:
        self.asked.append(message.application_property("n"))
        return self.selector.matches(message)


def test_a_consumer_with_a_selector_gets_only_the_messages_it_matches_in_order() -> None:
    q = queue()
    for n, color in enumerate(["red", "blue", "red", "blue", "red"]):
        q.enqueue(msg(color, n))
    red, anyone = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 10)
    assert numbers(red) == [0, 2, 4]
    q.subscribe(anyone)
    anyone.grant(q, 10)
    assert numbers(anyone) == [1, 3]  # what the selector passed over stays for others


def test_new_messages_reach_the_consumer_whose_selector_matches_them() -> None:
    q = queue()
    red, blue = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    q.subscribe(blue, selector=parse_selector("color = 'blue'"))
    red.grant(q, 10)
    blue.grant(q, 10)
    for n, color in enumerate(["blue", "red", "green", "blue"]):
        q.enqueue(msg(color, n))
    assert numbers(red) == [1] and numbers(blue) == [0, 3]
    assert q.depth == 4 and len(q._order) == 1  # green waits for somebody


def test_a_message_the_selector_does_not_match_is_looked_at_once_not_on_every_dispatch() -> None:
    q = queue()
    for n in range(100):
        q.enqueue(msg("blue", n))
    counting = Counting(parse_selector("color = 'red'"))
    red = Taker()
    q.subscribe(red, selector=counting)
    for n in range(100, 110):
        red.grant(q, 1)
        q.enqueue(msg("red" if n % 2 else "blue", n))
    assert numbers(red) == [101, 103, 105, 107, 109]
    assert sorted(counting.asked) == list(range(110))  # each message asked about once


def test_a_released_message_behind_the_cursor_is_offered_again() -> None:
    q = queue()
    for n in range(3):
        q.enqueue(msg("red", n))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 3)
    first = red.got[0]
    q.release(first)
    red.grant(q, 1)
    assert numbers(red) == [0, 1, 2, 0]


def test_a_message_held_until_valid_reaches_the_selecting_consumer_once_valid() -> None:
    q = queue(holdOnPublishEnabled=True)
    later = int((time.time() + 3600) * 1000)
    q.enqueue(msg("red", 0, annotations={proton.symbol("x-qpid-not-valid-before"): later}))
    q.enqueue(msg("red", 1))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 5)
    assert numbers(red) == [1]
    q.release_held(now=time.time() + 7200)
    assert numbers(red) == [1, 0]


def test_an_expired_message_is_dropped_not_given_to_the_selecting_consumer() -> None:
    q = queue()
    q.enqueue(msg("red", 0, ttl=0.001), now=time.time() - 10)
    q.enqueue(msg("red", 1))
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    red.grant(q, 5)
    assert numbers(red) == [1]
    assert q.stats.expired == 1 and q.depth == 1


def test_a_selecting_consumer_with_a_replay_period_starts_where_the_period_does() -> None:
    q = queue()
    q.enqueue(msg("red", 0))
    red = Taker()
    q.subscribe(red, replay_period=0, selector=parse_selector("color = 'red'"))
    q.enqueue(msg("red", 1))
    red.grant(q, 5)
    assert numbers(red) == [1]


def test_a_message_a_selector_took_and_released_goes_back_behind_older_ones() -> None:
    q = queue()
    blue, anyone = Taker(), Taker()
    q.subscribe(blue, selector=parse_selector("color = 'blue'"))
    q.subscribe(anyone)
    q.enqueue(msg("red", 0))
    blue.grant(q, 1)
    q.enqueue(msg("blue", 1))  # taken out of arrival order: 0 is still there
    q.release(blue.got[0])
    anyone.grant(q, 2)
    assert numbers(anyone) == [0, 1]


def test_a_browser_with_a_selector_sees_only_matching_messages_and_takes_none() -> None:
    q = queue()
    for n, color in enumerate(["red", "blue", "red"]):
        q.enqueue(msg(color, n))
    browser = Taker(browse=True)
    q.subscribe(browser, selector=parse_selector("n > 0 AND color <> 'blue'"))
    browser.grant(q, 10)
    assert numbers(browser) == [2]
    assert q.depth == 3


def test_a_selector_on_a_priority_queue_takes_matching_messages_in_arrival_order() -> None:
    q = queue(**{"x-qpid-priorities": 10})
    q.enqueue(msg("red", 0, priority=1))
    q.enqueue(msg("red", 1, priority=9))
    red, anyone = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("JMSPriority < 5"))
    red.grant(q, 5)
    assert numbers(red) == [0]
    q.subscribe(anyone)
    anyone.grant(q, 5)
    assert numbers(anyone) == [1]


def test_on_a_grouped_queue_a_selector_takes_what_it_matches_of_groups_free_or_its_own() -> None:
    """As qpidd's consumers: the selector first, then the groups."""
    q = queue(**{"qpid.group_header_key": "group", "qpid.shared_msg_group": 1})
    for n, (color, group) in enumerate([("blue", "B"), ("red", "A"), ("red", "B"), ("blue", "A")]):
        q.enqueue(msg(color, n, group))
    red, anyone = Taker(), Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    q.subscribe(anyone)
    anyone.grant(q, 1)
    red.grant(q, 5)
    assert (numbers(anyone), numbers(red)) == ([0], [1])  # 2 is B's, which anyone holds
    q.settle(anyone.got[0])
    assert numbers(red) == [1, 2]  # B went free: red looked again from where it passed 2
    anyone.grant(q, 5)
    assert numbers(anyone) == [0]  # 3 is A's, which red holds
    q.settle(red.got[0])  # 1: A is free (red holds B still)
    assert numbers(anyone) == [0, 3]


def test_a_consumer_that_leaves_takes_its_selector_with_it() -> None:
    q = queue()
    red = Taker()
    q.subscribe(red, selector=parse_selector("color = 'red'"))
    q.unsubscribe(red)
    assert not q._picky.cursors
    q.enqueue(msg("red", 0))
    assert red.got == []


# ---- against the rules, at random ----------------------------------------------------------


SELECTORS = {"red": "color = 'red'", "blue": "color IN ('blue', 'green')", "any": None}


class ConsumersModel(RuleBasedStateMachine):
    """What the models below share: their consumers by name (each says which messages it
    may take, ``may_take``), the messages available by number, and those each holds."""

    q: Queue
    consumers: dict[str, Told]
    available: set[int]
    held: dict[str, list[Entry]]
    color: dict[int, str]

    journal: list[tuple[Told, Entry]]

    def may_take(self, name: str, n: int) -> bool:
        raise NotImplementedError

    def first_for(self, name: str, candidates: set[int]) -> int:
        """The message the queue's order gives ``name`` first among ``candidates``."""
        return min(candidates)

    def delivered(self, name: str, n: int) -> None:
        """What the model learns from a delivery (a group's holder, say)."""

    def deliveries(self) -> None:
        """Each delivery since the last step, in the order they happened: one the consumer
        may take, the first of those in the queue's order."""
        names = {id(consumer): name for name, consumer in self.consumers.items()}
        for consumer, entry in self.journal:
            name = names[id(consumer)]
            n = entry.message.application_property("n")
            assert n in self.available and self.may_take(name, n)
            mine = {m for m in self.available if self.may_take(name, m)}
            assert n == self.first_for(name, mine)
            self.delivered(name, n)
            self.available.discard(n)
            self.held[name].append(entry)
        self.journal.clear()

    @invariant()
    def no_consumer_with_credit_waits_for_a_message_it_may_take(self) -> None:
        for name, consumer in self.consumers.items():
            if consumer.credit:
                assert not any(self.may_take(name, n) for n in self.available)

    def check_holdings(self, not_yet_due: int) -> None:
        """The queue holds what is available, what consumers hold and what is not due."""
        held = sum(len(entries) for entries in self.held.values())
        assert self.q.depth == len(self.available) + held + not_yet_due
        assert self.q.unacknowledged == held
        check_figures(self.q, len(self.color))


class SelectingModel(ConsumersModel):
    """Random sends (colours, priorities, some with a time to live or a delivery time),
    credit, accepts, releases, failed deliveries (two at most a message), and time passing,
    by consumers with selectors and one without, on a FIFO, a priority or a sorted queue
    (by colour), against the rules: a consumer gets only what its selector matches, each the
    message its queue's order puts first among those it may take (so a selector never keeps
    a message from anyone else), and no consumer with credit is left waiting while a message
    it may take is available."""

    @initialize(order=st.sampled_from(["fifo", "priority", "sorted"]))
    def start(self, order: str) -> None:
        compact_early()
        self.order = order
        options = {
            "priority": {"x-qpid-priorities": 10},
            "sorted": {"qpid.queue_sort_key": "color"},
        }
        self.q = queue(**options.get(order, {}))
        self.q.max_delivery_attempts = 2
        self.journal: list[tuple[Told, Entry]] = []
        self.consumers: dict[str, Told] = {}
        for name, text in SELECTORS.items():
            consumer = Told(self.journal)
            self.consumers[name] = consumer
            self.q.subscribe(consumer, selector=None if text is None else parse_selector(text))
        self.color: dict[int, str] = {}
        self.priority: dict[int, int] = {}
        self.available: set[int] = set()  # by the number each message carries
        self.expires: dict[int, float] = {}
        self.due: dict[int, float] = {}  # held until then (a delivery time)
        self.now = time.time()
        self.held: dict[str, list[Entry]] = {name: [] for name in SELECTORS}
        self.failed: dict[int, int] = {}  # deliveries that failed, by message

    def teardown(self) -> None:
        compact_as_usual()

    def may_take(self, name: str, n: int) -> bool:
        wanted = {"red": ("red",), "blue": ("blue", "green")}.get(name)
        return wanted is None or self.color[n] in wanted

    def first_for(self, name: str, candidates: set[int]) -> int:
        if self.order == "fifo":  # arrival order
            return min(candidates)
        if self.order == "sorted":  # by the key's text, then arrival
            return min(candidates, key=lambda n: (self.color[n], n))
        return min(candidates, key=lambda n: (-self.priority[n], n))

    @rule(
        color=st.sampled_from(["red", "blue", "green", "grey"]),
        priority=st.integers(0, 9),
        ttl=st.none() | st.sampled_from([2, 6]),
        delay=st.none() | st.sampled_from([1, 4]),
    )
    def send(self, color: str, priority: int, ttl: int | None, delay: int | None) -> None:
        n = len(self.color)
        self.color[n], self.priority[n] = color, priority
        fields: dict[str, Any] = {"priority": priority}
        if ttl is not None:
            fields["ttl"] = ttl
            self.expires[n] = self.now + ttl
        if delay is not None:
            when = self.now + delay
            fields["annotations"] = {proton.symbol("x-opt-delivery-time"): int(when * 1000)}
            self.due[n] = when
        else:
            self.available.add(n)
        self.q.enqueue(msg(color, n, **fields), now=self.now)
        self.deliveries()

    @rule(seconds=st.sampled_from([1, 3]))
    def time_passes(self, seconds: int) -> None:
        self.now += seconds
        for n, when in list(self.due.items()):
            if when <= self.now:  # valid now, unless its time to live ran out meanwhile
                del self.due[n]
                if self.expires.get(n, self.now + 1) > self.now:
                    self.available.add(n)
        self.q.release_held(now=self.now)
        self.deliveries()
        gone = {n for n in self.available if self.expires.get(n, self.now + 1) <= self.now}
        self.q.purge_expired(now=self.now)
        self.available -= gone
        self.deliveries()

    @rule(name=st.sampled_from(list(SELECTORS)), credit=st.integers(1, 3))
    def grant(self, name: str, credit: int) -> None:
        self.consumers[name].grant(self.q, credit)
        self.deliveries()

    @rule(
        name=st.sampled_from(list(SELECTORS)),
        data=st.data(),
        outcome=st.sampled_from(["accepted", "released", "failed"]),
    )
    def settle(self, name: str, data: st.DataObject, outcome: str) -> None:
        if self.held[name]:
            entry = data.draw(st.sampled_from(self.held[name]))
            self.held[name].remove(entry)
            n = entry.message.application_property("n")
            if outcome == "accepted":
                self.q.settle(entry)
            elif outcome == "released":
                self.available.add(n)
                self.q.release(entry)
            else:  # modified, delivery-failed: the second time it goes
                self.failed[n] = self.failed.get(n, 0) + 1
                if self.failed[n] < 2:
                    self.available.add(n)
                self.q.release(entry, delivery_failed=True)
            self.deliveries()

    @invariant()
    def the_queue_holds_what_is_available_taken_or_not_yet_due(self) -> None:
        self.check_holdings(len(self.due))


SelectingModel.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)
test_selecting_keeps_its_rules_at_random = SelectingModel.TestCase


GROUPS = ("A", "B", "C", None)


class GroupedSelectingModel(ConsumersModel):
    """Random sends (colours, groups, some without one), credit, accepts, releases and
    consumers that leave and come back, by consumers with selectors and one without, on a
    queue of shared or standard groups, against the rules: a consumer gets only what its
    selector matches, of a group free or its own, the first such message in arrival order;
    a group is never held by two consumers; and no consumer with credit is left waiting
    while a message it may take is available."""

    @initialize(mode=st.sampled_from(["shared", "standard"]))
    def start(self, mode: str) -> None:
        compact_early()
        self.shared = mode == "shared"
        options = {"qpid.group_header_key": "group"}
        if self.shared:
            options["qpid.shared_msg_group"] = 1  # type: ignore[assignment] # an option value
        self.q = queue(**options)
        self.journal: list[tuple[Told, Entry]] = []
        self.consumers: dict[str, Told] = {}
        self.held: dict[str, list[Entry]] = {}
        for name in SELECTORS:
            self.subscribe(name)
        self.color: dict[int, str] = {}
        self.group: dict[int, str | None] = {}
        self.available: set[int] = set()
        self.owner: dict[str, str] = {}  # group -> the consumer holding it (model)

    def teardown(self) -> None:
        compact_as_usual()

    def subscribe(self, name: str) -> None:
        consumer = Told(self.journal)
        self.consumers[name], self.held[name] = consumer, []
        text = SELECTORS[name]
        self.q.subscribe(consumer, selector=None if text is None else parse_selector(text))

    def group_of(self, n: int) -> str | None:
        """The group the rules put message ``n`` in: shared mode gathers the ungrouped."""
        group = self.group[n]
        return "qpid.no-group" if group is None and self.shared else group

    def may_take(self, name: str, n: int) -> bool:
        wanted = {"red": ("red",), "blue": ("blue", "green")}.get(name)
        if wanted is not None and self.color[n] not in wanted:
            return False
        group = self.group_of(n)
        return group is None or self.owner.get(group, name) == name

    def delivered(self, name: str, n: int) -> None:
        group = self.group_of(n)
        if group is not None:
            self.owner[group] = name

    def let_go(self, name: str, entry: Entry) -> None:
        """A held entry is settled or back: a shared group is free once nothing of it is
        held (a standard one stays with its consumer)."""
        n = entry.message.application_property("n")
        self.held[name].remove(entry)
        group = self.group_of(n)
        held = {self.group_of(e.message.application_property("n")) for e in self.held[name]}
        if self.shared and group is not None and group not in held:
            self.owner.pop(group, None)

    @rule(color=st.sampled_from(["red", "blue", "green"]), group=st.sampled_from(GROUPS))
    def send(self, color: str, group: str | None) -> None:
        n = len(self.color)
        self.color[n], self.group[n] = color, group
        self.available.add(n)
        self.q.enqueue(msg(color, n, group))
        self.deliveries()

    @rule(name=st.sampled_from(list(SELECTORS)), credit=st.integers(1, 3))
    def grant(self, name: str, credit: int) -> None:
        self.consumers[name].grant(self.q, credit)
        self.deliveries()

    @rule(name=st.sampled_from(list(SELECTORS)), data=st.data(), accept=st.booleans())
    def settle(self, name: str, data: st.DataObject, accept: bool) -> None:
        if self.held[name]:
            entry = data.draw(st.sampled_from(self.held[name]))
            n = entry.message.application_property("n")
            if accept:
                self.let_go(name, entry)
                self.q.settle(entry)
            else:
                self.available.add(n)
                self.let_go(name, entry)
                self.q.release(entry)
            self.deliveries()

    @rule(name=st.sampled_from(list(SELECTORS)))
    def leave_and_come_back(self, name: str) -> None:
        """It goes (the protocol adapter then releases what it held), and its groups with
        it: each once nothing of it is held any more, so nobody overtakes what comes back;
        a new consumer with the same selector attaches."""
        self.q.unsubscribe(self.consumers[name])
        self.release_groups(name)
        self.deliveries()
        for entry in list(self.held[name]):
            self.available.add(entry.message.application_property("n"))
            self.held[name].remove(entry)
            self.release_groups(name)
            self.q.release(entry)
            self.deliveries()
        self.subscribe(name)
        self.deliveries()

    def release_groups(self, name: str) -> None:
        """The groups of a consumer that went, of which it holds nothing now, are free."""
        held = {self.group_of(e.message.application_property("n")) for e in self.held[name]}
        self.owner = {g: who for g, who in self.owner.items() if who != name or g in held}

    @invariant()
    def the_queue_holds_what_is_available_or_taken(self) -> None:
        self.check_holdings(0)


GroupedSelectingModel.TestCase.settings = settings(  # 150 missed a lost place at times
    max_examples=400, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)
test_selecting_on_grouped_queues_keeps_its_rules_at_random = GroupedSelectingModel.TestCase
