"""Per-key sequence numbers and each key's history of versions (docs/sequence-history.md).

Rules owned here:

* On a queue with a key (the last-value key, or ``sequenceKey`` on a queue that keeps every
  message), every message whose key property is set gets a sequence number: 1 for the
  key's first message, then one more than the key's current number. Keys are the
  property's text as qpidd makes it (:mod:`proton_broker.queues.keys`: the boolean true is
  ``"1"``), compared whole (``1`` and ``10`` are different keys).
* A producer may choose the number (``x-opt-sequence``, as a message annotation or an
  application property). It must be an integer (a long; not a string holding one, which
  the HTTP gateway refuses too) greater than the key's current number, so history stays
  ordered, and at most 2^62 (:data:`CUSTOM_MAX`); anything else
  is refused before the message joins the queue. A custom number is a producer's only on
  its own transfer or an HTTP send: a copy the broker makes of a message that was on
  another queue (moved, copied, dead-lettered to this one) carries that queue's number
  (a stored message's bytes and every dead letter do) or its producer's, checked there,
  and gets its key's next number here instead, its annotation replaced (:meth:`renumber`;
  qpidd's ``Queue::reroute`` routes a message as a new delivery, which its new
  queue numbers as it numbers every message). A stored message recovered onto its own
  queue keeps the number its bytes carry. A transaction's send is numbered at commit, in
  the order sent (qpidd's ``TxPublish::commit``), its custom number checked when sent and
  again then. The number is the record's
  ``sequence``; the message is delivered with it as the annotation ``x-opt-sequence``,
  added as it leaves, and a message written to the store carries it in its bytes
  (codec/encode.py).
* History: ``max_key_updates`` newest versions of each key are kept (``None``: all of
  them; ``0``: the current version only, like ``1``). Older versions are dropped as new
  ones arrive, O(1) each.
* A dropped version lets go of its message at once, so a last-value queue under churn
  holds the bytes of its current values only.
* A key's list (or deque) of versions is out of the cyclic collector's view, as every
  message record is (:mod:`proton_broker.collector`): a queue keeping millions of versions
  would otherwise have each walked by the collector as it grows.
* Last value (after Qpid Broker-J's ``LastValueQueueList`` and the Qpid C++ LVQ): on a
  last-value queue the history is also the index of each key's newest entry. While the
  entry of a key's latest version is on the queue, the history keeps that entry in the
  version's place (``indexes``); a new version of the key displaces it, and the queue
  supersedes it (see :meth:`proton_broker.queues.queue.Queue.enqueue`). One dictionary
  serves both: a second one cost about 40 bytes a key. Replacing is O(1). A message
  without the key is never replaced and never replaces another (Broker-J and Artemis;
  the C++ broker conflates such messages under ``""``, reported as a bug).
* Forgetting (the broker's ``broker.max_history_memory``, shared by every history; the
  budget is in queues/budget.py): what a history holds alone, its versions that have left
  the queue (consumed, or replaced), counts their bytes and :data:`VERSION_COST` each.
  When that goes over the limit, the history holding the most forgets until the budget is
  at 90% (the others in turn if it can give nothing: queues/budget.py). A hand walks its
  keys in the dictionary's order (the order they were first seen; a key first seen during
  a round is passed at the round's end), on from where it stopped:
  each key it passes lets go of its older versions held alone (it keeps its latest); a key
  with none to let go of, whose latest version has left the queue, is forgotten if that
  version is among the oldest: at or below the cut, the queue number under which a share
  of the keys that may be forgotten had their latest version, as :data:`_SAMPLE` keys
  evenly spaced in the dictionary say (picked as each round starts, their latest versions
  read as each forgetting starts; every key that may be forgotten, if none of those may).
  The share is what the budget needs the history to let go of over what it holds alone, an
  eighth at least: so a history that must give up a fifth of what it holds forgets its
  oldest fifth in one round, not an eighth a round with a new sample each time (the hand
  passed about eight keys for every key it forgot). So keys updated recently stay and the
  ones left idle go, from the first time the budget is full (a sampled approximation of
  least recently used: a key's latest queue number is its last update). A round that let
  go of nothing makes the next one forget any key it may. A key whose latest version is on
  the queue is never forgotten (on a last-value queue it is the index). Nothing is
  recorded for this per message, and no list of keys is kept: the hand is a walk over the
  dictionary's items, so it reads each key's versions as it passes without a lookup (a
  list of the keys and a lookup a key touched each key three times more, each a cache miss
  at 10^6 keys). A dictionary cannot lose keys while it is walked: keys forgotten as the
  hand passes leave it when the hand stops. When keys came or went since the hand stopped,
  it goes on from its place by passing over the keys before it once more, in C (O(its
  place), about 16 ms for 10^6 keys; the walk frees a tenth of the budget at least each
  time). A round costs O(its keys), and each key is passed once a round.
* A forgotten key's next number is one more than the highest number the history has
  forgotten (``floor``), and so is a new key's once anything has been forgotten (and, after
  a restart, every key's that is not above it: no key can tell it was never forgotten). A
  number is never given out twice for a key, however long ago it was forgotten, and
  nothing of a key is kept once it is forgotten. Numbers given out for keys that never got
  a version (a commit whose write failed) are kept for 10,000 such keys at most; past that
  those keys are forgotten too.
* On a durable queue the store keeps each key's latest number with its stored versions;
  a version it does not keep (a message that arrived without a store id: not durable, or
  on a queue whose ``messageDurability`` keeps no such message) got a number no stored row
  says was given out. Such numbers are reserved in the store :data:`KEY_BLOCK` at a time
  (the next block once half of this one is used), as a floor: after a restart every key
  goes on above it, as above a forgotten key, so no number a consumer saw is given out
  again. A queue whose versions are all stored reserves nothing, and its keys go on where
  they were.
* Replay from a sequence ``N`` (or ``first``, ``last``): the kept versions with a number
  >= N, of one key or of all keys, in arrival order. ``first`` is the oldest kept version,
  ``last`` the latest one (of each key, when replaying all keys). A key's versions are
  kept in arrival order, and both their queue numbers and their key numbers ascend, so
  where a key's run starts is found by bisection; all keys are merged by queue number
  (the history keeps no arrival order of its own across keys: see :class:`Version`).
  A long poll asks for the first version only (:meth:`History.first`): O(log n) for a
  key, O(keys x log n) for all keys, never the whole list (a sorted list of every kept
  version for each poll of a 200,000-version history held the loop for 0.2 s a poll). A
  WebSocket stream reads its replay a slice at a time (:meth:`History.replay_slice`,
  bounded by queue numbers: after the last one sent, up to the newest when it
  subscribed), so the loop serves its sockets between slices; a slice costs
  O(keys x log n + its length x log keys).
"""

from __future__ import annotations

import contextlib
import sys
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from heapq import merge
from itertools import islice
from operator import attrgetter
from typing import NamedTuple

from proton_broker.codec.encode import KEY_SEQUENCE
from proton_broker.codec.sections import annotate, stamp
from proton_broker.codec.values import contains, find_in_map, find_unmarked
from proton_broker.collector import untrack
from proton_broker.errors import InvalidField
from proton_broker.message import Message
from proton_broker.queues.budget import DEFAULT_HISTORY_BUDGET, HistoryBudget
from proton_broker.queues.entries import Entry
from proton_broker.queues.keys import key_text

SEQUENCE = KEY_SEQUENCE
_LONG_MAX = 2**63 - 1  # x-opt-sequence is a long
# A producer's number at most: half a long's range, so that numbers given out above it (a
# key's next ones, and every key's once the key is forgotten: see the module rules) never
# run out of the long.
CUSTOM_MAX = 2**62
_SEQUENCE_BYTES = SEQUENCE.encode()
SEQUENCE_KEY = "x-opt-sequence-key"
FIRST, LAST = "first", "last"
_LIST_KEEP = 1024  # up to this many versions a key, its versions are a list (see History)
# What a version held beyond its queue costs besides its bytes: its record and what the
# codec read (spans, header), its place among its key's versions, its key's text and its
# share of the dictionary. Measured with tracemalloc: 322 bytes a key of one version.
VERSION_COST = 320
_AHEAD_FOLD = 10_000  # numbers ahead of their versions kept before keys without one go
_SAMPLE = 32  # keys whose latest updates choose a forgetting round's cut (see forget)
_SHARE_LEAST = 1 / 8  # of the keys that may be forgotten, what a cut lets go of at least
_EVERY = 2**63  # a cut above every queue number
# Key numbers a durable queue reserves at a time for versions its store does not keep: a
# restart skips at most about this many numbers of every key (see History.make_durable).
KEY_BLOCK = 1024


class Version(NamedTuple):
    """One kept version of a key, as a replay lists it. The history keeps the message only
    (its ``number`` is the order, its ``sequence`` the version's number): a version object
    for every key of a million-key last-value queue cost 80 bytes a key with its place in
    an arrival log, and a replay, which is O(n) anyway, makes them."""

    order: int  # its queue sequence number: arrival order
    key: str
    seq: int
    message: Message


# A key's kept versions, oldest first: one alone, a list or a deque (see History). On a
# last-value queue the latest may be the entry standing for it (see the module rules).
Kept = Message | Entry | list[Message | Entry] | deque[Message | Entry]
_MANY = (list, deque)  # more than one version


class History:
    """The sequence counters and kept versions of one queue, whose messages' key is the
    application property ``key_property``."""

    def __init__(
        self,
        max_updates: int | None,
        key_property: str,
        dropped: Callable[[Message], None] | None = None,
        indexes: bool = False,
    ) -> None:
        self.keep = None if max_updates is None else max(1, max_updates)
        self._bound = sys.maxsize if self.keep is None else self.keep  # keep, as a number
        self.key_property = key_property
        self.indexes = indexes  # a last-value queue's: the index of newest entries too
        self.standing = 0  # keys whose latest version's entry stands for it (on the queue)
        # Called with a stored version's message when it is let go (its row may go).
        self.dropped = dropped
        # Called with (key, sequence, message) for every new version, on the loop thread:
        # replaying browsers and the HTTP gateway's long polls and WebSocket streams.
        self.watchers: list[Callable[[str, int, Message], object]] = []
        # A key's current number is its latest kept version's, except where a number was
        # given out that is not yet recorded (a durable message numbered before it is
        # written), a version was recorded behind a greater one, or a restart restored a
        # counter: those keys only are here. A million keys otherwise cost a dictionary of
        # a million numbers (about 50 bytes a key) that says what their versions say.
        self._ahead: dict[str, int] = {}
        # Each key's kept versions (their messages), oldest first. A key with one version
        # keeps it alone (a last-value queue has a million keys, many never updated, and a
        # list of one costs 64 bytes more); more go in a list, dropped from the front in
        # O(keep), which is small, or a deque when there is no bound or a large one (a deque
        # of one takes about 600 bytes). There is no arrival log of versions: a replay of
        # every key merges the keys' versions by their queue numbers.
        self._versions: dict[str, Kept] = {}
        self._small = self.keep is not None and self.keep <= _LIST_KEEP
        # What it holds beyond its queue, in the broker's budget (see the module rules),
        # and the highest number it has forgotten: numbers start above it.
        self.held = 0
        # Forgetting's hand: its walk over the dictionary (None before the first round),
        # the keys it has passed this round, the keys whose latest versions choose the cut
        # (picked as the round starts), and whether its round has let go of anything yet
        # (or there was no round yet). See forget.
        self._walk: Iterator[tuple[str, Kept]] | None = None
        self._hand = 0
        self._sample: list[str] = []
        self._round_freed = True
        self._ahead_limit = _AHEAD_FOLD  # numbers ahead at which keys without versions go
        self.floor = 0
        self.budget: HistoryBudget = HistoryBudget(DEFAULT_HISTORY_BUDGET)
        # Called with (key, floor) as a key is forgotten (a durable queue's store).
        self.forgot: Callable[[str, int], None] | None = None
        # A durable queue's: numbers given to versions the store does not keep are reserved
        # up to here (see make_durable); the next reservation when one goes above the watermark.
        self._reserve_keys: Callable[[int], None] | None = None
        self._unstored_watermark = sys.maxsize

    def join(self, budget: HistoryBudget) -> None:
        """Count in the broker's ``budget`` (its queue is made)."""
        self.budget = budget
        budget.histories.append(self)
        budget.used += self.held

    def leave(self) -> None:
        """Count no more (its queue is being deleted). What its queue lets go of from now on
        counts in a budget of its own, without limit: it must not make other histories
        forget."""
        budget = self.budget
        if self in budget.histories:
            budget.histories.remove(self)
            budget.used -= self.held
        self.budget = HistoryBudget(sys.maxsize)

    def make_durable(self, reserve: Callable[[int], None]) -> None:
        """Its queue is durable: a version the store does not keep (one that arrives
        without a store id) may have a number no stored row says was given out, so such numbers are
        reserved with ``reserve(upto)`` a block ahead (:data:`KEY_BLOCK`), the next block
        when half of this one is used, and after a restart every key goes on above the
        reservation, as above a forgotten key (see the module rules)."""
        self._reserve_keys = reserve
        self._unstored_watermark = 0  # the first such version reserves the first block

    def _reserve_unstored(self, seq: int) -> None:
        """A version the store does not keep got ``seq``, above the watermark: reserve the
        next block (see :meth:`make_durable`)."""
        assert self._reserve_keys is not None  # set with the watermark, by make_durable
        upto = seq + KEY_BLOCK
        self._unstored_watermark = upto - KEY_BLOCK // 2
        self._reserve_keys(upto)

    def reserve(self, key: str, seq: int) -> None:
        """``seq`` is given out for ``key`` (its version is recorded when it joins)."""
        if seq > self.current(key):
            self._ahead[key] = seq
            if len(self._ahead) > self._ahead_limit:
                self._fold_ahead()

    def restore(self, counters: dict[str, int], floor: int = 0) -> None:
        """After a restart: the numbers given out before it, and the highest it forgot, so
        none is given out again."""
        self.floor = max(self.floor, floor)
        for key, seq in counters.items():
            self.reserve(key, seq)
        if floor:  # no key can tell it was never forgotten: every key goes on above it
            for key in [*self._versions, *counters]:
                self.reserve(key, floor)

    def arrived(  # noqa: C901 - runs for every keyed message, measured
        self, key: str, message: Message, order: int, entry: Entry | None = None
    ) -> Entry | None:
        """``message``, a version of ``key`` (its key read by :meth:`numbered`), is number
        ``order`` on its queue (the number the queue gives it as it joins): number it unless
        it has its number already (``message.sequence``; see :meth:`numbered`), record it
        as its key's latest version and tell the watchers. On a last-value queue ``entry``,
        its entry, stands for it; the entry that stood for the key's latest version until
        now, if any, is returned (a newer value has arrived for it).
        Runs for every keyed message: the key's latest version is read once, for its number
        and its place, and the type tests are written out (``type(x) is``, not isinstance
        with a tuple)."""
        seq = message.sequence
        versions = self._versions.get(key)
        kind = type(versions)
        latest = versions[-1] if kind is list or kind is deque else versions  # type: ignore[index]
        displaced: Entry | None = None
        if latest is not None and type(latest) is not Message:  # its entry stood for it
            displaced, latest = latest, latest.message  # type: ignore[assignment,union-attr]
            self.standing -= 1  # the message does now (below)
        if self._ahead:  # numbers were given out ahead of their versions
            seq = self._numbered_ahead(key, latest, seq)
        else:
            # The key's current number: its latest version's, or for a key of none (new, or
            # forgotten) the highest forgotten (see the module rules).
            current: int = self.floor if latest is None else latest.sequence  # type: ignore[assignment] # numbered
            if seq is None:  # numbered now: the next number (see the module rules)
                seq = current + 1
            elif current > seq:  # recorded behind a greater number: that stays the current one
                self._ahead[key] = current
        message.number, message.sequence = order, seq
        if seq > self._unstored_watermark and message.store_id is None:  # see make_durable
            self._reserve_unstored(seq)
        message.in_history = True
        version: Message | Entry = message
        if entry is not None:
            version = entry
            self.standing += 1
        if versions is None:
            self._versions[key] = version  # alone (see __init__)
        elif kind is list or kind is deque:
            many: list[Message | Entry] = versions  # type: ignore[assignment] # or a deque
            if displaced is not None:
                many[-1] = latest  # type: ignore[assignment] # a message
            many.append(version)
            if len(many) > self._bound:  # only the latest can be an entry: this is a message
                self._drop(many.pop(0) if kind is list else versions.popleft())  # type: ignore[arg-type,union-attr]
        elif self.keep == 1:
            self._versions[key] = version
            self._drop(latest)  # type: ignore[arg-type] # a message
        else:
            pair: Kept = [latest, version]  # type: ignore[list-item]
            if not self._small:
                pair = deque(pair)  # type: ignore[arg-type]
            untrack(pair)  # only the dictionary holds it: no cycle passes through it
            self._versions[key] = pair
        if self.watchers:
            for watch in self.watchers:
                watch(key, seq, message)
        return displaced

    def _numbered_ahead(self, key: str, latest: Message | None, seq: int | None) -> int:
        """:meth:`arrived`'s number for a version of ``key`` (``seq``: its own, if it has
        one) whose latest version is ``latest``, while some numbers were given out ahead of
        their versions (``_ahead``): one of them may be this key's."""
        ahead = self._ahead
        current = ahead.get(key, self._kept_number(latest))
        if seq is None:  # numbered now: the next number (see the module rules)
            seq = current + 1
        if current > seq:  # recorded behind a greater number: that stays the current one
            ahead[key] = current
        else:  # a number given out ahead of its version may have been this one
            ahead.pop(key, None)
        return seq

    def left(self, entry: Entry) -> None:
        """``entry``, whose message is a kept version (``in_history``), leaves the queue
        (runs as each does): the history alone holds the message from now on
        (:meth:`held_alone`). On a last-value queue, if the entry stood for its key's latest
        version, its message does again, and the entry lets go of its key's text (the
        queue's log may keep the entry a while)."""
        message = entry.message
        if self.indexes:
            key: str = entry.key  # type: ignore[assignment] # a last-value queue's entry
            entry.key = None  # type: ignore[misc]
            versions = self._versions.get(key)
            kind = type(versions)
            if kind is list or kind is deque:
                if versions[-1] is entry:  # type: ignore[index] # a list or deque
                    versions[-1] = message  # type: ignore[index]
                    self.standing -= 1
            elif versions is entry:
                self._versions[key] = message
                self.standing -= 1
        self.held_alone(message)

    def superseded(self, entry: Entry) -> bool:
        """Whether a newer version of ``entry``'s key has arrived while ``entry``, a live
        entry of a last-value queue, is on it (out with a consumer, or held): it no longer
        stands for its key's latest version (or the key was forgotten since). O(1)."""
        key = entry.key
        if not self.indexes or key is None:
            return False
        versions = self._versions.get(key)
        return versions is None or _latest(versions) is not entry

    def held_alone(self, message: Message) -> None:
        """``message``, a kept version, is held by the history alone from now on (it has
        left its queue, or came back from the store as history only): it counts in the
        budget, which may make the histories forget (see the module rules)."""
        cost = (len(message.data) if not message.paged else message.size) + VERSION_COST
        self.held += cost
        budget = self.budget
        budget.used += cost
        if budget.used > budget.limit:
            budget.went_over()

    def forget(self, needed: int) -> int:
        """Let go of at least ``needed`` of what it holds alone, if it holds that much: a
        hand walks the keys in the dictionary's order, on from where it stopped last (see
        the module rules). How much it let go. O(the keys it passes): at most three rounds.
        The walk reads each key's versions as it passes them (no lookup, no list of keys);
        keys are forgotten as it passes them and leave the dictionary once it stops, as a
        dictionary cannot lose keys while it is walked."""
        held = self.held
        every = self._versions
        visits = 3 * len(every)
        share = self._share(needed)
        cut = self._next_round(share) if self._walk is None else self._cut(share)
        walk, hand = self._walk, self._hand  # the hand, as locals: it passes many keys
        gone: list[str] = []  # forgotten, still in the dictionary
        while held - self.held < needed and visits:
            try:
                item = next(walk, None)  # type: ignore[arg-type] # a round is under way
            except RuntimeError:  # keys came or went since it stopped: on from its place
                walk = self._walk = islice(every.items(), hand, None)
                continue
            if item is None:  # the round is over
                self._leave(gone)
                cut = self._next_round(self._share(needed - (held - self.held)))
                walk, hand = self._walk, 0
                if not every:
                    break  # every key is gone
                continue
            visits -= 1
            hand += 1
            key, versions = item
            kind = type(versions)
            if kind is list or kind is deque:  # two versions at least (see _trim)
                oldest = versions[0]  # type: ignore[index]
                if type(oldest) is Message and not oldest.on_queue:  # held alone (_held_alone)
                    self._trim(key, versions)  # type: ignore[arg-type] # it lets go of some:
                    self._round_freed = True  # the key stays this round
                    continue
                latest = versions[-1]  # type: ignore[index]
            else:
                latest = versions
            if type(latest) is Message and not latest.on_queue and latest.number <= cut:  # type: ignore[operator] # numbered
                self._let_go(key, versions)  # nothing older to let go of, and among the oldest
                gone.append(key)
                self._round_freed = True
        self._hand = hand - len(gone)  # the keys it forgot were behind it
        self._leave(gone)
        return held - self.held

    def _leave(self, gone: list[str]) -> None:
        """The keys in ``gone``, forgotten as the hand passed them, leave the dictionary."""
        for key in gone:
            del self._versions[key]
        gone.clear()

    def _share(self, needed: int) -> float:
        """What share of its keys that may be forgotten the history lets go of, to free
        ``needed``: ``needed`` over what it holds alone, an eighth at least (see the module
        rules)."""
        return 1.0 if needed >= self.held else max(_SHARE_LEAST, needed / self.held)

    def _next_round(self, share: float) -> int:
        """The hand starts a round: over every key, in the dictionary's order (the order
        first seen; keys first seen during the round are passed at its end). Its cut: every
        key held alone if the last round let go of nothing, else a new sample's (see
        :meth:`_cut`)."""
        every = self._versions
        self._walk, self._hand = iter(every.items()), 0
        self._sample = list(islice(every, 0, None, max(1, len(every) // _SAMPLE)))
        cut = self._cut(share) if self._round_freed else _EVERY
        self._round_freed = False
        return cut

    def _cut(self, share: float) -> int:
        """The queue number at or below which ``share`` or so of the keys that may be
        forgotten had their latest version: of :data:`_SAMPLE` keys or so, evenly spaced in
        the dictionary as the round started (O(_SAMPLE)); above every number if none of
        them may be."""
        latest_numbers = []
        for key in self._sample:
            versions = self._versions.get(key)
            if versions is not None:
                latest = _latest(versions)
                if _held_alone(latest):
                    latest_numbers.append(latest.number)  # type: ignore[union-attr] # a message
        if not latest_numbers:
            return _EVERY
        latest_numbers.sort()
        at = min(len(latest_numbers) - 1, int(len(latest_numbers) * share))
        return latest_numbers[at]  # type: ignore[return-value] # numbered

    def _trim(self, key: str, versions: list[Message | Entry] | deque[Message | Entry]) -> None:
        """Let go of ``key``'s older versions held alone, from the oldest (the front, as
        versions mostly leave their queue in order) up to its latest or one still on the
        queue. A key's list (or deque) holds two versions at least: one left alone is kept
        alone (see __init__)."""
        while len(versions) > 1:
            oldest = versions[0]
            if type(oldest) is not Message or oldest.on_queue:  # not held alone (_held_alone)
                break
            if type(versions) is list:
                versions.pop(0)
            else:
                versions.popleft()  # type: ignore[union-attr] # a deque
            self._drop(oldest)
        if len(versions) == 1:
            self._versions[key] = versions[0]  # alone (see __init__)

    def _forget(self, key: str) -> None:
        """``key`` and every version of it go; its numbers are never given out again."""
        self._let_go(key, self._versions.pop(key, None))

    def _let_go(self, key: str, versions: Kept | None) -> None:
        """``key``'s ``versions`` (None: it has none) go, and its numbers are never given
        out again (its current number, as :meth:`current` reads it, read as they go). The
        caller takes the key out of the dictionary."""
        current = self._kept_number(versions)
        if versions is not None:
            for each in versions if isinstance(versions, _MANY) else (versions,):
                self._drop(each)  # type: ignore[arg-type] # none is on the queue's index
        if self._ahead:
            current = self._ahead.pop(key, current)
        if current > self.floor:
            self.floor = current
        self.budget.forgotten += 1
        if self.forgot is not None:
            self.forgot(key, self.floor)

    def _fold_ahead(self) -> None:
        """Numbers given out for keys that have no version (a commit whose write failed, a
        transfer refused after it was numbered) are kept only up to a point: past it those
        keys are forgotten (O(1) for each number given out)."""
        for key in [key for key in self._ahead if key not in self._versions]:
            self._forget(key)
        self._ahead_limit = max(_AHEAD_FOLD, 2 * len(self._ahead))

    def _drop(self, message: Message) -> None:
        """A key has more versions than it keeps: its oldest, ``message``, goes, bytes and
        all (unless its entry is still on the queue)."""
        message.in_history = False
        if not message.on_queue:  # it was held alone (see held_alone)
            cost = (len(message.data) if not message.paged else message.size) + VERSION_COST
            self.held -= cost
            self.budget.used -= cost
        if message.store_id is not None and self.dropped is not None:
            self.dropped(message)

    def number(self, message: Message) -> tuple[str, int] | None:
        """Give ``message`` the next number of its key (``message.sequence``), unless it has
        one; InvalidField for a bad custom number.
        (key, number), or None for a message without the key. For a message numbered
        before it joins (the broker writes it to the store first): its number counts as
        given out from now on."""
        key = self.numbered(message)
        if key is None:
            return None
        if message.sequence is None:
            message.sequence = self.current(key) + 1
        self.reserve(key, message.sequence)
        return key, message.sequence

    def numbered(self, message: Message) -> str | None:
        """The key of ``message``, a message recorded next (by :meth:`arrived`), or None
        when it has none. It is numbered here (``message.sequence``) only where its number
        must be known before it is recorded: a producer's own, which is checked now (the
        queue asks before anything changes, so a bad one refuses the message), and a
        stored message's, which its bytes carry. Otherwise :meth:`arrived` numbers it, as
        it reads the key's latest version anyway. Nothing is reserved (see :meth:`number`).
        The usual keyed message (its properties not decoded, not stored, no custom number)
        takes one compiled call: the key's value, unless the bytes of ``x-opt-sequence``
        occur from its annotations to the end of its properties (never the body)."""
        props = message.app_properties_span
        if props is not None and message.extras is None and message.store_id is None:
            notes = message.annotations_span
            value = find_unmarked(
                message.data,
                props[0],
                props[1],
                self.key_property,
                props[0] if notes is None else notes[0],
                _SEQUENCE_BYTES,
            )
            if value is not _SEQUENCE_BYTES:  # no custom number: nothing more to do
                return value if type(value) is str else key_text(value, message, self.key_property)
        return self._numbered_further(message)

    def _numbered_further(self, message: Message) -> str | None:
        """:meth:`numbered` for a message that may have a custom number, was stored, or has
        its properties decoded already."""
        key = self._key_of(message)
        if key is None:
            return None
        if message.sequence is None:
            custom = self._custom_of(message)
            if custom is not None:
                message.sequence = _custom_sequence(key, custom, self.current(key))
            elif message.store_id is not None:
                message.sequence = self.current(key) + 1
            # Delivered as x-opt-sequence, added as it leaves; a message written to the
            # store carries it in its bytes (codec/encode.py).
            if message.store_id is not None:
                annotate(message, SEQUENCE, message.sequence)  # type: ignore[arg-type] # numbered
        return key

    def _key_of(self, message: Message) -> str | None:
        """The text of ``message``'s key property; None when it has none."""
        props = message.app_properties_span
        if props is not None and message.extras is None:  # Message.application_property,
            value = find_in_map(message.data, props[0], props[1], self.key_property)  # inlined
        else:
            value = message.application_property(self.key_property)
        return value if type(value) is str else key_text(value, message, self.key_property)

    def _custom_of(self, message: Message) -> object:
        """The value ``message`` carries as ``x-opt-sequence`` (a message annotation, else
        an application property; None: neither). It is looked for only if its bytes are in
        those sections (one C-speed search from the annotations to the end of the
        properties, never the body)."""
        props = message.app_properties_span
        notes = message.annotations_span
        if notes is None:
            first = last = props
        else:
            first, last = notes, props or notes
        if first is None or not contains(message.data, _SEQUENCE_BYTES, first[0], last[1]):  # type: ignore[index]
            return None
        custom = message.message_annotation(SEQUENCE)
        return message.application_property(SEQUENCE) if custom is None else custom

    def check(self, message: Message) -> None:
        """InvalidField if ``message`` carries a custom number its key would refuse now;
        nothing is given out or kept. For a transaction's send, numbered when it commits
        (:meth:`number`, which checks the number again then)."""
        key = self._key_of(message)
        if key is not None and message.sequence is None:
            custom = self._custom_of(message)
            if custom is not None:
                _custom_sequence(key, custom, self.current(key))

    def renumber(self, message: Message) -> tuple[str, int] | None:
        """Give ``message``, a copy the broker makes of a message that was on another queue
        (moved or dead-lettered to this one), its key's next number now, as qpidd's queue
        numbers every message it is given: whatever ``x-opt-sequence`` it carries was the
        other queue's number, or its producer's, checked there, not a producer's for this
        queue. The annotation in its bytes, if any, is replaced (a delivery keeps one it
        finds), and a message bound for the store gets it in its bytes, as
        :meth:`numbered` gives a stored one. (key, number), or None without the key; the
        number counts as given out from now on (see :meth:`number`)."""
        key = self._key_of(message)
        if key is None:
            return None
        seq = message.sequence = self.current(key) + 1
        self.reserve(key, seq)
        if message.store_id is not None or message.message_annotation(SEQUENCE) is not None:
            stamp(message, SEQUENCE, seq)
        return key, seq

    def recover(self, message: Message) -> Entry | None:
        """At start-up: a stored version that had left the queue but was kept. On a
        last-value queue: the entry it displaces, as :meth:`arrived`."""
        key = self.numbered(message)
        if key is None:
            return None
        displaced = self.arrived(key, message, message.number or 0)
        if message.in_history:  # not dropped at once (a later version came back first)
            self.held_alone(message)
        return displaced

    def current(self, key: str) -> int:
        """The latest number given out for ``key`` (0: none yet)."""
        seq = self._kept_number(self._versions.get(key))
        return self._ahead.get(key, seq) if self._ahead else seq

    def _kept_number(self, versions: Kept | None) -> int:
        """The number of a key's latest kept version (``versions``; None: it has none, and
        its numbers go on above the highest forgotten, see the module rules)."""
        if versions is None:
            return self.floor
        return _message_of(_latest(versions)).sequence  # type: ignore[return-value] # numbered

    def replay(self, start: int | str, key: str | None = None) -> list[Version]:
        """The kept versions from ``start`` (a number, FIRST or LAST), arrival order."""
        return self.replay_slice(start, key)

    def replay_slice(
        self,
        start: int | str,
        key: str | None = None,
        after: int = 0,
        upto: int = _EVERY,
        limit: int | None = None,
    ) -> list[Version]:
        """Up to ``limit`` (None: all) of the versions :meth:`replay` lists, those whose
        queue numbers are above ``after`` and at most ``upto``: a stream asks for its
        replay a slice at a time, ``after`` the last one it was given, ``upto`` the newest
        queue number when it subscribed (versions above it reach it as they arrive), so
        the loop serves its sockets in between (see the module rules). O(keys x log n +
        what it lists x log keys)."""
        every = self._versions
        if key is not None:
            versions = every.get(key)
            keys: Iterable[tuple[str, Kept]] = () if versions is None else ((key, versions),)
        else:
            keys = every.items()
        runs = []
        for each, versions in keys:
            many = versions if isinstance(versions, _MANY) else (versions,)
            end = bisect_right(many, upto, key=_order_of)
            begin = bisect_right(many, after, 0, end, key=_order_of)
            if start == LAST:
                begin = max(begin, end - 1)  # its latest up to ``upto``, if not given yet
            elif start != FIRST:
                begin = bisect_left(many, start, begin, end, key=_sequence_of)
            if begin < end:
                runs.append(map(partial(_version, each), islice(many, begin, end)))
        if not runs:
            return []
        ordered = runs[0] if len(runs) == 1 else merge(*runs, key=_ORDER)
        return list(ordered if limit is None else islice(ordered, limit))

    def first(self, start: int | str, key: str | None = None) -> Version | None:
        """What a long poll from ``start`` is answered at once: the first kept version
        with a number >= ``start`` (FIRST: the oldest; LAST: the newest), of ``key`` or in
        arrival order of all keys; None if there is none. Each key's candidate is found by
        bisection and the earliest (LAST: the latest) taken: O(log n) for a key, O(keys x
        log n) for all keys, not a list of every version (see the module rules)."""
        every = self._versions
        if key is not None:
            versions = every.get(key)
            found = None if versions is None else _first_of(versions, start)
            return None if found is None else _version(key, found)
        best: Message | Entry | None = None
        best_key = ""
        best_order = 0
        latest = start == LAST
        for each, versions in every.items():
            found = _first_of(versions, start)
            if found is None:
                continue
            order: int = _order_of(found)
            if best is None or (order > best_order if latest else order < best_order):
                best, best_key, best_order = found, each, order
        return None if best is None else _version(best_key, best)


def _first_of(versions: Kept, start: int | str) -> Message | Entry | None:
    """A key's first kept version with a number >= ``start`` (FIRST: its oldest; LAST: its
    latest), or None: its numbers ascend, so it is found by bisection."""
    if not isinstance(versions, _MANY):
        one: Message | Entry = versions  # one version alone
        return one if isinstance(start, str) or _sequence_of(one) >= start else None
    if start == LAST:
        return versions[-1]
    if start == FIRST:
        return versions[0]
    at = bisect_left(versions, start, key=_sequence_of)
    return versions[at] if at < len(versions) else None


def _order_of(version: Message | Entry) -> int:
    """A kept version's queue number: its arrival order."""
    return _message_of(version).number  # type: ignore[return-value] # numbered


def _sequence_of(version: Message | Entry) -> int:
    """A kept version's number of its key."""
    return _message_of(version).sequence  # type: ignore[return-value] # numbered


def _custom_sequence(key: str, custom: object, current: int) -> int:
    """``custom``, a producer's number for ``key``'s next version (its ``current`` one
    given out), if it is valid (see the module rules)."""
    if not isinstance(custom, int) or isinstance(custom, bool) or custom > _LONG_MAX:
        raise InvalidField(f"{SEQUENCE} must be an integer (a long), got {custom!r}", SEQUENCE)
    if custom > CUSTOM_MAX:
        raise InvalidField(
            f"{SEQUENCE} {custom} is too large: at most {CUSTOM_MAX} (2^62), so that every "
            "key's numbers can go on above it",
            SEQUENCE,
        )
    if custom <= current:
        raise InvalidField(
            f"{SEQUENCE} {custom} for key {key!r} is not greater than its "
            f"current sequence {current}",
            SEQUENCE,
        )
    return custom


def _held_alone(version: Message | Entry) -> bool:
    """Whether a kept version is held by its history alone (it has left the queue)."""
    return type(version) is Message and not version.on_queue


def _latest(versions: Kept) -> Message | Entry:
    """A key's latest kept version."""
    return versions[-1] if isinstance(versions, _MANY) else versions


def _message_of(version: Message | Entry) -> Message:
    """A kept version's message (its entry's, where an entry stands for it)."""
    return version.message if isinstance(version, Entry) else version


def _version(key: str, version: Message | Entry) -> Version:
    message = _message_of(version)
    return Version(message.number, key, message.sequence, message)  # type: ignore[arg-type] # numbered


_ORDER = attrgetter("order")


def sequence_start(value: object) -> int | str:
    """A replay start as a consumer gives it: a number, or ``first``/``last``."""
    if isinstance(value, str):
        if value.lower() in (FIRST, LAST):
            return value.lower()
        with contextlib.suppress(ValueError):
            value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise InvalidField(
        f"{SEQUENCE} filter must be a sequence number, 'first' or 'last', got {value!r}", SEQUENCE
    )
