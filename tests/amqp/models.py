"""Running the random models that talk to a real broker (test_recovery_model.py,
test_subscription_model.py): each example starts brokers of its own, so no deadline, and
the broker's warnings (refused steps, restarts) are silenced while they run: the model's
asserts say what went wrong."""

from __future__ import annotations

import logging

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test


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
