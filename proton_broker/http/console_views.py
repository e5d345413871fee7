"""What the web console reads and does, on the broker's event loop.

Each function here runs on the broker's loop (the console's handlers send it there) and
returns plain JSON-ready values. Rules this module owns (docs/console.md):

* No second code path: creating, reading, changing, listing and deleting queues, exchanges
  and bindings go through the ``$management`` node's layer
  (:class:`~proton_broker.management.Management`), with its ACL checks and its error texts
  (a bad option is refused with the words an attach would get). Purging is the broker's
  :meth:`~proton_broker.broker.Broker.purge_queue`; a test message is enqueued as the HTTP
  gateway's sends are.
* The ACL decides as it does for AMQP (qpidd's actions and objects): a queue's page is
  ``access queue``, the queue list ``access query queue``, browsing ``browse`` (else
  ``consume``) the queue, a test message ``publish``, purging ``purge queue``; the overview
  and the logs are ``access broker`` (as the metrics are), the connection list ``access
  query connection`` and closing one ``delete connection``.
* A message is shown as its sections decoded by the broker's own codec, its body at most
  :data:`BODY_PREVIEW` bytes of it: text as text, JSON and AMQP maps or lists as JSON, any
  other binary as hex.
* What ``$management`` holds confidential (Broker-J's secure operations: getMessageContent,
  and the application properties getMessageInfo shows with ``includeHeaders``) is shown
  only where management would answer it: over HTTPS, or to a client address
  ``broker.confidential_without_tls`` allows. Elsewhere a browsed message comes without its
  body and application properties (``null``), with ``withheld`` saying why; its header,
  properties, content type and size are what getMessageInfo shows anywhere, and its
  annotations (the broker's and the client library's, which getMessageInfo does not
  show) stay too.
"""

from __future__ import annotations

import heapq
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import proton_broker
from proton_broker.codec.encode import encode_header, encode_message
from proton_broker.codec.sections import body_of, parse_message
from proton_broker.codec.values import DecodeError
from proton_broker.errors import BrokerError, Unauthorized
from proton_broker.http.rates import Rates, series
from proton_broker.http.wire import (
    RequestError,
    check_long,
    json_safe,
    refuse_when_full,
    when_written,
)
from proton_broker.management import (
    MANAGEMENT_TYPE,
    QUEUE_ATTRIBUTES,
    QUEUE_TYPE,
    Management,
    Response,
    queue_attributes,
    status_of,
)
from proton_broker.management_exchanges import BINDING_TYPE, EXCHANGE_TYPE
from proton_broker.queues.entries import ACQUIRED, HELD
from proton_broker.queues.settings import LIVE_SETTINGS, OptionInfo, option_table

if TYPE_CHECKING:
    from proton_broker.broker import Broker
    from proton_broker.queues.queue import Queue

BODY_PREVIEW = 1024  # bytes of a body a browsed message shows
MAX_BROWSE = 100  # messages one browse shows at most
PROPERTY_NAMES = (
    "message_id",
    "user_id",
    "to",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "absolute_expiry_time",
    "creation_time",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
)
STATES = {ACQUIRED: "acquired", HELD: "held"}  # otherwise available
HELP = {
    "durable": "kept in the store across restarts, with its durable messages",
    "priorities": "priority levels (1 to 10): a priority queue",
    "sort_key": "application property whose value orders the queue: a sorted queue",
    "lvq_key": "application property whose value is the key: a last-value queue",
    "sequence_key": "application property that numbers versions per key (sequence history)",
    "max_key_updates": "versions kept per key in the sequence history",
    "group_key": "application property naming a message's group",
    "group_mode": "message groups: NONE, STANDARD (one consumer a group) or SHARED_GROUPS",
    "default_group": "the group of a message without a group key",
    "max_count": "most messages the queue holds (-1: no limit)",
    "max_size": "most bytes of messages the queue holds (-1: no limit)",
    "overflow_policy": "what happens over the limits",
    "fairshare": "messages a priority level hands out in a row before the next lower one",
    "max_live_consumers": "consumers that take messages; the others stand by (0: all)",
    "message_durability": "which messages a durable queue keeps: durable ones, all or none",
    "no_local": "what a connection sends does not join while it consumes from the queue",
    "queue_filter": "a JMS selector a message must match to join the queue",
    "sequence_annotation": "message annotation each delivery carries the queue number under",
    "flow_stop_count": "messages at which producers are stopped",
    "flow_stop_size": "bytes at which producers are stopped",
    "flow_resume_count": "messages at which stopped producers resume",
    "flow_resume_size": "bytes at which stopped producers resume",
    "flow_resume_percent": "percent of the limits at which stopped producers resume",
    "ensure_nondestructive": "every consumer browses: nothing is removed",
    "default_filters": "filters applied to consumers that give none (JSON map)",
    "min_ttl": "least time to live a message gets, in milliseconds",
    "max_ttl": "most time to live a message gets, in milliseconds",
    "hold_on_publish": "hold messages until their x-opt-delivery-time",
    "lifetime_policy": "when the broker deletes the queue by itself",
    "auto_delete_timeout": "seconds an unused auto-delete queue waits before it goes",
    "exclusive": "one connection only may use the queue",
    "subscription": "made for receivers on an exchange: a shared or exclusive subscription",
    "alternate": "where rejected, expired and dead messages go",
    "dead_letter_queue": "make a dead-letter queue as the alternate",
    "max_delivery_attempts": "deliveries before a message goes to the alternate (0: no limit)",
    "expiry_policy": "what happens to expired messages: DELETE or ROUTE_TO_ALTERNATE",
    "duplicate_count": "message-ids remembered for duplicate detection",
    "duplicate_seconds": "seconds message-ids are remembered for duplicate detection",
    "description": "what the queue is for, in words (no effect)",
    "context": "Broker-J's context variables (JSON map; no effect)",
}


def answer(response: Response) -> Any:
    """The body of a management answer, or the RequestError its status stands for."""
    if response.status >= 400:
        raise RequestError(response.status, response.description)
    return response.body


def request_error(exc: BrokerError) -> RequestError:
    """A broker error as the console's JSON error, with the status management gives it."""
    return RequestError(status_of(exc), exc.description)


# ---- overview -------------------------------------------------------------------------


def overview(broker: Broker, rates: Rates, connections: int, started: float, now: float) -> Any:
    """The broker as a whole (``access broker``)."""
    queues = list(broker.queues.values())
    latest = rates.broker[-1] if rates.broker else None
    budget = broker.loop_hooks.budget
    return {
        "version": proton_broker.__version__,
        "started": started,
        "uptime": now - started,
        "connections": connections,
        "queues": len(queues),
        "exchanges": sum(1 for _ in broker.exchanges),
        "messages": sum(q.depth for q in queues),
        "bytes": sum(q.bytes for q in queues),
        "rate_in": latest.rate_in if latest else None,
        "rate_out": latest.rate_out if latest else None,
        "store": _store(broker),
        "memory": {"rss": _rss(), "queued_bytes": budget.used, "max_memory": budget.limit},
        "series": series(rates.broker),
    }


def _store(broker: Broker) -> dict[str, Any] | None:
    store = broker.store
    if store is None:
        return None
    location = store.location
    if location is None:
        return {"kind": "memory", "path": None, "size": None, "disk_free": None}
    path = Path(location)
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    return {
        "kind": "sqlite",
        "path": str(path),
        "size": sum(f.stat().st_size for f in files if f.exists()),
        "disk_free": shutil.disk_usage(path.parent).free,
    }


def _rss() -> int | None:
    """This process's resident memory in bytes (Linux), or None where it cannot be read."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    import resource  # Unix only, like /proc

    return pages * resource.getpagesize()


# ---- queues ---------------------------------------------------------------------------


def queue_list(broker: Broker, rates: Rates, user: str, text: str, limit: int) -> Any:
    """The queue table: the queues whose name holds ``text``, by name, the first ``limit``
    of them, read as management's QUERY reads them (under its ACL question, ``access query
    queue``), with their rates. Only the rows shown are read and ordered (O(n log limit)),
    so a broker with many queues answers nearly as quickly as one with few."""
    check(broker, user, "access", "query", "queue", "query queues")  # as management's QUERY
    matching = [name for name in broker.queues if text in name]
    shown = []
    for name in heapq.nsmallest(limit, matching):
        row = queue_attributes(broker.queues[name], QUEUE_COLUMNS)
        rate = rates.rate_of(name)
        alternate = row["alternateBinding"]
        shown.append(
            {
                "name": name,
                "type": row["qpid-type"],  # the kind (management's "type": its class)
                "groups": row["messageGroupType"] not in (None, "NONE"),
                "durable": row["durable"],
                "depth": row["queueDepthMessages"],
                "bytes": row["queueDepthBytes"],
                "consumers": row["consumerCount"],
                "rate_in": rate[0] if rate else None,
                "rate_out": rate[1] if rate else None,
                "overflow": row["overflowPolicy"],
                "alternate": alternate.get("destination") if alternate else None,
            }
        )
    return {"total": len(matching), "queues": shown}


# The attributes the queue table shows.
QUEUE_COLUMNS = ["qpid-type", "messageGroupType", "durable", "queueDepthMessages"]
QUEUE_COLUMNS += ["queueDepthBytes", "consumerCount", "overflowPolicy", "alternateBinding"]


def queue_page(
    management: Management, rates: Rates, user: str, name: str, consumers: list[dict[str, Any]]
) -> Any:
    """One queue: management's READ (``access queue``), what may change, its consumers
    (``consumers``: as the protocol adapter lists them), its plot."""
    properties = {"operation": "READ", "type": QUEUE_TYPE, "name": name}
    attributes = answer(management.handle(properties, None, user))
    return {
        "attributes": json_safe(attributes),
        "editable": EDITABLE,
        "consumers": consumers,
        "series": series(rates.plot_of(name)),
    }


def _management_name(option: OptionInfo) -> str:
    """The name management (and the console) shows an option by: Broker-J's attribute
    name where it has one."""
    return next((n for n in option.names if n in QUEUE_ATTRIBUTES), option.names[0])


def _options() -> list[OptionInfo]:
    """One option per setting: where a setting has two forms, the one with choices."""
    chosen: dict[str, OptionInfo] = {}
    for option in option_table():
        kept = chosen.get(option.setting)
        if kept is None or (option.choices and not kept.choices):
            chosen[option.setting] = option
    return list(chosen.values())


# The attributes a live queue may change (queues/settings.py LIVE_SETTINGS), as named.
EDITABLE = sorted(_management_name(o) for o in _options() if o.setting in LIVE_SETTINGS)


def options() -> Any:
    """Every option the create form offers, with its other names and a sentence."""
    return {
        "options": [
            {
                "name": _management_name(option),
                "aliases": [n for n in option.names if n != _management_name(option)],
                "type": option.kind,
                "choices": list(option.choices),
                "help": HELP.get(option.setting, ""),
            }
            for option in _options()
        ]
    }


def create_queue(management: Management, user: str, name: Any, given: Any) -> Any:
    """CREATE through management: the attach's parser judges every option."""
    if not isinstance(name, str) or not name:
        raise RequestError(400, "a queue needs a name", "name")
    if not isinstance(given, Mapping):
        raise RequestError(400, "'options' must be an object of queue options", "options")
    properties = {"operation": "CREATE", "type": QUEUE_TYPE, "name": name}
    # The form sends only what the user set: an unticked "durable" means not durable (the
    # management node's default is Broker-J's, durable).
    options = {"durable": False, **given}
    return {"attributes": json_safe(answer(management.handle(properties, options, user)))}


def update_queue(management: Management, user: str, name: str, given: Any) -> Any:
    if not isinstance(given, Mapping):
        raise RequestError(400, "'options' must be an object of queue options", "options")
    properties = {"operation": "UPDATE", "type": QUEUE_TYPE, "name": name}
    return {"attributes": json_safe(answer(management.handle(properties, dict(given), user)))}


def delete_queue(management: Management, user: str, name: str, force: str | bool) -> None:
    """DELETE through management, ``force`` as given (``true``, ``1``, ``yes``, ...: its
    parser judges the text, and refuses what is not a boolean)."""
    properties = {"operation": "DELETE", "type": QUEUE_TYPE, "name": name, "force": force}
    answer(management.handle(properties, None, user))


def purge_queue(broker: Broker, user: str, name: str) -> Any:
    """Purge queue ``name`` (``purge`` it), answered once the removals are on disk, as
    management's clearQueue is (a 503 if the store cannot write them yet)."""
    queue = _queue(broker, name)
    purged = [0]
    answer, written = when_written(lambda: {"purged": purged[0]}, "the removals")

    def done(removed: int) -> None:  # after the last slice
        purged[0] = removed
        if not broker.when_removed(queue, removed, written):
            written(None)  # nothing stored to wait for

    try:
        broker.purge_queue(name, user, done)
    except BrokerError as exc:
        raise request_error(exc) from None
    return answer


def browse(broker: Broker, user: str, name: str, count: int, confidential: bool) -> Any:
    """The first ``count`` messages, taken by nobody (``browse`` the queue); their bodies
    and application properties only when ``confidential`` (see the module rules)."""
    queue = _queue(broker, name)
    try:
        broker.access.receive(user, name, queue.settings, browse=True)
    except Unauthorized as exc:
        raise request_error(exc) from None
    shown = [_shown(*seen) for seen in queue.peek(min(count, MAX_BROWSE))]
    if not confidential:
        shown = [_withheld(message) for message in shown]
    return {"messages": shown}


WITHHELD = (
    "body and application properties withheld: they are shown over HTTPS only, or from "
    "where broker.confidential_without_tls allows (as $management's getMessageContent)"
)


def _withheld(message: dict[str, Any]) -> dict[str, Any]:
    """A browsed message without what management holds confidential."""
    if "error" in message:  # a message that did not decode shows nothing of itself
        return message
    return {
        **message,
        "body": None,
        "body_encoding": None,
        "application_properties": None,
        "withheld": WITHHELD,
    }


def send_test(broker: Broker, user: str, name: str, given: Mapping[str, Any]) -> Any:
    """A test message onto queue ``name`` (``publish`` to it), as a producer's: durable if
    asked; answered once written when the queue keeps it (its messageDurability). Refused
    (503) while the broker's memory budget is full, as the gateway's sends are."""
    queue = _queue(broker, name)
    text, content_type, properties, durable = _test_message(given)
    header = encode_header(True, 4, None, False, 0) if durable else b""
    message = parse_message(header + encode_message(text, content_type, properties))
    answer, written = when_written(lambda: {"sequence": message.number})
    try:
        broker.access.send(user, name, queue.settings)
        refuse_when_full(broker.loop_hooks.budget)  # not a BrokerError: passes through
        if broker.publish(message, queue, written):
            return answer
    except BrokerError as exc:
        raise request_error(exc) from None
    return {"sequence": message.number}


def _test_message(given: Mapping[str, Any]) -> tuple[str, str | None, dict[str, Any], bool]:
    unknown = sorted(set(given) - {"body", "content_type", "properties", "durable"})
    if unknown:
        raise RequestError(400, f"unknown field {unknown[0]!r}", unknown[0])
    durable = given.get("durable", False)
    if not isinstance(durable, bool):
        raise RequestError(400, "'durable' must be true or false", "durable")
    text = given.get("body", "")
    content_type = given.get("content_type") or None
    properties = given.get("properties") or {}
    if not isinstance(text, str):
        raise RequestError(400, "'body' must be text", "body")
    if content_type is not None and not isinstance(content_type, str):
        raise RequestError(400, "'content_type' must be text", "content_type")
    if not isinstance(properties, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in properties.items()
    ):
        raise RequestError(
            400, "'properties' must map names to text, numbers or booleans", "properties"
        )
    for value in properties.values():
        if isinstance(value, int):
            check_long(value, "properties")
    return text, content_type, dict(properties), durable


def _queue(broker: Broker, name: str) -> Queue:
    queue = broker.queues.get(name)
    if queue is None:
        raise RequestError(404, f"Node not found: {name}")
    return queue


def _shown(number: int, state: int, data: bytes) -> dict[str, Any]:
    """One browsed message, its sections decoded (see the module rules)."""
    try:
        message = parse_message(data)
        fields = [message.properties_field(i) for i in range(len(PROPERTY_NAMES))]
        body = body_of(message)
    except DecodeError as exc:
        return {"sequence": number, "state": STATES.get(state, "available"), "error": str(exc)}
    content_type = fields[6]
    preview, size, encoding = _preview(body, content_type)
    return {
        "sequence": number,
        "state": STATES.get(state, "available"),
        "header": json_safe(message.header._asdict()),
        "properties": {
            n: json_safe(v) for n, v in zip(PROPERTY_NAMES, fields, strict=True) if v is not None
        },
        "application_properties": json_safe(message.application_properties),
        "annotations": json_safe(message.message_annotations),
        "content_type": json_safe(content_type),
        "body": preview,
        "body_size": size,
        "body_encoding": encoding,
    }


def _preview(body: Any, content_type: Any) -> tuple[str, int, str]:
    """(the first BODY_PREVIEW bytes of the body as text, its size, how it is shown)."""
    if isinstance(body, str):
        raw = body.encode("utf-8")
        return raw[:BODY_PREVIEW].decode("utf-8", "ignore"), len(raw), "text"
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return body[: BODY_PREVIEW // 2].hex(" "), len(body), "hex"
        kind = "json" if str(content_type or "").endswith("json") else "text"
        return text[:BODY_PREVIEW], len(body), kind
    text = json.dumps(json_safe(body))
    return text[:BODY_PREVIEW], len(text), "json"


# ---- exchanges, bindings, connections -------------------------------------------------


# The console's names for management's exchange and binding attributes.
EXCHANGE_COLUMNS = {
    "name": "name",
    "type": "qpid-type",  # the kind (management's "type" is its class name)
    "durable": "durable",
    "bindings": "bindingCount",
    "routed": "messagesRouted",
    "dropped": "messagesDropped",
}
BINDING_COLUMNS = {
    "exchange": "exchange",
    "queue": "queue",
    "key": "bindingKey",
    "arguments": "arguments",
}


def exchanges(management: Management, user: str) -> Any:
    return {"exchanges": _columns(_query(management, user, EXCHANGE_TYPE), EXCHANGE_COLUMNS)}


def bindings(management: Management, user: str) -> Any:
    return {"bindings": _columns(_query(management, user, BINDING_TYPE), BINDING_COLUMNS)}


def _columns(rows: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    return [{shown: row.get(attribute) for shown, attribute in names.items()} for row in rows]


def subscriptions(broker: Broker, user: str) -> Any:
    """The subscriptions receivers hold now (``access query name=queue``: they are queues)
    with the exchange and keys each is bound by."""
    check(broker, user, "access", "query", "queue", "list the subscriptions")
    shown = []
    for name, links in sorted(broker.subscriptions.in_use().items()):
        queue = broker.queues.get(name)
        if queue is None:
            continue
        bound = broker.exchanges.bindings_of(name)
        shown.append(
            {
                "name": name,
                "links": links,
                "durable": queue.settings.durable,
                "depth": queue.depth,
                "exchange": bound[0].exchange if bound else None,
                "keys": [b.key for b in bound],
            }
        )
    return {"subscriptions": shown}


def _query(
    management: Management, user: str, entity_type: str, count: int | None = None
) -> list[dict[str, Any]]:
    """Management's QUERY of ``entity_type`` (its ACL question asked), its rows as maps;
    ``count``: at most that many rows."""
    properties: dict[str, Any] = {
        "operation": "QUERY",
        "type": MANAGEMENT_TYPE,
        "entityType": entity_type,
    }
    if count is not None:
        properties["count"] = count
    body = answer(management.handle(properties, {}, user))
    return [json_safe(dict(zip(body["attributeNames"], r, strict=True))) for r in body["results"]]


def with_rates(connections: list[dict[str, Any]], rates: Rates) -> list[dict[str, Any]]:
    """The connection table: each connection's figures with its rates in and out."""
    for figures in connections:
        rate = rates.connection_rate(figures["id"])
        figures["rate_in"], figures["rate_out"] = rate if rate else (None, None)
    return connections


def check(broker: Broker, user: str, action: str, obj: str, name: str | None, what: str) -> None:
    """An ACL question for what is not a queue operation (see the module rules)."""
    try:
        broker.access.check(user, action, obj, name, what=what)
    except Unauthorized as exc:
        raise request_error(exc) from None
