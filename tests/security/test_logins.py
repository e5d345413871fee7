"""The failed-login guard (proton_broker/security/logins.py) on its own, on a clock the test
moves: when an address is locked out, for how long, and what it remembers."""

from __future__ import annotations

import pytest

from proton_broker.security.logins import LockedOut, LoginGuard


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_an_address_is_locked_out_at_the_limit_until_its_oldest_failure_is_a_window_old(
    clock: Clock,
) -> None:
    guard = LoginGuard(3, 60.0, now=clock)
    for _ in range(2):
        guard.failed("10.0.0.1")
        clock.now += 10
    guard.check("10.0.0.1")  # two failures: it may try again
    guard.failed("10.0.0.1")
    with pytest.raises(LockedOut) as locked:
        guard.check("10.0.0.1")
    assert locked.value.seconds == 40  # the first failure, at 1000, ages out at 1060
    assert str(locked.value) == "too many failed logins from 10.0.0.1: try again in 40 seconds"
    guard.check("10.0.0.2")  # other addresses are not concerned
    clock.now = 1060.0
    guard.check("10.0.0.1")


def test_attempts_while_locked_out_do_not_count(clock: Clock) -> None:
    guard = LoginGuard(2, 60.0, now=clock)
    guard.failed("h")
    guard.failed("h")
    for _ in range(5):
        clock.now += 10
        guard.failed("h")  # refused unchecked: not a failure
    clock.now = 1060.0
    assert guard.locked_for("h") is None


def test_a_limit_of_zero_locks_nobody_out(clock: Clock) -> None:
    guard = LoginGuard(0, 60.0, now=clock)
    for _ in range(100):
        guard.failed("h")
    assert guard.locked_for("h") is None


def test_it_remembers_a_bounded_number_of_addresses_least_recent_first(clock: Clock) -> None:
    guard = LoginGuard(1, 60.0, now=clock, tracked=2)
    for host in ("a", "b", "c"):
        guard.failed(host)
    assert guard.locked_for("a") is None  # forgotten to make room for c
    assert guard.locked_for("b") is not None and guard.locked_for("c") is not None
