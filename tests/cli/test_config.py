"""``proton-broker-config`` run as a subprocess against a live broker, every command and option.

The Qpid documentation's qpid-config command lines are run with their argument lists unchanged;
the broker address comes from ``$PROTON_CONFIG_BROKER`` (qpid-config's default would be
localhost:5672)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from proton import Disposition, Message

from proton_broker.testing import BrokerProcess, add_user
from tests.amqp.test_durability import drain, send_all
from tests.conftest import RunningBroker

REPO = Path(__file__).resolve().parents[2]
QPID_DOC_COMMANDS = [  # verbatim from the qpidd LVQ and message-groups documentation
    "qpid-config add queue prices --lvq-key ticker",
    'qpid-config add queue MyMsgQueue --group-header="GROUP_KEY" --shared-groups',
]


def tool(
    broker: RunningBroker | None, *args: str, address: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the tool; the broker's address goes in the environment, not the arguments."""
    env = dict(os.environ)
    if broker is not None and address:
        env["PROTON_CONFIG_BROKER"] = f"{broker.host}:{broker.port}"
    return subprocess.run(
        [sys.executable, "-m", "proton_broker.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings(broker: RunningBroker, name: str) -> Any:
    return broker.call(lambda: broker.broker.queues[name].settings)


# ---- the Qpid documentation's commands ------------------------------------------------


def test_the_qpid_docs_lvq_command_makes_a_last_value_queue(broker: RunningBroker) -> None:
    done = tool(broker, *shlex.split(QPID_DOC_COMMANDS[0])[1:])
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    send_all(
        broker,
        "prices",
        [
            Message(body=f"v{i}", properties={"ticker": k})
            for i, k in enumerate(["IBM", "RHT", "IBM"])
        ],
    )
    client = broker.client()
    receiver = client.receiver("prices", credit=10)
    client.wait_received(receiver, 2)
    client.pump(0.2)
    assert [r.message.body for r in client.received(receiver)] == ["v1", "v2"]


def test_the_qpid_docs_group_command_makes_a_shared_group_queue(broker: RunningBroker) -> None:
    done = tool(broker, *shlex.split(QPID_DOC_COMMANDS[1])[1:])
    assert done.returncode == 0, done.stderr
    made = settings(broker, "MyMsgQueue")
    assert (made.group_key, made.group_mode) == ("GROUP_KEY", "shared")


# ---- add queue -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--durable"], {"durable": True}),
        (["--priorities", "5"], {"priorities": 5}),
        (["--sort-key", "rank"], {"sort_key": "rank"}),
        (["--group-header", "G"], {"group_key": "G", "group_mode": "standard"}),
        (["--max-queue-size", "1000"], {"max_size": 1000}),
        (["--max-queue-count", "10"], {"max_count": 10}),
        (["--max-queue-count", "10", "--limit-policy", "none"], {"overflow_policy": "reject"}),
        (["--max-queue-count", "10", "--limit-policy", "ring"], {"overflow_policy": "ring"}),
        (["--max-queue-count", "10", "--limit-policy", "reject"], {"overflow_policy": "reject"}),
        (
            ["--max-queue-count", "10", "--limit-policy", "flow-to-disk"],
            {"overflow_policy": "flow_to_disk"},
        ),
        (
            ["--max-queue-count", "10", "--limit-policy", "producer-flow-control"],
            {"overflow_policy": "producer_flow_control"},
        ),
        (
            ["--argument", "qpid.max_count=7", "--argument", "maximumMessageTtl=5000"],
            {"max_count": 7, "max_ttl": 5000},
        ),
    ],
)
def test_add_queue_options_become_the_queue_settings(
    broker: RunningBroker, options: list[str], expected: dict[str, Any]
) -> None:
    done = tool(broker, "add", "queue", "q", *options)
    assert done.returncode == 0, done.stderr
    made = settings(broker, "q")
    assert {name: getattr(made, name) for name in expected} == expected


def test_add_queue_with_json_prints_the_created_queue(broker: RunningBroker) -> None:
    done = tool(broker, "--json", "add", "queue", "j", "--sort-key", "s")
    assert done.returncode == 0
    assert json.loads(done.stdout)["sortKey"] == "s"


def test_qpid_configs_flow_and_force_options_work_unchanged(broker: RunningBroker) -> None:
    flow = ("--flow-stop-count", "10", "--flow-resume-count", "5", "--file-count", "8")
    assert tool(broker, "add", "queue", "flowing", *flow).returncode == 0
    settings = broker.call(lambda: broker.broker.queues["flowing"].settings)
    assert (settings.flow_stop_count, settings.flow_resume_count) == (10, 5)
    assert settings.durable is False  # said so: Broker-J's default would be durable
    send_all(broker, "flowing", [Message(body="kept")])
    assert tool(broker, "del", "queue", "flowing", "--force-if-not-empty").returncode == 0
    assert broker.call(lambda: "flowing" not in broker.broker.queues)


def test_a_refused_add_exits_1_names_the_attribute_and_creates_nothing(
    broker: RunningBroker,
) -> None:
    done = tool(broker, "add", "queue", "bad", "--argument", "colour=blue")
    assert done.returncode == 1
    assert done.stderr.startswith("Failed: 400") and "colour" in done.stderr
    assert broker.call(lambda: "bad" not in broker.broker.queues)
    done = tool(broker, "add", "queue", "worse", "--lvq-key", "k", "--priorities", "3")
    assert done.returncode == 1 and "priorities" in done.stderr


def test_add_queue_with_an_alternate_exchange_sends_a_rejected_message_there(
    broker: RunningBroker,
) -> None:
    assert tool(broker, "add", "queue", "dlq").returncode == 0
    done = tool(broker, "add", "queue", "orders", "--alternate-exchange", "dlq")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    options = broker.call(lambda: broker.broker.queues["orders"].options)
    assert options["alternate-exchange"] == "dlq"
    send_all(broker, "orders", [Message(body="poison")])
    client = broker.client()
    (got,) = client.wait_received(client.receiver("orders", credit=1), 1)
    client.settle(got, Disposition.REJECTED)
    assert drain(broker, "dlq", 1) == ["poison"]


def test_an_alternate_exchange_that_does_not_exist_is_refused_and_creates_nothing(
    broker: RunningBroker,
) -> None:
    done = tool(broker, "add", "queue", "orders", "--alternate-exchange", "nowhere")
    assert done.returncode == 1
    assert done.stderr == (
        "Failed: 404 alternate 'nowhere' of queue 'orders' is neither a queue nor an exchange\n"
    )
    assert broker.call(lambda: "orders" not in broker.broker.queues)


def test_deleting_a_queue_that_is_an_alternate_in_use_is_refused(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "dlq")
    tool(broker, "add", "queue", "orders", "--alternate-exchange", "dlq")
    done = tool(broker, "del", "queue", "dlq")
    assert done.returncode == 1
    assert done.stderr == (
        "Failed: 403 cannot delete queue 'dlq': it is the alternate of queue 'orders'\n"
    )
    assert broker.call(lambda: "dlq" in broker.broker.queues)


def test_adding_an_existing_queue_exits_1(broker: RunningBroker) -> None:
    assert tool(broker, "add", "queue", "once").returncode == 0
    done = tool(broker, "add", "queue", "once")
    assert done.returncode == 1 and "already exists" in done.stderr


# ---- del queue ---------------------------------------------------------------------------------


def test_del_queue_deletes_an_empty_queue(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "empty")
    done = tool(broker, "del", "queue", "empty")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert broker.call(lambda: "empty" not in broker.broker.queues)


def test_del_queue_needs_force_when_the_queue_holds_messages(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "busy")
    send_all(broker, "busy", [Message(body="m")])
    refused = tool(broker, "del", "queue", "busy")
    assert refused.returncode == 1 and "force" in refused.stderr
    assert broker.call(lambda: broker.broker.queues["busy"].depth) == 1
    forced = tool(broker, "--json", "del", "queue", "busy", "--force")
    assert forced.returncode == 0 and json.loads(forced.stdout) == {"name": "busy", "deleted": True}
    assert broker.call(lambda: "busy" not in broker.broker.queues)


def test_a_queue_count_limit_gets_qpidds_reject_policy_and_flow_control_as_qpid_config_makes_it(
    broker: RunningBroker,
) -> None:
    assert tool(broker, "add", "queue", "q5", "--max-queue-count", "5").returncode == 0
    made = settings(broker, "q5")
    assert (made.max_count, made.overflow_policy) == (5, "reject")
    assert (made.flow_stop_count, made.flow_resume_count) == (4, 3)
    none = tool(broker, "add", "queue", "qn", "--max-queue-size", "1000", "--limit-policy", "none")
    assert none.returncode == 0  # none: "use the broker's default policy"
    assert settings(broker, "qn").overflow_policy == "reject"


def test_del_queue_refuses_a_queue_in_use_or_not_empty_unless_forced_for_that(
    broker: RunningBroker,
) -> None:
    """qpid-config's if_empty and if_unused, each cleared by its own --force-if-*."""
    for name in ("used", "full"):
        tool(broker, "add", "queue", name)
    send_all(broker, "full", [Message(body="m")])
    client = broker.client()
    client.receiver("used", credit=1)
    in_use = tool(broker, "del", "queue", "used")
    assert in_use.returncode == 1 and "in use" in in_use.stderr
    assert tool(broker, "del", "queue", "used", "--force-if-not-empty").returncode == 1
    assert tool(broker, "del", "queue", "full", "--force-if-used").returncode == 1
    assert broker.call(lambda: broker.broker.queues["full"].depth) == 1  # nothing discarded
    assert tool(broker, "del", "queue", "used", "--force-if-used").returncode == 0
    assert tool(broker, "del", "queue", "full", "--force-if-not-empty").returncode == 0
    assert broker.call(lambda: sorted(broker.broker.queues)) == []


def test_deleting_an_unknown_queue_exits_1(broker: RunningBroker) -> None:
    done = tool(broker, "del", "queue", "ghost")
    assert done.returncode == 1 and "404" in done.stderr


# ---- queues and queue --------------------------------------------------------------------------


def test_queues_prints_a_table_with_type_depth_consumers_and_rates(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "table", "--lvq-key", "k")
    send_all(broker, "table", [Message(properties={"k": k}) for k in "abc"])
    client = broker.client()
    client.receiver("table", credit=0)  # a consumer, taking nothing
    done = tool(broker, "queues", "--interval", "0.2")
    assert done.returncode == 0, done.stderr
    header, rule, *rows = done.stdout.splitlines()
    assert header.split() == [
        "Queue",
        "Type",
        "Dur",
        "Msgs",
        "Bytes",
        "Cons",
        "Enq",
        "Deq",
        "Enq/s",
        "Deq/s",
    ]
    assert set(rule) == {"="}
    (row,) = rows  # the tool's own reply queue is not listed
    cells = row.split()
    assert cells[:4] + cells[5:8] == ["table", "lvq", "N", "3", "1", "3", "0"]


def test_queues_lists_thousands_of_queues(broker: RunningBroker) -> None:
    names = [f"many{i:04}" for i in range(7000)]  # over 65,535 values in one answer
    broker.call(lambda: [broker.broker.declare(name) for name in names])
    done = tool(broker, "queues", "--interval", "0")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines()[2:]]
    assert listed == names


def test_queues_shows_an_alternate_column_only_when_a_queue_has_an_alternate(
    broker: RunningBroker,
) -> None:
    tool(broker, "add", "queue", "dlq")
    assert tool(broker, "queues", "--interval", "0").stdout.split()[:3] == ["Queue", "Type", "Dur"]
    tool(broker, "add", "queue", "orders", "--alternate-exchange", "dlq")
    header, _, *rows = tool(broker, "queues", "--interval", "0").stdout.splitlines()
    assert header.split()[:4] == ["Queue", "Type", "Alternate", "Dur"]
    assert [row.split()[:3] for row in rows] == [
        ["dlq", "standard", "-"],
        ["orders", "standard", "dlq"],
    ]


def test_queues_json_lists_every_queue_with_its_rates(broker: RunningBroker) -> None:
    for name in ("one", "two"):
        tool(broker, "add", "queue", name)
    done = tool(broker, "queues", "--json", "--interval", "0.1")
    listed = json.loads(done.stdout)
    assert [q["name"] for q in listed] == ["one", "two"]
    assert (listed[0]["type"], listed[0]["qpid-type"]) == (
        "org.apache.qpid.StandardQueue",
        "standard",
    )
    assert {"queueDepthMessages", "consumerCount", "enqueueRate", "dequeueRate"} <= set(listed[0])
    no_rates = json.loads(tool(broker, "queues", "--json", "--interval", "0").stdout)
    assert "enqueueRate" not in no_rates[0]


def test_queue_prints_every_attribute(broker: RunningBroker) -> None:
    tool(broker, "add", "queue", "shown", "--group-header", "G", "--shared-groups")
    send_all(broker, "shown", [Message(properties={"G": "g1"})])
    done = tool(broker, "queue", "shown")
    assert done.returncode == 0
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines() if " " in line.strip())
    assert lines["messageGroupKeyOverride"].strip() == "G"
    assert lines["queueDepthMessages"].strip() == "1"
    as_json = json.loads(tool(broker, "--json", "queue", "shown").stdout)
    assert as_json["messageGroups"][0]["groupId"] == "g1"


def test_an_unknown_queue_exits_1(broker: RunningBroker) -> None:
    done = tool(broker, "queue", "ghost")
    assert done.returncode == 1 and done.stderr.startswith("Failed: 404")


# ---- qpid-config's overview, filters and trees ------------------------------------------------


def test_no_command_prints_qpid_configs_overview_of_exchanges_and_queues(
    broker: RunningBroker,
) -> None:
    for args in (["add", "queue", "kept", "--durable"], ["add", "queue", "passing"]):
        assert tool(broker, *args).returncode == 0
    done = tool(broker)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Total Exchanges: 4",
        "         direct: 1",
        "         fanout: 1",
        "        headers: 1",
        "          topic: 1",
        "",
        "   Total Queues: 2",
        "        durable: 1",
        "    non-durable: 1",
    ]


def test_a_queues_filter_lists_the_names_holding_it_and_exits_1_when_none_does(
    broker: RunningBroker,
) -> None:
    for name in ("orders.eu", "orders.us", "audit"):
        assert tool(broker, "add", "queue", name).returncode == 0
    listed = tool(broker, "queues", "orders", "--interval", "0")
    names = [line.split()[0] for line in listed.stdout.splitlines()[2:]]
    assert (listed.returncode, names) == (0, ["orders.eu", "orders.us"])
    none = tool(broker, "queues", "payroll", "--interval", "0")
    assert (none.returncode, none.stdout, none.stderr) == (1, "", "")


def test_queues_r_shows_each_queue_with_the_bindings_that_reach_it(broker: RunningBroker) -> None:
    assert tool(broker, "add", "queue", "uk-news").returncode == 0
    assert tool(broker, "add", "queue", "idle").returncode == 0
    assert tool(broker, "bind", "amq.topic", "uk-news", "news.uk.#").returncode == 0
    assert tool(broker, "bind", "amq.match", "uk-news", "k", "any", "lang=en").returncode == 0
    done = tool(broker, "queues", "-r", "--ignore-default")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("Queue ")[1:]) == [
        "'idle'\n",
        "'uk-news'\n"
        "    bind [k] => amq.match {'x-match': 'any', 'lang': 'en'}\n"
        "    bind [news.uk.#] => amq.topic\n",
    ]


# ---- the broker address, usage and packaging ---------------------------------------------------


def test_the_broker_option_overrides_the_environment(broker: RunningBroker) -> None:
    done = tool(None, "-b", f"amqp://{broker.host}:{broker.port}", "add", "queue", "via-b")
    assert done.returncode == 0, done.stderr
    assert broker.call(lambda: "via-b" in broker.broker.queues)


def test_an_unreachable_broker_exits_1_with_a_message() -> None:
    done = tool(None, "--broker", "127.0.0.1:1", "--timeout", "3", "queues")
    assert done.returncode == 1
    assert done.stderr.startswith("Failed: cannot reach the broker at 127.0.0.1:1")


@pytest.mark.parametrize(
    "args",
    [
        ["bogus"],
        ["add", "queue"],
        ["add", "topic", "x"],
        ["queues", "--lvq-key", "k"],
        ["queue", "x", "--force"],
        ["add", "queue", "x", "--limit-policy", "drop"],
        ["add", "queue", "x", "--argument", "novalue"],
        ["add", "queue", "x", "--priorities", "hi"],
        ["add", "queue", "x", "--alternate-exchange"],
        ["add", "queue", "x", "--alternate-exchange", "d", "--argument", "alternate-exchange=d"],
        ["queues", "--alternate-exchange", "d"],
    ],
)
def test_usage_errors_exit_2_without_asking_the_broker(args: list[str]) -> None:
    done = tool(None, "--broker", "127.0.0.1:1", *args)
    assert done.returncode == 2
    assert "usage:" in done.stderr and "cannot reach" not in done.stderr


def test_help_lists_every_option() -> None:
    done = tool(None, "--help")
    assert done.returncode == 0
    for option in (
        "--broker",
        "--json",
        "--durable",
        "--lvq-key",
        "--group-header",
        "--shared-groups",
        "--priorities",
        "--sort-key",
        "--max-queue-size",
        "--max-queue-count",
        "--limit-policy",
        "--alternate-exchange",
        "--argument",
        "--force",
    ):
        assert option in done.stdout


def test_the_console_script_is_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["proton-broker-config"] == "proton_broker.cli.config:main"


def test_the_tool_logs_in_with_the_user_in_the_url_and_never_prints_its_password(
    tmp_path: Path,
) -> None:
    add_user(tmp_path, "alice", "pw-alice")
    env = {"PROTON_BROKER_SASL_ANONYMOUS": "never"}
    with BrokerProcess("--store", "memory", data_dir=str(tmp_path), env=env) as process:
        address = f"{process.host}:{process.port}"
        made = tool(None, "-b", f"alice:pw-alice@{address}", "add", "queue", "secured")
        assert made.returncode == 0, made.stderr
        qpid_config_form = tool(None, "-b", f"alice/pw-alice@{address}", "queue", "secured")
        assert qpid_config_form.returncode == 0, qpid_config_form.stderr
        with_scheme = tool(None, "-b", f"amqp://alice/pw-alice@{address}", "queue", "secured")
        assert with_scheme.returncode == 0, with_scheme.stderr
        bad_port = tool(None, "-b", f"alice/pw/x@{process.host}:port", "queues")
        assert bad_port.returncode == 2 and bad_port.stderr.startswith("Failed: invalid broker URL")
        assert "pw/x" not in bad_port.stderr and "Traceback" not in bad_port.stderr
        refused = tool(None, "-b", f"alice:not-it@{address}", "queues", "--interval", "0")
        assert refused.returncode == 1
        assert "amqp:unauthorized-access" in refused.stderr
        assert "not-it" not in refused.stderr and "alice:***@" in refused.stderr


def test_the_tool_reaches_a_broker_that_verifies_clients_with_qpid_configs_ssl_options(
    tmp_path: Path,
) -> None:
    """qpid-config's --ssl-certificate and --ssl-key, and a CA file to trust."""
    import trustme

    from tests.amqp.test_tls import tls_config

    ca = trustme.CA()
    paths = {
        name: str(tmp_path / f"{name}.pem") for name in ("ca", "cert", "key", "mine", "my_key")
    }
    server, client = ca.issue_cert("localhost", "127.0.0.1"), ca.issue_cert("admin")
    ca.cert_pem.write_to_path(paths["ca"])
    server.cert_chain_pems[0].write_to_path(paths["cert"])
    server.private_key_pem.write_to_path(paths["key"])
    client.cert_chain_pems[0].write_to_path(paths["mine"])
    client.private_key_pem.write_to_path(paths["my_key"])
    running = RunningBroker(tls_config(paths, verify_clients=True))
    try:
        url = f"amqps://localhost:{running.server.tls_address[1]}"
        trust = ("--ssl-trustfile", paths["ca"], "--timeout", "5")
        without = tool(None, "-b", url, *trust, "add", "queue", "secure")
        assert without.returncode == 1
        mine = ("--ssl-certificate", paths["mine"], "--ssl-key", paths["my_key"])
        made = tool(None, "-b", url, *trust, *mine, "add", "queue", "secure")
        assert made.returncode == 0, made.stderr
        assert running.call(lambda: "secure" in running.broker.queues)
        missing = tool(None, "-b", url, "--ssl-certificate", str(tmp_path / "none.pem"), "queues")
        assert missing.returncode == 2 and "TLS files" in missing.stderr
    finally:
        running.stop()


def test_a_timeout_of_0_waits_as_long_as_it_takes_as_qpid_configs_does(
    broker: RunningBroker,
) -> None:
    done = tool(broker, "-t", "0", "add", "queue", "patient")
    assert done.returncode == 0, done.stderr
    assert broker.call(lambda: "patient" in broker.broker.queues)


def test_a_reader_that_stops_reading_is_no_failure_to_reach_the_broker(
    broker: RunningBroker,
) -> None:
    """``proton-broker-config queues | head -1``: the pipe breaks, quietly."""
    broker.call(lambda: [broker.broker.declare(f"q-{i:05}") for i in range(2000)])
    env = {**os.environ, "PROTON_CONFIG_BROKER": f"{broker.host}:{broker.port}"}
    command = [sys.executable, "-m", "proton_broker.cli", "queues", "--interval", "0"]
    with subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # as head does once it has its line
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, stderr
    assert "cannot reach" not in stderr and "Traceback" not in stderr
