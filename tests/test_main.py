"""The command line: start-up, the listening line, clean shutdown, configuration errors."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from proton import Message
from proton.utils import BlockingConnection

from proton_broker.testing import BrokerProcess


def test_the_broker_starts_logs_its_address_and_serves_clients() -> None:
    with BrokerProcess() as proc:
        assert any("listening on 127.0.0.1:" in line for line in proc.output)
        conn = BlockingConnection(proc.url)
        conn.create_sender("cli-q").send(Message(body="hi"))
        receiver = conn.create_receiver("cli-q")
        assert receiver.receive(timeout=5).body == "hi"
        receiver.accept()
        conn.close()


def test_sigterm_shuts_the_broker_down_cleanly() -> None:
    proc = BrokerProcess().start()
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(10) == 0
    proc.stop()


def test_sigint_shuts_the_broker_down_cleanly() -> None:
    proc = BrokerProcess().start()
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGINT)
    assert proc.proc.wait(10) == 0
    proc.stop()


def test_queues_declared_in_the_config_file_exist_at_start(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  auto_create: false\nqueues:\n  declared: {}\n")
    with BrokerProcess("--config", str(path)) as proc:
        conn = BlockingConnection(proc.url)
        conn.create_sender("declared").send(Message(body=1))
        conn.close()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "proton_broker", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


def test_an_unknown_config_key_stops_start_up_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  colour: blue\n")
    result = run_cli("--config", str(path), "--port", "0")
    assert result.returncode == 2
    assert "broker.colour" in result.stderr


def test_an_unknown_queue_option_in_the_config_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("queues:\n  q:\n    flavour: mint\n")
    result = run_cli("--config", str(path), "--port", "0")
    assert result.returncode == 2
    assert "flavour" in result.stderr


def test_a_bad_environment_value_stops_start_up_with_its_name() -> None:
    result = run_cli("--port", "0", env={"PROTON_BROKER_BROKER_IDLE_TIMEOUT": "soon"})
    assert result.returncode == 2
    assert "broker.idle_timeout" in result.stderr


def test_help_describes_the_flags() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for flag in ("--config", "--host", "--port", "--data-dir"):
        assert flag in result.stdout
