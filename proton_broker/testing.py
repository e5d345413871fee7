"""Start a real broker in a subprocess, for tests, interop suites and benchmarks.

The broker prints ``listening on HOST:PORT`` once its listener is bound; this helper waits
for that line, so callers can use ``--port 0`` and never race on a fixed port. Programs that
only know the default address (some of Proton's examples, the README's snippets) get a
broker on ``port=5672``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_TLS_LISTENING = re.compile(r"AMQPS \(TLS\) on (\S+):(\d+)")
_HTTP_LISTENING = re.compile(r"HTTP gateway on (https?)://(\S+):(\d+)")
_METRICS_LISTENING = re.compile(r"metrics on http://(\S+):(\d+)")


class BrokerProcess:
    """A ``python -m proton_broker`` child process with its own data directory."""

    def __init__(
        self,
        *args: str,
        data_dir: str | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 30.0,
        port: int = 0,
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="proton-broker-")
        self.data_dir = data_dir or self._tmp.name  # type: ignore[union-attr]
        self.args = list(args)
        self.env = {**os.environ, **(env or {})}
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.requested_port = port  # 0: any free port (read from the log line)
        self.tls_port: int | None = None  # the AMQPS port, when the broker serves TLS
        self.http_base: str | None = None  # the HTTP gateway's URL, when it is on
        self.metrics_port: int | None = None  # the metrics listener's port, when it is on
        self.output: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> BrokerProcess:
        cmd = [
            sys.executable,
            "-m",
            "proton_broker",
            "--host",
            self.host,
            "--port",
            str(self.requested_port),
            "--data-dir",
            self.data_dir,
            *self.args,
        ]
        if "--config" not in self.args:
            cmd += ["--config", str(_REPO / "conf" / "broker.yaml")]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        if not ready.wait(self.startup_timeout) or not self.port:
            self.stop()
            raise RuntimeError("broker did not start:\n" + "".join(self.output))
        return self

    def _pump(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            tls = _TLS_LISTENING.search(line)
            if tls:
                self.tls_port = int(tls.group(2))
            if http := _HTTP_LISTENING.search(line):
                self.http_base = f"{http.group(1)}://{http.group(2)}:{http.group(3)}"
            if metrics := _METRICS_LISTENING.search(line):
                self.metrics_port = int(metrics.group(2))
            match = _LISTENING.search(line)
            if match and not ready.is_set():
                self.host, self.port = match.group(1), int(match.group(2))
                ready.set()
        ready.set()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logged(self, *parts: str, count: int = 1, timeout: float = 5.0) -> list[str]:
        """The log lines containing every one of ``parts``, once there are ``count`` of them
        or ``timeout`` has passed. The output arrives through a pipe a moment after the
        broker wrote it, so a client can see the broker's answer before the line that says
        why it answered so: read right away, the line may not be there yet."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.output if all(part in line for part in parts)]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop with SIGTERM (a clean shutdown); SIGKILL if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0)  # let the output pump finish its last lines
        if self._tmp is not None:
            self._tmp.cleanup()
        return self.proc.returncode

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def user_command(data_dir: str | Path, *words: str, password: str | None = None) -> Any:
    """Run ``proton-broker-config user WORDS --data-dir DATA_DIR`` as an operator would, the
    password (if any) on its standard input; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "proton_broker.cli", "user", *words, "--data-dir", str(data_dir)],
        input=None if password is None else password + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )


def add_user(data_dir: str | Path, name: str, password: str) -> None:
    """Add a user to a data directory's user database (AssertionError if that fails)."""
    made = user_command(data_dir, "add", name, password=password)
    assert made.returncode == 0, made.stderr


def server_certificates(directory: str | Path, *hosts: str) -> dict[str, Path]:
    """PEM files for a broker serving TLS as ``hosts`` (default ``localhost``), made by a
    throwaway CA (trustme, a test dependency): ``ca`` (the CA's certificate, for clients
    to trust), ``cert`` and ``key`` (the broker's), ``client_cert`` and ``client_key`` (a
    client's the CA signed, for a broker that asks for one), and ``other_ca`` (a CA that
    signed none of them)."""
    import trustme

    ca = trustme.CA()
    issued, client = ca.issue_cert(*(hosts or ("localhost",))), ca.issue_cert("a-client")
    names = ("ca", "cert", "key", "client_cert", "client_key", "other_ca")
    files = {name: Path(directory) / f"{name}.pem" for name in names}
    ca.cert_pem.write_to_path(str(files["ca"]))
    issued.cert_chain_pems[0].write_to_path(str(files["cert"]))
    issued.private_key_pem.write_to_path(str(files["key"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    trustme.CA().cert_pem.write_to_path(str(files["other_ca"]))
    return files
