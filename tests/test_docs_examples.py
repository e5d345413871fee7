"""Every Python and shell example in the README and in docs/ runs, verbatim, against a broker.

An example that breaks fails the suite. The rules a page follows:

* A fenced block tagged ``python`` runs with this environment's Python; one tagged ``sh``
  runs with ``bash -e`` and this environment's scripts on the PATH. Each runs in an empty
  temporary directory of its own, with at most two minutes, and must exit 0.
* Before each one, a fresh broker is started exactly as ``./scripts/start`` starts it (the
  embedded defaults: ``conf/broker.yaml``, ``127.0.0.1:5672``), with its data directory in a
  temporary directory. An HTML comment on the line just above the block changes that:
  ``<!-- example: broker --http-port 8081 -->`` adds arguments to that broker's command
  line, and ``<!-- example: own broker -->`` starts none (the block starts what it uses).
  Whatever the block left running in the background is stopped after it.
* A block tagged ``text`` right after a runnable block (nothing but blank lines between) is
  the output it must print, exactly.
* The two commands of the quick start are special: ``./scripts/start`` is run as written
  (and stopped once it listens) and ``./scripts/test`` is the command this suite runs
  under, so the test checks that CI runs exactly it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proton_broker.testing import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
RUNNABLE = {"python", "sh"}
FENCE = re.compile(r"^```(\S*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->$")
BIN = Path(sys.executable).parent
TIMEOUT = 120.0


@dataclass
class Example:
    page: Path
    line: int
    language: str
    code: str
    directive: str = ""
    output: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def examples_in(page: Path) -> Iterator[Example]:
    """The runnable blocks of a Markdown page, with their directive and expected output."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[tuple[int, str, str, str]] = []  # (line, language, code, directive)
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start, language = i, fence.group(1)
        end = start + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        above = lines[start - 1].strip() if start else ""
        directive = DIRECTIVE.match(above)
        blocks.append(
            (
                start + 1,
                language,
                "\n".join(lines[start + 1 : end]),
                directive.group(1) if directive else "",
            )
        )
        i = end + 1
    for index, (line, language, code, directive) in enumerate(blocks):
        if language not in RUNNABLE:
            continue
        example = Example(page, line, language, code + "\n", directive)
        if (
            index + 1 < len(blocks)
            and blocks[index + 1][1] == "text"
            and _only_blank_between(lines, line + code.count("\n") + 1, blocks[index + 1][0])
        ):
            example.output = blocks[index + 1][2]
        yield example


def _only_blank_between(lines: list[str], after_fence: int, next_fence_line: int) -> bool:
    # after_fence: the 0-based index of the closing fence; next_fence_line: 1-based
    return all(not lines[j].strip() for j in range(after_fence + 1, next_fence_line - 1))


ALL = [example for page in PAGES for example in examples_in(page)]
QUICK_START = {"./scripts/start", "./scripts/test"}


def test_the_pages_have_runnable_examples() -> None:
    assert len(ALL) >= 5, [e.id for e in ALL]


@pytest.mark.parametrize(
    "example", [e for e in ALL if e.code.strip() not in QUICK_START], ids=lambda e: e.id
)
def test_the_example_runs(example: Example, tmp_path: Path) -> None:
    broker = None
    if example.directive != "own broker":
        args = example.directive.removeprefix("broker").split()
        assert not example.directive or example.directive.startswith("broker"), (
            f"unknown directive {example.directive!r}"
        )
        broker = start_default_broker(args, tmp_path / "broker-data")
    try:
        output = run_block(example, tmp_path / "work")
    finally:
        if broker is not None:
            broker_alive = broker.alive()
            broker.stop()
            assert broker_alive, "the broker died:\n" + "".join(broker.output)
    if example.output is not None:
        assert output.rstrip() == example.output.rstrip()


@pytest.mark.timeout(300)  # it installs first, as a new user's first run does
def test_the_quick_start_command_starts_the_broker_as_written(tmp_path: Path) -> None:
    assert any(e.code.strip() == "./scripts/start" for e in ALL if e.page.name == "README.md")
    env = {**os.environ, "PROTON_BROKER_BROKER_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(
        ["./scripts/start"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        seen = wait_for_line(proc, "listening on 127.0.0.1:5672", timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert "listening on 127.0.0.1:5672" in seen
    assert proc.returncode == 0  # SIGTERM is a clean shutdown


def test_the_quick_start_test_command_is_what_ci_runs() -> None:
    assert any(e.code.strip() == "./scripts/test" for e in ALL if e.page.name == "README.md")
    ci = (REPO / ".ci" / "run").read_text()
    assert "\n./scripts/test\n" in ci


# ---- running ---------------------------------------------------------------------------------


def start_default_broker(args: list[str], data_dir: Path) -> BrokerProcess:
    """The broker ``./scripts/start`` would run: the embedded defaults, 127.0.0.1:5672."""
    try:
        return BrokerProcess(*args, port=5672, data_dir=str(data_dir)).start()
    except RuntimeError as exc:
        pytest.fail(f"the examples need 127.0.0.1:5672 free: {exc}")


def run_block(example: Example, workdir: Path) -> str:
    """Run the block in its own session (so whatever it starts can be stopped with it)."""
    workdir.mkdir(parents=True)
    if example.language == "python":
        cmd = [sys.executable, "-c", example.code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", example.code]
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        out, err = "", f"did not finish in {TIMEOUT} s"
    finally:
        _stop_group(proc.pid)
    assert proc.returncode == 0, (
        f"{example.id} failed ({proc.returncode}):\n{example.code}\nstdout:\n{out}\nstderr:\n{err}"
    )
    return out


def _stop_group(pgid: int) -> None:
    """Stop the block and anything it left in the background."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)


def wait_for_line(proc: subprocess.Popen[str], wanted: str, timeout: float) -> str:
    assert proc.stdout is not None
    seen = []
    end = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if wanted in line or time.monotonic() > end:
            break
    return "".join(seen)
