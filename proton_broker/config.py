"""Broker configuration: one YAML file, environment overrides, command-line flags.

Precedence is file < environment < flags. Every key has a type in the schema below, and an
unknown key or a value of the wrong type stops start-up with a message naming the key: a
typo in a config file must never be silently ignored. Environment variables are named
``PROTON_BROKER_<SECTION>_<KEY>`` (e.g. ``PROTON_BROKER_BROKER_PORT=5673``) and their values
are read as YAML scalars, so ``true``, ``5`` and ``[a, b]`` have their natural types.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from proton_broker.errors import ConfigError

ENV_PREFIX = "PROTON_BROKER_"


@dataclass
class BrokerSection:
    """Listener and node-creation settings."""

    host: str = "127.0.0.1"
    port: int = 5672
    data_dir: str = "./data"
    container_id: str = "proton-broker"
    max_frame_size: int = 1048576
    idle_timeout: float = 60.0
    auto_create: bool = True
    auto_create_patterns: list[str] = field(default_factory=lambda: ["*"])
    producer_credit: int = 1000
    expiry_interval: float = 1.0
    default_message_group: str = "qpid.no-group"
    store: str = "sqlite"  # "sqlite" (in data_dir) or "memory" (nothing survives a restart)


@dataclass
class SaslSection:
    """SASL on the listener; without a SASL header clients are still served (anonymous)."""

    enabled: bool = True
    mechanisms: str = "ANONYMOUS"
    require_auth: bool = False


@dataclass
class QueueSection:
    """Defaults for every queue (the names docs/sequence-history.md uses)."""

    max_key_updates: int | None = None  # versions kept per key; None: all of them


@dataclass
class HttpSection:
    """The HTTP gateway (docs/sequence-history.md): off unless enabled; local-only by default."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8081  # 0 picks a free port
    longpoll_timeout: float = 30.0  # seconds a long poll waits when it names no timeout


@dataclass
class MetricsSection:
    """The Prometheus text endpoint on a port of its own (docs/metrics.md); off unless
    enabled, local-only by default. The HTTP gateway, when it is on,
    serves ``/metrics`` as well, whatever this says."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 9464  # 0 picks a free port


@dataclass
class TlsSection:
    """An AMQPS listener (TLS; IANA port 5671) beside the plain one; off unless enabled.
    SASL applies inside TLS as on the plain port (docs/security.md)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 5671  # 0 picks a free port
    cert_file: str = ""  # PEM: the broker's certificate (chain)
    key_file: str = ""  # PEM: its private key
    key_password: str = ""  # for an encrypted key ("": none)
    ca_file: str = ""  # PEM: the CAs client certificates are checked against
    verify_clients: bool = False  # require a client certificate signed by ca_file


@dataclass
class LoggingSection:
    level: str = "INFO"


@dataclass
class Config:
    broker: BrokerSection = field(default_factory=BrokerSection)
    sasl: SaslSection = field(default_factory=SaslSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    queue: QueueSection = field(default_factory=QueueSection)
    http: HttpSection = field(default_factory=HttpSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    tls: TlsSection = field(default_factory=TlsSection)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)


_SECTIONS = {
    "broker": BrokerSection,
    "sasl": SaslSection,
    "logging": LoggingSection,
    "queue": QueueSection,
    "http": HttpSection,
    "metrics": MetricsSection,
    "tls": TlsSection,
}


def load(
    path: str | Path | None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Config:
    """Build the configuration from the file at ``path`` (may be absent), the environment
    and the ``overrides`` from command-line flags (``{section: {key: value}}``)."""
    raw = _read_file(path)
    _merge(raw, _from_environment(os.environ if environ is None else environ))
    _merge(raw, {s: dict(v) for s, v in (overrides or {}).items()})
    return _build(raw)


def _read_file(path: str | Path | None) -> dict[str, Any]:
    if path is None or not Path(path).exists():
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def _from_environment(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section = next((s for s in _SECTIONS if rest.startswith(s + "_")), None)
        if section is None:
            raise ConfigError(f"environment variable {name}: unknown section")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        found.setdefault(section, {})[rest[len(section) + 1 :]] = value
    return found


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for section, values in more.items():
        current = into.setdefault(section, {})
        if not isinstance(current, dict) or not isinstance(values, Mapping):
            raise ConfigError(f"{section}: must be a mapping")
        current.update(values)


def _build(raw: dict[str, Any]) -> Config:
    config = Config()
    for section, values in raw.items():
        if section == "queues":
            config.queues = _queues(values)
            continue
        cls = _SECTIONS.get(section)
        if cls is None:
            raise ConfigError(f"unknown configuration section '{section}'")
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: must be a mapping")
        setattr(config, section, _section(cls, section, values))
    return config


def _section(cls: type, section: str, values: dict[str, Any]) -> Any:
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown configuration key '{section}.{key}'")
        values[key] = _check_type(f"{section}.{key}", hints[key], value)
    return cls(**values)


def _check_type(name: str, hint: Any, value: Any) -> Any:
    """Accept the value if it has the declared type (ints for floats too), else refuse."""
    if hint == int | None:  # an optional integer: null, or a non-negative integer
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise ConfigError(
            f"configuration key '{name}' must be null or a non-negative integer, got {value!r}"
        )
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    else:  # list[str]
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        raise ConfigError(f"configuration key '{name}' must be {_type_name(hint)}, got {value!r}")
    return value


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, "a list of strings")


def _queues(values: Any) -> dict[str, dict[str, Any]]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError("queues: must be a mapping of queue name to settings")
    for name, settings in values.items():
        if settings is not None and not isinstance(settings, dict):
            raise ConfigError(f"queues.{name}: settings must be a mapping")
    return {str(name): dict(settings or {}) for name, settings in values.items()}
