"""Proton's own example programs, run as shipped against the broker.

The C and C++ examples are compiled by ``interop/setup.sh`` from Debian's
``libqpid-proton11-dev-examples`` sources into ``interop/build/examples/``; the Python ones
run from that package's sources with this environment's Proton. None of their code lives in
this repository. Some of them only ever run until interrupted (browsers, selective
receivers, servers): :class:`Running` starts one, collects what it prints, and stops it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from interop.clients import INTEROP, ClientError

SOURCES = Path("/usr/share/proton/examples")
BUILT = INTEROP / "build" / "examples"
C = BUILT / "c"
CPP = BUILT / "cpp"
PYTHON = SOURCES / "python"
EXAMPLE_PROGRAMS = [
    *(C / name for name in ("send", "receive")),
    *(
        CPP / name
        for name in (
            "simple_send",
            "simple_recv",
            "queue_browser",
            "selected_recv",
            "client",
            "server",
        )
    ),
    PYTHON / "client.py",
]


def python_example(name: str) -> list[str]:
    """The command that runs Proton's Python example ``name`` with this interpreter."""
    return [sys.executable, str(PYTHON / f"{name}.py")]


def run_to_end(cmd: Sequence[str], timeout: float = 20.0) -> str:
    """Run an example that ends by itself; its output, or :class:`ClientError`."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(
            f"{cmd[0]} did not finish in {timeout} s: {exc.stdout!r} {exc.stderr!r}"
        ) from exc
    if done.returncode != 0:
        raise ClientError(
            f"{' '.join(cmd)} exited {done.returncode}\nstdout:\n"
            f"{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}"
        )
    return done.stdout


class Running:
    """An example that runs until stopped, with the lines it has printed so far."""

    def __init__(self, cmd: Sequence[str]) -> None:
        self.cmd = list(cmd)
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_lines(self, count: int, timeout: float = 15.0) -> list[str]:
        """The first ``count`` lines, once printed; :class:`ClientError` if it exits or
        takes longer."""
        end = time.monotonic() + timeout
        while len(self.lines) < count:
            if self.proc.poll() is not None:
                self._reader.join(1)
                if len(self.lines) >= count:
                    break
                raise ClientError(f"{self.cmd[0]} exited {self.proc.returncode}: {self.lines}")
            if time.monotonic() > end:
                raise ClientError(
                    f"{self.cmd[0]} printed {self.lines} in {timeout} s, wanted {count} lines"
                )
            time.sleep(0.02)
        return self.lines[:count]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(1)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
