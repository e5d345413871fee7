"""The three interop clients behind one interface: rhea, Proton C++ and Proton Python.

Each client sends messages described in "typed JSON" and receives them back as the same
shape, so one test can pair any sender with any receiver. Typed JSON: null, booleans,
strings, lists and string-keyed maps are themselves; integers are AMQP integers and numbers
with a fraction are doubles; ``{"$binary": "<hex>"}`` is binary, ``{"$symbol": "s"}`` a
symbol. A message is ``{"id", "subject", "body", "properties"}``.

rhea and Proton C++ run as subprocesses (built by ``interop/setup.sh``); Proton Python runs
in the test process with ``proton.utils.BlockingConnection``.

``user=`` and ``password=`` make a client authenticate: the subprocesses get ``--user NAME``
and the password in the environment variable ``INTEROP_PASSWORD``, never on their command
line. rhea then offers SASL PLAIN; Proton C++ needs ``--sasl-allow-insecure`` (and may be
given ``--sasl-mechs``) before it sends a password without TLS.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proton import Array, Message, symbol
from proton.reactor import Copy
from proton.utils import BlockingConnection

INTEROP = Path(__file__).resolve().parent
CPP_CLIENT = INTEROP / "build" / "client"
NODE_DIR = INTEROP / "node"

Json = Any
Spec = dict[str, Json]


class ClientError(AssertionError):
    """A client exited with a failure status; carries its output for the test report."""


def run(cmd: Sequence[str], timeout: float, password: str | None = None) -> list[Json]:
    """Run a client to completion and return the JSON lines it printed. A ``password`` goes
    to it in the environment variable ``INTEROP_PASSWORD``."""
    env = None if password is None else {**os.environ, "INTEROP_PASSWORD": password}
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(f"{cmd[0]} did not finish in {timeout} s: {exc.stderr!r}") from exc
    if done.returncode != 0:
        raise ClientError(
            f"{' '.join(cmd[:3])} ... exited {done.returncode}\n"
            f"stderr:\n{done.stderr}\nstdout (tail):\n{done.stdout[-2000:]}"
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def credentials(user: str | None, password: str | None) -> list[str]:
    """The command-line half of a client's credentials (the password goes by environment)."""
    if user is None:
        assert password is None, "a password without a user"
        return []
    assert password is not None, "a user without a password"
    return ["--user", user]


def node_round_trip(
    script: str,
    url: str,
    address: str,
    count: int,
    *,
    user: str | None = None,
    password: str | None = None,
) -> Json:
    """Run one of the Node.js round-trip programs (``rhea_promise_round_trip.js``,
    ``amqp10_round_trip.js``); returns its ``{"sent", "browsed", "consumed"}``."""
    cmd = ["node", str(NODE_DIR / script), url, address, str(count), *credentials(user, password)]
    (result,) = run(cmd, timeout=20, password=password)
    return result


class Client:
    name = ""

    def send(
        self,
        url: str,
        address: str,
        messages: list[Spec],
        *options: str,
        user: str | None = None,
        password: str | None = None,
    ) -> list[Json]:
        raise NotImplementedError

    def receive(
        self,
        url: str,
        address: str,
        count: int,
        *,
        browse: bool = False,
        timeout: float = 10.0,
        options: Sequence[str] = (),
        user: str | None = None,
        password: str | None = None,
    ) -> list[Spec]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class _ExternalClient(Client):
    """A client program with the send/receive command line shared by C++ and rhea."""

    def command(self, mode: str) -> list[str]:
        raise NotImplementedError

    def send(
        self,
        url: str,
        address: str,
        messages: list[Spec],
        *options: str,
        user: str | None = None,
        password: str | None = None,
    ) -> list[Json]:
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="spec-") as spec:
            json.dump(messages, spec)
            spec.flush()
            return run(
                [
                    *self.command("send"),
                    url,
                    address,
                    str(len(messages)),
                    "--spec",
                    spec.name,
                    *options,
                    *credentials(user, password),
                ],
                timeout=30,
                password=password,
            )

    def receive(
        self,
        url: str,
        address: str,
        count: int,
        *,
        browse: bool = False,
        timeout: float = 10.0,
        options: Sequence[str] = (),
        user: str | None = None,
        password: str | None = None,
    ) -> list[Spec]:
        cmd = [
            *self.command("receive"),
            url,
            address,
            str(count),
            "--timeout",
            str(timeout),
            *options,
            *credentials(user, password),
        ]
        if browse:
            cmd.append("--browse")
        return run(cmd, timeout=timeout + 10, password=password)


class CppClient(_ExternalClient):
    name = "cpp"

    def command(self, mode: str) -> list[str]:
        return [str(CPP_CLIENT), mode]


class RheaClient(_ExternalClient):
    name = "rhea"

    def command(self, mode: str) -> list[str]:
        return ["node", str(NODE_DIR / f"{mode}.js")]


class PythonClient(Client):
    name = "python"

    def send(
        self,
        url: str,
        address: str,
        messages: list[Spec],
        *options: str,
        user: str | None = None,
        password: str | None = None,
    ) -> list[Json]:
        assert not options, "the Python client takes no options"
        conn = BlockingConnection(url, timeout=10, user=user, password=password)
        try:
            sender = conn.create_sender(address)
            for index, spec in enumerate(messages):
                sender.send(to_message(spec, index))  # waits for `accepted`; raises otherwise
        finally:
            conn.close()
        return []

    def receive(
        self,
        url: str,
        address: str,
        count: int,
        *,
        browse: bool = False,
        timeout: float = 10.0,
        options: Sequence[str] = (),
        user: str | None = None,
        password: str | None = None,
    ) -> list[Spec]:
        assert not options, "the Python client takes no options"
        conn = BlockingConnection(url, timeout=timeout, user=user, password=password)
        try:
            receiver = conn.create_receiver(
                address, credit=count, options=Copy() if browse else None
            )
            out = []
            for _ in range(count):
                out.append(from_message(receiver.receive(timeout=timeout)))
                receiver.accept()  # a browsed one too: it settles it, the queue keeps it
            return out
        finally:
            conn.close()


CPP, RHEA, PYTHON = CppClient(), RheaClient(), PythonClient()
ALL_CLIENTS = [CPP, RHEA, PYTHON]


def to_amqp(value: Json) -> Any:
    if isinstance(value, list):
        return [to_amqp(item) for item in value]
    if isinstance(value, dict):
        if set(value) == {"$binary"}:
            return bytes.fromhex(value["$binary"])
        if set(value) == {"$symbol"}:
            return symbol(value["$symbol"])
        return {key: to_amqp(item) for key, item in value.items()}
    return value


def from_amqp(value: Any) -> Json:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, symbol):
        return {"$symbol": str(value)}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):  # 0.40 hands back memoryview
        return {"$binary": bytes(value).hex()}
    if isinstance(value, Array):
        return [from_amqp(item) for item in value.elements]
    if isinstance(value, list | tuple):
        return [from_amqp(item) for item in value]
    if isinstance(value, dict):
        return {str(key): from_amqp(item) for key, item in value.items()}
    return {"$unsupported": type(value).__name__}


def to_message(spec: Spec, index: int) -> Message:
    return Message(
        id=spec.get("id", f"msg-{index}"),
        subject=spec.get("subject"),
        body=to_amqp(spec.get("body")),
        properties=to_amqp(spec.get("properties")),
    )


def from_message(message: Message) -> Spec:
    return {
        "id": from_amqp(message.id),
        "subject": message.subject or "",
        "body": from_amqp(message.body),
        "properties": from_amqp(message.properties or {}),
    }


def expected(spec: Spec, index: int) -> Spec:
    """What a receiver prints for a message sent from ``spec``."""
    return {
        "id": spec.get("id", f"msg-{index}"),
        "subject": spec.get("subject", ""),
        "body": spec.get("body"),
        "properties": spec.get("properties", {}),
    }


def typed(value: Json) -> Json:
    """``value`` with each number and boolean tagged by its JSON type, so that comparing two
    typed values tells 1 from 1.0 from True (plain ``==`` does not)."""
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    return (type(value).__name__, value)
