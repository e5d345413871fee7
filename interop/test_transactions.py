"""Local transactions driven by Proton Python's own transaction client (``proton.reactor``'s
``declare_transaction`` and ``TransactionHandler``), code nobody here wrote."""

from __future__ import annotations

from typing import Any

from proton import Message
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container

from proton_broker.testing import BrokerProcess


class TransactedSender(MessagingHandler, TransactionHandler):
    """Sends ``commit`` in one transaction and commits it, then ``abort`` in another and
    aborts it."""

    def __init__(self, url: str, address: str, commit: list[str], abort: list[str]) -> None:
        super().__init__()
        self.url, self.address = url, address
        self.batches = [(commit, True), (abort, False)]
        self.outcomes: list[str] = []

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.sender = event.container.create_sender(self.conn, self.address)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        bodies, commit = self.batches[0]
        for body in bodies:
            event.transaction.send(self.sender, Message(body=body, durable=True))
        event.transaction.commit() if commit else event.transaction.abort()

    def _next(self, event: Any, outcome: str) -> None:
        self.outcomes.append(outcome)
        self.batches.pop(0)
        if self.batches:
            event.container.declare_transaction(self.conn, handler=self)
        else:
            self.conn.close()

    def on_transaction_committed(self, event: Any) -> None:
        self._next(event, "committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._next(event, "aborted")

    def on_transaction_declare_failed(self, event: Any) -> None:
        raise AssertionError("declare failed")

    def on_transaction_commit_failed(self, event: Any) -> None:
        raise AssertionError("commit failed")


class TransactedReceiver(MessagingHandler, TransactionHandler):
    """Receives ``count`` messages accepting them in a transaction, aborts it (so they are
    released back to the queue by the client), receives them again and commits."""

    def __init__(self, url: str, address: str, count: int) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address, self.count = url, address, count
        self.rounds: list[list[str]] = []
        self.txn: Any = None

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(self.conn, self.address)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self.rounds.append([])
        self.receiver.flow(self.count)

    def on_message(self, event: Any) -> None:
        self.rounds[-1].append(event.message.body)
        self.txn.accept(event.delivery)
        if len(self.rounds[-1]) == self.count:
            self.txn.abort() if len(self.rounds) == 1 else self.txn.commit()

    def on_transaction_aborted(self, event: Any) -> None:
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_committed(self, event: Any) -> None:
        self.conn.close()


def test_proton_python_commits_and_aborts_transactional_sends(
    broker: BrokerProcess, queue: str
) -> None:
    sender = TransactedSender(broker.url, queue, ["a", "b", "c"], ["x", "y"])
    Container(sender).run()
    assert sender.outcomes == ["committed", "aborted"]
    receiver = TransactedReceiver(broker.url, queue, 3)
    Container(receiver).run()
    assert receiver.rounds == [["a", "b", "c"], ["a", "b", "c"]]
    drain = _Drain(broker.url, queue)
    Container(drain).run()
    assert drain.got == []  # committed acknowledgements took them; the aborted sends never came


class _Drain(MessagingHandler):
    """Whatever is left on the queue after a short wait."""

    def __init__(self, url: str, address: str) -> None:
        super().__init__()
        self.url, self.address = url, address
        self.got: list[str] = []

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        event.container.create_receiver(self.conn, self.address)
        event.container.schedule(0.5, self)

    def on_message(self, event: Any) -> None:
        self.got.append(event.message.body)

    def on_timer_task(self, event: Any) -> None:
        self.conn.close()
