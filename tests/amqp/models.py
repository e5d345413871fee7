"""The random models that talk to a real broker (test_recovery_model.py,
test_subscription_model.py, test_shared_subscription_model.py): :class:`BrokerModel` gives
each example a broker of its own on a data directory of its own, restartable, and the few
steps every model takes with its links; :class:`SubscriberModel` adds a client that
subscribes to ``amq.topic`` as Qpid JMS does; :func:`run_model` runs one. Examples start
brokers, so there is no deadline, and the broker's warnings (refused steps, restarts) are
silenced while they run: the model's asserts say what went wrong."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test
from proton import Disposition, Link

from tests.amqp.test_durability import Restartable
from tests.conftest import RunningBroker
from tests.engine_client import EngineClient, Received


class BrokerModel(RuleBasedStateMachine):
    """A state machine with a broker of its own (``brokers.restart()`` for the next one);
    its steps talk to it through ``client``, which the subclass connects."""

    client: EngineClient

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.brokers = Restartable(Path(self.directory.name) / "data")
        self.broker: RunningBroker = self.brokers.start()

    def teardown(self) -> None:
        alive = self.broker.alive()
        self.broker.stop()
        self.directory.cleanup()
        assert alive, "the broker's event loop died"

    def received(self, link: Link, count: int, before: int = 0) -> list[Received]:
        """What ``link`` got after its first ``before``: ``count`` messages, and no more
        after a short wait (the broker sends what it has in one go: more would be here)."""
        with contextlib.suppress(TimeoutError):
            self.client.wait_received(link, before + count)
        self.client.pump(0.02)
        return list(self.client.received(link))[before:]

    def close(self, link: Link) -> None:
        link.close()
        self.client.wait_closed(link)


class SubscriberModel(BrokerModel):
    """A model of a JMS client subscribing to ``amq.topic``: its connection's container id is
    the client id (as Qpid JMS sets it), so its subscriptions' queues are
    ``<CLIENT_ID>_<name>``; it publishes on the same connection."""

    CLIENT_ID = "jms-client"

    def __init__(self) -> None:
        super().__init__()
        self.connect()
        self.made = 0  # messages published: each body is unique

    def connect(self) -> None:
        self.client = self.broker.client(container=self.CLIENT_ID)
        self.publisher = self.client.sender("amq.topic")

    def restart_broker(self) -> None:
        """The broker restarts on its data directory; the client connects again."""
        self.broker = self.brokers.restart()
        self.connect()

    @staticmethod
    def persistent(held: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
        """What a durable subscription still holds of ``held`` after a restart."""
        return [(body, True) for body, durable in held if durable]

    def browsed(self, queue: str, count: int) -> list[str]:
        """The bodies of the ``count`` messages ``queue`` is expected to hold (and of any
        more it holds), browsed so that nothing is taken."""
        browser = self.client.receiver(queue, credit=1000, browse=True)
        got = self.received(browser, count)
        self.close(browser)
        return [r.message.body for r in got]

    def consumers(self, queue: str) -> int:
        """How many links consume ``queue`` (0 if there is no such queue)."""
        queues = self.broker.broker.queues
        return self.broker.call(lambda: queue in queues and queues[queue].consumer_count)

    def exists(self, queue: str) -> bool:
        return self.broker.call(lambda: queue in self.broker.broker.queues)

    def take(
        self, link: Link | None, held: list[tuple[str, bool]], count: int, accept: bool
    ) -> None:
        """Credit ``link`` for the first ``count`` of ``held`` (a subscription's messages,
        body and persistence, oldest first; no more, so that nothing comes unasked later),
        check that those come, then accept them (they leave ``held``) or release them."""
        expected = [body for body, _ in held[:count]]
        if link is None or not expected:
            return
        before = len(self.client.received(link))
        link.flow(len(expected))
        got = self.received(link, len(expected), before)
        assert [r.message.body for r in got] == expected, f"link {link.name}"
        self.client.settle_all(got, Disposition.ACCEPTED if accept else Disposition.RELEASED)
        if accept:
            del held[: len(got)]


def run_model(machine: type[RuleBasedStateMachine], examples: int, steps: int) -> None:
    logging.disable(logging.WARNING)
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        logging.disable(logging.NOTSET)
