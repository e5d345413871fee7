"""Broker configuration: one YAML file, environment overrides, command-line flags.

Precedence is file < environment < flags. Every key has a type in the schema below, and
most have a range or a set of allowed values (``field`` metadata: ``low``/``high``,
``choices``); an unknown key, a value of the wrong type, out of range or not allowed stops
start-up with one line naming the key and the value, before any file is opened: a typo in a
config file must never be silently ignored, let alone run a broker that loses what it
accepted (``store: SQLite`` is refused, not taken for the memory store). Allowed words are
matched exactly, except log levels, whose case does not matter. An explicit config file
that does not exist is an error; the default one may be absent. Environment variables are named
``PROTON_BROKER_<SECTION>_<KEY>`` (e.g. ``PROTON_BROKER_BROKER_PORT=5673``) and their values
are read as YAML scalars, so ``true``, ``5`` and ``[a, b]`` have their natural types.

What else a wrong file cannot do:

* Say a key twice. YAML's last-one-wins would drop a whole section silently (a second
  ``sasl:`` losing ``anonymous: never``): a key repeated in one mapping is refused with the
  file, its line and the dotted key (:class:`_StrictLoader`).
* Give a number that is not finite: ``.nan`` passes every range check and ``.inf`` turns a
  period into never, so both are refused for every number, from the file or the environment.
* Give a number the wire or a C call cannot carry: frame sizes and message sizes are AMQP
  ``uint`` and ``ulong``, link credit Proton's C ``int``, the idle timeout Proton's ``uint``
  milliseconds, handles a ``uint``; each such key has that as its upper bound.
* Name a queue, an exchange or a binding's ends with a YAML non-string (``yes``, ``010``,
  ``12:30``, ``~``), which YAML would turn into ``True``, 8, 750 or None; or leave a host
  empty, which would listen on every interface.
* Ask an exchange for an argument this broker does not know (Broker-J: "Unknown attributes
  provided"): a misspelt ``unroutableMessageBehavior`` would otherwise be kept and ignored.
* Name a TLS file that is not there (:func:`check_tls_files`, at start-up before the store
  is opened): the key and the path are said, for AMQPS and HTTPS alike.

A file that is not UTF-8, or a path that is a directory, is a configuration error too. A
section whose keys are all commented out (``broker:`` alone) is an empty section.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from proton_broker.errors import ConfigError
from proton_broker.exchanges.exchange import EXCHANGE_TYPES, unknown_argument

ENV_PREFIX = "PROTON_BROKER_"
# What the wire (AMQP's uint and ulong) and Proton's C calls can carry.
UINT_MAX = 2**32 - 1  # max-frame-size, handle-max; Proton's idle timeout, in milliseconds
ULONG_MAX = 2**64 - 1  # max-message-size
CREDIT_MAX = 2**31 - 1  # pn_link_flow takes a C int
IDLE_TIMEOUT_MAX = UINT_MAX // 1000  # seconds whose milliseconds are a uint


def _port(default: int) -> Any:
    """A TCP port (0 picks a free one)."""
    return field(default=default, metadata={"low": 0, "high": 65535})


def _at_least(default: float | None, low: float, high: float | None = None) -> Any:
    return field(default=default, metadata={"low": low, "high": high})


def _host(default: str) -> Any:
    """An address to listen on: "" would be every interface, so it must be said (0.0.0.0)."""
    return field(default=default, metadata={"nonempty": True})


def _one_of(default: str, *choices: str, fold: bool = False) -> Any:
    """One of ``choices`` (``fold``: in any case, kept as written in ``choices``)."""
    return field(default=default, metadata={"choices": choices, "fold": fold})


STORES = ("sqlite", "memory")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
PEER_POLICIES = ("never", "loopback", "always")  # from which client addresses a thing is allowed


@dataclass
class BrokerSection:
    """Listener and node-creation settings."""

    host: str = _host("127.0.0.1")
    port: int = _port(5672)
    data_dir: str = "./data"
    container_id: str = "proton-broker"
    max_frame_size: int = _at_least(1048576, 512, UINT_MAX)  # AMQP's smallest max-frame-size
    idle_timeout: float = _at_least(60.0, 0, IDLE_TIMEOUT_MAX)
    auto_create: bool = True
    auto_create_patterns: list[str] = field(default_factory=lambda: ["*"])
    producer_credit: int = _at_least(1000, 1, CREDIT_MAX)
    expiry_interval: float = _at_least(1.0, 0.001)
    default_message_group: str = "qpid.no-group"
    # "sqlite" (in data_dir) or "memory" (nothing survives a restart)
    store: str = _one_of("sqlite", *STORES)
    # Limits (docs/broker-limits.md): connections at once, from one client address and as
    # one user; seconds a new connection has to complete the AMQP open; queues in all, and
    # made by one connection; the largest message accepted (advertised on attach).
    max_connections: int = _at_least(10000, 1)
    max_connections_per_address: int = _at_least(1000, 1)
    max_connections_per_user: int = _at_least(1000, 1)
    handshake_timeout: float = _at_least(10.0, 0.001)
    max_queues: int = _at_least(100000, 1)
    max_queues_per_connection: int = _at_least(1000, 1)
    # Sessions (the channel-max of the broker's open frame is one less) and links one
    # connection may have at once.
    max_sessions_per_connection: int = _at_least(256, 1, 65536)
    max_links_per_connection: int = _at_least(10000, 1, UINT_MAX)
    # Bytes (UTF-8) of a name a client gives: a container id, a link name, an address, a
    # queue or exchange made on demand, by $management or over HTTP.
    max_name_length: int = _at_least(1024, 1)
    # Exchanges declared (the four defaults not counted), and bindings in all.
    max_exchanges: int = _at_least(10000, 1)
    max_bindings: int = _at_least(1000000, 1)
    max_message_size: int = _at_least(104857600, 512, ULONG_MAX)
    # Bytes of deliveries handed to one connection that its socket has not taken yet (a
    # client that does not read) before its consumers get nothing more until half that is
    # left (amqp/output.py).
    max_connection_backlog: int = _at_least(1048576, 65536)
    # Bytes of queued (and transaction-staged) messages held in memory, all queues together,
    # before every producer is flow-controlled until they fall to 90% (queues/budget.py).
    max_memory: int = _at_least(1073741824, 1)
    # Transactions one connection may have open at once (docs/durability.md).
    max_transactions_per_connection: int = _at_least(1000, 1)
    # What sequence histories hold beyond their queues (consumed and replaced versions),
    # all queues together, before they forget their oldest (queues/history.py).
    max_history_memory: int = _at_least(1073741824, 1)
    # Seconds a queue made on demand may stay without links and messages before the
    # periodic check deletes it (docs/queue-lifetime.md); 0: never.
    idle_queue_timeout: float = _at_least(0.0, 0)
    # From where management's confidential operations (getMessageContent: what a message
    # says) may be asked for without TLS (docs/management.md); Broker-J's port attribute
    # allowConfidentialOperationsOnInsecureChannels, false by default there.
    confidential_without_tls: str = _one_of("loopback", *PEER_POLICIES)


@dataclass
class SaslSection:
    """Authentication (docs/security.md): the SASL mechanisms offered, and from where a
    client may stay anonymous or send a password without TLS (never, loopback, always)."""

    enabled: bool = True
    # Offered to clients that authenticate (Cyrus SASL; EXTERNAL only over verified TLS).
    mechanisms: str = "SCRAM-SHA-256 SCRAM-SHA-1 PLAIN"
    # Who may connect without authenticating (SASL ANONYMOUS, or no SASL layer at all).
    anonymous: str = _one_of("loopback", *PEER_POLICIES)
    # Where PLAIN (a password in the clear) is accepted on a connection without TLS.
    plain_without_tls: str = _one_of("loopback", *PEER_POLICIES)
    user_db: str = ""  # the Cyrus sasldb file of users; "": users.sasldb in broker.data_dir
    # Who an EXTERNAL client (a verified TLS certificate) is: its subject's CN, or the whole
    # subject (Broker-J's useFullDN).
    external_user: str = _one_of("cn", "cn", "subject")
    # Wrong passwords from one client address within the window that lock it out of
    # password logins until the oldest is that old (security/logins.py); 0: no limit.
    max_failed_logins: int = _at_least(10, 0)
    failed_login_window: float = _at_least(60.0, 0.001)  # seconds


@dataclass
class QueueSection:
    """Defaults for every queue (the names docs/sequence-history.md uses)."""

    max_key_updates: int | None = _at_least(None, 0)  # versions kept per key; None: all
    # Messages a plain queue holds before it packs the newest ones (queues/packed.py);
    # 0: never.
    pack_after: int = _at_least(10_000, 0)
    # Dead-lettering (docs/dead-letters.md): the most deliveries a message gets before it
    # goes to its queue's alternate (0: no maximum, as in both Qpid brokers); whether every
    # queue made on demand gets a dead-letter queue, and that queue's suffix (Broker-J's
    # queue.deadLetterQueueEnabled and qpid.broker_dead_letter_queue_suffix).
    maximum_delivery_attempts: int = _at_least(0, 0)
    dead_letter_queues: bool = False
    dead_letter_suffix: str = field(default="_DLQ", metadata={"nonempty": True})


@dataclass
class HttpSection:
    """The HTTP gateway (docs/sequence-history.md): off unless enabled; local-only by default."""

    enabled: bool = False
    host: str = _host("127.0.0.1")
    port: int = _port(8081)  # 0 picks a free port
    # Seconds a long poll waits when it names no timeout.
    longpoll_timeout: float = _at_least(30.0, 0)
    max_body_size: int = _at_least(1048576, 1)  # bytes a request body may have (413 above)
    # Seconds to receive a request's headers and body (408 after).
    read_timeout: float = _at_least(10.0, 0.001)
    max_long_polls: int = _at_least(10000, 0)  # long polls and streams waiting (503 above)
    tls: bool = False  # serve HTTPS, with the tls section's certificate and key


@dataclass
class ConsoleSection:
    """The web console (docs/console.md), served under /console/ by the HTTP gateway when
    it runs. Every figure below bounds what the console keeps in memory."""

    enabled: bool = True
    sample_interval: float = _at_least(2.0, 0.05)  # seconds between samples of the counters
    history: int = _at_least(300, 2)  # samples kept for each plot (10 minutes at 2 s)
    max_plotted_queues: int = _at_least(100, 0)  # queues with plots, the latest looked at
    max_sessions: int = _at_least(1000, 1)  # logged-in sessions at once (see http/sessions.py)
    session_timeout: float = _at_least(1800.0, 1)  # seconds a session lasts unused
    log_records: int = _at_least(1000, 0)  # recent log records the logs page shows


@dataclass
class MetricsSection:
    """The Prometheus text endpoint on a port of its own (docs/metrics.md); off unless
    enabled, local-only by default. The HTTP gateway, when it is on,
    serves ``/metrics`` as well, whatever this says."""

    enabled: bool = False
    host: str = _host("127.0.0.1")
    port: int = _port(9464)  # 0 picks a free port
    open: bool = False  # serve /metrics to anyone, without authentication


@dataclass
class TlsSection:
    """An AMQPS listener (TLS; IANA port 5671) beside the plain one; off unless enabled.
    SASL applies inside TLS as on the plain port (docs/security.md)."""

    enabled: bool = False
    host: str = _host("127.0.0.1")
    port: int = _port(5671)  # 0 picks a free port
    cert_file: str = ""  # PEM: the broker's certificate (chain)
    key_file: str = ""  # PEM: its private key
    key_password: str = ""  # for an encrypted key ("": none)
    ca_file: str = ""  # PEM: the CAs client certificates are checked against
    verify_clients: bool = False  # require a client certificate signed by ca_file
    min_version: str = _one_of("TLSv1.2", *TLS_VERSIONS)  # the oldest TLS version accepted


@dataclass
class AclSection:
    """Authorisation (docs/acl.md): a Qpid ACL file; "" is none, and every authenticated
    user may do everything, as in qpidd without ``--acl-file``."""

    file: str = ""  # the ACL file (qpidd's format); relative paths from the working directory


@dataclass
class LoggingSection:
    level: str = _one_of("INFO", *LOG_LEVELS, fold=True)


@dataclass
class Config:
    broker: BrokerSection = field(default_factory=BrokerSection)
    sasl: SaslSection = field(default_factory=SaslSection)
    acl: AclSection = field(default_factory=AclSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    queue: QueueSection = field(default_factory=QueueSection)
    http: HttpSection = field(default_factory=HttpSection)
    console: ConsoleSection = field(default_factory=ConsoleSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    tls: TlsSection = field(default_factory=TlsSection)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    exchanges: dict[str, ExchangeConfig] = field(default_factory=dict)
    bindings: list[BindingConfig] = field(default_factory=list)
    listeners: list[ListenerConfig] = field(default_factory=list)


@dataclass(frozen=True)
class ListenerConfig:
    """Another plain AMQP listener (``listeners:``), with a largest frame of its own: test
    suites that check frame sizes (Qpid Interop Test 2.0) want a 4 KiB and a 1 MiB port on
    one broker. ``host`` and ``max_frame_size`` default to the ``broker`` section's."""

    port: int
    host: str | None = None
    max_frame_size: int | None = None


@dataclass(frozen=True)
class ExchangeConfig:
    """An exchange the configuration file declares (``exchanges:``)."""

    type: str
    durable: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BindingConfig:
    """A binding the configuration file makes (``bindings:``)."""

    exchange: str
    queue: str
    key: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


_SECTIONS = {
    "broker": BrokerSection,
    "sasl": SaslSection,
    "acl": AclSection,
    "logging": LoggingSection,
    "queue": QueueSection,
    "http": HttpSection,
    "console": ConsoleSection,
    "metrics": MetricsSection,
    "tls": TlsSection,
}


def load(
    path: str | Path | None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    must_exist: bool = False,
) -> Config:
    """Build the configuration from the file at ``path`` (may be absent, unless
    ``must_exist``: the user named it), the environment and the ``overrides`` from
    command-line flags (``{section: {key: value}}``)."""
    if must_exist and path is not None and not Path(path).exists():
        raise ConfigError(f"configuration file {path} does not exist")
    raw = _read_file(path)
    _merge(raw, _from_environment(os.environ if environ is None else environ))
    _merge(raw, {s: dict(v) for s, v in (overrides or {}).items()})
    return _build(raw)


def _read_file(path: str | Path | None) -> dict[str, Any]:
    """The file's sections, read as UTF-8 YAML with no key said twice (see the module
    rules); a file that cannot be read as such is a ConfigError naming it."""
    if path is None or not Path(path).exists():
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text ({exc.object[exc.start]:#04x} at byte offset {exc.start}); "
            "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    loader = _StrictLoader(text, str(path))
    try:
        data = loader.get_single_data() or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key said twice in one mapping (YAML keeps the last
    silently), naming the file, the line and the dotted key (``sasl.anonymous``,
    ``bindings[1].queue``). Each mapping is built before what it holds, so it hands its
    values their dotted paths as it checks its own keys. Merged keys (``<<: *base``) may be
    overridden: only keys written in the mapping itself count."""

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name  # in YAML's own messages too
        self._paths: dict[int, str] = {}  # id(node) -> its dotted path

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        where = self._paths.get(id(node), "")
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            dotted = f"{where}.{key}" if where else str(key)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # not hashable: YAML's own constructor says so
                continue
            if first is not key_node:
                raise ConfigError(
                    f"{self.name}, line {key_node.start_mark.line + 1}: '{dotted}' is given "
                    f"twice (first on line {first.start_mark.line + 1}); say each key once"
                )
            self._paths[id(value_node)] = dotted
        return super().construct_mapping(node, deep)

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        where = self._paths.get(id(node), "")
        for number, item in enumerate(node.value):
            self._paths[id(item)] = f"{where}[{number}]"
        return super().construct_sequence(node, deep)


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
    """Add ``more``'s keys to ``into``'s sections; a section with nothing in it (``broker:``
    and only comments) is an empty one, as :func:`_build` takes it."""
    for section, values in more.items():
        current = into.get(section)
        if current is None:
            current = into[section] = {}
        if not isinstance(current, dict) or not isinstance(values, Mapping):
            raise ConfigError(f"{section}: must be a mapping")
        current.update(values)


def _build(raw: dict[str, Any]) -> Config:
    config = Config()
    for section, values in raw.items():
        if section == "queues":
            config.queues = _queues(values)
            continue
        if section == "exchanges":
            config.exchanges = _exchanges(values)
            continue
        if section == "bindings":
            config.bindings = _bindings(values)
            continue
        if section == "listeners":
            config.listeners = _listeners(values)
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
            raise ConfigError(f"unknown configuration key '{section}.{key}'{_RENAMED.get(key, '')}")
        values[key] = _check_value(
            f"{section}.{key}",
            _field(cls, key).metadata,
            _check_type(f"{section}.{key}", hints[key], value),
        )
    return cls(**values)


_RENAMED = {  # keys that were replaced: say by what
    "require_auth": " (replaced by sasl.anonymous: never, loopback or always)",
}


def _field(cls: type, name: str) -> Any:
    return next(f for f in fields(cls) if f.name == name)


def _check_value(name: str, rules: Mapping[str, Any], value: Any) -> Any:
    """Accept a well-typed value within the field's range and allowed words, else refuse."""
    choices = rules.get("choices")
    if choices is not None:
        found = value.upper() if rules.get("fold") else value
        if found not in choices:
            allowed = ", ".join(choices)
            raise ConfigError(f"configuration key '{name}' must be one of {allowed}, got {value!r}")
        return found
    if rules.get("nonempty") and not value:
        raise ConfigError(f"configuration key '{name}' must not be empty")
    low, high = rules.get("low"), rules.get("high")
    if value is not None and (
        (low is not None and value < low) or (high is not None and value > high)
    ):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"configuration key '{name}' must be {bounds}, got {value!r}")
    return value


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
        if ok and not _finite(value):
            raise ConfigError(f"configuration key '{name}' must be a finite number, got {value!r}")
        value = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    else:  # list[str]
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        raise ConfigError(f"configuration key '{name}' must be {_type_name(hint)}, got {value!r}")
    return value


def _finite(value: float) -> bool:
    """Whether ``value`` is a number a range can hold: ``.nan`` compares false with every
    bound, and ``.inf`` (or an integer beyond a float) would make a period never end."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, "a list of strings")


def _queues(values: Any) -> dict[str, dict[str, Any]]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError("queues: must be a mapping of queue name to settings")
    for name, settings in values.items():
        _name("queues", name)
        if settings is not None and not isinstance(settings, dict):
            raise ConfigError(f"queues.{name}: settings must be a mapping")
    return {name: dict(settings or {}) for name, settings in values.items()}


def _name(where: str, name: Any) -> str:
    """A queue's or exchange's name as written: YAML reads ``yes``, ``010``, ``12:30`` and
    ``~`` as True, 8, 750 and None, which would silently become other names."""
    if not isinstance(name, str):
        raise ConfigError(f"{where}: name {name} is not a string (quote it)")
    if not name:
        raise ConfigError(f"{where}: a name must not be empty")
    return name


def _exchanges(values: Any) -> dict[str, ExchangeConfig]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError("exchanges: must be a mapping of exchange name to settings")
    found = {}
    for name, settings in values.items():
        _name("exchanges", name)
        where = f"exchanges.{name}"
        given = _entry(where, settings, required=("type",), optional=("durable", "arguments"))
        kind = given["type"]
        if kind not in EXCHANGE_TYPES:
            raise ConfigError(f"{where}.type: must be one of {', '.join(EXCHANGE_TYPES)}")
        durable = given.get("durable", False)
        if not isinstance(durable, bool):
            raise ConfigError(f"{where}.durable: must be a boolean")
        arguments = _arguments(where, given)
        problem = unknown_argument(arguments)
        if problem is not None:
            key, why = problem
            raise ConfigError(f"{where}.arguments.{key}: {why}")
        found[name] = ExchangeConfig(kind, durable, arguments)
    return found


def _bindings(values: Any) -> list[BindingConfig]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise ConfigError("bindings: must be a list of {exchange, queue, key, arguments}")
    found = []
    for number, entry in enumerate(values):
        where = f"bindings[{number}]"
        given = _entry(where, entry, required=("exchange", "queue"), optional=("key", "arguments"))
        key = given.get("key", "")
        if not isinstance(key, str):
            raise ConfigError(f"{where}.key: must be a string (quote it)")
        found.append(
            BindingConfig(given["exchange"], given["queue"], key, _arguments(where, given))
        )
    return found


def _listeners(values: Any) -> list[ListenerConfig]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise ConfigError("listeners: must be a list of {port, host, max_frame_size}")
    found = []
    for number, entry in enumerate(values):
        where = f"listeners[{number}]"
        given = _entry(where, entry, required=(), optional=("port", "host", "max_frame_size"))
        port = given.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigError(f"{where}.port: is required, a port number from 0 to 65535")
        host = given.get("host")
        if host is not None and (not isinstance(host, str) or not host):
            raise ConfigError(f"{where}.host: must be a non-empty string")
        size = given.get("max_frame_size")
        if size is not None and (
            isinstance(size, bool) or not isinstance(size, int) or not 512 <= size <= UINT_MAX
        ):
            raise ConfigError(
                f"{where}.max_frame_size: must be an integer from 512 to {UINT_MAX}, got {size!r}"
            )
        found.append(ListenerConfig(port, host, size))
    return found


def _entry(
    where: str, entry: Any, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, Any]:
    """A mapping with the ``required`` string keys and no others but ``optional``."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a mapping")
    unknown = [str(k) for k in entry if k not in required + optional]
    if unknown:
        known = ", ".join(required + optional)
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting (known: {known})")
    for key in required:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}.{key}: {value} is not a string (quote it)")
        if not value:
            raise ConfigError(f"{where}.{key}: is required, a non-empty string")
    return entry


def _arguments(where: str, given: dict[str, Any]) -> dict[str, Any]:
    arguments = given.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise ConfigError(f"{where}.arguments: must be a mapping")
    return {str(k): v for k, v in arguments.items()}


def check_tls_files(config: Config) -> None:
    """ConfigError naming the key and the path of a TLS file that AMQPS (``tls.enabled``) or
    HTTPS (``http.tls``) needs and cannot have, at start-up before the store is opened (a
    listener would otherwise fail later, saying neither)."""
    https = config.http.enabled and config.http.tls
    if not (config.tls.enabled or https):
        return
    problem = tls_file_problem(config.tls)
    if problem is not None:
        users = "tls.enabled" if config.tls.enabled else "http.tls"
        raise ConfigError(f"configuration key {problem} (needed by {users})")


def tls_file_problem(section: TlsSection) -> str | None:
    """What is wrong with the first of the certificate, the key and (``verify_clients``)
    the CA file that is missing, not a file, unreadable or empty, as ``'tls.KEY': ...``
    naming the path; None if each can be read. (Whether the TLS library takes their
    contents is for the listener to find out.)"""
    wanted = ("cert_file", "key_file") + (("ca_file",) if section.verify_clients else ())
    for key in wanted:
        path = getattr(section, key)
        if not path:
            because = " with tls.verify_clients" if key == "ca_file" else ""
            return f"'tls.{key}' is required{because}"
        problem = file_problem(path, empty_too=True)
        if problem is not None:
            return f"'tls.{key}': {problem}"
    return None


def file_problem(path: str | Path, empty_too: bool = False) -> str | None:
    """What keeps ``path`` from being read as a file (missing, not a file, unreadable, or
    with ``empty_too`` empty), naming it; None if it can be read. The checks of every file
    a key names (TLS files, the SASL users' database) at start-up."""
    path = Path(path)
    if not path.exists():
        return f"no such file: {path}"
    if not path.is_file():
        return f"not a file: {path}"
    try:
        with path.open("rb") as file:
            empty = not file.read(1)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return f"the file is empty: {path}" if empty and empty_too else None
