"""The transaction coordinator: AMQP 1.0 local transactions on the wire.

A client opens a sending link whose target is a ``coordinator`` (capability
``amqp:local-transactions``) and sends it control messages, each an amqp-value body holding
a described list:

* ``declare`` (0x31, ``amqp:declare:list``): answered with ``declared`` (0x33) carrying a
  new transaction id. A ``global-id`` (distributed transactions) is refused with
  ``amqp:not-implemented``.
* ``discharge`` (0x32, ``amqp:discharge:list``) ``[txn-id, fail]``: ``fail`` true rolls the
  transaction back, false commits it; answered ``accepted`` once done, or ``rejected`` with
  ``amqp:transaction:unknown-id`` or ``amqp:transaction:rollback`` (the commit could not be
  written, so it was rolled back). A discharge with no ``txn-id`` (a mandatory field) is
  refused with ``amqp:decode-error``. A controller whose source lists outcomes without
  ``rejected`` has its link detached with the error instead (Broker-J's coordinator, and
  the broker's producers).

Work joins a transaction through ``transactional-state`` (0x34) ``[txn-id, outcome]``: on a
transfer (a send; Proton puts it in the delivery's remote state) or on a disposition (an
acknowledgement). Those are handled by the producer and consumer links, which call
:func:`transaction_of` and :func:`transactional_outcome`. What the work means is
:mod:`proton_broker.transactions`' business.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from proton import Delivery, Described, Link, Message, symbol, ulong

from proton_broker.amqp.conditions import allows_rejected, close_link, condition_for, reject
from proton_broker.amqp.control import ControlLink
from proton_broker.errors import (
    BrokerError,
    InvalidField,
    MalformedMessage,
    NotImplementedByBroker,
    TransactionRolledBack,
    UnknownTransaction,
)
from proton_broker.transactions import Transaction, Transactions

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.amqp")

DECLARE = (ulong(0x31), symbol("amqp:declare:list"))
DISCHARGE = (ulong(0x32), symbol("amqp:discharge:list"))
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED_OUTCOME = ulong(0x24)
REJECTED_OUTCOME = ulong(0x25)
ERROR = ulong(0x1D)
LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")
OUTCOMES = {
    0x24: Delivery.ACCEPTED,
    0x25: Delivery.REJECTED,
    0x26: Delivery.RELEASED,
    0x27: Delivery.MODIFIED,
}


class CoordinatorLink(ControlLink):
    """A link on which a client declares and discharges transactions."""

    def __init__(self, link: Link, broker: Broker, credit: int) -> None:
        super().__init__(link, credit, broker.config.broker.max_message_size)
        self.broker = broker
        self.may_reject = allows_rejected(link)

    def handle(self, delivery: Delivery, data: bytes) -> None:
        try:
            body = Message()
            body.decode(data)
            self._control(delivery, body.body)
        except BrokerError as exc:
            self._refuse(delivery, exc)
        except Exception as exc:  # a control message we cannot read
            self._refuse(delivery, InvalidField(f"unreadable transaction control message: {exc}"))

    def _refuse(self, delivery: Delivery, exc: BrokerError) -> None:
        """``rejected`` with the error, or, when the controller's source lists outcomes
        without ``rejected``, the link detached with it (Broker-J's coordinator; the rule
        the broker's producers follow)."""
        if self.may_reject:
            reject(delivery, exc)
            return
        name, description, info = condition_for(exc)
        log.info("detaching transaction controller '%s': %s %s", self.link.name, name, description)
        close_link(self.link, name, description, info)

    def _control(self, delivery: Delivery, body: Any) -> None:
        if not isinstance(body, Described) or not isinstance(body.value, list):
            raise InvalidField(
                "a transaction control message must be a declare or a "
                "discharge (a described list in an amqp-value body)"
            )
        fields = body.value
        if body.descriptor in DECLARE:
            if fields and fields[0] is not None:
                raise NotImplementedByBroker(
                    "distributed transactions (a declare with a global-id) are not supported"
                )
            txn = self.broker.transactions.declare(self, self.link.connection._impl)
            delivery.local.data = [txn.id]
            _settle(delivery, DECLARED)
        elif body.descriptor in DISCHARGE:
            if not fields or fields[0] is None:  # Broker-J: a mandatory field not provided
                raise MalformedMessage("a discharge must name its transaction: txn-id is mandatory")
            txn = self.broker.transactions.get(fields[0])
            if txn.controller is not self:
                raise UnknownTransaction(
                    f"transaction {txn.id!r} was declared on another coordinator link"
                )
            fail = len(fields) > 1 and bool(fields[1])
            self._discharge(delivery, txn, fail)
        else:
            raise InvalidField(f"unknown transaction control message {body.descriptor!r}")

    def _discharge(self, delivery: Delivery, txn: Transaction, fail: bool) -> None:
        if fail:
            self.broker.rollback(txn)
            _settle(delivery, Delivery.ACCEPTED)
            return

        def committed(error: BaseException | None) -> None:
            if self.closed:
                return
            if error is None:
                _settle(delivery, Delivery.ACCEPTED)
            else:
                log.warning("transaction %r rolled back: its commit failed: %s", txn.id, error)
                reject(
                    delivery,
                    TransactionRolledBack(
                        f"commit failed, the transaction was rolled back: {error}"
                    ),
                )

        self.broker.commit(txn, committed)

    def detach(self) -> None:
        """The controller is gone: its open transactions are rolled back."""
        self.closed = True
        transactions: Transactions = self.broker.transactions
        for txn in transactions.controlled_by(self):
            if not txn.discharging:
                self.broker.rollback(txn)


def _settle(delivery: Delivery, state: int) -> None:
    delivery.update(state)
    delivery.settle()


def transaction_of(transactions: Transactions, dlv: Any) -> tuple[Transaction, Any]:
    """The transaction a ``transactional-state`` delivery state names, and its outcome
    (the described outcome, or None); raises UnknownTransaction."""
    delivery = Delivery.wrap(dlv)
    data = delivery.remote.data or []
    txn = transactions.get(data[0] if data else None, delivery.link.connection._impl)
    return txn, data[1] if len(data) > 1 else None


def accepted_in(delivery: Delivery, txn: Transaction) -> None:
    """Answer a transactional transfer: ``transactional-state(txn-id, accepted)``, settled."""
    delivery.local.data = [txn.id, Described(ACCEPTED_OUTCOME, [])]
    _settle(delivery, TRANSACTIONAL_STATE)


def rejected_in(delivery: Delivery, txn: Transaction, error: BaseException) -> None:
    """Refuse a transactional transfer: ``transactional-state(txn-id, rejected(error))``,
    settled, as Broker-J answers (AMQP 1.0 4.4.1: the outcome inside the state)."""
    name, description, info = condition_for(error)
    fields: list[Any] = [symbol(name), description]
    if info:
        fields.append({symbol(key): value for key, value in info.items()})
    delivery.local.data = [txn.id, Described(REJECTED_OUTCOME, [Described(ERROR, fields)])]
    _settle(delivery, TRANSACTIONAL_STATE)


def known_transaction(transactions: Transactions, dlv: Any) -> Transaction | None:
    """The transaction a delivery was sent under, or None: not transactional, or naming a
    transaction this connection does not have."""
    if Delivery.wrap(dlv).remote_state != TRANSACTIONAL_STATE:
        return None
    try:
        return transaction_of(transactions, dlv)[0]
    except BrokerError:
        return None


def transactional_outcome(outcome: Any) -> tuple[int, list[Any]]:
    """(disposition type, fields) of the outcome inside a transactional state."""
    if isinstance(outcome, Described):
        kind = (
            OUTCOMES.get(int(outcome.descriptor)) if isinstance(outcome.descriptor, int) else None
        )
        if kind is not None:
            fields = outcome.value if isinstance(outcome.value, list) else []
            return kind, fields
    raise InvalidField(f"transactional state with an outcome we cannot apply: {outcome!r}")
