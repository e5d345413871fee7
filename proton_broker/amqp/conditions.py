"""The one table from domain errors to AMQP error conditions, and the ways the broker
tells a client about one: a rejected delivery, a detached link."""

from __future__ import annotations

import logging
from typing import Any

from proton import Condition, Delivery, Link, symbol

from proton_broker import errors

log = logging.getLogger("proton_broker.amqp.links")

NOT_FOUND = "amqp:not-found"
INVALID_FIELD = "amqp:invalid-field"
DECODE_ERROR = "amqp:decode-error"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
PRECONDITION_FAILED = "amqp:precondition-failed"
NOT_IMPLEMENTED = "amqp:not-implemented"
INTERNAL_ERROR = "amqp:internal-error"
RESOURCE_DELETED = "amqp:resource-deleted"
RESOURCE_LOCKED = "amqp:resource-locked"
CONNECTION_FORCED = "amqp:connection:forced"
TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id"
TRANSACTION_ROLLBACK = "amqp:transaction:rollback"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
LINK_STOLEN = "amqp:link:stolen"
ILLEGAL_STATE = "amqp:illegal-state"

FIELD = symbol("field")

_TABLE: dict[type[errors.BrokerError], str] = {
    errors.NotFound: NOT_FOUND,
    errors.InvalidField: INVALID_FIELD,
    errors.MalformedMessage: DECODE_ERROR,
    errors.ResourceLimitExceeded: RESOURCE_LIMIT_EXCEEDED,
    errors.MessageTooLarge: MESSAGE_SIZE_EXCEEDED,
    errors.Unauthorized: UNAUTHORIZED_ACCESS,
    errors.PreconditionFailed: PRECONDITION_FAILED,
    errors.ResourceLocked: RESOURCE_LOCKED,
    errors.NotImplementedByBroker: NOT_IMPLEMENTED,
    errors.UnknownTransaction: TRANSACTION_UNKNOWN_ID,
    errors.TransactionRolledBack: TRANSACTION_ROLLBACK,
}


def condition_for(error: BaseException) -> tuple[str, str, dict[symbol, symbol] | None]:
    """(condition name, description, info) for ``error``; unknown errors are internal.
    An invalid field is named in the info map as ``{field: NAME}``, both symbols (AMQP's
    ``fields`` are keyed by symbols; Broker-J sends ``{field: filter}`` so)."""
    for cls in type(error).__mro__:
        name = _TABLE.get(cls)  # type: ignore[arg-type]
        if name is not None:
            info = None
            if isinstance(error, errors.InvalidField) and error.field:
                info = {FIELD: symbol(error.field)}
            return name, str(error), info
    return INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}", None


def reject(delivery: Delivery, error: BaseException) -> None:
    """Settle ``delivery`` as rejected, carrying the error's condition."""
    name, description, info = condition_for(error)
    delivery.local.condition = Condition(name, description, info)
    delivery.update(Delivery.REJECTED)
    delivery.settle()


REJECTED_OUTCOME = "amqp:rejected:list"


def allows_rejected(link: Link) -> bool:
    """Whether a producer may be told ``rejected``: its source lists that outcome, or lists
    no outcomes at all (see the module rules)."""
    outcomes = link.remote_source.outcomes
    outcomes.rewind()
    if not outcomes.next():
        return True
    value = outcomes.get_object()
    if value is None:
        return True
    values = getattr(value, "elements", value)  # an Array, a list, or one bare symbol
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        values = [values]
    return REJECTED_OUTCOME in {str(v) for v in values}


def close_link(link: Link, name: str, description: str, info: dict[str, Any] | None = None) -> None:
    """Detach ``link`` (closing) with an error condition."""
    link.condition = Condition(name, description, info)
    link.close()


def refuse_beyond_credit(link: Link, why: str, allowance: int) -> None:
    """Detach ``link``, whose client sent more than the ``allowance`` transfers in flight
    when its credit was withdrawn (``why``), with ``amqp:link:transfer-limit-exceeded``
    (AMQP 1.0 2.8.15): a producer's and a management requester's alike."""
    description = (
        f"transfer sent without link credit: credit was withdrawn because {why}, and "
        f"more than the {allowance} transfers in flight then have arrived since"
    )
    log.warning("%s on link '%s': %s", TRANSFER_LIMIT_EXCEEDED, link.name, description)
    close_link(link, TRANSFER_LIMIT_EXCEEDED, description)


def refuse_oversized(link: Link, delivery: Delivery, most: int) -> None:
    """A message over ``most`` bytes (``broker.max_message_size``): refused before the rest
    of it is buffered (AMQP 1.0 2.7.3: the link is detached with message-size-exceeded)."""
    description = (
        f"message larger than {most} bytes, the most this broker accepts (broker.max_message_size)"
    )
    log.warning("%s on link '%s': %s", MESSAGE_SIZE_EXCEEDED, link.name, description)
    reject(delivery, errors.MessageTooLarge(description))
    close_link(link, MESSAGE_SIZE_EXCEEDED, description)
