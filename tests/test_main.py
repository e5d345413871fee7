"""The command line: start-up, the listening line, clean shutdown, configuration errors."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from proton import Message, symbol
from proton.reactor import DynamicNodeProperties
from proton.utils import BlockingConnection

from proton_broker.__main__ import parse_args
from proton_broker.store.sqlite import FILE_NAME, SqliteStore
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


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "sasl:\n  anonymous: never\nsasl:\n  mechanisms: PLAIN\n",
            "{dir}/b.yaml, line 3: 'sasl' is given twice (first on line 1)",
        ),
        (
            "queues:\n  q: {{x-max-cuont: 10}}\n",
            "queues.q: unknown queue option(s) for 'q': 'x-max-cuont'=10",
        ),
        (
            "queues:\n  q: {{qpid.max_count: ten}}\n",
            "queues.q: queue option 'qpid.max_count' must be an integer",
        ),
        (
            "exchanges:\n  x: {{type: direct, arguments: {{unroutableMessageBehavior: REJECT}}}}\n",
            "exchanges.x.arguments.unroutableMessageBehavior: unknown exchange argument",
        ),
        (
            "http: {{enabled: true, port: 0, tls: true}}\n"
            "tls: {{cert_file: '{dir}/none.pem', key_file: '{dir}/none.key'}}\n",
            "configuration key 'tls.cert_file': no such file: {dir}/none.pem (needed by http.tls)",
        ),
        (
            "tls: {{enabled: true, port: 0, cert_file: '{dir}/empty.pem', key_file: x}}\n",
            "configuration key 'tls.cert_file': the file is empty: {dir}/empty.pem",
        ),
        (
            "sasl: {{user_db: '{dir}/nobody.sasldb'}}\n",
            "configuration key 'sasl.user_db': no such file: {dir}/nobody.sasldb",
        ),
        ("sasl: {{user_db: '{dir}'}}\n", "configuration key 'sasl.user_db': not a file: {dir}"),
    ],
    ids=[
        "section-twice",
        "queue-option",
        "queue-option-type",
        "exchange-argument",
        "https-cert",
        "amqps-empty-cert",
        "user-db-missing",
        "user-db-directory",
    ],
)
def test_a_wrong_config_stops_start_up_with_status_2_naming_key_and_value_before_the_store(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "empty.pem").write_text("")
    path = tmp_path / "b.yaml"
    path.write_text(text.format(dir=tmp_path))
    data = tmp_path / "data"
    result = run_cli("--config", str(path), "--port", "0", "--data-dir", str(data))
    assert (result.returncode, "Traceback" in result.stderr) == (2, False), result.stderr
    assert f"configuration error: {said.format(dir=tmp_path)}" in result.stderr
    assert not data.exists()


def test_a_config_file_that_is_not_utf8_or_is_a_directory_stops_start_up_with_status_2(
    tmp_path: Path,
) -> None:
    path = tmp_path / "b.yaml"
    path.write_bytes(b"broker: {container_id: caf\xe9}\n")
    for named, said in ((path, "not UTF-8 text"), (tmp_path, "cannot be read: Is a directory")):
        result = run_cli("--config", str(named), "--port", "0")
        assert (result.returncode, "Traceback" in result.stderr) == (2, False), result.stderr
        assert f"configuration error: {named}: {said}" in result.stderr


def test_help_describes_the_flags() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for flag in ("--config", "--host", "--port", "--data-dir"):
        assert flag in result.stdout


# ---- configuration fails closed, before any file is opened -------------------------------


def test_an_out_of_range_port_stops_start_up_before_the_data_dir_is_made(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = run_cli("--port", "99999", "--data-dir", str(data))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "proton-broker: configuration error: configuration key 'broker.port' must be between "
        "0 and 65535, got 99999"
    ]
    assert not data.exists()


def test_a_store_name_that_is_not_known_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  store: SQLite\n")
    data = tmp_path / "data"
    result = run_cli("--config", str(path), "--port", "0", "--data-dir", str(data))
    assert result.returncode == 2
    assert "'broker.store' must be one of sqlite, memory, got 'SQLite'" in result.stderr
    assert not data.exists()


def test_a_bad_log_level_is_refused_and_a_lower_case_one_is_taken(tmp_path: Path) -> None:
    result = run_cli("--port", "0", "--log-level", "chatty", "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2
    assert "'logging.level' must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in result.stderr
    with BrokerProcess(env={"PROTON_BROKER_LOGGING_LEVEL": "debug"}) as proc:
        assert proc.alive()


def test_a_config_file_named_on_the_command_line_must_exist(tmp_path: Path) -> None:
    result = run_cli("--config", str(tmp_path / "missing.yaml"), "--port", "0")
    assert result.returncode == 2
    assert f"configuration file {tmp_path / 'missing.yaml'} does not exist" in result.stderr


def test_a_sasl_mechanism_cyrus_does_not_offer_stops_start_up_naming_its_package(
    tmp_path: Path,
) -> None:
    result = run_cli(
        "--port",
        "0",
        "--data-dir",
        str(tmp_path / "d"),
        env={"PROTON_BROKER_SASL_MECHANISMS": "SCRAM-SHA-256 GSSAPI"},
    )
    assert result.returncode == 2
    assert "'sasl.mechanisms': Cyrus SASL does not offer GSSAPI" in result.stderr
    assert "install libsasl2-modules-gssapi-mit" in result.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "env, said",
    [
        ({"PROTON_BROKER_SASL_MECHANISMS": "PLAIN ANONYMOUS"}, "set by sasl.anonymous"),
        ({"PROTON_BROKER_SASL_REQUIRE_AUTH": "true"}, "replaced by sasl.anonymous"),
        ({"PROTON_BROKER_SASL_MECHANISMS": "EXTERNAL"}, "needs a TLS listener that verifies"),
        ({"PROTON_BROKER_SASL_ANONYMOUS": "sometimes"}, "must be one of never, loopback, always"),
        (
            {"PROTON_BROKER_SASL_MECHANISMS": "''", "PROTON_BROKER_SASL_ANONYMOUS": "never"},
            "no client could connect",
        ),
    ],
    ids=["anonymous-as-mechanism", "require-auth", "external-without-tls", "policy", "nobody"],
)
def test_an_authentication_setting_that_cannot_work_stops_start_up(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    result = run_cli("--port", "0", "--data-dir", str(tmp_path / "d"), env=env)
    assert result.returncode == 2
    assert said in result.stderr
    assert not (tmp_path / "d").exists()


# ---- one broker per data directory, and start-up says what it uses -----------------------


def test_a_second_broker_on_the_same_data_dir_refuses_naming_the_dir_and_holder(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data_dir=str(data)) as first:
        result = run_cli("--port", "0", "--data-dir", str(data))
        assert result.returncode == 2
        assert f"data directory {data.resolve()} is in use by another broker" in result.stderr
        assert f"(pid {first.pid})" in result.stderr
        conn = BlockingConnection(first.url)  # the first broker is untouched
        conn.create_sender("still-here").send(Message(body=1))
        conn.close()


def test_the_data_dir_is_free_again_once_its_broker_is_killed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = BrokerProcess(data_dir=str(data)).start()
    assert first.proc is not None
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    first.stop()
    with BrokerProcess(data_dir=str(data)) as second:
        assert second.alive()


def refused_store(result: subprocess.CompletedProcess[str], said: str) -> None:
    """Start-up stopped as for any store error: exit 2, one readable line, no traceback."""
    assert result.returncode == 2, result.stderr
    assert f"proton-broker: cannot open the store: {said}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_data_dir_that_is_a_file_stops_start_up_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a directory")
    result = run_cli("--port", "0", "--data-dir", str(data))
    refused_store(result, f"data directory {data.resolve()} cannot be used: not a directory")


def test_a_data_dir_whose_lock_file_cannot_be_opened_stops_start_up_naming_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    (data / "broker.lock").mkdir(parents=True)  # as if someone made it a directory
    result = run_cli("--port", "0", "--data-dir", str(data))
    refused_store(result, f"data directory {data.resolve()} cannot be used: Is a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only directory")
def test_a_read_only_data_dir_stops_start_up_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o555)
    try:
        result = run_cli("--port", "0", "--data-dir", str(data))
    finally:
        data.chmod(0o755)
    refused_store(result, f"data directory {data.resolve()} cannot be used: Permission denied")


def test_a_stored_queue_whose_options_are_not_json_stops_start_up_naming_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    store = SqliteStore(data, lambda fn: fn())
    store.open()
    store.save_queue("orders", {"durable": True})
    store.close()
    with sqlite3.connect(data / FILE_NAME) as db:
        db.execute("UPDATE queues SET options = '{not json' WHERE name = 'orders'")
    result = run_cli("--port", "0", "--data-dir", str(data))
    said = "the queue 'orders' cannot be recovered: its stored settings are not JSON"
    refused_store(result, f"store {(data / FILE_NAME).resolve()}: {said}")


# ---- the config file and the store: neither may say otherwise than the other -----------


def config_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_stored_durable_queue_the_config_file_declares_not_durable_stops_start_up_naming_both(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    durable = config_file(tmp_path, "a.yaml", "queues:\n  q:\n    durable: true\n")
    with BrokerProcess("--config", durable, data_dir=str(data)) as first:
        conn = BlockingConnection(first.url)
        conn.create_sender("q").send(Message(body="kept", durable=True))
        conn.close()
    transient = config_file(tmp_path, "b.yaml", "queues:\n  q:\n    durable: false\n")
    result = run_cli("--port", "0", "--data-dir", str(data), "--config", transient)
    assert result.returncode == 2, result.stderr
    said = (
        "configuration error: queues.q: the config file declares it durable: false, but "
        f"queue 'q' is stored as durable in {(data / FILE_NAME).resolve()}: delete the queue"
    )
    assert said in result.stderr
    with BrokerProcess("--config", durable, data_dir=str(data)) as again:  # nothing was lost
        conn = BlockingConnection(again.url)
        assert conn.create_receiver("q").receive(timeout=5).body == "kept"
        conn.close()


def test_a_stored_exchange_the_config_file_gives_another_type_stops_start_up_naming_both(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    exchange = "exchanges:\n  news:\n    type: {}\n    durable: true\n"
    topic = config_file(tmp_path, "a.yaml", exchange.format("topic"))
    with BrokerProcess("--config", topic, data_dir=str(data)):
        pass
    direct = config_file(tmp_path, "b.yaml", exchange.format("direct"))
    result = run_cli("--port", "0", "--data-dir", str(data), "--config", direct)
    assert result.returncode == 2, result.stderr
    said = (
        "configuration error: exchanges.news: the config file declares type 'direct', but "
        f"exchange 'news' is stored with type 'topic' in {(data / FILE_NAME).resolve()}"
    )
    assert said in result.stderr


def test_queues_stored_beyond_the_creation_limits_are_all_recovered_with_a_warning(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    name = "a-queue-name-of-more-than-forty-bytes-in-all-{}"
    with BrokerProcess(data_dir=str(data)) as first:
        conn = BlockingConnection(first.url)
        for n in range(5):
            node = DynamicNodeProperties({symbol("durable"): True})
            conn.create_sender(name.format(n), options=node).send(Message(body=n, durable=True))
        conn.close()
    limits = config_file(
        tmp_path, "limits.yaml", "broker:\n  max_queues: 3\n  max_name_length: 40\n"
    )
    with BrokerProcess("--config", limits, data_dir=str(data)) as again:
        log = "\n".join(again.output)
    for n in range(5):
        assert f"MST-1005 : Recovered 1 messages for queue '{name.format(n)}'" in log
    assert "the broker has 5 queues, more than broker.max_queues (3)" in log
    assert f"longer than broker.max_name_length (40 bytes), such as '{name.format(0)}'" in log


def test_start_up_logs_the_config_file_the_data_dir_and_the_store(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("broker:\n  auto_create: true\n")
    data = tmp_path / "data"
    with BrokerProcess("--config", str(path), data_dir=str(data)) as proc:
        log = "\n".join(proc.output)
    assert f"configuration file: {path.resolve()}" in log
    assert "MST-1001 : Created : sqlite" in log
    assert f"MST-1002 : Store location : {data.resolve() / 'broker.sqlite'}" in log


def test_the_default_message_group_flag_has_qpidds_name_and_its_user_books() -> None:
    for flag in ("--default-message-group", "--default-msg-group"):
        assert parse_args([flag, "nameless"]).default_message_group == "nameless"
