"""Clients nobody here wrote, configured with a user name and a password, against a broker
that lets nobody in anonymously: Proton C++ (``connection_options().user().password()``),
rhea and rhea-promise (``username`` / ``password``) and amqp10 (credentials in its URL).

Each one, with alice's right password, sends and receives and the broker logs the
connection as alice's; with a wrong password or as a user the broker does not know, it is
refused with the SASL ``auth`` outcome, says so in its own words, and the broker logs
CON-1007 with the client's address and mechanism; with no credentials it is refused too.

All of them log in with SASL PLAIN: rhea and amqp10 know no other password mechanism, and
Debian's Proton C/C++ 0.37 is built without Cyrus SASL, so it has only its built-in
ANONYMOUS, EXTERNAL and PLAIN (SCRAM is covered by tests/amqp/test_authentication.py with
this environment's Proton Python, which is built against Cyrus).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from interop.clients import CPP, RHEA, ClientError, node_round_trip
from proton_broker.testing import BrokerProcess, add_user

PASSWORD = "correct horse battery staple"
RIGHT = ("alice", PASSWORD)
WRONG = {"a-wrong-password": ("alice", "incorrect horse"), "an-unknown-user": ("mallory", PASSWORD)}

# Proton C++ sends a password in the clear (PLAIN without TLS) only when allowed to.
CPP_PLAIN = ("--sasl-mechs", "PLAIN", "--sasl-allow-insecure")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker whose only user is alice (made with the CLI, the password on stdin) and
    which lets no one in anonymously, not even from this machine."""
    add_user(tmp_path, "alice", PASSWORD)
    process = BrokerProcess(
        "--store",
        "memory",
        data_dir=str(tmp_path),
        env={"PROTON_BROKER_SASL_ANONYMOUS": "never"},
    ).start()
    yield process
    alive = process.alive()
    process.stop()
    output = "".join(process.output)
    assert alive, "the broker process died during the test:\n" + output
    assert "Traceback" not in output, "the broker logged an exception:\n" + output


def log_lines(broker: BrokerProcess, text: str, count: int = 1) -> list[str]:
    """The broker's log lines containing ``text``, once there are ``count`` of them (see
    BrokerProcess.logged)."""
    return broker.logged(text, count=count)


def opened_as(broker: BrokerProcess, user: str, count: int) -> list[str]:
    """The broker's CON-1001 lines for connections it opened for ``user``."""
    return [line for line in log_lines(broker, f" : User : {user} : ", count) if "CON-1001" in line]


# ---- the right password ----------------------------------------------------------------


def test_rhea_with_the_right_password_sends_and_receives_as_alice(
    broker: BrokerProcess, queue: str
) -> None:
    RHEA.send(broker.url, queue, [{"body": "from rhea"}], user="alice", password=PASSWORD)
    got = RHEA.receive(broker.url, queue, 1, user="alice", password=PASSWORD)
    assert [m["body"] for m in got] == ["from rhea"]
    assert len(opened_as(broker, "alice", 2)) == 2  # the sender's and the receiver's


def test_proton_cpp_with_the_right_password_sends_and_receives_as_alice(
    broker: BrokerProcess, queue: str
) -> None:
    CPP.send(broker.url, queue, [{"body": "from c++"}], *CPP_PLAIN, user="alice", password=PASSWORD)
    got = CPP.receive(broker.url, queue, 1, options=CPP_PLAIN, user="alice", password=PASSWORD)
    assert [m["body"] for m in got] == ["from c++"]
    assert len(opened_as(broker, "alice", 2)) == 2


@pytest.mark.parametrize("script", ["rhea_promise_round_trip.js", "amqp10_round_trip.js"])
def test_rhea_promise_and_amqp10_with_the_right_password_send_browse_and_consume_as_alice(
    broker: BrokerProcess, queue: str, script: str
) -> None:
    result = node_round_trip(script, broker.url, queue, 3, user="alice", password=PASSWORD)
    bodies = ["message-0", "message-1", "message-2"]
    assert result == {"sent": bodies, "browsed": bodies, "consumed": bodies}
    assert len(opened_as(broker, "alice", 1)) == 1


def test_proton_cpp_sends_no_password_in_the_clear_unless_allowed(
    broker: BrokerProcess, queue: str
) -> None:
    """Without ``sasl_allow_insecure_mechs`` Proton withholds PLAIN on a plain socket: it
    finds no mechanism it may use among those the broker offers, and the broker never
    learns the password."""
    with pytest.raises(ClientError, match=r"Authentication failed \[mech=none\]"):
        CPP.send(broker.url, queue, [{"body": "x"}], user="alice", password=PASSWORD)
    assert not log_lines(broker, "CON-1001", count=0)


# ---- a wrong password, an unknown user -------------------------------------------------

# How each client, given credentials the broker refuses, runs and reports it.
Attempt = Callable[[str, str, str, str], object]
ATTEMPTS: dict[str, tuple[Attempt, str]] = {
    "rhea": (
        lambda url, queue, user, password: RHEA.send(
            url, queue, [{"body": "x"}], user=user, password=password
        ),
        "error: ConnectionError: Failed to authenticate: 1 (amqp:unauthorized-access)",
    ),
    "rhea-promise": (
        lambda url, queue, user, password: node_round_trip(
            "rhea_promise_round_trip.js", url, queue, 1, user=user, password=password
        ),
        "error: ConnectionError: Failed to authenticate: 1",
    ),
    "amqp10": (
        lambda url, queue, user, password: node_round_trip(
            "amqp10_round_trip.js", url, queue, 1, user=user, password=password
        ),
        # connect() rejects with a bare AmqpDisconnectedError; the reason is an event
        "errorReceived: AmqpAuthenticationError: SASL Failed: 1",
    ),
    "proton-cpp": (
        lambda url, queue, user, password: CPP.send(
            url, queue, [{"body": "x"}], *CPP_PLAIN, user=user, password=password
        ),
        "send: error: amqp:unauthorized-access: Authentication failed [mech=PLAIN]",
    ),
}


@pytest.mark.parametrize("credentials", WRONG.values(), ids=WRONG.keys())
@pytest.mark.parametrize("client", ATTEMPTS)
def test_with_a_wrong_password_or_as_an_unknown_user_each_client_is_refused_and_logged(
    broker: BrokerProcess, queue: str, client: str, credentials: tuple[str, str]
) -> None:
    attempt, report = ATTEMPTS[client]
    with pytest.raises(ClientError) as refused:
        attempt(broker.url, queue, *credentials)
    assert report in str(refused.value)
    (failed,) = log_lines(broker, "CON-1007 : Authentication failed")
    assert "(amqp://127.0.0.1:" in failed and ": mechanism PLAIN :" in failed
    assert not log_lines(broker, "CON-1001", count=0)


# ---- no credentials at all ---------------------------------------------------------------

# Without a user, rhea, rhea-promise and amqp10 skip SASL altogether: the broker, which
# requires it, closes the socket, and each client sees only that. Proton C++ offers SASL
# ANONYMOUS, which the broker does not offer back. rhea-promise sends its open frame after
# its header: the broker lingers over the closed connection (amqp/lingering.py), so that
# frame never draws a reset and the client always reports the refusal itself.
NO_CREDENTIALS: dict[str, tuple[Callable[[str, str], object], str]] = {
    "rhea": (
        lambda url, queue: RHEA.send(url, queue, [{"body": "x"}]),
        "disconnected: ",
    ),
    "rhea-promise": (
        lambda url, queue: node_round_trip("rhea_promise_round_trip.js", url, queue, 1),
        "error: Error: Failed to connect",
    ),
    "amqp10": (
        lambda url, queue: node_round_trip("amqp10_round_trip.js", url, queue, 1),
        "error: AmqpDisconnectedError",
    ),
    "proton-cpp": (
        lambda url, queue: CPP.send(url, queue, [{"body": "x"}]),
        "send: error: amqp:unauthorized-access: Authentication failed [mech=none]",
    ),
}


@pytest.mark.parametrize("client", NO_CREDENTIALS)
def test_with_no_credentials_each_client_is_refused(
    broker: BrokerProcess, queue: str, client: str
) -> None:
    attempt, report = NO_CREDENTIALS[client]
    started = time.monotonic()
    with pytest.raises(ClientError) as refused:
        attempt(broker.url, queue)
    assert report in str(refused.value)
    assert time.monotonic() - started < 5  # refused, not left to time out
    if client != "proton-cpp":
        assert log_lines(broker, "Client skipped authentication")
    assert not log_lines(broker, "CON-1001", count=0)
