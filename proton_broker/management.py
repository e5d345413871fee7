"""Broker management: entity types, attribute tables and the operations on them.

This is the protocol-free half of the ``$management`` node (the AMQP half is
:mod:`proton_broker.amqp.management`). It follows the AMQP Management 1.0 draft as Qpid
Broker-J's ``management-amqp`` plugin implements it: a request is an operation, a type, a
name or identity and an attribute map; the answer is a status code (200, 201, 204, 400, 404,
409, 501, ...), a description and a body.

Rules this module owns:

* Queues are managed here; exchanges and bindings by
  :mod:`proton_broker.management_exchanges`, which this node hands their requests to.
* Queues: the category ``org.apache.qpid.Queue`` and Broker-J's
  kinds ``org.apache.qpid.StandardQueue``, ``PriorityQueue``, ``SortedQueue`` and
  ``LastValueQueue``. A kind given on CREATE must match the attributes (``LastValueQueue``
  needs ``lvqKey``); READ with a kind finds only queues of that kind.
* CREATE reads its attributes with the same parser as an attach
  (:func:`proton_broker.queues.settings.parse_options`), so a name the attach refuses is
  refused here too: a bad attribute is a 400 naming it, and nothing is created. A queue
  that exists already is a 409, as in Broker-J. A queue is durable unless the request says
  ``durable: false``, as Broker-J's ``durable`` defaults to true: a client written for
  Broker-J does not find its queue gone after a restart.
* Answers name a queue's kind as Broker-J's do: ``type`` is the AMQP name of its type class
  (``org.apache.qpid.LastValueQueue``), ``qpid-type`` the kind (``lvq``). Requests may give
  either attribute as either name.
* Read-only attributes (``id``, ``type``, ``qpid-type``) may be sent back on UPDATE
  unchanged, so READ, edit, UPDATE works; a different value is a 400. The live figures
  (:data:`FIGURES`) are passed over whatever their value, as Broker-J passes over names
  that are not attributes. Only :data:`LIVE_SETTINGS` can change on a live queue (the
  limits among them, applied at once); anything else is a 400 naming the attribute.
* DELETE refuses a queue holding messages (409) unless ``force`` is true (an application
  property or a body entry), as ``qpid-config del queue --force`` has it; with ``ifUnused``
  true it also refuses one that has consumers (409: qpidd's ``if_unused``, which
  qpid-config asks for unless ``--force-if-used``).
* Broker-J's queue operation ``clearQueue`` removes the available messages (the broker's
  purge: held ones stay with their consumers, none goes to the alternate; the ACL's
  ``purge``) and answers how many, as Broker-J's ``Queue.clearQueue`` does.
* Broker-J's ``getStatistics`` answers :data:`QUEUE_STATISTICS` (its names and meanings;
  ``bindingCount`` from the broker), all or those named; ``resetStatistics`` sets the
  counters back to zero. Its message operations are :mod:`proton_broker.management_messages`'s,
  ``getConsumers`` and ``getPublishingLinks`` :mod:`proton_broker.management_links`'s.
* ``setContextVariable`` and ``removeContextVariable``, on queues and exchanges, are a READ
  and an UPDATE of the entity's ``context`` (:mod:`proton_broker.management_context`).
* Deviation from Broker-J, for a clearer error: an unknown type or operation is a 400 (Broker-J
  answers 404 and 501). Errors from the broker's own table map to statuses in
  :data:`STATUS_FOR`.
* A subscription queue (:mod:`proton_broker.exchanges.subscriptions`) reads as what its
  subscription is, as both Qpid brokers make it: ``exclusive`` true unless it is shared
  (qpidd makes the session its exclusive owner; Broker-J gives it the exclusivity policy
  ``LINK``, a shared one ``SHARED_SUBSCRIPTION``), and ``lifetimePolicy``
  ``delete-if-unused`` unless it is kept (its expiry policy ``never``): it goes as its last
  link goes (qpidd's auto-delete; Broker-J's ``DELETE_ON_SESSION_END``,
  ``DELETE_ON_NO_OUTBOUND_LINKS`` or ``DELETE_ON_CONNECTION_CLOSE``, by the expiry policy).
* Identities are name-based UUIDs (``uuid5``), stable across restarts without storing
  them; a queue deleted and created again under the same name has the same identity.

Attributes live in one table per entity, :data:`QUEUE_ATTRIBUTES`: name -> a reader of the
queue. Adding an attribute is one line there.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proton_broker import errors
from proton_broker.broker import MANAGEMENT_NODE
from proton_broker.management_connections import (
    CONNECTION_ATTRIBUTES,
    CONNECTION_TYPE,
    ConnectionDirectory,
    ConnectionEntities,
)
from proton_broker.management_context import (
    CONTEXT_OPERATIONS,
    NO_VALUE,
    changed_context,
    entity_properties,
)
from proton_broker.management_exchanges import (
    BINDING_TYPE,
    ENTITY_TYPES,
    EXCHANGE_TYPE,
    GET_STATISTICS,
    RESET_STATISTICS,
    TYPE_HIERARCHY,
    ExchangeEntities,
    attribute_names,
    integer_parameter,
    json_text,
    statistics,
    wanted_statistics,
)
from proton_broker.management_links import LINK_OPERATIONS, LinkDirectory, link_operation
from proton_broker.management_messages import (
    COPY_MESSAGES,
    DELETE_MESSAGES,
    MESSAGE_OPERATIONS,
    MOVE_MESSAGES,
    message_operation,
    selection,
)
from proton_broker.management_messages import confidential as is_confidential
from proton_broker.management_paths import named_by_path, object_path
from proton_broker.moving import MAX_TRANSFER, Transfer
from proton_broker.queues.queue import Queue
from proton_broker.queues.settings import (
    DELETE_IF_UNUSED,
    EXCLUSIVE_SUBSCRIPTION,
    GROUPS_NONE,
    GROUPS_SHARED,
    LIVE_SETTINGS,
    PERMANENT,
    ParsedOptions,
    option_names,
    parse_options,
    to_bool,
    unknown_options_error,
)
from proton_broker.security.access import queue_properties
from proton_broker.security.acl import AclError

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.management")

NODE_ADDRESS = MANAGEMENT_NODE  # where the protocol adapter attaches the node
MANAGEMENT_TYPE = "org.amqp.management"
SELF = "self"
QUEUE_TYPE = "org.apache.qpid.Queue"
# Broker-J's queue kinds: amqp type name -> our settings kind (QueueSettings.kind)
QUEUE_KINDS = {
    "org.apache.qpid.StandardQueue": "standard",
    "org.apache.qpid.PriorityQueue": "priority",
    "org.apache.qpid.SortedQueue": "sorted",
    "org.apache.qpid.LastValueQueue": "lvq",
}
KIND_TYPES = {kind: name for name, kind in QUEUE_KINDS.items()}
QUEUE_TYPES = (QUEUE_TYPE, *QUEUE_KINDS)

ENTITY_OPERATIONS = ("CREATE", "READ", "UPDATE", "DELETE")
# Broker-J's queue operation that removes the available messages (qpidd's purge).
CLEAR_QUEUE = "clearQueue"
# Broker-J's queue operations this node has (beside CREATE, READ, UPDATE, DELETE).
QUEUE_OPERATIONS = (
    CLEAR_QUEUE,
    GET_STATISTICS,
    RESET_STATISTICS,
    *MESSAGE_OPERATIONS,
    *LINK_OPERATIONS,
)
NODE_OPERATIONS = ("QUERY", "GET-TYPES", "GET-ATTRIBUTES", "GET-OPERATIONS", "RELOAD-ACL")
RELOAD_ACL_METHOD = "reloadACLFile"  # qpidd's name for the method, in ACL rules

OK, CREATED, NO_CONTENT = 200, 201, 204
BAD_REQUEST, FORBIDDEN, NOT_FOUND, CONFLICT = 400, 403, 404, 409
INTERNAL_ERROR, NOT_IMPLEMENTED = 500, 501

STATUS_FOR: dict[type[errors.BrokerError], int] = {
    errors.NotFound: NOT_FOUND,
    errors.InvalidField: BAD_REQUEST,
    errors.MalformedMessage: BAD_REQUEST,
    errors.PreconditionFailed: CONFLICT,
    errors.IntegrityViolation: FORBIDDEN,  # Broker-J's IntegrityViolationException
    errors.Unauthorized: FORBIDDEN,
    errors.ResourceLimitExceeded: FORBIDDEN,
    errors.NotImplementedByBroker: NOT_IMPLEMENTED,
}

# Attributes of the request, never queue settings.
IF_UNUSED = "ifUnused"
_REQUEST_ONLY = ("name", "object-path", "force", IF_UNUSED, "qpid-type")


def _flag(name: str, properties: Mapping[str, Any], body: Any) -> bool:
    """A DELETE's boolean ``name``: an application property or a body entry."""
    value = properties.get(name)
    if value is None and isinstance(body, Mapping):
        value = body.get(name)
    return to_bool(name, value or False)


@dataclass
class Response:
    """A management answer: ``status`` and ``description`` go in the application
    properties (``statusCode``, ``statusDescription``), ``body`` is the message body."""

    status: int
    description: str
    body: Any = None
    properties: dict[str, Any] = field(default_factory=dict)
    # An answer that waits for the store (moveMessages, copyMessages, the purges): status,
    # description and body are its own once :meth:`finish` runs, and the reply goes then.
    pending: bool = False
    _waiters: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def when_done(self, waiter: Callable[[], None]) -> None:
        """Run ``waiter`` once the answer is complete (now, unless it is pending)."""
        if self.pending:
            self._waiters.append(waiter)
        else:
            waiter()

    def finish(self) -> None:
        """The answer is complete: those waiting for it run."""
        self.pending = False
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter()


class ManagementError(Exception):
    """A request the node answers with an error status."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


# ---- the queue attribute table --------------------------------------------------------


def _limit(value: int | None) -> int:
    return -1 if value is None else value  # Broker-J's "no limit"


def _groups(queue: Queue) -> list[dict[str, Any]]:
    """Each group with messages or a holder: its id, messages (queued and acquired), the
    acquired ones and the consumer holding it (None: free). O(groups)."""
    groups = queue._groups  # read only, for management
    if groups is None:
        return []
    return [
        {
            "groupId": g.name if g.name is not None else groups.default_group,
            "messageCount": g.waiting + g.acquired,
            "acquiredMessages": g.acquired,
            "consumer": g.owner,
        }
        for g in groups.groups()
    ]


def _group_type(queue: Queue) -> str:
    mode = queue.settings.group_mode
    return (
        "NONE" if mode == GROUPS_NONE else "SHARED_GROUPS" if mode == GROUPS_SHARED else "STANDARD"
    )


def _lifetime_policy(queue: Queue) -> str:
    """The queue's lifetime policy; a subscription queue's is its subscription's (see the
    module rules)."""
    policy = queue.settings.lifetime_policy
    if policy == PERMANENT and queue.settings.subscription and not queue.subscription_kept:
        return DELETE_IF_UNUSED  # deleted as its last link goes (exchanges/subscriptions.py)
    return policy


def _exclusive(queue: Queue) -> bool:
    """Whether the queue is exclusive: to one connection, or, a subscription that is not
    shared, to one link at a time (see the module rules)."""
    settings = queue.settings
    return settings.exclusive or settings.subscription == EXCLUSIVE_SUBSCRIPTION


def _lvq_keys(queue: Queue) -> int | None:
    """The keys of a last-value queue that have a message on it."""
    history = queue.history
    return history.standing if history is not None and history.indexes else None


Reader = Callable[[Queue], Any]


def _oldest_message_age(queue: Queue) -> int:
    """How long ago the oldest message on the queue arrived, in milliseconds (0: none)."""
    arrival = queue.oldest_arrival()
    return 0 if arrival is None else max(0, int((time.time() - arrival) * 1000))


# A queue's statistics: what getStatistics answers (besides bindingCount, which the broker
# knows), and what READ and QUERY give after the settings.
QUEUE_STATISTICS: dict[str, Reader] = {
    # Broker-J's (its Queue's statistics, under the same names and meanings)
    "queueDepthMessages": lambda q: q.depth,
    "queueDepthBytes": lambda q: q.bytes,
    "consumerCount": lambda q: q.consumer_count,
    "consumerCountWithCredit": lambda q: q.consumers_with_credit(),
    "availableMessages": lambda q: q.depth - q.unacknowledged,  # held ones too, as Broker-J
    "unacknowledgedMessages": lambda q: q.unacknowledged,
    "totalEnqueuedMessages": lambda q: q.stats.enqueued,
    "totalEnqueuedBytes": lambda q: q.stats.enqueued_bytes,
    # every message that left, for any reason (as Broker-J and qpidd count dequeues)
    "totalDequeuedMessages": lambda q: q.removed,
    "totalDequeuedBytes": lambda q: q.removed_bytes,
    "totalExpiredMessages": lambda q: q.stats.expired,
    "totalExpiredBytes": lambda q: q.stats.expired_bytes,
    "oldestMessageAge": _oldest_message_age,
    # this broker's own
    "totalConsumedMessages": lambda q: q.stats.dequeued,  # accepted by a consumer
    "totalEvictedMessages": lambda q: q.stats.evicted,
    "totalRejectedMessages": lambda q: q.stats.rejected,
    "totalRefusedMessages": lambda q: q.stats.refused,
    "totalReleasedMessages": lambda q: q.stats.released,
    "totalRedeliveredMessages": lambda q: q.stats.redelivered,
    "totalReplacedMessages": lambda q: q.stats.replaced,
    "totalDuplicateMessages": lambda q: q.stats.duplicates,
    "totalDeadLetteredMessages": lambda q: q.stats.dead_lettered,
    "totalDeliveryAttemptsExhausted": lambda q: q.stats.exhausted,
    "totalDeadLettersDiscarded": lambda q: q.stats.discarded,
}

QUEUE_ATTRIBUTES: dict[str, Reader] = {
    # identity
    "name": lambda q: q.name,
    "id": lambda q: identity_of(q.name),
    "identity": lambda q: identity_of(q.name),  # Broker-J's name for it in READ and QUERY
    "object-path": lambda q: object_path(q.name),
    "type": lambda q: KIND_TYPES[q.kind],  # as Broker-J: the type class's AMQP name
    "qpid-type": lambda q: q.kind,  # and the kind (standard, lvq, priority, sorted)
    # settings (names Broker-J uses; all accepted back by the settings parser)
    "durable": lambda q: q.settings.durable,
    "lifetimePolicy": _lifetime_policy,
    "exclusive": _exclusive,
    "priorities": lambda q: q.settings.priorities,
    "sortKey": lambda q: q.settings.sort_key,
    "lvqKey": lambda q: q.settings.lvq_key,
    "sequenceKey": lambda q: q.settings.sequence_key,
    "maxKeyUpdates": lambda q: q.settings.max_key_updates,
    "messageDurability": lambda q: q.settings.messages_kept.upper(),
    "messageGroupType": _group_type,
    "messageGroupKeyOverride": lambda q: q.settings.group_key if q.settings.grouped else None,
    "messageGroupSharedGroups": lambda q: q.settings.group_mode == GROUPS_SHARED,
    "messageGroupDefaultGroup": lambda q: q.settings.default_group,
    "maximumQueueDepthMessages": lambda q: _limit(q.settings.max_count),
    "maximumQueueDepthBytes": lambda q: _limit(q.settings.max_size),
    "overflowPolicy": lambda q: q.settings.overflow_policy.upper(),
    "queueFlowResumeLimit": lambda q: q.settings.flow_resume_percent,
    "ensureNondestructiveConsumers": lambda q: q.settings.ensure_nondestructive,
    "maximumLiveConsumers": lambda q: q.settings.max_live_consumers,
    "noLocal": lambda q: q.settings.no_local,
    "defaultFilters": lambda q: dict(q.settings.default_filters or {}) or None,
    "minimumMessageTtl": lambda q: q.settings.min_ttl or 0,
    "maximumMessageTtl": lambda q: q.settings.max_ttl or 0,
    "holdOnPublishEnabled": lambda q: q.settings.hold_on_publish,
    "duplicateDetectionCount": lambda q: q.settings.duplicate_count,
    "duplicateDetectionSeconds": lambda q: q.settings.duplicate_seconds,
    "alternateBinding": lambda q: {"destination": q.alternate} if q.alternate else None,
    "maximumDeliveryAttempts": lambda q: q.max_delivery_attempts,
    "expiryPolicy": lambda q: q.settings.expiry_policy.upper(),
    "description": lambda q: q.settings.description,
    "context": lambda q: dict(q.settings.context) if q.settings.context is not None else None,
    "arguments": lambda q: dict(q.options),  # as declared, under the names then used
    # statistics (getStatistics gives these alone)
    **QUEUE_STATISTICS,
    # queue sequence numbers (x-opt-sequence-number): the lowest still on the queue (the
    # next when it is empty) and the one the next message will get
    "earliestSequenceNumber": lambda q: q.earliest_sequence_number,
    "nextSequenceNumber": lambda q: q.next_sequence_number,
    "flowStopped": lambda q: q.flow_stopped,
    "queueFlowStopped": lambda q: q.flow_stopped,  # Broker-J's name for it
    # per-group and per-key figures (None where the queue has no groups / keys)
    "messageGroupCount": lambda q: len(_groups(q)) if q.settings.grouped else None,
    "messageGroups": lambda q: _groups(q) if q.settings.grouped else None,
    "lvqKeyCount": _lvq_keys,
}
# The figures of the moment among the attributes: UPDATE passes over them, whatever their
# value, since a READ map sent back as UPDATE carries figures that have moved since.
FIGURES = frozenset(
    {
        *QUEUE_STATISTICS,
        "bindingCount",
        "earliestSequenceNumber",
        "nextSequenceNumber",
        "flowStopped",
        "queueFlowStopped",
        "messageGroupCount",
        "messageGroups",
        "lvqKeyCount",
    }
)
# What UPDATE may send back unchanged but never change: every attribute that is not a
# queue option (identity, statistics, anything added to the table later).
# ("type" is also an x-declare option the parser understands and ignores.)
READ_ONLY = frozenset(QUEUE_ATTRIBUTES) - frozenset(option_names()) | {"type"}
# The attributes that name the queue's kind; a request may give the kind or the class name.
KIND_ATTRIBUTES = ("type", "qpid-type")
# QUERY without attribute names lists these (not the per-group lists: they can be long).
QUERY_DEFAULT = [name for name in QUEUE_ATTRIBUTES if name != "messageGroups"]


def identity_of(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"proton-broker:queue:{name}"))


def queue_attributes(queue: Queue, names: list[str] | None = None) -> dict[str, Any]:
    """The attribute map of ``queue`` (``names``: only those; unknown names give None)."""
    if names is None:
        return {name: read(queue) for name, read in QUEUE_ATTRIBUTES.items()}
    return {
        name: QUEUE_ATTRIBUTES[name](queue) if name in QUEUE_ATTRIBUTES else None for name in names
    }


# ---- the node ---------------------------------------------------------------------------


class Management:
    """Performs management requests on a :class:`Broker` (on its event-loop thread)."""

    def __init__(
        self,
        broker: Broker,
        links: LinkDirectory | None = None,
        connections: ConnectionDirectory | None = None,
    ) -> None:
        self.broker = broker
        self.exchanges = ExchangeEntities(broker)
        self.links = links  # the protocol adapter's, for getConsumers and getPublishingLinks
        self.connections = ConnectionEntities(broker.access, connections)

    def handle(
        self,
        properties: Mapping[str, Any],
        body: Any,
        user: str | None = None,
        confidential: bool = False,
    ) -> Response:
        """Answer one request: ``properties`` are its application properties, ``user`` who
        sent it (the ACL decides what it may do; None: the broker itself), ``confidential``
        whether it came where confidential operations may be asked for (over TLS, or from
        where ``broker.confidential_without_tls`` allows: Broker-J's secure operations)."""
        try:
            operation = properties.get("operation")
            if not confidential and is_confidential(operation, properties):
                raise ManagementError(  # Broker-J's words
                    FORBIDDEN,
                    f"Operation '{operation}' can only be performed over a secure (AMQPS) "
                    "connection",
                )
            return self._handle(properties, body, user)
        except ManagementError as exc:
            return Response(exc.status, exc.description)
        except errors.BrokerError as exc:
            return Response(status_of(exc), exc.description)
        except AclError as exc:  # RELOAD-ACL of a file that is wrong: the old rules stay
            return Response(BAD_REQUEST, f"{exc}; the rules in force are unchanged")
        except Exception as exc:  # a bug answers 500, the node keeps serving
            log.exception("management request %r failed", dict(properties))
            return Response(INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def _handle(self, properties: Mapping[str, Any], body: Any, user: str | None) -> Response:
        operation = properties.get("operation")
        if not isinstance(operation, str) or not operation:
            raise ManagementError(BAD_REQUEST, "the request has no 'operation'")
        kind = properties.get("type")
        if _is_node(properties, kind) or operation in NODE_OPERATIONS:
            # QUERY and GET-* are the node's own operations: Broker-J wants them addressed
            # to 'self', other clients do not always say so; both are answered.
            return self._node_operation(operation, properties, body, user)
        if kind is None:
            raise ManagementError(BAD_REQUEST, "the request has no 'type'")
        if kind == CONNECTION_TYPE:  # management_connections.py
            return Response(*self.connections.handle(operation, properties, user))
        if operation in CONTEXT_OPERATIONS:  # management_context.py
            return self._context_variable(operation, properties, user)
        if kind in ENTITY_TYPES:
            attributes = _attribute_map(body, operation)
            status, said, answer = self.exchanges.handle(
                operation, kind, properties, attributes, user
            )
            return Response(status, said, answer)
        if kind not in QUEUE_TYPES:
            raise ManagementError(
                BAD_REQUEST,
                f"unknown type {kind!r}; this node manages "
                f"{', '.join((*QUEUE_TYPES, *ENTITY_TYPES, CONNECTION_TYPE))}",
            )
        return self._queue_operation(operation, kind, properties, body, user)

    def _context_variable(
        self, operation: str, properties: Mapping[str, Any], user: str | None
    ) -> Response:
        """setContextVariable and removeContextVariable on a queue or an exchange: a READ
        of its context, then an UPDATE of it with the one variable changed."""
        named = entity_properties(operation, properties)
        current = self._handle({**named, "operation": "READ"}, None, user).body
        after, before = changed_context(operation, properties, current.get("context"))
        self._handle({**named, "operation": "UPDATE"}, {"context": after}, user)
        return Response(OK, "OK", NO_VALUE if before is None else before)

    def _queue_operation(
        self,
        operation: str,
        kind: str,
        properties: Mapping[str, Any],
        body: Any,
        user: str | None,
    ) -> Response:
        if operation == "CREATE":
            return self.create(kind, properties, body, user)
        if operation == "READ":
            queue = self._find(kind, properties)
            self._check(user, "access", queue)
            return Response(OK, "OK", queue_attributes(queue))
        if operation == "UPDATE":
            queue = self._find(kind, properties)
            self._check(user, "update", queue)
            return self.update(queue, body, user)
        if operation == "DELETE":
            return self.delete(self._find(kind, properties), properties, body, user)
        if operation in QUEUE_OPERATIONS:
            return self._broker_j_operation(
                operation, self._find(kind, properties), properties, user
            )
        raise ManagementError(
            BAD_REQUEST,
            f"unknown operation {operation!r} for type "
            f"{kind!r}; supported: {', '.join((*ENTITY_OPERATIONS, *QUEUE_OPERATIONS))}",
        )

    def _broker_j_operation(
        self, operation: str, queue: Queue, properties: Mapping[str, Any], user: str | None
    ) -> Response:
        """Broker-J's queue operations (:data:`QUEUE_OPERATIONS`), each asking the ACL."""
        if operation == CLEAR_QUEUE:
            response = Response(OK, "OK", pending=True)
            self.broker.purge_queue(
                queue.name,
                user,
                lambda purged: self._answer_removed(response, queue, purged, purged),
            )
            return response
        if operation == GET_STATISTICS:
            self._check(user, "access", queue)
            return Response(OK, "OK", self._statistics(queue, wanted_statistics(properties)))
        if operation == RESET_STATISTICS:
            self._check(user, "update", queue)
            queue.reset_statistics()
            return Response(OK, "OK")
        if operation in (MOVE_MESSAGES, COPY_MESSAGES):
            return self._transfer(operation, queue, properties, user)
        if operation in LINK_OPERATIONS:  # management_links.py
            self._check(user, "access", queue)
            answer = link_operation(operation, queue.name, self.links, self.broker.exchanges)
            return Response(OK, "OK", answer)
        if operation == DELETE_MESSAGES:  # management_messages.py
            self._check(user, "purge", queue)
            return self._delete_messages(queue, properties, user)
        if user is not None:  # they show what messages say, as a browser sees them
            self.broker.access.receive(user, queue.name, queue.settings, browse=True)
        return Response(OK, "OK", message_operation(queue, operation, properties))

    def _delete_messages(
        self, queue: Queue, properties: Mapping[str, Any], user: str | None
    ) -> Response:
        """Broker-J's deleteMessages, at most :data:`MAX_TRANSFER` messages a request, in
        slices of as many looked at, one a pass of the broker's loop, so that a deep queue
        never holds it; answered once the last slice's removals are on disk."""
        wanted, matches, limit = selection(properties)
        limit = MAX_TRANSFER if limit < 0 else min(limit, MAX_TRANSFER)
        response = Response(OK, "OK", pending=True)
        deleted: list[int] = []

        def step(start: int) -> int | None:
            if not self.broker.is_live(queue):  # a deleted queue took the rest with it
                return None
            removed, following = queue.delete_slice(
                wanted, matches, limit - len(deleted), start, MAX_TRANSFER
            )
            deleted.extend(removed)
            return following

        def done() -> None:
            log.info(
                'QUE-1011 Purge : "%s" : %d message(s) deleted by %s',
                queue.name,
                len(deleted),
                user,
            )
            self._answer_removed(response, queue, deleted, len(deleted))

        queue.in_slices(step, done)
        return response

    def _answer_removed(self, response: Response, queue: Queue, body: Any, removed: int) -> None:
        """Finish the pending ``response`` (``body``) to a purge (clearQueue,
        deleteMessages) that removed ``removed`` messages from ``queue`` once their
        removals are on disk, as Broker-J answers after its transaction: a 200 means a
        restart does not bring them back. If the store cannot write them yet, a 500 says
        so."""
        response.body = body

        def written(error: BaseException | None) -> None:
            if error is not None:
                response.status = INTERNAL_ERROR
                response.description = (
                    f"the messages are off '{queue.name}', but the store could not write "
                    f"their removal yet: {error}; it is written with the next write that "
                    "succeeds, or at the next start"
                )
            response.finish()

        if not self.broker.when_removed(queue, removed, written):
            response.finish()  # nothing stored to wait for

    def _transfer(
        self, operation: str, source: Queue, properties: Mapping[str, Any], user: str | None
    ) -> Response:
        """Broker-J's moveMessages and copyMessages (:mod:`proton_broker.moving`), which
        the ACL's ``move`` rule for the source, with the destination as ``queuename``,
        guards (qpidd's check for its queue move); the answer waits for the store."""
        destination = self._destination(source, properties)
        wanted, matches, limit = selection(properties)
        if user is not None:
            self.broker.access.check(
                user,
                "move",
                "queue",
                source.name,
                {"queuename": destination.name},
                f"move messages from queue '{source.name}' to queue '{destination.name}'",
            )
        response = Response(OK, "OK", pending=True)
        move = operation == MOVE_MESSAGES

        def done(moved: list[int], error: BaseException | None) -> None:
            response.body = moved
            if error is not None:
                response.status = INTERNAL_ERROR
                where = (
                    f"nothing moved, the messages stay on '{source.name}'"
                    if move
                    else f"the copies are on '{destination.name}' in memory only"
                )
                response.description = (
                    f"the store could not write the {operation}: {error}; {where}"
                )
            log.info(  # Broker-J's words
                "QUE-1016 : Operation : %s : %s: %s: %d (by %s)",
                operation,
                source.name,
                destination.name,
                len(moved),
                user,
            )
            response.finish()

        Transfer(self.broker, source, destination, move).run(wanted, matches, limit, done)
        return response

    def _destination(self, source: Queue, properties: Mapping[str, Any]) -> Queue:
        """The queue a move or a copy names as its ``destination`` (a name or an identity);
        400 for none, an unknown one or the source itself (Broker-J's answer to a
        parameter it cannot convert)."""
        given = properties.get("destination")
        if given is None or given == "":
            raise ManagementError(
                BAD_REQUEST, "'destination' is required: the queue the messages go to"
            )
        destination = self._by_name_or_identity(None, given)
        if destination is None:
            raise ManagementError(BAD_REQUEST, f"'destination': there is no queue {given!r}")
        if destination is source:
            raise ManagementError(BAD_REQUEST, "'destination' is the queue itself")
        return destination

    def _statistics(self, queue: Queue, wanted: frozenset[str] | None) -> dict[str, Any]:
        """Broker-J's getStatistics of ``queue``: every statistic, or those ``wanted``."""
        readers: dict[str, Reader] = {
            **QUEUE_STATISTICS,
            "bindingCount": lambda q: len(self.broker.exchanges.bindings_of(q.name)),
        }
        return statistics(readers, queue, wanted)

    # ---- entity operations ----------------------------------------------------------

    def create(
        self, kind: str, properties: Mapping[str, Any], body: Any, user: str | None = None
    ) -> Response:
        attributes = _attribute_map(body, "CREATE")
        for forbidden in ("id", "identity"):
            if forbidden in attributes or (forbidden == "identity" and "identity" in properties):
                raise ManagementError(
                    BAD_REQUEST, f"the '{forbidden}' cannot be set when creating an object"
                )
        name = _create_name(properties, attributes)
        if name == NODE_ADDRESS:
            raise ManagementError(
                BAD_REQUEST, f"'{NODE_ADDRESS}' is the management node's address, not a queue name"
            )
        if name in self.broker.queues:
            raise ManagementError(CONFLICT, f"queue '{name}' already exists")
        options = _options_of(attributes)
        options.setdefault("durable", True)  # Broker-J's default (see the module rules)
        parsed = parse_options(options)
        if parsed.unknown:
            raise unknown_options_error(name, parsed.unknown)
        default = _KIND_DEFAULTS.get(_wanted_kind(kind, attributes))
        if default is not None and parsed.settings.kind == "standard":  # a kind by name alone
            options.update(default)  # gets Broker-J's default for it
            parsed = parse_options(options)
        _check_kind(kind, attributes, parsed)
        queue = self.broker.declare(name, options, user=user)
        return Response(CREATED, "Created", queue_attributes(queue))

    def update(self, queue: Queue, body: Any, user: str | None = None) -> Response:
        attributes = _attribute_map(body, "UPDATE")
        current = queue_attributes(queue)
        options: dict[str, Any] = {}
        for key, value in attributes.items():
            if key in ("name", "object-path"):
                if str(value).rsplit("/", 1)[-1] != queue.name:
                    raise ManagementError(BAD_REQUEST, f"cannot change the value of '{key}'")
            elif key in FIGURES:
                continue  # figures of the moment, read back with the rest: never settings
            elif key in READ_ONLY:
                allowed = (
                    (queue.kind, KIND_TYPES[queue.kind])
                    if key in KIND_ATTRIBUTES
                    else (current[key],)
                )
                if not any(_same(value, v) for v in allowed):
                    raise ManagementError(
                        BAD_REQUEST,
                        f"attribute '{key}' is read-only "
                        f"({current[key]!r}), it cannot be set to {value!r}",
                    )
            elif value is not None and not (key in current and _same(value, current[key])):
                options[key] = value  # a change (unchanged ones: READ, edit, UPDATE)
        if options:
            self.broker.update_queue(queue.name, options, user=user)
        return Response(OK, "OK", queue_attributes(queue))

    def delete(
        self, queue: Queue, properties: Mapping[str, Any], body: Any, user: str | None = None
    ) -> Response:
        force, if_unused = (_flag(name, properties, body) for name in ("force", IF_UNUSED))
        if if_unused and queue.consumer_count:
            raise ManagementError(  # qpidd's Broker::checkDeleteQueue
                CONFLICT,
                f"queue '{queue.name}' is in use: {queue.consumer_count} consumer(s); "
                "delete it without ifUnused to detach them",
            )
        self.broker.delete_queue(queue.name, force=force, user=user)
        return Response(NO_CONTENT, "Deleted", {})

    def _find(self, kind: str, properties: Mapping[str, Any]) -> Queue:
        """The queue a request names: ``name``, ``identity`` (a UUID or a name), or
        Broker-J's ``index``=``object-path`` with ``key`` (management_paths.py)."""
        name = properties.get("name")
        identity = properties.get("identity")
        if name is None and identity is None and "index" in properties:
            if properties["index"] != "object-path":
                raise ManagementError(
                    BAD_REQUEST, f"unknown index {properties['index']!r}; use 'object-path'"
                )
            key = properties.get("key")
            if not isinstance(key, str) or not key:
                raise ManagementError(BAD_REQUEST, "index 'object-path' needs a 'key'")
            name = named_by_path(key)
            if name is None:
                raise ManagementError(
                    NOT_FOUND,
                    f"no {kind} at object-path {key!r} (a '/' in a name is written '\\/')",
                )
        if name is None and identity is None:
            raise ManagementError(
                BAD_REQUEST, "the request names no entity: give 'name' or 'identity'"
            )
        queue = self._by_name_or_identity(name, identity)
        if queue is None or (kind in QUEUE_KINDS and QUEUE_KINDS[kind] != queue.kind):
            what = name if name is not None else identity
            raise ManagementError(NOT_FOUND, f"no {kind} named {what!r}")
        return queue

    def _by_name_or_identity(self, name: Any, identity: Any) -> Queue | None:
        queues = self.broker.queues
        if name is not None:
            queue = queues.get(str(name))
            if (
                queue is not None
                and identity is not None
                and str(identity) not in (queue.name, identity_of(queue.name))
            ):
                raise ManagementError(
                    BAD_REQUEST,
                    f"'name' {name!r} and 'identity' {identity!r} name different entities",
                )
            return queue
        identity = str(identity)
        queue = queues.get(identity)
        if queue is not None:
            return queue
        return next((q for q in queues.values() if identity_of(q.name) == identity), None)

    # ---- node operations ------------------------------------------------------------

    def _check(self, user: str | None, action: str, queue: Queue) -> None:
        if user is not None:
            properties = queue_properties(queue.settings)
            self.broker.access.check(user, action, "queue", queue.name, properties)

    def _node_operation(
        self, operation: str, properties: Mapping[str, Any], body: Any, user: str | None
    ) -> Response:
        entity_type = properties.get("entityType")
        known = entity_type is None or entity_type in _types(None)
        if operation == "QUERY" and not known:  # GET-*: an empty map, as Broker-J's
            raise ManagementError(BAD_REQUEST, f"unknown entityType {entity_type!r}")
        if user is not None and operation in NODE_OPERATIONS:
            if operation == "QUERY":
                for what in _query_objects(entity_type):
                    self.broker.access.check(user, "access", "query", what, None, f"query {what}s")
            else:
                method = RELOAD_ACL_METHOD if operation == "RELOAD-ACL" else operation.lower()
                self.broker.access.check(user, "access", "method", method, None, operation)
        if operation == "RELOAD-ACL":
            rules = self.broker.access.reload()
            plural = "" if rules == 1 else "s"
            said = f"the ACL file is read again: {rules} rule{plural}"
            return Response(OK, said, {"rules": rules})
        if operation == "QUERY":
            return self.query(entity_type, properties, body)
        if operation == "GET-TYPES":
            return Response(OK, "OK", _types(entity_type))
        if operation == "GET-ATTRIBUTES":
            return Response(
                OK,
                "OK",
                {t: _attribute_names(t) for t in _types(entity_type)},
            )
        if operation == "GET-OPERATIONS":
            return Response(OK, "OK", {t: _operations(t) for t in _types(entity_type)})
        raise ManagementError(
            BAD_REQUEST,
            f"unknown operation {operation!r} for the "
            f"management node; supported: {', '.join(NODE_OPERATIONS)}",
        )

    def query(self, entity_type: str | None, properties: Mapping[str, Any], body: Any) -> Response:
        """Broker-J's QUERY: body ``{attributeNames: [...]}`` (empty: the defaults),
        application properties ``offset`` and ``count`` (negative: from the end); the
        answer ``{attributeNames, results: [[...], ...]}``, queues sorted by name. Without
        ``entityType``, every entity, as Broker-J lists them: bindings, exchanges, then
        queues (its categories by name), with every kind's attributes."""
        request = _attribute_map(body if body is not None else {}, "QUERY")
        names = json_text(request.get("attributeNames") or [], "attributeNames", "a list")
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ManagementError(BAD_REQUEST, "'attributeNames' must be a list of strings")
        rows: list[dict[str, Any]] | list[Queue] | list[dict[str, Any] | Queue]
        if entity_type is None:  # bindings, exchanges, then queues: Broker-J's order
            names = list(names) or _EVERY_ATTRIBUTE
            rows = [  # type: ignore[assignment] # rows of every kind: maps and queues
                *self.exchanges.rows(BINDING_TYPE, properties),
                *self.exchanges.rows(EXCHANGE_TYPE, properties),
                *self._queues_of(QUEUE_TYPE),
            ]
        elif entity_type in ENTITY_TYPES:
            names = list(names) or attribute_names(entity_type)
            rows = self.exchanges.rows(entity_type, properties)
        elif entity_type == CONNECTION_TYPE:
            names = list(names) or list(CONNECTION_ATTRIBUTES)
            rows = self.connections.rows()
        else:
            names = list(names) or QUERY_DEFAULT
            rows = self._queues_of(entity_type)
        rows = _window(
            rows, integer_parameter(properties, "offset"), integer_parameter(properties, "count")
        )
        results = [_query_row(row, names) for row in rows]  # a queue is read in the window only
        return Response(OK, "OK", {"attributeNames": names, "results": results})

    def _queues_of(self, entity_type: str) -> list[Queue]:
        """The queues a QUERY of ``entity_type`` (a queue type) lists, sorted by name."""
        queues = sorted(self.broker.queues.values(), key=lambda q: q.name)
        if entity_type in QUEUE_KINDS:
            return [q for q in queues if q.kind == QUEUE_KINDS[entity_type]]
        return [] if entity_type == MANAGEMENT_TYPE else queues


def _query_row(row: dict[str, Any] | Queue, names: list[str]) -> list[Any]:
    """One QUERY result: a queue's attributes, or an exchange's or a binding's map, in the
    order of ``names`` (null for a name it does not have)."""
    if isinstance(row, Queue):
        return list(queue_attributes(row, names).values())
    return [row.get(n) for n in names]


def _is_node(properties: Mapping[str, Any], kind: Any) -> bool:
    """A request to the node itself: type org.amqp.management with name (the draft) or
    identity (Broker-J) 'self'."""
    return kind == MANAGEMENT_TYPE and SELF in (properties.get("name"), properties.get("identity"))


def _types(entity_type: str | None) -> dict[str, list[str]]:
    """GET-TYPES: each type and the types it extends; for one type, that type and those
    that extend it (a category and its kinds, as Broker-J answers); nothing for a type
    this node does not know."""
    table = {
        MANAGEMENT_TYPE: [],
        QUEUE_TYPE: [],
        **{kind: [QUEUE_TYPE] for kind in QUEUE_KINDS},
        **TYPE_HIERARCHY,
        CONNECTION_TYPE: [],
    }
    if entity_type is None:
        return table
    return {t: up for t, up in table.items() if t == entity_type or entity_type in up}


def _attribute_names(entity_type: str) -> list[str]:
    if entity_type == MANAGEMENT_TYPE:
        return []
    if entity_type in ENTITY_TYPES:
        return attribute_names(entity_type)
    if entity_type == CONNECTION_TYPE:
        return list(CONNECTION_ATTRIBUTES)
    return list(QUEUE_ATTRIBUTES)


def _query_objects(entity_type: str | None) -> tuple[str, ...]:
    """What a QUERY lists, as the ACL's ``access query name=`` names each: every kind
    without ``entityType`` (each must be allowed)."""
    if entity_type is None:
        return ("binding", "exchange", "queue")
    if entity_type in ENTITY_TYPES:
        return ("binding",) if entity_type == BINDING_TYPE else ("exchange",)
    if entity_type == CONNECTION_TYPE:
        return ("connection",)
    return ("queue",)


# QUERY without entityType or attribute names: Broker-J's four naming attributes first, then
# every kind's defaults (a binding's and an exchange's that a queue has not), in one list.
_EVERY_ATTRIBUTE = list(
    dict.fromkeys(
        [
            "identity",
            "type",
            "qpid-type",
            "object-path",
            *QUERY_DEFAULT,
            *attribute_names(EXCHANGE_TYPE),
            *attribute_names(BINDING_TYPE),
        ]
    )
)


def _operations(entity_type: str) -> dict[str, list[str]]:
    if entity_type == MANAGEMENT_TYPE:
        return {op: [] for op in NODE_OPERATIONS}
    if entity_type == CONNECTION_TYPE:  # made by clients: read, closed, counted
        return {"READ": [], "DELETE": [], GET_STATISTICS: ["statistics"]}
    crud: dict[str, list[str]] = {
        "CREATE": [],
        "READ": [],
        "UPDATE": [],
        "DELETE": ["force", IF_UNUSED],
    }
    if entity_type == EXCHANGE_TYPE or EXCHANGE_TYPE in TYPE_HIERARCHY.get(entity_type, ()):
        crud["bind"] = ["destination", "bindingKey", "arguments", "replaceExistingArguments"]
        crud["unbind"] = ["destination", "bindingKey"]
        crud.update(CONTEXT_OPERATIONS)
    if entity_type in QUEUE_TYPES:
        crud[CLEAR_QUEUE] = []
        crud.update(MESSAGE_OPERATIONS)
        crud.update({op: [] for op in LINK_OPERATIONS})
        crud.update(CONTEXT_OPERATIONS)
    if entity_type != BINDING_TYPE:
        crud[GET_STATISTICS] = ["statistics"]
        crud[RESET_STATISTICS] = []
    return crud


def _attribute_map(body: Any, operation: str) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping) or not all(isinstance(k, str) for k in body):
        raise ManagementError(
            BAD_REQUEST,
            f"the body of a {operation} request must be a "
            f"map of attribute names to values, got {type(body).__name__}",
        )
    return dict(body)


def _create_name(properties: Mapping[str, Any], attributes: Mapping[str, Any]) -> str:
    given = [v for v in (properties.get("name"), attributes.get("name")) if v is not None]
    if any(not isinstance(v, str) for v in given):  # not a list's text made a name
        raise ManagementError(BAD_REQUEST, f"a name is text, got {given!r}")
    names: set[str] = set(given)
    path = attributes.get("object-path")
    if path is not None:
        named = named_by_path(str(path))
        if named is None:
            raise ManagementError(BAD_REQUEST, f"object-path {path!r} names no entity here")
        names.add(named)
    if not names or "" in names:
        raise ManagementError(
            BAD_REQUEST, "CREATE needs a 'name' (application property or body attribute)"
        )
    if len(names) > 1:
        raise ManagementError(BAD_REQUEST, "CREATE names differ: " + ", ".join(sorted(names)))
    return names.pop()


def _options_of(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The queue options in a CREATE body: everything but the request's own attributes,
    Broker-J's queue ``type`` ("lvq", checked by _check_kind) and nulls (unset)."""
    return {
        k: v
        for k, v in attributes.items()
        if k not in _REQUEST_ONLY and k != "type" and v is not None
    }


# What Broker-J gives a queue created as a kind without the attribute that makes it one: its
# LastValueQueue's lvqKey and its PriorityQueue's priorities default (context variables
# queue.lvqKey and queue.priorities). A SortedQueue's sortKey is mandatory there too.
_KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "lvq": {"lvqKey": "qpid.LVQ_key"},
    "priority": {"priorities": 10},
}


def _wanted_kind(kind: str, attributes: Mapping[str, Any]) -> str:
    """The queue kind a CREATE names: its type (a kind's class), else a body's ``type`` or
    ``qpid-type`` (a kind or its class); "" when it names none."""
    if kind in QUEUE_KINDS:
        return QUEUE_KINDS[kind]
    for key in KIND_ATTRIBUTES:
        given = attributes.get(key)
        if isinstance(given, str) and (given in KIND_TYPES or given in QUEUE_KINDS):
            return QUEUE_KINDS.get(given, given)
    return ""


def _check_kind(kind: str, attributes: Mapping[str, Any], parsed: ParsedOptions) -> None:
    made = parsed.settings.kind
    wanted = QUEUE_KINDS.get(kind)
    if wanted is not None and wanted != made:
        needs = {
            "priority": "'priorities'",
            "sorted": "'sortKey'",
            "lvq": "'lvqKey'",
            "standard": "none of priorities, sortKey, lvqKey",
        }[wanted]
        raise ManagementError(
            BAD_REQUEST, f"type {kind} needs {needs}; these attributes make a {made} queue"
        )
    for key in KIND_ATTRIBUTES:
        given = attributes.get(key)
        if given is not None and given not in (made, KIND_TYPES[made]):
            raise ManagementError(
                BAD_REQUEST,
                f"attribute '{key}' is {given!r} but the other attributes make a {made} queue",
            )


def _same(value: Any, current: Any) -> bool:
    return value == current or (
        isinstance(current, str) and isinstance(value, str) and value.upper() == current.upper()
    )


def _window(items: list[Any], offset: int | None, count: int | None) -> list[Any]:
    if offset is not None:
        items = items[offset:] if offset >= 0 else items[max(0, len(items) + offset) :]
    if count is not None:
        items = items[:count] if count >= 0 else items[: max(0, len(items) + count)]
    return items


def status_of(error: errors.BrokerError) -> int:
    """The status a management answer gives ``error`` (:data:`STATUS_FOR`, by class)."""
    for cls in type(error).__mro__:
        status = STATUS_FOR.get(cls)
        if status is not None:
            return status
    return INTERNAL_ERROR


__all__ = ["LIVE_SETTINGS", "Management", "ManagementError", "Response", "queue_attributes"]
