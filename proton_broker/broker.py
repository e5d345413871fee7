"""The broker: the set of queues, which names may be created on demand, and routing.

This is the only place that decides whether an address resolves to a queue. It knows no
protocol: the AMQP adapter asks it for queues by name and hands it message records.
Node auto-creation follows the Qpid brokers' node policies: a name is created on demand
when ``auto_create`` is on and the name matches one of ``auto_create_patterns``
(shell-style patterns; the Qpid interop suite expects ``qit.*`` and ``test.*`` to work).
"""

from __future__ import annotations

import fnmatch
import itertools
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from proton_broker.codec.encode import KEY_SEQUENCE
from proton_broker.codec.sections import annotate, parse_message
from proton_broker.codec.values import DecodeError
from proton_broker.config import Config
from proton_broker.deadletters import DeadLetters
from proton_broker.errors import (
    BrokerError,
    ConfigError,
    InvalidField,
    NotFound,
    NotImplementedByBroker,
    NotTaken,
    PreconditionFailed,
    ResourceLimitExceeded,
    UnknownDestination,
)
from proton_broker.exchanges.exchange import (
    DEFAULT_EXCHANGES,
    Exchange,
    ExchangeAddress,
    unsupported_arguments,
)
from proton_broker.exchanges.registry import Exchanges
from proton_broker.exchanges.subscriptions import Subscriptions
from proton_broker.lifetime import Lifetimes
from proton_broker.message import Message
from proton_broker.queues.budget import HistoryBudget, MemoryBudget
from proton_broker.queues.expiry import SWEEP_BATCH
from proton_broker.queues.factory import build_queue
from proton_broker.queues.history import SEQUENCE
from proton_broker.queues.ports import LoopHooks
from proton_broker.queues.queue import SLICE, Queue
from proton_broker.queues.settings import (
    LIVE_SETTINGS,
    ParsedOptions,
    QueueSettings,
    differences,
    parse_options,
    unknown_options_error,
)
from proton_broker.security.access import Access, queue_properties
from proton_broker.store.base import (
    Completion,
    Post,
    Recovered,
    Store,
    StoredMessage,
    StoreError,
    Unit,
)
from proton_broker.store.memory import MemoryStore
from proton_broker.store.sqlite import SqliteStore
from proton_broker.transactions import Transaction, Transactions

# qpidd's QMF exchanges: a request sent there as to a queue made on demand would never be
# answered, so an attach to them (or to NAME/subject) is refused as not implemented.
QMF_EXCHANGES = ("qmf.default.direct", "qmf.default.topic")

log = logging.getLogger("proton_broker.broker")

MANAGEMENT_NODE = "$management"  # the address of the management node (proton_broker.management)
store_log = logging.getLogger("proton_broker.store")


class Broker:
    """Owns every queue. Used only from the event-loop thread."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.queues: dict[str, Queue] = {}
        self._sweeping: list[Queue] = []  # queues the expiry sweep under way has still to do
        # How the event loop drives every queue, present and future (filled in by the
        # server and the store): one object all the queues share.
        self.loop_hooks = LoopHooks(
            budget=MemoryBudget(self.config.broker.max_memory),
            history_budget=HistoryBudget(self.config.broker.max_history_memory),
        )
        self.store: Store | None = None  # opened by open_store(), once the loop exists
        self.transactions = Transactions(
            self.loop_hooks.budget, self.config.broker.max_transactions_per_connection
        )
        # Called with a queue being deleted, before its messages go: the protocol adapter
        # detaches the links attached to it (see delete_queue).
        self.deletion_watchers: list[Callable[[Queue], object]] = []
        # Who may do what (the ACL file, security/access.py); ``user`` arguments below are
        # the client asking, None for the broker itself (configured queues, recovery).
        self.access = Access(self.config.acl.file)
        self.deletion_watchers.append(lambda queue: self.access.queue_gone(queue.name))
        self.exchanges = Exchanges(
            self.config.broker.max_exchanges, self.config.broker.max_bindings
        )
        self.deletion_watchers.append(lambda queue: self.exchanges.queue_deleted(queue.name))
        self.subscriptions = Subscriptions(self)
        # Queues that take nothing some connections publish (no-local: a subscriber's
        # filter, or a no-local queue's receivers): queue name -> those connections (any
        # object the adapter identifies a connection by), each counted once for every such
        # link it has on the queue. Routing (route) and a producer's link (is_local) ask.
        self.no_local: dict[str, Counter[object]] = {}
        self.deletion_watchers.append(lambda queue: self.no_local.pop(queue.name, None))
        # Where the messages a queue gives up on go (deadletters.py); while the broker
        # starts, alternates are checked once everything is declared (they may name
        # exchanges and queues declared later).
        self.dead_letters = DeadLetters(self)
        self.loop_hooks.dead_letters = self.dead_letters
        self.loop_hooks.self_destruct = self._self_destruct  # queues/limits.py
        self._starting = True
        self._recovering = False  # bringing back the store's messages (open_store)
        self.lifetimes = Lifetimes(self)  # auto-delete, exclusive, the idle sweep (lifetime.py)
        for name, options in self.config.queues.items():
            try:
                self.declare(name, options)
            except BrokerError as exc:  # the config file's: say where in it
                raise ConfigError(f"queues.{name}: {exc.description}") from None
        self._declare_configured_exchanges()
        self._check_alternates(configured=True)

    def set_queue_hooks(
        self,
        defer: Callable[[Queue], object] | None = None,
        wake_at: Callable[[float, Queue], object] | None = None,
        soon: Callable[[Callable[[], None]], object] | None = None,
    ) -> None:
        """How the server's event loop drives every queue, present and future (see
        :class:`~proton_broker.queues.ports.LoopHooks`)."""
        self.loop_hooks.defer = defer
        self.loop_hooks.wake_at = wake_at
        self.loop_hooks.soon = soon

    def declare(
        self, name: str, options: Mapping[str, Any] | None = None, user: str | None = None
    ) -> Queue:
        """Create ``name`` with ``options`` or return the existing queue if it matches."""
        return self._get_or_create(name, options, allowed=True, user=user)

    def may_create(self, name: str) -> bool:
        broker = self.config.broker
        return broker.auto_create and any(
            fnmatch.fnmatchcase(name, pattern) for pattern in broker.auto_create_patterns
        )

    def check_name(self, name: str, what: str) -> None:
        """InvalidField unless ``name`` (of a new ``what``: a queue, an exchange, a link, a
        container id) is Unicode text that AMQP's strings and the store can carry (the HTTP
        side's JSON can spell a lone surrogate, which neither can: a queue named so could be
        made but never encoded, listed or deleted), at most ``broker.max_name_length``
        bytes of UTF-8 (a name is kept, logged and shown whole)."""
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidField(f"the name of a {what} must be Unicode text, got {name!r}") from None
        most = self.config.broker.max_name_length
        if size > most:
            raise InvalidField(
                f"the name of a {what} is {size} bytes long, more than {most} "
                f"(broker.max_name_length): {name[:64]!r}..."
            )

    def resolve(
        self,
        name: str | None,
        options: Mapping[str, Any] | None = None,
        create: bool = True,
        user: str | None = None,
    ) -> Queue:
        """The queue for ``name``, created on demand (with ``options``) when policy allows.

        Options are checked even when the queue exists: unknown keys, bad values and
        settings that differ from the queue's own are refused with :class:`InvalidField`,
        and nothing is created or changed.
        """
        if not name:
            raise NotFound("no address given")
        if name == MANAGEMENT_NODE:  # reached by the anonymous relay or the HTTP gateway
            raise NotFound(
                f"'{name}' is the management node, not a queue: send requests on "
                f"a link whose target address is {name}"
            )
        if name.startswith(QMF_EXCHANGES) and name not in self.queues:
            raise NotImplementedByBroker(
                f"'{name}' is qpidd's QMF management address: this broker does not speak QMF; "
                f"send AMQP management requests to {MANAGEMENT_NODE} (qpid-config's "
                "operations: proton-broker-config)"
            )
        allowed = create and self.may_create(name)
        return self._get_or_create(name, options, allowed=allowed, user=user, on_demand=True)

    def relay_target(self, to: str | None) -> Queue | ExchangeAddress:
        """Where a message sent through the anonymous relay goes: a queue that exists, or
        an exchange (``exchange`` or ``exchange/subject``, qpidd's and Broker-J's relay).
        Auto-creation applies to attach, as in qpidd, so a late reply to a temporary queue
        that is gone cannot bring it back as a permanent one; the message is refused
        (Broker-J's "Unknown destination")."""
        found = self.node(to, sending=True) if to and to != MANAGEMENT_NODE else None
        if found is not None:
            return found
        if not to or to == MANAGEMENT_NODE:
            return self.resolve(to)  # raises, saying what is wrong with the address
        raise UnknownDestination(
            f"Unknown destination '{to}': the anonymous relay sends only to queues and "
            "exchanges that exist"
        )

    def _get_or_create(
        self,
        name: str,
        options: Mapping[str, Any] | None,
        allowed: bool,
        user: str | None = None,
        on_demand: bool = False,
    ) -> Queue:
        parsed = parse_options(options) if options else None
        if parsed is not None and parsed.unknown:
            raise unknown_options_error(name, parsed.unknown)
        queue = self.queues.get(name)
        if queue is not None:
            if parsed is not None:
                _note_differences(queue, parsed)
            return queue
        if not allowed:
            raise NotFound(f"Node not found: {name}")
        if not self._recovering:  # what the store holds comes back (_warn_over_limits)
            self._check_creatable(name)
        settings = parsed.settings if parsed is not None else QueueSettings()
        if user is not None:
            self.access.create_queue(user, name, settings)
        alternate = self._alternate_of(name, settings, on_demand)
        queue = build_queue(
            name,
            settings,
            parsed.echo if parsed is not None else {},
            default_group=self.config.broker.default_message_group,
            max_key_updates=self.config.queue.max_key_updates,
            hooks=self.loop_hooks,
            pack_after=self.config.queue.pack_after,
        )
        if settings.durable:
            self._make_durable(queue)
        self._set_dead_lettering(queue, alternate, settings)
        queue.auto_created = on_demand  # made on demand: the idle sweep may delete it
        self.queues[name] = queue
        if user is not None:
            self.access.queue_created(user, name)
        log.info(
            'QUE-1001 Create : "%s" : %s : %s',
            name,
            settings.kind,
            ", ".join(f"{k}={v}" for k, v in (options or {}).items()) or "defaults",
        )
        for notice in parsed.notices if parsed is not None else ():
            log.warning('queue "%s": %s', name, notice)
        return queue

    def _check_creatable(self, name: str) -> None:
        """InvalidField or ResourceLimitExceeded unless a queue ``name`` may be created now:
        its name (see :meth:`check_name`) and ``broker.max_queues``."""
        self.check_name(name, "queue")
        most = self.config.broker.max_queues
        if len(self.queues) >= most:
            raise ResourceLimitExceeded(
                f"cannot create queue '{name}': the broker has {most} queues, the most it may "
                "have (broker.max_queues)"
            )

    def _alternate_of(self, name: str, settings: QueueSettings, on_demand: bool) -> str | None:
        """The alternate a new queue gets (see deadletters.py): the one it names (which
        must exist, unless the broker is starting), or its dead-letter queue, made now."""
        if settings.alternate is not None:
            if not self._starting:
                self.dead_letters.check_exists(settings.alternate, f"queue '{name}'")
            return settings.alternate
        section = self.config.queue
        wanted = settings.dead_letter_queue
        if wanted is None:
            wanted = on_demand and section.dead_letter_queues
        if not wanted or name.endswith(section.dead_letter_suffix):
            return None  # a dead-letter queue has none of its own
        dlq = name + section.dead_letter_suffix
        if dlq not in self.queues:
            self._get_or_create(dlq, {"durable": True} if settings.durable else None, True)
        return dlq

    def _set_dead_lettering(
        self, queue: Queue, alternate: str | None, settings: QueueSettings
    ) -> None:
        """Give ``queue`` its alternate and maximum delivery attempts (the broker's default
        unless its settings say)."""
        old = queue.alternate
        self.dead_letters.unuse(old, f"queue '{queue.name}'")
        queue.alternate = alternate
        self.dead_letters.use(alternate, f"queue '{queue.name}'")
        most = settings.max_delivery_attempts
        queue.max_delivery_attempts = (
            self.config.queue.maximum_delivery_attempts if most is None else most
        )

    def _check_alternates(self, configured: bool) -> None:
        """Once the broker has declared what it starts with: every alternate must exist.
        One the config file names stops start-up (``configured``); one recovered from the
        store is only warned about: the broker must come back with what it stored."""
        self._starting = False
        named = [("queue", "queues", q.name, q.alternate) for q in self.queues.values()]
        named += [("exchange", "exchanges", e.name, e.alternate) for e in self.exchanges]
        for kind, section, name, alternate in named:
            if alternate is None:
                continue
            try:
                self.dead_letters.check_exists(alternate, f"{kind} '{name}'")
            except NotFound as exc:
                if configured:
                    raise ConfigError(f"{section}.{name}: {exc.description}") from None
                log.warning("%s: what it gives up on is discarded", exc.description)

    def delete_queue(self, name: str, force: bool = False, user: str | None = None) -> int:
        """Delete queue ``name`` and its messages; returns how many messages went.

        A queue holding messages is refused (:class:`PreconditionFailed`) unless ``force``,
        as ``qpid-config del queue`` does. The links attached to it are detached first (by
        the :attr:`deletion_watchers`; consumers' unacknowledged messages come back and go
        with the rest), then a durable queue leaves the store with its messages.
        """
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"Node not found: {name}")
        if user is not None:
            self.access.check(user, "delete", "queue", name, queue_properties(queue.settings))
        if queue.depth and not force:
            raise PreconditionFailed(
                f"queue '{name}' holds {queue.depth} message(s); "
                "delete it with force to discard them"
            )
        self.dead_letters.check_unused(name, "queue")
        del self.queues[name]
        dropped = [0]
        alternate = queue.alternate
        persistent = queue.persistent and self.store is not None
        # A dead letter costs some 20 us, a discard far less: 1000 a pass to an alternate
        # (as the expiry sweep's, qpidd's maxPurgeBatch), SLICE a pass otherwise. A stored
        # queue's messages going to an alternate go in one pass, stored with the deletion
        # of the queue's rows in one write: in slices, a stop between two would lose those
        # not moved yet, their rows gone with the queue's (docs/management.md).
        most = SLICE if alternate is None else SWEEP_BATCH
        on_disk = self.store is not None and self.store.location is not None
        if persistent and on_disk and alternate is not None:
            most = sys.maxsize  # see above
        first = [True]

        def step(start: int) -> int | None:
            # Its messages (those consumers give back as they are detached, then the rest,
            # ``most`` a pass of the loop) go to its alternate, stored with the deletion itself
            # (the first slice) or in a write of their own (deadletters.py).
            with self.dead_letters.deleting() as moved:
                if first[0]:
                    for watcher in list(self.deletion_watchers):
                        watcher(queue)
                    queue.journal = None  # the store drops the queue's rows at once
                    queue.begin_clear()
                removed, following = queue.clear_slice(start, most)
            dropped[0] += removed
            self._store_moved(name, moved, deleted=persistent and first[0])
            first[0] = False
            return following

        def done() -> None:
            queue.end_clear()
            self.dead_letters.unuse(alternate, f"queue '{name}'")
            where = f"moved to '{alternate}'" if alternate else "discarded"
            log.info('QUE-1002 Deleted : "%s" : %d message(s) %s', name, dropped[0], where)

        total = queue.depth
        queue.in_slices(step, done)
        return total

    def _store_moved(self, name: str, moved: Any, deleted: bool) -> None:
        """The store writes what a slice of a deletion moved to the alternate: with the
        deletion of the queue's rows (``deleted``: the first slice of a durable queue's),
        or alone; the copies join their queue once written."""
        if deleted:
            assert self.store is not None
            self.store.delete_queue(name, moved.stored)
        elif moved.stored:  # durable copies of a queue that was not: they join once written
            assert self.store is not None
            later, moved.joins = moved.joins, []
            self.store.commit(Unit(enqueues=moved.stored, done=lambda _error: _run(later)))
        _run(moved.joins)

    def _self_destruct(self, queue: Queue) -> bool:
        """qpidd's self-destruct policy: ``queue`` went over its limit, so it is deleted as
        a forced delete would (its consumers detached, its messages to its alternate or
        discarded), after the enqueue that took it over, unless it has gone already. Not
        while the broker recovers: messages recovered from the store do not count (qpidd
        recovers them without the check), the next arrival does."""
        if self._recovering:
            return False

        def destruct() -> None:
            if self.queues.get(queue.name) is not queue:
                return  # QUE-1003 said why (queues/overflow.py), QUE-1002 will say it went
            try:
                self.delete_queue(queue.name, force=True)
            except BrokerError as exc:  # another queue's alternate: it stays
                log.warning('"%s" could not delete itself: %s', queue.name, exc)

        self.loop_hooks.later(destruct)
        return True

    def purge_queue(
        self,
        name: str,
        user: str | None = None,
        done: Callable[[int], None] | None = None,
    ) -> None:
        """Remove the available messages of queue ``name`` (qpidd's purge, which its ACL
        calls ``purge``), :data:`SLICE` looked at a pass of the loop, so that a deep queue
        never holds it; ``done(purged)`` runs after the last slice. Messages consumers hold
        stay with them, and none goes to the alternate: a purge is an operator's discard.
        A queue deleted meanwhile took the rest with it."""
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"Node not found: {name}")
        if user is not None:
            self.access.check(user, "purge", "queue", name, queue_properties(queue.settings))
        purged = [0]

        def step(start: int) -> int | None:
            if not self.is_live(queue):
                return None
            removed, following = queue.purge_slice(start, SLICE)
            purged[0] += removed
            return following

        def finished() -> None:
            log.info('QUE-1011 Purge : "%s" : %d message(s) removed by %s', name, purged[0], user)
            if done is not None:
                done(purged[0])

        queue.in_slices(step, finished)

    def when_removed(self, queue: Queue, removed: int, done: Completion) -> bool:
        """After an operator removed ``removed`` messages from ``queue`` (a purge,
        deleteMessages): whether their removals go to the store, and then ``done(error)``
        runs once they are on disk (error: they could not be written yet; the store
        retries them with its next write, and finishes them at the next start). False:
        nothing to wait for (``done`` is not called)."""
        if not removed or not queue.persistent or self.store is None:
            return False
        self.store.after_writes(done)
        return True

    def is_live(self, queue: Queue) -> bool:
        """Whether ``queue`` is still the broker's (not deleted): messages whose store write
        finishes after a deletion must not join (or be left in the store for) it."""
        return self.queues.get(queue.name) is queue

    def update_queue(self, name: str, changes: Mapping[str, Any], user: str | None = None) -> Queue:
        """Change settings of a live queue (only those :meth:`Queue.update_settings`
        accepts); the options are checked as on an attach, ``user`` (if any) must be
        allowed to ``update`` the queue as it will be (the ACL's limit properties are
        checked against the new limits), and a durable queue's new options are saved.
        Nothing changes if anything is refused."""
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"Node not found: {name}")
        parsed = parse_options(changes)
        if parsed.unknown:
            raise unknown_options_error(name, parsed.unknown)
        declared = parse_options(queue.options).given if queue.options else {}
        replaced = {declared[target] for target in parsed.given if target in declared}
        options = {k: v for k, v in queue.options.items() if k not in replaced}
        merged = parse_options({**options, **changes})
        fixed = [
            key
            for target, key in parsed.given.items()
            if target not in LIVE_SETTINGS
            and getattr(merged.settings, target) != getattr(queue.settings, target)
        ]
        if fixed:
            raise InvalidField(
                f"cannot change {', '.join(repr(k) for k in fixed)} on a live "
                f"queue ('{name}'); delete and create it again",
                fixed[0],
            )
        if user is not None:
            self.access.check(user, "update", "queue", name, queue_properties(merged.settings))
        alternate = queue.alternate
        if "alternate" in parsed.given:
            alternate = merged.settings.alternate
            if alternate is not None:
                self.dead_letters.check_exists(alternate, f"queue '{name}'")
        if merged.settings.exclusive != queue.settings.exclusive:
            self.lifetimes.exclusivity_changed(queue, merged.settings.exclusive)
        queue.update_settings(merged.settings)
        self._set_dead_lettering(queue, alternate, merged.settings)
        queue.options = {**options, **parsed.echo}
        if queue.persistent and self.store is not None:
            self.store.save_queue(name, queue.options)
        log.info(
            'queue "%s" updated: %s', name, ", ".join(f"{k}={v}" for k, v in parsed.echo.items())
        )
        return queue

    # ---- exchanges and bindings --------------------------------------------------------

    def node(
        self, name: str, sending: bool = False, asked: str | None = None
    ) -> Queue | ExchangeAddress | None:
        """What an address names: a queue, an exchange, then ``exchange/key``; None:
        nothing. Where a name is both (a warning is logged), the kind of node the link
        asked for (``asked``: ``queue`` or ``topic``, qpid::messaging's node type, as
        qpidd's ``Session::resolve`` reads the capabilities); asking for neither, Broker-J's
        orders: a consumer's source the queue (``getAttainedMessageSource``), a producer's
        target or the relay's ``to`` (``sending``) the exchange
        (``getAttainedMessageDestination``)."""
        queue = self.queues.get(name)
        exchange = self.exchanges.get(name)
        if queue is not None and exchange is not None:
            to_exchange = asked == "topic" or (asked is None and sending)
            used = "exchange" if to_exchange else "queue"
            log.warning("'%s' is both a queue and an exchange: the %s is used", name, used)
            return ExchangeAddress(exchange) if to_exchange else queue
        if queue is not None:
            return queue
        if exchange is not None:
            return ExchangeAddress(exchange)
        prefix, slash, subject = name.partition("/")
        exchange = self.exchanges.get(prefix) if slash else None
        return ExchangeAddress(exchange, subject) if exchange is not None else None

    def declare_exchange(
        self,
        name: str,
        kind: str,
        durable: bool = False,
        arguments: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> Exchange:
        """Create exchange ``name`` of type ``kind``, or return it if it exists with that
        type (see :mod:`proton_broker.exchanges.registry`)."""
        existing = self.exchanges.get(name)
        if existing is None and not self._starting:  # one stored before is recovered
            self.check_name(name, "exchange")
            unsupported_arguments(arguments or {})
        if existing is None and user is not None:
            properties = {"type": kind, "durable": "true" if durable else "false"}
            self.access.check(user, "create", "exchange", name, properties)
        exchange, created = self.exchanges.declare(
            name, kind, durable, arguments, limited=not self._recovering
        )
        if created and exchange.alternate is not None:
            if not self._starting:
                try:
                    self.dead_letters.check_exists(exchange.alternate, f"exchange '{name}'")
                except NotFound:
                    self.exchanges.delete(name)
                    raise
            self.dead_letters.use(exchange.alternate, f"exchange '{name}'")
        if created:
            if durable and self.store is not None:
                self.store.save_exchange(name, kind, exchange.arguments)
            log.info('EXH-1001 Create : "%s" : %s%s', name, kind, " : durable" if durable else "")
        return exchange

    def update_exchange(
        self, name: str, arguments: Mapping[str, Any], user: str | None = None
    ) -> Exchange:
        """Give exchange ``name`` new ``arguments`` (see :meth:`Exchange.rearrange`): a new
        alternate must exist, and the old one is then free to be deleted; a durable
        exchange's arguments are saved. Nothing changes if anything is refused."""
        exchange = self.exchanges.named(name)
        if user is not None:
            self.access.check(user, "update", "exchange", name, {"type": exchange.kind})
        old = exchange.alternate
        previous = exchange.arguments
        exchange.rearrange(arguments)
        if exchange.alternate is not None and exchange.alternate != old:
            try:
                self.dead_letters.check_exists(exchange.alternate, f"exchange '{name}'")
            except NotFound:
                exchange.rearrange(previous)
                raise
        self.dead_letters.unuse(old, f"exchange '{name}'")
        self.dead_letters.use(exchange.alternate, f"exchange '{name}'")
        if exchange.durable and self.store is not None:
            self.store.save_exchange(name, exchange.kind, exchange.arguments)
        log.info('exchange "%s" updated: %s', name, exchange.arguments)
        return exchange

    def delete_exchange(self, name: str, user: str | None = None) -> None:
        """Delete exchange ``name`` and its bindings (its queues stay)."""
        exchange = self.exchanges.named(name)
        if user is not None:
            self.access.check(user, "delete", "exchange", name, {"type": exchange.kind})
        self.dead_letters.check_unused(name, "exchange")
        self.exchanges.delete(name)
        self.dead_letters.unuse(exchange.alternate, f"exchange '{name}'")
        if exchange.durable and self.store is not None:
            self.store.delete_exchange(name)
        log.info('EXH-1002 Deleted : "%s"', name)

    def bind(
        self,
        exchange: str,
        queue: str,
        key: str = "",
        arguments: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> bool:
        """Bind queue ``queue`` to ``exchange`` with ``key``; False if the binding existed
        (its arguments are replaced). A binding is durable (stored, recovered) when both
        its exchange and its queue are."""
        target, bound = self.exchanges.named(exchange), self.queues.get(queue)
        if bound is None:
            raise NotFound(f"Node not found: {queue}")
        if user is not None:
            properties = {"queuename": queue, "routingkey": key}
            self.access.check(user, "bind", "exchange", exchange, properties)
        created = self.exchanges.bind(exchange, queue, key, arguments)
        if target.durable and bound.persistent and self.store is not None:
            self.store.save_binding(exchange, queue, key, arguments or {})
        if created:
            log.info('BND-1001 Create : "%s" -> "%s" : key "%s"', exchange, queue, key)
        return created

    def unbind(self, exchange: str, queue: str, key: str = "", user: str | None = None) -> bool:
        """Remove one binding; False if there was none."""
        target = self.exchanges.named(exchange)
        if user is not None:
            properties = {"queuename": queue, "routingkey": key}
            self.access.check(user, "unbind", "exchange", exchange, properties)
        removed = self.exchanges.unbind(exchange, queue, key)
        bound = self.queues.get(queue)
        if removed and target.durable and bound is not None and bound.persistent:
            assert self.store is not None
            self.store.delete_binding(exchange, queue, key)
        if removed:
            log.info('BND-1002 Deleted : "%s" -> "%s" : key "%s"', exchange, queue, key)
        return removed

    def route(self, exchange: Exchange, key: str, message: Message) -> list[Queue]:
        """The queues ``message`` goes to through ``exchange`` with routing key ``key``
        (see :func:`~proton_broker.exchanges.exchange.routing_key`); none: it is
        unroutable. Those that keep its connection's messages out are left to
        :meth:`without_local`: a message routed only to them is routed all the same."""
        queues = self.queues
        routed = [queues[name] for name in exchange.route(key, message) if name in queues]
        if not routed and exchange.alternate is not None:
            routed = self.alternate_queues(exchange.alternate, key, message)
        return routed

    def without_local(self, routed: list[Queue], origin: object) -> list[Queue]:
        """``routed`` but for the no-local subscriptions of connection ``origin``."""
        no_local = self.no_local
        if no_local and origin is not None:
            return [queue for queue in routed if origin not in no_local.get(queue.name, ())]
        return routed

    def no_local_link(self, name: str, connection: object, attached: bool = True) -> None:
        """A no-local receiver of queue ``name`` on ``connection`` attached (or, ``attached``
        False, went): while it is there, what that connection publishes stays out of the
        queue, as qpidd drops it (Broker-J: out of reach of every consumer's connection)."""
        held = self.no_local.setdefault(name, Counter())
        held[connection] += 1 if attached else -1
        if held[connection] <= 0:
            del held[connection]
        if not held:
            del self.no_local[name]

    def is_local(self, queue: Queue, origin: object) -> bool:
        """Whether what connection ``origin`` publishes stays out of ``queue`` (see
        :meth:`no_local_link`)."""
        return origin in self.no_local.get(queue.name, ())

    def alternate_queues(
        self, name: str, key: str, message: Message, follow: bool = False
    ) -> list[Queue]:
        """The queues an alternate called ``name`` gives ``message``: the queue of that
        name, or what the exchange of that name routes it to with ``key``. ``follow``: an
        exchange's own alternate takes what it routes nowhere (dead-lettering does that);
        otherwise one level only, as qpidd routes an exchange's unroutable messages."""
        queue = self.queues.get(name)
        if queue is not None:
            return [queue]
        exchange = self.exchanges.get(name)
        if exchange is None:
            return []
        if follow:
            return self.route(exchange, key, message)
        return [self.queues[n] for n in exchange.route(key, message) if n in self.queues]

    def _declare_configured_exchanges(self) -> None:
        """The config file's exchanges and bindings (after its queues)."""
        for name, declared in self.config.exchanges.items():
            try:
                self.declare_exchange(name, declared.type, declared.durable, declared.arguments)
            except BrokerError as exc:
                raise ConfigError(f"exchanges.{name}: {exc.description}") from None
        for number, binding in enumerate(self.config.bindings):
            try:
                self.bind(binding.exchange, binding.queue, binding.key, binding.arguments)
            except BrokerError as exc:
                raise ConfigError(f"bindings[{number}]: {exc.description}") from None

    def _recover_exchanges(self, recovered: Recovered) -> None:
        """Durable exchanges and the bindings of durable queues, as they were; the
        configuration's are stored now if they were not."""
        for exchange in self.exchanges:
            if (
                exchange.durable
                and not exchange.builtin
                and exchange.name not in recovered.exchanges
            ):
                assert self.store is not None
                self.store.save_exchange(exchange.name, exchange.kind, exchange.arguments)
        for name, (kind, arguments) in recovered.exchanges.items():
            self.declare_exchange(name, kind, True, arguments)
        for exchange_name, queue, key, arguments in recovered.bindings:
            if exchange_name in self.exchanges and queue in self.queues:
                self.exchanges.bind(exchange_name, queue, key, arguments, limited=False)
            else:
                store_log.warning(
                    "store: binding '%s' -> '%s' names what is gone; not restored",
                    exchange_name,
                    queue,
                )
        for binding in self.config.bindings:
            self.bind(binding.exchange, binding.queue, binding.key, binding.arguments)

    # ---- durability -------------------------------------------------------------------

    def open_store(self, post: Post) -> None:  # noqa: C901 - recovery and commit steps, one after another
        """Open the configured store and bring back what it holds: durable queues with
        their settings, then their durable messages in their original order (through
        ``enqueue``, so priorities, last-value keys and groups are rebuilt as they were).
        ``post`` runs a callable on the event-loop thread (store completions)."""
        section = self.config.broker
        self.store = (
            SqliteStore(section.data_dir, post, **_crash_hooks())
            if section.store == "sqlite"
            else MemoryStore()
        )
        store_log.info("MST-1001 : Created : %s", section.store)
        if self.store.location is not None:
            store_log.info("MST-1002 : Store location : %s", self.store.location)
        store_log.info("MST-1004 : Recovery Start")
        recovered = self.store.open()
        try:
            self._refuse_contradictions(recovered, self.store.location)
        except ConfigError:
            self.store.close()  # as it was: nothing recovered, nothing written
            raise
        self._starting = True  # alternates are checked once everything is back
        self.loop_hooks.pager = StorePager(self.store) if self.store.pages else None
        for queue in list(self.queues.values()):  # declared by the config file
            if queue.settings.durable:
                _note_replaced_settings(queue, recovered.queues.get(queue.name))
                self._make_durable(queue)
        # Neither limits nor self-destruct apply to what the store brings back (see
        # _get_or_create, declare_exchange, _self_destruct): it was allowed when it was made.
        self._recovering = True
        try:
            for name, options in recovered.queues.items():
                if name not in self.queues:  # the config file's settings stand (see above)
                    self.declare(name, options)
            self._recover_exchanges(recovered)
            self._check_alternates(configured=False)
            for name, records in recovered.seen.items():
                seen_on = self.queues.get(name)
                if seen_on is not None:
                    seen_on.numbers.restore_seen(records)
            floors = _number_floors(recovered)
            counts, orphans = self._recover_messages(recovered, floors)
        finally:
            self._recovering = False
        self._remove_orphans(orphans)
        self._warn_over_limits()
        for name, numbered in self.queues.items():
            if numbered.history is not None:
                counters = recovered.sequences.get(name, {})
                numbered.history.restore(counters, recovered.floors.get(name, 0))
        for queue in self.queues.values():
            if queue.persistent:
                queue.numbers.restore(floors.get(queue.name, 1))
        _log_recovery(counts)

    def _recover_messages(
        self, recovered: Recovered, floors: dict[str, int]
    ) -> tuple[dict[str, int], dict[str, list[int]]]:
        """Put the stored messages back on their queues, in order, as the store reads them
        (one at a time: a flow-to-disk queue over its limit pages each out as it joins, so
        its backlog is never in memory). Returns how many came back per durable queue, and
        the ids of those whose queue the store no longer has. A row the store cannot serve
        (its checksum fails) stops start-up: the store is closed, and the error goes on."""
        assert self.store is not None
        counts = dict.fromkeys(recovered.queues, 0)
        last: dict[str, int] = {}
        orphans: dict[str, list[int]] = {}
        retired = recovered.retired
        try:
            for stored in recovered.messages:
                if stored.queue not in self.queues:
                    orphans.setdefault(stored.queue, []).append(stored.id)
                    continue
                number, fresh = _recovered_number(stored, recovered, floors, last)
                gone = stored.id in retired
                self._recover(stored, gone, number, fresh)
                if not gone and stored.queue in counts:
                    counts[stored.queue] += 1
        except StoreError:
            self.store.close()
            raise
        return counts, orphans

    def _refuse_contradictions(self, recovered: Recovered, location: str | None) -> None:
        """ConfigError if the config file declares other than the store holds: a queue or
        an exchange the store keeps as durable declared not durable, or an exchange
        declared with another type. Neither Qpid broker has start-up declarations that
        could say otherwise than its store, so nothing tells which one is meant; either
        guess loses something (a queue taken as not durable never removes its stored
        messages, which come back at every start), so the broker starts with neither and
        names both. A durable queue's other settings are the config file's
        (:func:`_note_replaced_settings`)."""
        where = location or "the store"
        for name, queue in self.queues.items():
            if name in recovered.queues and not queue.settings.durable:
                declared = (
                    f"queues.{name}: the config file declares it durable: false"
                    if name in self.config.queues
                    else "the config file declares it not durable (the dead-letter queue of "
                    f"queue '{name.removesuffix(self.config.queue.dead_letter_suffix)}')"
                )
                raise ConfigError(
                    f"{declared}, but queue '{name}' is stored as durable in {where}: delete "
                    "the queue (start the broker without it in the config file, and delete "
                    "it) or make it durable: true in the config file"
                )
        for name, declared_exchange in self.config.exchanges.items():
            stored = recovered.exchanges.get(name)
            if stored is None:
                continue
            if not declared_exchange.durable:
                raise ConfigError(
                    f"exchanges.{name}: the config file declares it durable: false, but "
                    f"exchange '{name}' is stored as durable in {where}: delete the exchange "
                    "(start the broker without it in the config file, and delete it) or make "
                    "it durable: true in the config file"
                )
            if stored[0] != declared_exchange.type:
                raise ConfigError(
                    f"exchanges.{name}: the config file declares type "
                    f"'{declared_exchange.type}', but exchange '{name}' is stored with type "
                    f"'{stored[0]}' in {where}: delete the exchange (start the broker without "
                    f"it in the config file, and delete it) or declare type '{stored[0]}'"
                )

    def _warn_over_limits(self) -> None:
        """Recovery brings back everything the store holds, as both Qpid brokers do, over
        the creation limits or not (they were lower when it was made, or the store came
        from elsewhere): say which limit it is over, as nothing more of that kind can be
        created until enough are deleted."""
        section = self.config.broker
        exchanges = len(self.exchanges) - len(DEFAULT_EXCHANGES)
        counts = (
            ("queues", len(self.queues), section.max_queues, "max_queues"),
            ("exchanges", exchanges, section.max_exchanges, "max_exchanges"),
            ("bindings", self.exchanges.binding_count, section.max_bindings, "max_bindings"),
        )
        for what, count, most, key in counts:
            if count > most:
                store_log.warning(
                    "the broker has %d %s, more than broker.%s (%d), as recovered from the "
                    "store: no more are created until fewer than %d remain",
                    count,
                    what,
                    key,
                    most,
                    most,
                )
        longest = section.max_name_length
        names = [*self.queues, *(exchange.name for exchange in self.exchanges)]
        long_names = [name for name in names if len(name.encode("utf-8")) > longest]
        if long_names:
            store_log.warning(
                "%d queues and exchanges recovered from the store have names longer than "
                "broker.max_name_length (%d bytes), such as '%s': they are kept, but an "
                "attach that names one is refused until the limit is raised",
                len(long_names),
                longest,
                long_names[0],
            )

    def _remove_orphans(self, orphans: dict[str, list[int]]) -> None:
        """Remove the stored messages of queues the store no longer has: written after
        their queue's deletion by a broker older than this one's store writer, which
        writes none (store/sqlite.py). Kept, they would join a later queue of that name;
        Broker-J's recoverer discards an enqueue whose queue it does not know, and qpidd
        deletes a queue's journal with it."""
        if not orphans:
            return
        assert self.store is not None
        for name, ids in orphans.items():
            store_log.warning(
                "MST-1015 : %d messages of queue '%s', which was deleted before they were "
                "written, are removed from the store",
                len(ids),
                name,
            )
        gone = [message_id for ids in orphans.values() for message_id in ids]
        self.store.commit(Unit(dequeues=gone, acknowledgements=True))

    def _recover(self, stored: StoredMessage, retired: bool, number: int, fresh: bool) -> None:
        queue = self.queues[stored.queue]
        try:
            message = parse_message(stored.data)
        except DecodeError as exc:
            raise StoreError(
                f"store message {stored.id} on '{stored.queue}' is not a valid message: {exc}"
            ) from exc
        message.store_id = stored.id
        if queue.history is not None:  # numbered before it was written: keep that number
            key_number = message.message_annotation(SEQUENCE)
            message.sequence = key_number if type(key_number) is int else None
            if retired:  # a past version its history keeps, no longer on the queue
                message.number = number
                queue.recover_version(message)
                if fresh:
                    queue.numbers.write(message)
                return
        queue.enqueue(message, now=stored.arrival, admitted=True, number=number)
        if fresh:  # browsers are not given it until this number is on disk either
            queue.numbers.write(message)

    def _make_durable(self, queue: Queue) -> None:
        if self.store is None:
            return  # saved by open_store()
        self.store.save_queue(queue.name, queue.options)
        queue.make_durable(StoreJournal(self.store))

    def store_id(self) -> int:
        """An id for a message about to be written (it joins its queue with it)."""
        assert self.store is not None
        return self.store.next_id()

    def persist(self, message: Message, queue: Queue, done: Completion) -> None:
        """Write ``message``, which has just joined ``queue`` with its ``store_id``
        (``queue.enqueue(..., writing=True)``), with the number and the arrival time the
        queue gave it; ``done(error)`` runs on the loop thread once it is committed (error
        None) or could not be (nothing written). The caller then tells the queue's
        numbering (``numbers.stored``)."""
        assert self.store is not None and message.store_id is not None
        if not message.on_queue and not message.in_history:
            done(None)  # it left as it joined (a ring made room with it): nothing to keep
            return
        self.store.enqueue(
            StoredMessage(
                message.store_id, queue.name, message.data, message.arrival, message.number
            ),
            done,
        )
        if message.sequence is not None:  # numbered in its key as it joined
            numbered = queue.number(message)  # (key, its number), nothing given out anew
            if numbered is not None:
                self.store.sequence(queue.name, *numbered)

    def publish(self, message: Message, queue: Queue, written: Completion) -> bool:
        """``message``, from a producer that is not an AMQP link (the HTTP gateway, the web
        console), joins ``queue``, and is written first when the queue keeps it (its
        messageDurability), as a producer's durable message is. Returns whether a write
        began: then ``written(error)`` runs once it is over (error None: it is safe; else
        the message was taken back, as from a refused transfer); else ``written`` is not
        called. BrokerError if the queue refuses it (nothing changes); NotTaken if the queue
        does not take it (its filter, a duplicate), which an AMQP producer is not told."""
        writing = self.store is not None and queue.keeps(message)
        message.store_id = self.store_id() if writing else None
        filtered = queue.stats.filtered
        try:
            joined = queue.enqueue(message, writing=writing)
        except BrokerError:
            message.store_id = None
            raise
        if not joined:
            message.store_id = None
            why = (
                "its filter (qpid.filter) does not select it"
                if queue.stats.filtered != filtered
                else "it repeats a message-id the queue has seen (qpid.duplicate)"
            )
            raise NotTaken(f"queue '{queue.name}' did not take the message: {why}")
        if not writing:
            return False

        def done(error: BaseException | None) -> None:
            self.write_done(message, queue, error)
            written(error)

        self.persist(message, queue, done)
        return True

    def write_done(self, message: Message, queue: Queue, error: BaseException | None) -> None:
        """The write :meth:`persist` began for ``message`` on ``queue`` is over: readers
        may pass its number now; one that failed (``error``) is taken back, not stored,
        and the row of one whose queue was deleted meanwhile goes too."""
        if message.number_unwritten:
            queue.numbers.stored(message)  # readers may pass it now
        if error is not None:
            message.store_id = None  # the failed commit wrote none of it
            self.withdraw(message, queue)
        elif message.store_id is not None and not self.is_live(queue):
            self.forget(message)  # its queue was deleted meanwhile: so is its row

    def commit(self, txn: Transaction, done: Completion) -> None:  # noqa: C901 - recovery and commit steps, one after another
        """Commit ``txn`` (see :mod:`proton_broker.transactions`): one store unit with its
        durable sends and the removal of the durable messages it acknowledged; once that is
        on disk the sends join their queues and the outcomes apply, then ``done(None)``. If
        the unit cannot be written the transaction is rolled back and ``done(error)``."""
        txn.discharging = True
        cannot = txn.cannot_commit(self.is_live)
        if cannot is not None:  # see the transactions module rules
            self.rollback(txn)
            done(BrokerError(cannot))
            return
        try:  # numbered in their keys now, in the order sent (see the transactions rules)
            numbers = [queue.number(message) for queue, message, _ in txn.sends]
        except BrokerError as exc:  # a custom number another send has gone past meanwhile
            self.rollback(txn)
            done(exc)
            return
        unit = Unit()
        now = time.time()
        if self.store is not None:
            for (queue, message, _), numbered in zip(txn.sends, numbers, strict=True):
                if queue.keeps(message) and self.is_live(queue):
                    message.store_id = self.store.next_id()
                    if numbered is not None:  # its bytes carry it: see codec/encode.py
                        annotate(message, KEY_SEQUENCE, numbered[1])
                        unit.sequences.append((queue.name, *numbered))
                    unit.enqueues.append(
                        StoredMessage(message.store_id, queue.name, message.data, now)
                    )
            for ack in txn.acks:
                message = ack.entry.message
                if ack.removes and ack.queue.persistent and message.store_id:
                    if message.in_history:  # history keeps it: see Queue._forget
                        unit.retires.append(message.store_id)
                    else:
                        unit.dequeues.append(message.store_id)

        def written(error: BaseException | None) -> None:
            self.transactions.end(txn)
            if error is not None:
                for _, message, _ in txn.sends:
                    message.store_id = None
                txn.rollback()
                done(error)
                return
            for queue, message, _ in txn.sends:
                # deleted meanwhile: it goes with the queue's others
                if not self.is_live(queue) or not queue.enqueue(message, admitted=True):
                    self.forget(message)
            removed = set(unit.dequeues)
            for ack in txn.acks:
                if ack.entry.message.store_id in removed:
                    ack.entry.message.store_id = None  # its removal was in the unit
                ack.apply()
            done(None)

        if unit.enqueues or unit.dequeues or unit.retires:
            assert self.store is not None
            unit.done = written
            self.store.commit(unit)
        else:
            written(None)

    def rollback(self, txn: Transaction) -> None:
        self.transactions.end(txn)
        txn.rollback()

    def withdraw(self, message: Message, queue: Queue) -> None:
        """Take back ``message``, which joined ``queue`` for a transfer that is refused
        after all (its write failed, or another copy was refused; it was not written): off
        the queue unless a consumer has it already (then it goes on, not stored, as qpidd's
        would)."""
        if self.is_live(queue):
            queue.withdraw(message)

    def forget(self, message: Message) -> None:
        """Remove a written message that did not join its queue after all."""
        if message.store_id is not None and self.store is not None:
            self.store.dequeue(message.store_id)
            message.store_id = None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            store_log.info("MST-1003 : Closed")

    def purge_expired(self, now: float | None = None) -> int:
        """Drop expired messages from every queue, all in one go (the loop sweeps in
        slices instead, :meth:`sweep_expired`)."""
        now = time.time() if now is None else now
        return sum(queue.purge_expired(now) for queue in self.queues.values())

    def sweep_expired(self, most: int = SWEEP_BATCH, now: float | None = None) -> bool:
        """One slice of the expiry sweep (called on a timer): the queues, one after the
        other, drop expired messages, ``most`` looked at in all (a queue counts as one), so
        that the loop serves its sockets between slices (queues/expiry.py). True: the
        sweep has more to do, and wants the next slice at once."""
        now = time.time() if now is None else now
        if not self._sweeping:  # a new sweep
            self._sweeping = list(self.queues.values())
        while self._sweeping and most > 0:
            queue = self._sweeping[-1]
            if self.queues.get(queue.name) is not queue:  # deleted meanwhile
                self._sweeping.pop()
                continue
            most -= 1 + queue.purge_expired(now, most)
            if queue.expiry_due(now):
                return True  # its slice took what was left: the rest in the next
            self._sweeping.pop()
        return bool(self._sweeping)


def _run(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        step()


def _recovered_number(
    stored: StoredMessage, recovered: Recovered, floors: dict[str, int], last: dict[str, int]
) -> tuple[int, bool]:
    """The queue sequence number a recovered message gets back, and whether it is a new one:
    its stored one, or, for one stored without (a crash before its number was written, or a
    store from before numbers) or out of order, a new one above every number given out
    before the restart, so the queue stays ordered by number (the queue writes it)."""
    stored_number = recovered.numbers.get(stored.id)
    previous = last.get(stored.queue, 0)
    fresh = stored_number is None or stored_number <= previous
    if stored_number is None or fresh:
        number = max(previous + 1, floors.get(stored.queue, 1))
        floors[stored.queue] = number + 1
    else:
        number = stored_number
    last[stored.queue] = number
    return number, fresh


def _log_recovery(counts: dict[str, int]) -> None:
    """MST-1005 per durable queue (``counts``: its messages recovered), then MST-1006
    (Broker-J's recovery lines)."""
    for name, count in counts.items():
        store_log.info("MST-1005 : Recovered %d messages for queue '%s'", count, name)
    store_log.info(
        "MST-1006 : Recovery Complete : %d durable queues, %d messages",
        len(counts),
        sum(counts.values()),
    )


def _note_replaced_settings(queue: Queue, stored: dict[str, Any] | None) -> None:
    """A durable queue of the config file takes the file's settings, which replace those
    stored (the file is what the operator declares now); say which differ."""
    if stored is None:
        return
    try:
        before = parse_options(stored)
    except BrokerError:  # settings this broker no longer reads: replaced all the same
        log.warning('queue "%s" takes the config file\'s settings, not %s', queue.name, stored)
        return
    declared = parse_options(queue.options)
    keys = {**before.given, **declared.given}  # settings field -> the option name used
    diffs = [
        f"{key} {getattr(queue.settings, target)!r} (stored: {getattr(before.settings, target)!r})"
        for target, key in keys.items()
        if getattr(queue.settings, target) != getattr(before.settings, target)
    ]
    if diffs:
        log.warning(
            'queue "%s" takes the config file\'s settings, not those stored: %s',
            queue.name,
            "; ".join(diffs),
        )


def _note_differences(queue: Queue, parsed: ParsedOptions) -> None:
    """An attach that names an existing queue with other settings gets the queue as it is,
    as from both Qpid brokers (the attach echoes its real settings, so a client that
    asserts them, as qpid::messaging's ``assert`` does, finds the difference)."""
    diffs = differences(queue.settings, parsed)
    if diffs:
        log.info('queue "%s" attached as it is, not as asked: %s', queue.name, "; ".join(diffs))


def _number_floors(recovered: Recovered) -> dict[str, int]:
    """Per queue, the lowest queue sequence number that may be given out anew: above the
    store's reservation mark and above every recovered message's number (known before
    the messages are read: ``Recovered.highest``)."""
    floors = dict(recovered.marks)
    for name, number in recovered.highest.items():
        if number >= floors.get(name, 1):
            floors[name] = number + 1
    return floors


class StoreJournal:
    """A durable queue's Journal: what leaves it, its numbers and its duplicate-detection
    records go to the store, in the pass's shared unit (written with the pass's other
    writes)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def removed(self, queue: Queue, store_id: int) -> None:
        self.store.dequeue(store_id)

    def retired(self, queue: Queue, store_id: int) -> None:
        self.store.retire(store_id)

    def numbered(self, queue: Queue, message: Message, done: Completion) -> None:
        assert message.store_id is not None and message.number is not None
        self.store.number(message.store_id, message.number, done)

    def reserve(self, queue: Queue, upto: int) -> None:
        self.store.mark(queue.name, upto)

    def seen(self, queue: Queue, key: str, when: float) -> None:
        self.store.seen(queue.name, key, when)

    def forgot(self, queue: Queue, key: str, floor: int) -> None:
        self.store.forget(queue.name, key, floor)

    def reserve_keys(self, queue: Queue, upto: int) -> None:
        self.store.floor(queue.name, upto)

    def unseen(self, queue: Queue, key: str) -> None:
        self.store.unseen(queue.name, key)


class StorePager:
    """Flow to disk through the store: a durable message's bytes are already there; others
    are written as pages, which the store drops at restart."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._ids = itertools.count(1)

    def page_out(self, message: Message, done: Callable[[], None]) -> None:
        if message.store_id is not None and not message.number_unwritten:
            done()  # its row is on disk (one still being written gets a page, below)
            return
        message.page_id = next(self._ids)

        def written(error: BaseException | None) -> None:
            if error is None:
                done()  # otherwise the bytes simply stay in memory

        self.store.commit(Unit(pages=[(message.page_id, message.data)], done=written))

    def page_in(self, message: Message) -> bytes:
        if message.page_id is not None:
            return self.store.read(message.page_id, page=True)
        assert message.store_id is not None
        return self.store.read(message.store_id, page=False)

    def discard(self, message: Message) -> None:
        if message.page_id is not None:
            self.store.commit(Unit(unpages=[message.page_id]))
            message.page_id = None


def _crash_hooks() -> dict[str, Callable[[], None]]:
    """Fault tests only: ``PROTON_TEST_CRASH_AT=before_commit`` (or ``after_commit``)
    ends the process at that point of the first store commit, as a power cut would;
    ``before_commit:N`` (or ``after_commit:N``) at the N-th commit."""
    where, _, nth = os.environ.get("PROTON_TEST_CRASH_AT", "").partition(":")
    if where not in ("before_commit", "after_commit"):
        return {}
    remaining = [int(nth or 1)]

    def crash() -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            os._exit(CRASH_EXIT_CODE)

    return {where: crash}


CRASH_EXIT_CODE = 86
