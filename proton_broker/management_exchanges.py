"""Exchanges and bindings on the ``$management`` node (the queue half is :mod:`management`).

Rules this module owns (Broker-J's entity names, qpid-config's behaviour):

* Exchanges: the category ``org.apache.qpid.Exchange`` and Broker-J's kinds
  ``org.apache.qpid.DirectExchange``, ``TopicExchange``, ``FanoutExchange`` and
  ``HeadersExchange``. CREATE takes ``type`` or ``qpid-type`` (``direct``, ``topic``,
  ``fanout``, ``headers``, or the kind's class name; a kind in the request implies it; all
  given must agree), ``durable`` (true unless given: Broker-J's default), ``arguments``
  (only names an exchange knows, see exchanges/exchange.py: another is a 400, as Broker-J
  refuses unknown attributes), and Broker-J's ``alternateBinding``,
  ``unroutableMessageBehaviour``, ``lifetimePolicy`` (``PERMANENT`` only), ``description``
  and ``context``; one that exists is a 409.
  READ and QUERY give ``name``, ``id``, ``type`` (as Broker-J: the class name,
  ``org.apache.qpid.TopicExchange``), ``qpid-type`` (the kind, ``topic``), ``durable``,
  ``arguments``, those attributes of Broker-J's, and the statistics
  (:data:`EXCHANGE_STATISTICS`), which ``getStatistics`` gives alone and
  ``resetStatistics`` sets back to zero. DELETE removes the exchange and its bindings
  (the queues stay); the four default exchanges cannot be deleted, nor an exchange that
  is an alternate (403, as Broker-J answers its ``IntegrityViolationException``).
  UPDATE changes what Broker-J changes on a live exchange: its alternate
  (``alternateBinding``, or the qpid names), ``unroutableMessageBehaviour``,
  ``description`` and ``context``; the rest of a READ map may be sent back unchanged (its
  statistics whatever their value), anything else is a 400 naming it. Broker-J's exchange
  operations ``bind`` and ``unbind`` take their parameters from the application properties
  (``destination``, ``bindingKey``, ``arguments``, ``replaceExistingArguments``) and
  answer whether they changed anything.
* Bindings: ``org.apache.qpid.Binding``, this broker's own entity type (Broker-J manages
  bindings with its exchange's ``bind`` and ``unbind`` operations, not as entities), named
  by ``exchange``, ``queue`` and the binding key ``name`` (``bindingKey`` and
  ``destination``, Broker-J's argument names, are taken too).
  CREATE with ``arguments`` (a headers binding's ``x-match``...), a binding that exists is
  a 409; DELETE; READ; QUERY lists them all, or one exchange's (``exchange`` in the
  request's application properties).
* Refusals are the broker's own errors (``InvalidField`` 400, ``NotFound`` 404,
  ``PreconditionFailed`` 409, ``IntegrityViolation`` 403: the node's table
  :data:`management.STATUS_FOR`).
* Every operation asks the ACL first: ``create``/``delete``/``access exchange``,
  ``bind``/``unbind exchange`` with ``queuename`` and ``routingkey``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from proton_broker.codec.values import as_text
from proton_broker.errors import IntegrityViolation, InvalidField, NotFound, PreconditionFailed
from proton_broker.exchanges.exchange import (
    ALTERNATE_ARGUMENTS,
    EXCHANGE_TYPES,
    UNROUTABLE,
    Binding,
    Exchange,
    unknown_argument,
)
from proton_broker.management_paths import named_by_path, object_path
from proton_broker.queues.settings import to_bool, to_context, to_description

if TYPE_CHECKING:
    from proton_broker.broker import Broker

EXCHANGE_TYPE = "org.apache.qpid.Exchange"
EXCHANGE_KINDS = {
    "org.apache.qpid.DirectExchange": "direct",
    "org.apache.qpid.TopicExchange": "topic",
    "org.apache.qpid.FanoutExchange": "fanout",
    "org.apache.qpid.HeadersExchange": "headers",
}
KIND_TYPES = {kind: name for name, kind in EXCHANGE_KINDS.items()}
KIND_ATTRIBUTES = ("type", "qpid-type")  # either names the kind, by itself or its class
BINDING_TYPE = "org.apache.qpid.Binding"
EXCHANGE_ENTITY_TYPES = (EXCHANGE_TYPE, *EXCHANGE_KINDS)
ENTITY_TYPES = (*EXCHANGE_ENTITY_TYPES, BINDING_TYPE)
# Broker-J's operations on every object; this node has them for queues and exchanges.
GET_STATISTICS, RESET_STATISTICS = "getStatistics", "resetStatistics"
# Broker-J's operations on an exchange (beside CREATE, READ, UPDATE, DELETE).
EXCHANGE_OPERATIONS = ("bind", "unbind", GET_STATISTICS, RESET_STATISTICS)

TYPE_HIERARCHY = {
    EXCHANGE_TYPE: [],
    **{kind: [EXCHANGE_TYPE] for kind in EXCHANGE_KINDS},
    BINDING_TYPE: [],
}

# An exchange's statistics, Broker-J's names and meanings: what getStatistics answers, and
# what READ and QUERY give after the settings.
EXCHANGE_STATISTICS: dict[str, Callable[[Exchange], Any]] = {
    "bindingCount": lambda e: e.binding_count,
    "messagesIn": lambda e: e.routed + e.dropped,  # every message routed through it
    "bytesIn": lambda e: e.routed_bytes + e.dropped_bytes,
    "messagesDropped": lambda e: e.dropped,  # routed to no queue
    "bytesDropped": lambda e: e.dropped_bytes,
    "messagesRouted": lambda e: e.routed,  # this broker's own: routed to some queue
}
EXCHANGE_ATTRIBUTES: dict[str, Callable[[Exchange], Any]] = {
    "name": lambda e: e.name,
    "id": lambda e: _identity("exchange", e.name),
    "identity": lambda e: _identity("exchange", e.name),  # Broker-J's name for it
    "object-path": lambda e: object_path(e.name),
    "type": lambda e: KIND_TYPES[e.kind],  # as Broker-J: the type class's AMQP name
    "qpid-type": lambda e: e.kind,  # and the kind (direct, topic, fanout, headers)
    "durable": lambda e: e.durable,
    "arguments": lambda e: dict(e.arguments),
    "alternateBinding": lambda e: {"destination": e.alternate} if e.alternate else None,
    "unroutableMessageBehaviour": lambda e: "REJECT" if e.rejects_unroutable else "DISCARD",
    "lifetimePolicy": lambda e: "PERMANENT",
    "description": lambda e: e.arguments.get("description"),
    "context": lambda e: e.arguments.get("context"),
    **EXCHANGE_STATISTICS,
}
BINDING_ATTRIBUTES: dict[str, Callable[[Binding], Any]] = {
    "name": lambda b: b.key,
    "id": lambda b: _identity("binding", b.exchange, b.queue, b.key),
    "exchange": lambda b: b.exchange,
    "queue": lambda b: b.queue,
    "bindingKey": lambda b: b.key,
    "arguments": lambda b: dict(b.arguments),
}


# Attributes of a CREATE kept among the exchange's arguments: its alternate, Broker-J's
# unroutableMessageBehaviour (see exchanges/exchange.py), and what Broker-J's objects say of
# themselves (no effect).
_KEPT = (*ALTERNATE_ARGUMENTS, UNROUTABLE, "description", "context")


def _kept_value(key: str, value: Any) -> Any:
    """An attribute kept among the arguments, checked (the exchange checks the rest)."""
    if key == "context":
        return to_context(key, value)
    if key == "description":
        return to_description(key, value)
    return value


def _unchanged(key: str, value: Any, current: Any, exchange: Exchange) -> bool:
    """Whether an UPDATE's ``value`` of ``key`` is what the exchange has (``current``, as
    READ gives it; the type may also be given as the kind or its class name)."""
    if key in KIND_ATTRIBUTES:
        return value in (exchange.kind, KIND_TYPES[exchange.kind])
    if isinstance(value, str) and isinstance(current, str):
        return value.upper() == current.upper()
    return bool(value == current)


def _identity(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "proton-broker:" + "\0".join(parts)))


class ExchangeEntities:
    """CREATE, READ, UPDATE, DELETE and QUERY of exchanges and bindings."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handle(
        self,
        operation: str,
        kind: str,
        properties: Mapping[str, Any],
        attributes: dict[str, Any],
        user: str | None,
    ) -> tuple[int, str, Any]:
        """(status, description, body) for one entity operation."""
        if kind == BINDING_TYPE:
            return self._binding(operation, properties, attributes, user)
        return self._exchange(operation, kind, properties, attributes, user)

    # ---- exchanges ------------------------------------------------------------------------

    def _exchange(
        self,
        operation: str,
        kind: str,
        properties: Mapping[str, Any],
        attributes: dict[str, Any],
        user: str | None,
    ) -> tuple[int, str, Any]:
        name = _name(properties, attributes)
        if operation == "CREATE":
            return self._create_exchange(name, kind, attributes, user)
        exchange = self._find_exchange(name, properties, kind)
        if operation == "READ":
            if user is not None:
                self.broker.access.check(user, "access", "exchange", exchange.name)
            return 200, "OK", exchange_attributes(exchange)
        if operation == "DELETE":
            if exchange.builtin:
                raise IntegrityViolation(f"'{exchange.name}' is one of the broker's own exchanges")
            self.broker.delete_exchange(exchange.name, user=user)
            return 204, "Deleted", {}
        if operation == "UPDATE":
            return 200, "OK", self._update_exchange(exchange, attributes, user)
        if operation in EXCHANGE_OPERATIONS:
            return 200, "OK", self._exchange_operation(operation, exchange, properties, user)
        raise InvalidField(f"unknown operation {operation!r} for type {kind!r}")

    def _update_exchange(
        self, exchange: Exchange, attributes: Mapping[str, Any], user: str | None
    ) -> dict[str, Any]:
        """UPDATE: what Broker-J changes on a live exchange (its alternate,
        ``unroutableMessageBehaviour``, ``description``, ``context``). The rest of a READ
        map may be sent back unchanged (its statistics whatever their value); anything else
        is a 400 naming it, and nothing changes."""
        current = exchange_attributes(exchange)
        arguments = dict(exchange.arguments)
        for key, value in attributes.items():
            if key in EXCHANGE_STATISTICS:
                continue  # figures of the moment, read back with the rest: never settings
            if key in current and _unchanged(key, value, current[key], exchange):
                continue
            if key not in _KEPT:
                raise InvalidField(
                    f"attribute {key!r} of an exchange cannot be changed; delete and create it",
                    key,
                )
            if key in ALTERNATE_ARGUMENTS:  # one alternate, however it was named
                for name in ALTERNATE_ARGUMENTS:
                    arguments.pop(name, None)
            if value is None or value == "":
                arguments.pop(key, None)
            else:
                arguments[key] = _kept_value(key, value)
        if arguments != exchange.arguments:
            self.broker.update_exchange(exchange.name, arguments, user=user)
        return exchange_attributes(exchange)

    def _statistics(
        self, operation: str, exchange: Exchange, properties: Mapping[str, Any], user: str | None
    ) -> dict[str, Any] | None:
        """Broker-J's getStatistics (the ACL's ``access``) and resetStatistics (``update``)."""
        reading = operation == GET_STATISTICS
        if user is not None:
            action = "access" if reading else "update"
            self.broker.access.check(user, action, "exchange", exchange.name)
        if reading:
            return statistics(EXCHANGE_STATISTICS, exchange, wanted_statistics(properties))
        exchange.reset_statistics()
        return None

    def _exchange_operation(
        self, operation: str, exchange: Exchange, properties: Mapping[str, Any], user: str | None
    ) -> Any:
        """Broker-J's exchange operations, their parameters the application properties:
        ``bind(destination, bindingKey, arguments, replaceExistingArguments)`` and
        ``unbind(destination, bindingKey)``, each answering whether it changed anything;
        ``getStatistics(statistics)`` and ``resetStatistics()``."""
        if operation in (GET_STATISTICS, RESET_STATISTICS):
            return self._statistics(operation, exchange, properties, user)
        destination = properties.get("destination")
        if not isinstance(destination, str) or not destination:
            raise InvalidField(f"'{operation}' needs a 'destination' (a queue)")
        given = properties.get("bindingKey")
        if given is None:  # mandatory, as in Broker-J ("" for none); other values as text
            raise InvalidField(f"'{operation}' needs a 'bindingKey' (\"\" for none)")
        key = str(as_text(given))  # a uint(7) binds "7", as Broker-J's converter has it
        if operation == "unbind":
            return self.broker.unbind(exchange.name, destination, key, user=user)
        arguments = _json_map(properties.get("arguments"), "arguments")
        replace = to_bool(
            "replaceExistingArguments", properties.get("replaceExistingArguments", False)
        )
        exists = any(b.key == key for b in exchange.bindings_of(destination))
        if exists and not replace:
            return False
        self.broker.bind(exchange.name, destination, key, arguments, user=user)
        return True

    def _create_exchange(
        self, name: str | None, kind: str, attributes: dict[str, Any], user: str | None
    ) -> tuple[int, str, Any]:
        if not name:
            raise InvalidField("CREATE needs a 'name'")
        exchange_type = _exchange_type(kind, attributes)
        known = {"name", "type", "durable", "arguments", "qpid-type", "lifetimePolicy", *_KEPT}
        unknown = sorted(set(attributes) - known)
        if unknown:
            raise InvalidField(f"unknown exchange attribute {unknown[0]!r}")
        if name in self.broker.exchanges:
            raise PreconditionFailed(f"exchange '{name}' already exists")
        durable = to_bool("durable", attributes.get("durable", True))  # Broker-J's default
        lifetime = attributes.get("lifetimePolicy")
        if lifetime is not None and lifetime != "PERMANENT":
            raise InvalidField(
                f"an exchange's lifetimePolicy can only be PERMANENT here, not {lifetime!r}",
                "lifetimePolicy",
            )
        arguments = attributes.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise InvalidField("'arguments' must be a map")
        stray = unknown_argument(arguments)
        if stray is not None:  # Broker-J: "Unknown attributes provided"
            raise InvalidField(stray[1], stray[0])
        kept = {k: _kept_value(k, v) for k, v in attributes.items() if k in _KEPT and v is not None}
        arguments = {**arguments, **kept}
        exchange = self.broker.declare_exchange(name, exchange_type, durable, arguments, user)
        return 201, "Created", exchange_attributes(exchange)

    def _find_exchange(
        self, name: str | None, properties: Mapping[str, Any], kind: str
    ) -> Exchange:
        exchange = self.broker.exchanges.get(name) if name else None
        identity = properties.get("identity")
        if exchange is None and identity is not None:
            exchange = next(
                (e for e in self.broker.exchanges if _identity("exchange", e.name) == identity),
                None,
            )
        implied = EXCHANGE_KINDS.get(kind)
        if exchange is None or (implied is not None and exchange.kind != implied):
            raise NotFound(f"no {kind} named {name or identity!r}")
        return exchange

    # ---- bindings -------------------------------------------------------------------------

    def _binding(
        self,
        operation: str,
        properties: Mapping[str, Any],
        attributes: dict[str, Any],
        user: str | None,
    ) -> tuple[int, str, Any]:
        exchange, queue, key = _binding_names(properties, attributes)
        found = self._find_binding(exchange, queue, key)
        if operation == "CREATE":
            if found is not None:
                raise PreconditionFailed(
                    f"binding '{exchange}' -> '{queue}' '{key}' already exists"
                )
            arguments = attributes.get("arguments") or {}
            if not isinstance(arguments, Mapping):
                raise InvalidField("'arguments' must be a map")
            self.broker.bind(exchange, queue, key, arguments, user=user)
            made = self._find_binding(exchange, queue, key)
            return 201, "Created", binding_attributes(made) if made else {}
        if found is None:
            raise NotFound(f"no binding '{exchange}' -> '{queue}' with key '{key}'")
        if operation == "READ":
            if user is not None:
                self.broker.access.check(user, "access", "exchange", exchange)
            return 200, "OK", binding_attributes(found)
        if operation == "DELETE":
            self.broker.unbind(exchange, queue, key, user=user)
            return 204, "Deleted", {}
        if operation == "UPDATE":
            raise InvalidField("a binding cannot be changed; delete and create it")
        raise InvalidField(f"unknown operation {operation!r} for type {BINDING_TYPE!r}")

    def _find_binding(self, exchange: str, queue: str, key: str) -> Binding | None:
        target = self.broker.exchanges.get(exchange)
        if target is None:
            raise NotFound(f"no exchange named {exchange!r}")
        return next((b for b in target.bindings_of(queue) if b.key == key), None)

    # ---- listings -------------------------------------------------------------------------

    def rows(self, entity_type: str, properties: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every entity of ``entity_type`` as its attribute map, sorted (QUERY)."""
        if entity_type == BINDING_TYPE:
            wanted = properties.get("exchange")
            exchanges = [e for e in self.broker.exchanges if wanted in (None, e.name)]
            return [
                binding_attributes(b)
                for e in sorted(exchanges, key=lambda e: e.name)
                for b in sorted(e.bindings(), key=lambda b: (b.queue, b.key))
            ]
        implied = EXCHANGE_KINDS.get(entity_type)
        return [
            exchange_attributes(e)
            for e in sorted(self.broker.exchanges, key=lambda e: e.name)
            if implied in (None, e.kind)
        ]


def _exchange_type(kind: str, attributes: Mapping[str, Any]) -> str:
    """The type (``topic``...) a CREATE asks for: the body's ``type`` and ``qpid-type``
    (each the type or its class name), else the one the request's kind implies."""
    given = {
        key: EXCHANGE_KINDS.get(value, value) if isinstance(value, str) else value
        for key in KIND_ATTRIBUTES
        if (value := attributes.get(key)) is not None
    }
    implied = EXCHANGE_KINDS.get(kind)
    exchange_type = next(iter(given.values()), implied)
    if exchange_type not in EXCHANGE_TYPES:
        raise InvalidField(
            f"an exchange needs a 'type', one of {', '.join(EXCHANGE_TYPES)}, "
            f"not {exchange_type!r}",
        )
    for key, value in given.items():
        if implied is not None and value != implied:
            raise InvalidField(f"type {kind} is a {implied} exchange, not {value}")
        if value != exchange_type:
            raise InvalidField(
                f"attribute '{key}' is {attributes[key]!r} but 'type' is {attributes['type']!r}"
            )
    return exchange_type


def exchange_attributes(exchange: Exchange) -> dict[str, Any]:
    return {name: read(exchange) for name, read in EXCHANGE_ATTRIBUTES.items()}


def binding_attributes(binding: Binding) -> dict[str, Any]:
    return {name: read(binding) for name, read in BINDING_ATTRIBUTES.items()}


def attribute_names(entity_type: str) -> list[str]:
    return list(BINDING_ATTRIBUTES if entity_type == BINDING_TYPE else EXCHANGE_ATTRIBUTES)


def json_text(value: Any, name: str, kind: str) -> Any:
    """A parameter as given, or parsed if it is JSON text: a JMS ``MapMessage`` cannot carry
    a list or a map, so JMS management clients send one as text, and Broker-J reads it so
    (its ``ManagementInputConverter``). ``kind`` (a list, a map) names what was wanted."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise InvalidField(f"'{name}' is neither {kind} nor JSON text", name) from None


def integer(value: Any) -> int | None:
    """``value`` as a whole number: an integer, or its text (JMS management clients send
    numbers as text); None when it is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def integer_parameter(properties: Mapping[str, Any], name: str) -> int | None:
    """The integer parameter ``name`` of a request (None when not given)."""
    value = properties.get(name)
    if value is None:
        return None
    number = integer(value)
    if number is None:
        raise InvalidField(f"'{name}' must be an integer, got {value!r}", name)
    return number


def wanted_statistics(properties: Mapping[str, Any]) -> frozenset[str] | None:
    """The statistics a getStatistics request names in its ``statistics`` parameter (an
    application property: a list of names, or JSON text of one); None, or an empty list,
    asks for every one (Broker-J's default)."""
    value = json_text(properties.get("statistics"), "statistics", "a list")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise InvalidField("'statistics' must be a list of statistic names", "statistics")
    return frozenset(value) or None


def statistics(
    readers: Mapping[str, Callable[[Any], Any]], subject: Any, wanted: frozenset[str] | None
) -> dict[str, Any]:
    """Broker-J's getStatistics answer: each statistic of ``subject`` (those ``wanted``, all
    if None) that has a value; a name it does not have is left out, as Broker-J leaves it."""
    return {
        name: value
        for name, read in readers.items()
        if (wanted is None or name in wanted) and (value := read(subject)) is not None
    }


def _json_map(value: Any, name: str) -> dict[str, Any]:
    """A map parameter, given as a map or as JSON text."""
    value = json_text({} if value is None else value, name, "a map")
    if not isinstance(value, Mapping):
        raise InvalidField(f"'{name}' must be a map")
    return {str(k): v for k, v in value.items()}


def _name(properties: Mapping[str, Any], attributes: Mapping[str, Any]) -> str | None:
    name = properties.get("name", attributes.get("name"))
    if name is None and properties.get("index") == "object-path":
        name = named_by_path(str(properties.get("key", "")))
    if name is not None and not isinstance(name, str):  # not a list's text made a name
        raise InvalidField(f"a name is text, got {name!r}", "name")
    return name


def _binding_names(
    properties: Mapping[str, Any], attributes: Mapping[str, Any]
) -> tuple[str, str, str]:
    """(exchange, queue, key) of a binding request, from the application properties or the
    body (Broker-J's names: ``queue`` or ``destination``, ``name`` or ``bindingKey``)."""

    def given(*names: str) -> Any:
        for source in (properties, attributes):
            for name in names:
                if source.get(name) is not None:
                    return source[name]
        return None

    exchange, queue = given("exchange"), given("queue", "destination")
    key = given("bindingKey", "name")
    if not isinstance(exchange, str) or not isinstance(queue, str):
        raise InvalidField("a binding is named by 'exchange', 'queue' and 'name' (its key)")
    return exchange, queue, "" if key is None else str(as_text(key))
