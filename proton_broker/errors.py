"""Domain errors of the broker, independent of any protocol.

The AMQP adapter maps each class to an AMQP error condition in one table
(:mod:`proton_broker.amqp.conditions`), so queue code raises what went wrong and never
chooses wire symbols itself.
"""


class BrokerError(Exception):
    """Base class: ``description`` is the readable text sent to the client."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class NotFound(BrokerError):
    """The addressed node does not exist and may not be created."""


class UnknownDestination(NotFound):
    """A message's ``to`` on the anonymous relay names no queue or exchange: refused, or
    dropped for a sender that asked for that (Broker-J's ``DISCARD_UNROUTABLE``)."""


class InvalidField(BrokerError):
    """A setting, filter or field has an unknown name, a wrong type or a bad value."""

    def __init__(self, description: str, field: str | None = None) -> None:
        super().__init__(description)
        self.field = field


class MalformedMessage(BrokerError):
    """The bytes of a transfer are not a well-formed AMQP message."""


class ResourceLimitExceeded(BrokerError):
    """A queue limit or store capacity refuses the message."""


class MessageTooLarge(ResourceLimitExceeded):
    """A message over the largest size the broker accepts."""


class Unauthorized(BrokerError):
    """The peer may not do this."""


class PreconditionFailed(BrokerError):
    """The request conflicts with the node's state (e.g. deleting a busy queue)."""


class IntegrityViolation(PreconditionFailed):
    """Deleting what others depend on: an alternate in use, one of the broker's own
    exchanges (Broker-J's ``IntegrityViolationException``: management answers 403)."""


class NotTaken(PreconditionFailed):
    """A message the queue did not take (its ``qpid.filter`` does not select it, or it
    repeats a message-id the queue has seen), told to a producer that waits for its
    number (the HTTP gateway, the console); an AMQP producer's is accepted and dropped."""


class ResourceLocked(PreconditionFailed):
    """The node is held by someone else (a subscription another link uses)."""


class NotImplementedByBroker(BrokerError):
    """A recognised request the broker does not support."""


class UnknownTransaction(BrokerError):
    """A transfer, acknowledgement or discharge names a transaction that is not open."""


class TransactionRolledBack(BrokerError):
    """A commit could not be completed, so the transaction was rolled back instead."""


class ConfigError(Exception):
    """The configuration is unusable; the message names the key at fault."""
