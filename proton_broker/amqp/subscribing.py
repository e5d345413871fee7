"""Reading a receiver's attach to an exchange into a subscription, and writing our reply.

Rules this module owns (qpidd's ``docs/amqp-1.0.txt`` and ``Filter.cpp``; the filter
descriptors are those of the AMQP filter registry):

* Binding filters: ``legacy-amqp-direct-binding`` and ``legacy-amqp-topic-binding`` (a
  string: the binding key) and ``legacy-amqp-headers-binding`` (a map: the headers
  binding's arguments), recognised by their descriptor, symbolic or numeric. The subject
  of an ``exchange/subject`` address is a binding key too. Without one: a topic exchange
  binds ``#`` (everything), a headers exchange ``x-match: all`` (everything), a direct
  exchange the empty key, each echoed under the name ``default-subject-filter`` or
  ``default-headers-filter``. A topic filter on a direct exchange is taken as a direct one
  and echoed so. As both Qpid brokers do, what does not fit is passed over, not refused,
  and not echoed: a key filter after the first (qpidd's ``Filter::setFilter`` keeps the
  first), a headers filter on another type, a key filter (or an address's subject, which
  qpid::messaging sends as one) on a headers exchange, which then binds ``x-match: all``
  unless a headers filter says otherwise (qpidd's ``Filter::bind``; Broker-J's
  ``BindingInfo`` skips the filters that do not match the exchange's type). A binding
  filter whose value is of the wrong type is refused with ``amqp:invalid-field``.
* ``selector-filter`` goes into the binding (``x-filter-jms-selector``), so the
  subscription queue holds only what its receivers select. ``no-local-filter`` (a list,
  or the string Qpid JMS sends) keeps the messages the subscriber's own connection
  publishes out of its subscription queue.
* The filters honoured are echoed in our source, as the receiver sent them; the
  capabilities echoed are those requested among ``topic``, ``shared``, ``global``,
  ``create-on-demand``, ``durable`` (a durable exchange), and the legacy binding filter
  capability matching the exchange's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proton import Link, Terminus

from proton_broker.amqp.terminus import capabilities_of, filters_of, selector_filter
from proton_broker.codec.values import Described as DecodedDescribed
from proton_broker.errors import InvalidField
from proton_broker.exchanges.exchange import DIRECT, HEADERS, TOPIC, ExchangeAddress
from proton_broker.exchanges.headers import MATCH_ALL, SELECTOR_ARGUMENT, X_MATCH
from proton_broker.exchanges.subscriptions import Subscription, subscription_name

DIRECT_BINDING = ("apache.org:legacy-amqp-direct-binding:string", 0x0000468C00000000)
TOPIC_BINDING = ("apache.org:legacy-amqp-topic-binding:string", 0x0000468C00000001)
HEADERS_BINDING = ("apache.org:legacy-amqp-headers-binding:map", 0x0000468C00000002)
NO_LOCAL = ("apache.org:no-local-filter:list", 0x0000468C00000003)
DEFAULT_SUBJECT = "default-subject-filter"
DEFAULT_HEADERS = "default-headers-filter"
SHARED = "shared"
GLOBAL = "global"
EXCHANGE_CAPABILITIES = frozenset({"topic", SHARED, GLOBAL, "create-on-demand"})
FILTER_CAPABILITIES = {DIRECT: "legacy-amqp-direct-binding", TOPIC: "legacy-amqp-topic-binding"}


@dataclass
class SubscriptionRequest:
    """A receiver's attach to an exchange, read: what to ask the broker for, what to echo."""

    subscription: Subscription
    no_local: bool
    echo: dict[str, Any]  # filters honoured, as the receiver wrote them (or our defaults)


def read_subscription(
    link: Link, source: Terminus, address: ExchangeAddress, options: dict[str, Any]
) -> SubscriptionRequest:
    """The subscription a receiver on ``address`` asks for (InvalidField for a filter that
    cannot apply)."""
    exchange = address.exchange
    capabilities = set(capabilities_of(source))
    shared = SHARED in capabilities
    filters = filters_of(source)
    echo: dict[str, Any] = {}
    key, arguments = _binding(exchange.kind, address, filters, echo)
    selector, selected = selector_filter(source)
    if selector is not None and selector.text.strip():
        arguments[SELECTOR_ARGUMENT] = selector.text
    echo.update(selected)
    no_local = _no_local(filters, echo)
    kept = source.expiry_policy == Terminus.EXPIRE_NEVER
    container = link.connection.remote_container or ""
    name = subscription_name(container, link.name, shared, GLOBAL in capabilities, kept)
    subscription = Subscription(
        name,
        exchange.name,
        (Subscription.binding(key, arguments),),
        options,
        durable=source.durability != Terminus.NONDURABLE,
        kept=kept,
        shared=shared,
        linger=source.timeout,
    )
    return SubscriptionRequest(subscription, no_local, echo)


def _binding(
    kind: str, address: ExchangeAddress, filters: dict[str, Any], echo: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The binding key and arguments the filters (or the address' subject) ask for; the
    filters that do not fit are passed over (see the module rules)."""
    if kind == HEADERS:
        for name, raw in filters.items():
            if _is(raw, HEADERS_BINDING):
                return _headers_binding(name, raw, echo)
        echo[DEFAULT_HEADERS] = DecodedDescribed(HEADERS_BINDING[0], {X_MATCH: MATCH_ALL})
        return "", {X_MATCH: MATCH_ALL}
    for name, raw in filters.items():
        if _is(raw, DIRECT_BINDING) or _is(raw, TOPIC_BINDING):
            return _key_binding(kind, name, raw, echo)
    if address.subject is not None:
        return address.subject, {}
    default = "#" if kind == TOPIC else ""
    descriptor = TOPIC_BINDING if kind == TOPIC else DIRECT_BINDING
    echo[DEFAULT_SUBJECT] = DecodedDescribed(descriptor[0], default)
    return default, {}


def _headers_binding(
    name: str, raw: DecodedDescribed, echo: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    if not isinstance(raw.value, dict):
        raise InvalidField(f"binding filter '{name}' must be a map", "filter")
    echo[name] = raw
    return "", {str(k): v for k, v in raw.value.items()}


def _key_binding(
    kind: str, name: str, raw: DecodedDescribed, echo: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    if not isinstance(raw.value, str):
        raise InvalidField(f"binding filter '{name}' must be a string", "filter")
    if kind == DIRECT and _is(raw, TOPIC_BINDING):  # qpidd takes it as a direct one
        raw = DecodedDescribed(_like(raw.descriptor, DIRECT_BINDING), raw.value)
    echo[name] = raw
    return raw.value, {}


def _no_local(filters: dict[str, Any], echo: dict[str, Any]) -> bool:
    for name, raw in filters.items():
        if _is(raw, NO_LOCAL):
            echo[name] = raw
            return True
    return False


def subject_filter(source: Terminus) -> tuple[str | None, dict[str, Any]]:
    """The subject filter of a consumer on a queue (qpidd's ``Filter::apply`` on a queue
    source: a ``legacy-amqp-direct-binding`` or ``-topic-binding`` filter, which
    qpid::messaging sends for a ``queue/subject`` address): its pattern and the entry to
    echo; (None, {}) without one. The first counts, as qpidd keeps the first."""
    for name, raw in filters_of(source).items():
        if _is(raw, DIRECT_BINDING) or _is(raw, TOPIC_BINDING):
            if not isinstance(raw.value, str):
                raise InvalidField(
                    f"subject filter '{name}' must be a string, got {raw.value!r}", "filter"
                )
            return raw.value, {name: raw}
    return None, {}


def _is(raw: Any, descriptor: tuple[str, int]) -> bool:
    return isinstance(raw, DecodedDescribed) and raw.descriptor in descriptor


def _like(descriptor: Any, wanted: tuple[str, int]) -> Any:
    """``wanted`` in the form (symbolic or numeric) ``descriptor`` was written in."""
    return wanted[1] if isinstance(descriptor, int) else wanted[0]


def exchange_capabilities(requested: list[str], address: ExchangeAddress) -> set[str]:
    """The capabilities we echo for a link on ``address`` (see the module rules)."""
    exchange = address.exchange
    honoured = set(EXCHANGE_CAPABILITIES)
    if exchange.durable:
        honoured.add("durable")
    if exchange.kind in FILTER_CAPABILITIES:
        honoured.add(FILTER_CAPABILITIES[exchange.kind])
    return {c for c in requested if c in honoured}
