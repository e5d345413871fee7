"""Configuration: file, environment and flags, with unknown keys and bad types refused."""

from __future__ import annotations

import re
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


def test_exchanges_and_bindings_can_be_declared_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(
        "exchanges:\n  news: {type: topic, durable: true}\n  match: {type: headers}\n"
        "bindings:\n  - {exchange: news, queue: q, key: 'uk.#'}\n"
        "  - {exchange: match, queue: q, arguments: {x-match: any, a: 1}}\n"
    )
    loaded = config.load(path, environ={})
    assert loaded.exchanges == {
        "news": config.ExchangeConfig("topic", True),
        "match": config.ExchangeConfig("headers"),
    }
    assert loaded.bindings == [
        config.BindingConfig("news", "q", "uk.#"),
        config.BindingConfig("match", "q", "", {"x-match": "any", "a": 1}),
    ]


def test_more_listeners_can_be_declared_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(
        "listeners:\n  - {port: 5673, max_frame_size: 4096}\n  - {port: 0, host: 'localhost'}\n"
    )
    loaded = config.load(path, environ={})
    assert loaded.listeners == [
        config.ListenerConfig(5673, None, 4096),
        config.ListenerConfig(0, "localhost", None),
    ]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("exchanges: [news]", "exchanges: must be a mapping"),
        ("exchanges:\n  news: {}", "exchanges.news.type: is required"),
        ("exchanges:\n  news: {type: xml}", "exchanges.news.type: must be one of direct"),
        ("exchanges:\n  news: {type: topic, durable: maybe}", "exchanges.news.durable"),
        ("exchanges:\n  news: {type: topic, colour: red}", "exchanges.news.colour: unknown"),
        ("bindings: {a: b}", "bindings: must be a list"),
        ("bindings:\n  - {queue: q}", "bindings[0].exchange: is required"),
        ("bindings:\n  - {exchange: x, queue: q, key: 5}", "bindings[0].key: must be a string"),
        ("bindings:\n  - {exchange: x, queue: q, arguments: 5}", "bindings[0].arguments"),
        ("listeners: {port: 5673}", "listeners: must be a list"),
        ("listeners:\n  - {host: h}", "listeners[0].port: is required"),
        ("listeners:\n  - {port: 70000}", "listeners[0].port: is required, a port number"),
        ("listeners:\n  - {port: 5673, max_frame_size: 100}", "listeners[0].max_frame_size"),
        ("listeners:\n  - {port: 5673, frame: 4096}", "listeners[0].frame: unknown"),
    ],
)
def test_a_wrong_exchange_or_binding_stops_start_up_naming_it(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        config.load(path, environ={})


# ---- values are checked for range and allowed words, naming the key and the value ----------


@pytest.mark.parametrize(
    ("section", "key", "value", "complaint"),
    [
        ("broker", "store", "postgres", "must be one of sqlite, memory, got 'postgres'"),
        ("broker", "store", "SQLite", "must be one of sqlite, memory, got 'SQLite'"),
        ("broker", "port", 99999, "must be between 0 and 65535, got 99999"),
        ("broker", "port", -1, "must be between 0 and 65535, got -1"),
        ("http", "port", 70000, "must be between 0 and 65535"),
        ("metrics", "port", 65536, "must be between 0 and 65535"),
        ("tls", "port", -5, "must be between 0 and 65535"),
        ("broker", "idle_timeout", -1, "must be between 0 and 4294967, got -1"),
        ("broker", "expiry_interval", 0, "must be at least 0.001, got 0"),
        ("broker", "producer_credit", 0, "must be between 1 and 2147483647, got 0"),
        ("broker", "max_frame_size", 100, "must be between 512 and 4294967295, got 100"),
        ("http", "longpoll_timeout", -2.5, "must be at least 0"),
        ("http", "max_body_size", 0, "must be at least 1"),
        ("logging", "level", "LOUD", "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("queue", "max_key_updates", -1, "must be null or a non-negative integer"),
        ("queue", "pack_after", -1, "must be at least 0, got -1"),
    ],
)
def test_a_value_out_of_range_or_not_allowed_is_refused_naming_key_and_value(
    section: str, key: str, value: object, complaint: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        config.load(None, environ={}, overrides={section: {key: value}})
    assert f"'{section}.{key}'" in str(refused.value)
    assert complaint in str(refused.value)


def test_log_levels_are_names_in_any_case() -> None:
    loaded = config.load(None, environ={"PROTON_BROKER_LOGGING_LEVEL": "debug"})
    assert loaded.logging.level == "DEBUG"


def test_the_edges_of_each_range_are_accepted() -> None:
    loaded = config.load(
        None,
        environ={},
        overrides={"broker": {"port": 65535, "idle_timeout": 0}, "http": {"port": 0}},
    )
    assert (loaded.broker.port, loaded.broker.idle_timeout, loaded.http.port) == (65535, 0, 0)


def test_a_config_file_that_was_named_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"configuration file .*nope.yaml does not exist"):
        config.load(tmp_path / "nope.yaml", environ={}, must_exist=True)


# ---- what YAML or a typo would otherwise change silently ----------------------------------


def load_text(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> config.Config:
    path = tmp_path / "b.yaml"
    path.write_text(text, encoding="utf-8")
    return config.load(path, environ=environ or {})


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (
            "sasl:\n  anonymous: never\nacl: {file: ''}\nsasl:\n  mechanisms: PLAIN\n",
            "line 4: 'sasl' is given twice (first on line 1)",
        ),
        ("broker: {store: memory, store: sqlite}\n", "line 1: 'broker.store' is given twice"),
        ("queues:\n  q: {x-max-count: 1}\n  q: {}\n", "line 3: 'queues.q' is given twice"),
        (
            "bindings:\n  - {exchange: x, queue: q}\n  - {exchange: x, queue: q, queue: r}\n",
            "line 3: 'bindings[1].queue' is given twice",
        ),
    ],
)
def test_a_key_or_section_given_twice_is_refused_naming_file_line_and_key(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_text(tmp_path, text)
    assert str(refused.value).startswith(f"{tmp_path / 'b.yaml'}, {complaint}")
    # a key merged from an anchor may still be overridden: it is not written twice
    text = "queues:\n  a: &opts {durable: true}\n  b:\n    <<: *opts\n    durable: false\n"
    assert load_text(tmp_path, text).queues == {"a": {"durable": True}, "b": {"durable": False}}


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("sasl", "failed_login_window", ".nan"),
        ("broker", "expiry_interval", ".nan"),
        ("broker", "expiry_interval", ".inf"),
        ("broker", "idle_timeout", ".nan"),
        ("broker", "handshake_timeout", ".nan"),
        ("console", "sample_interval", ".nan"),
        ("http", "read_timeout", ".nan"),
        ("http", "longpoll_timeout", ".inf"),
        ("broker", "idle_queue_timeout", "-.inf"),
    ],
)
def test_a_number_that_is_not_finite_is_refused_from_the_file_and_the_environment(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    complaint = f"configuration key '{section}.{key}' must be a finite number"
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        load_text(tmp_path, f"{section}:\n  {key}: {value}\n")
    variable = f"PROTON_BROKER_{section.upper()}_{key.upper()}"
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        config.load(None, environ={variable: value})


@pytest.mark.parametrize(
    ("key", "most"),
    [
        ("max_frame_size", 2**32 - 1),
        ("producer_credit", 2**31 - 1),
        ("max_message_size", 2**64 - 1),
        ("idle_timeout", 4294967),
        ("max_links_per_connection", 2**32 - 1),
    ],
)
def test_a_number_the_wire_cannot_carry_is_refused_and_the_largest_it_can_is_taken(
    key: str, most: int
) -> None:
    assert getattr(config.load(None, environ={}, overrides={"broker": {key: most}}).broker, key)
    with pytest.raises(ConfigError, match=re.escape(f"'broker.{key}' must be between")):
        config.load(None, environ={}, overrides={"broker": {key: most + 1}})


def test_a_listener_frame_size_the_wire_cannot_carry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"listeners\[0\].max_frame_size: .* 4294967295"):
        load_text(tmp_path, "listeners:\n  - {port: 0, max_frame_size: 4294967296}\n")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("queues: {~: {}}", "queues: name None is not a string (quote it)"),
        ("queues: {yes: {}}", "queues: name True is not a string (quote it)"),
        ("queues: {010: {}}", "queues: name 8 is not a string (quote it)"),
        ("queues: {12:30: {}}", "queues: name 750 is not a string (quote it)"),
        ("queues: {'': {}}", "queues: a name must not be empty"),
        ("exchanges: {yes: {type: topic}}", "exchanges: name True is not a string (quote it)"),
        ("bindings: [{exchange: x, queue: 010}]", "bindings[0].queue: 8 is not a string"),
        ("bindings: [{exchange: no, queue: q}]", "bindings[0].exchange: False is not a string"),
    ],
)
def test_a_name_yaml_reads_as_another_type_is_refused_not_changed(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        load_text(tmp_path, text + "\n")
    quoted = load_text(tmp_path, "queues: {'010': {}, 'yes': {}}\n")  # as written
    assert list(quoted.queues) == ["010", "yes"]


@pytest.mark.parametrize(
    ("argument", "complaint"),
    [
        (
            "unroutableMessageBehavior: REJECT",
            "exchanges.x.arguments.unroutableMessageBehavior: unknown exchange argument "
            "'unroutableMessageBehavior' (did you mean 'unroutableMessageBehaviour'?",
        ),
        (
            "alternate_exchange: dlq",
            "exchanges.x.arguments.alternate_exchange: unknown exchange argument "
            "'alternate_exchange' (did you mean 'alternate-exchange'?",
        ),
    ],
)
def test_an_exchange_argument_the_broker_does_not_know_is_refused_naming_it(
    tmp_path: Path, argument: str, complaint: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(complaint)):
        load_text(tmp_path, f"exchanges:\n  x: {{type: direct, arguments: {{{argument}}}}}\n")
    known = load_text(
        tmp_path,
        "exchanges:\n  x: {type: direct, arguments: {unroutableMessageBehaviour: REJECT,"
        " alternate-exchange: dlq, description: d, qpid.ive: false}}\n",
    )
    assert known.exchanges["x"].arguments["unroutableMessageBehaviour"] == "REJECT"


@pytest.mark.parametrize("section", ["broker", "http", "metrics", "tls"])
def test_an_empty_host_is_refused_rather_than_listening_everywhere(section: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"'{section}.host' must not be empty")):
        config.load(None, environ={}, overrides={section: {"host": ""}})


def test_a_section_whose_keys_are_all_commented_out_is_empty(tmp_path: Path) -> None:
    text = "broker:\n  # port: 5672\nsasl:\n"
    loaded = load_text(tmp_path, text, environ={"PROTON_BROKER_BROKER_PORT": "5673"})
    assert loaded.broker.port == 5673
    assert loaded.sasl == config.SaslSection()


def test_a_file_that_is_not_utf8_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_bytes(b"broker: {container_id: caf\xe9}\n")
    with pytest.raises(
        ConfigError, match=re.escape(f"{path}: not UTF-8 text (0xe9 at byte offset 26)")
    ):
        config.load(path, environ={})


def test_a_config_path_that_is_a_directory_is_a_configuration_error(tmp_path: Path) -> None:
    for must_exist in (True, False):
        with pytest.raises(ConfigError, match=re.escape(f"{tmp_path}: cannot be read")):
            config.load(tmp_path, environ={}, must_exist=must_exist)
