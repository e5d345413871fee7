"""The ``http`` config section, its environment override and the --http-port flag."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest

from proton_broker import __main__ as cli
from proton_broker import config
from proton_broker.errors import ConfigError
from proton_broker.testing import BrokerProcess


def test_the_gateway_is_off_by_default_and_local_only() -> None:
    http = config.load(None, environ={}).http
    assert (http.enabled, http.host, http.port, http.longpoll_timeout) == (
        False,
        "127.0.0.1",
        8081,
        30.0,
    )


def test_the_file_and_the_environment_set_it(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("http:\n  enabled: true\n  port: 9000\n  longpoll_timeout: 5\n")
    loaded = config.load(path, environ={"PROTON_BROKER_HTTP_PORT": "9001"})
    assert loaded.http.enabled is True
    assert loaded.http.port == 9001
    assert loaded.http.longpoll_timeout == 5.0


def test_unknown_keys_and_wrong_types_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("http:\n  prot: 9000\n")
    with pytest.raises(ConfigError, match="http.prot"):
        config.load(path, environ={})
    with pytest.raises(ConfigError, match="http.enabled"):
        config.load(None, environ={"PROTON_BROKER_HTTP_ENABLED": "perhaps"})


def test_the_http_port_flag_turns_the_gateway_on() -> None:
    overrides = cli._overrides(cli.parse_args(["--http-port", "0"]))
    assert overrides["http"] == {"enabled": True, "port": 0}
    assert "http" not in cli._overrides(cli.parse_args([]))


def test_the_command_line_serves_http_and_shuts_down_cleanly() -> None:
    with BrokerProcess("--http-port", "0", "--store", "memory") as proc:
        line = next(line for line in proc.output if "HTTP gateway on " in line)
        base = line.split("HTTP gateway on ")[1].strip()
        request = urllib.request.Request(
            f"{base}/queue/send/cli",
            method="POST",
            data=json.dumps({"id": "1", "payload": 1}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.loads(response.read())["sequence"] == 1
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(10) == 0
