"""Configuration: file, environment and flags, with unknown keys and bad types refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from proton_broker import config
from proton_broker.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def test_the_shipped_config_file_loads_and_matches_the_defaults() -> None:
    loaded = config.load(REPO / "conf" / "broker.yaml", environ={})
    assert loaded == config.Config()


def test_a_missing_file_gives_the_defaults() -> None:
    assert config.load("/nonexistent/broker.yaml", environ={}) == config.Config()


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  port: 1234\n  auto_create: true\n")
    loaded = config.load(
        path,
        environ={
            "PROTON_BROKER_BROKER_PORT": "5673",
            "PROTON_BROKER_BROKER_AUTO_CREATE": "false",
            "PROTON_BROKER_SASL_MECHANISMS": "ANONYMOUS PLAIN",
        },
    )
    assert loaded.broker.port == 5673
    assert loaded.broker.auto_create is False
    assert loaded.sasl.mechanisms == "ANONYMOUS PLAIN"


def test_flags_override_the_environment() -> None:
    loaded = config.load(
        None, environ={"PROTON_BROKER_BROKER_PORT": "5673"}, overrides={"broker": {"port": 0}}
    )
    assert loaded.broker.port == 0


def test_an_unknown_key_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  prot: 1234\n")
    with pytest.raises(ConfigError, match="broker.prot"):
        config.load(path, environ={})


def test_a_wrong_type_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  port: five\n")
    with pytest.raises(ConfigError, match="broker.port.*integer"):
        config.load(path, environ={})


def test_an_unknown_environment_section_is_refused() -> None:
    with pytest.raises(ConfigError, match="PROTON_BROKER_NOPE_X"):
        config.load(None, environ={"PROTON_BROKER_NOPE_X": "1"})


def test_a_wrong_type_from_the_environment_is_refused() -> None:
    with pytest.raises(ConfigError, match="broker.auto_create"):
        config.load(None, environ={"PROTON_BROKER_BROKER_AUTO_CREATE": "maybe"})


def test_queues_can_be_declared_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("queues:\n  orders:\n    durable: true\n  plain:\n")
    loaded = config.load(path, environ={})
    assert loaded.queues == {"orders": {"durable": True}, "plain": {}}
