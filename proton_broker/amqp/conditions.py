"""The one table from domain errors to AMQP error conditions."""

from __future__ import annotations

from proton import Condition, Delivery

from proton_broker import errors

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


def condition_for(error: BaseException) -> tuple[str, str, dict[str, str] | None]:
    """(condition name, description, info) for ``error``; unknown errors are internal."""
    for cls in type(error).__mro__:
        name = _TABLE.get(cls)  # type: ignore[arg-type]
        if name is not None:
            info = None
            if isinstance(error, errors.InvalidField) and error.field:
                info = {"field": error.field}
            return name, str(error), info
    return INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}", None


def reject(delivery: Delivery, error: BaseException) -> None:
    """Settle ``delivery`` as rejected, carrying the error's condition."""
    name, description, info = condition_for(error)
    delivery.local.condition = Condition(name, description, info)
    delivery.update(Delivery.REJECTED)
    delivery.settle()
