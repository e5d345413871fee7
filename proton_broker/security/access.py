"""Access control: the gate in front of every operation a client asks the broker for.

The protocol adapters (AMQP, ``$management``, the HTTP gateway) say who asks and what for;
this module puts the question to the ACL file (:mod:`proton_broker.security.acl`) and
raises :class:`~proton_broker.errors.Unauthorized` (``amqp:unauthorized-access``, HTTP 403)
when the answer is no. docs/acl.md lists the checks; in short, as qpidd makes them for
AMQP 1.0 clients:

* Without an ACL file (``acl.file`` empty) every authenticated user may do everything.
* Receiving from a queue: ``access queue`` (with the queue's properties), then ``consume
  queue``; browsing: ``browse queue``, or ``consume queue`` when no browse rule matches.
* Sending to a queue, at attach and for each message through the anonymous relay: ``access
  queue``, then ``publish exchange name=amq.default routingkey=<queue>`` (qpidd's default
  exchange: a queue is published to by its name as the routing key).
* Creating a queue (on demand at attach, a dynamic node, ``$management`` CREATE): ``create
  queue`` with ``durable``, ``autodelete``, ``exclusive``, ``policytype``,
  ``maxqueuecount`` and ``maxqueuesize`` as the queue would have them; then ``quota
  queues``, counting the queues the user created that still exist.
* Deleting, changing and reading a queue's attributes: ``delete``, ``update`` and
  ``access queue``. Other management operations: ``access method name=<operation>``.
* Connecting: the ``create connection`` host rules; ``quota connections`` replaces
  ``broker.max_connections_per_user`` for the users it names.
* ``allow-log`` and ``deny-log`` rules log ``ACL-1001`` (allowed) and ``ACL-1002``
  (denied) with the user, the operation and the rule; other refusals are logged at debug.
  A client is told what it may not do, never the rule.
* :meth:`Access.reload` re-reads the file (SIGHUP, the management operation
  ``RELOAD-ACL``); a file that no longer reads keeps the rules in force.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from proton_broker.errors import PreconditionFailed, ResourceLimitExceeded, Unauthorized
from proton_broker.queues.settings import NONE, PERMANENT, QueueSettings
from proton_broker.security.acl import Acl, Decision

log = logging.getLogger("proton_broker.acl")

DEFAULT_EXCHANGE = ""  # qpidd publishes to a queue through the default exchange, ''


class Access:
    """The ACL in force (or none) and the queues each user created."""

    def __init__(self, path: str = "") -> None:
        self.path = path
        self.acl: Acl | None = Acl.load(path) if path else None  # AclError: start-up stops
        self._creator: dict[str, str] = {}  # queue -> the user that created it
        self._created: Counter[str] = Counter()  # user -> queues created that still exist
        if self.acl is not None:
            log.info("ACL-1003 : Loaded : %s : %d rules", path, len(self.acl.rules))

    @property
    def enabled(self) -> bool:
        return self.acl is not None

    def reload(self) -> int:
        """Read the file again; returns how many rules are now in force (AclError, and
        the old rules stay, if it cannot be used)."""
        if not self.path:
            raise PreconditionFailed("the broker has no ACL file to reload (acl.file is empty)")
        acl = Acl.load(Path(self.path))
        self.acl = acl
        log.info("ACL-1003 : Loaded : %s : %d rules", self.path, len(acl.rules))
        return len(acl.rules)

    # ---- the checks ---------------------------------------------------------------------

    def check(
        self,
        user: str,
        action: str,
        obj: str,
        name: str | None = None,
        properties: Mapping[str, str] | None = None,
        what: str = "",
    ) -> None:
        """Unauthorized unless the ACL allows ``user`` to do ``action`` on ``obj`` ``name``;
        ``what`` says it in words for the client."""
        acl = self.acl
        if acl is None:
            return
        decision = acl.authorise(user, action, obj, name, properties)
        self._log(decision, user, action, obj, name)
        if not decision.allowed:
            said = what or f"{action} {obj}" + (f" '{name}'" if name else "")
            raise Unauthorized(f"ACL denied: user '{user}' may not {said}")

    def receive(self, user: str, name: str, settings: QueueSettings, browse: bool) -> None:
        """A link that receives from queue ``name`` (consumes, or browses)."""
        if self.acl is None:
            return
        self.check(user, "access", "queue", name, queue_properties(settings), f"use queue '{name}'")
        if browse:
            self.check(user, "browse", "queue", name, None, f"browse queue '{name}'")
        else:
            self.check(user, "consume", "queue", name, None, f"consume from queue '{name}'")

    def send(self, user: str, name: str, settings: QueueSettings) -> None:
        """A link, a message or a request that sends to queue ``name``."""
        if self.acl is None:
            return
        self.check(user, "access", "queue", name, queue_properties(settings), f"use queue '{name}'")
        self.check(
            user,
            "publish",
            "exchange",
            DEFAULT_EXCHANGE,
            {"routingkey": name},
            f"publish to queue '{name}'",
        )

    def publish(self, user: str, exchange: str, key: str) -> None:
        """A message ``user`` sends through ``exchange`` with routing key ``key``."""
        self.check(
            user,
            "publish",
            "exchange",
            exchange,
            {"routingkey": key},
            f"publish to exchange '{exchange}' with routing key '{key}'",
        )

    def create_queue(self, user: str, name: str, settings: QueueSettings) -> None:
        """``user`` would create queue ``name``: the ACL and the user's queue quota."""
        if self.acl is None:
            return
        properties = queue_properties(settings)
        self.check(user, "create", "queue", name, properties, f"create queue '{name}'")
        quota = self.acl.queue_quota(user)
        if quota is not None and self._created[user] >= quota:
            raise ResourceLimitExceeded(
                f"cannot create queue '{name}': user '{user}' has created {quota} queues "
                "that exist (its ACL queue quota)"
            )

    def queue_created(self, user: str, name: str) -> None:
        self._creator[name] = user
        self._created[user] += 1

    def queue_gone(self, name: str) -> None:
        user = self._creator.pop(name, None)
        if user is not None:
            self._created[user] -= 1
            if not self._created[user]:
                del self._created[user]

    def connect(self, user: str, host: str) -> None:
        """Unauthorized if the ``create connection`` rules keep ``user`` out from ``host``."""
        if self.acl is None:
            return
        decision = self.acl.connection(user, host)
        self._log(decision, user, "create", "connection", host)
        if not decision.allowed:
            raise Unauthorized(f"ACL denied: user '{user}' may not connect from {host}")

    def connection_quota(self, user: str) -> int | None:
        """The user's ``quota connections`` (None: the broker's own limit applies)."""
        return self.acl.connection_quota(user) if self.acl is not None else None

    def _log(self, decision: Decision, user: str, action: str, obj: str, name: str | None) -> None:
        where = f"{action} {obj} '{name or ''}'"
        if decision.log:
            log.info(
                "ACL-%d : %s : User : %s : %s : %s",
                1001 if decision.allowed else 1002,
                "Allowed" if decision.allowed else "Denied",
                user,
                where,
                decision.reason(),
            )
        elif not decision.allowed:
            log.debug("ACL denied: user %s: %s: %s", user, where, decision.reason())


def queue_properties(settings: QueueSettings) -> dict[str, str]:
    """A queue's properties as qpidd's ACL names them (``create``/``access queue``)."""
    properties = {
        "durable": _flag(settings.durable),
        "autodelete": _flag(settings.lifetime_policy != PERMANENT),
        "exclusive": _flag(settings.exclusive),
    }
    if settings.overflow_policy != NONE:  # qpidd's spelling: self-destruct
        properties["policytype"] = settings.overflow_policy.replace("_", "-")
    if settings.alternate is not None:
        properties["alternate"] = settings.alternate
    if settings.max_count is not None:
        properties["maxqueuecount"] = str(settings.max_count)
    if settings.max_size is not None:
        properties["maxqueuesize"] = str(settings.max_size)
    return properties


def _flag(value: bool) -> str:
    return "true" if value else "false"
