"""Clients nobody here wrote, logged in as users the ACL file treats differently: rhea and
Proton C++ send and receive where the file allows, and where it does not the broker refuses
the link with ``amqp:unauthorized-access``, which each client reports in its own words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.clients import CPP, RHEA, ClientError
from proton_broker.cli.client import ManagementClient
from proton_broker.testing import BrokerProcess, add_user

PASSWORD = "acl interop password"
CPP_PLAIN = ("--sasl-mechs", "PLAIN", "--sasl-allow-insecure")
RULES = """\
acl allow alice all
acl allow bob access queue name=orders
acl allow bob publish exchange name=amq.default routingkey=orders
acl allow carol access queue name=orders
acl allow carol consume queue name=orders
acl deny all all
"""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """bob may only send to ``orders``, carol only receive from it."""
    for user in ("alice", "bob", "carol"):
        add_user(tmp_path, user, PASSWORD)
    (tmp_path / "broker.acl").write_text(RULES)
    env = {
        "PROTON_BROKER_SASL_ANONYMOUS": "never",
        "PROTON_BROKER_ACL_FILE": str(tmp_path / "broker.acl"),
    }
    process = BrokerProcess("--store", "memory", data_dir=str(tmp_path), env=env).start()
    yield process
    process.stop()
    assert "Traceback" not in "".join(process.output)


@pytest.fixture
def orders(broker: BrokerProcess) -> str:
    admin = f"amqp://alice:{PASSWORD}@127.0.0.1:{broker.port}"
    with ManagementClient(admin) as management:  # alice makes the queue
        assert management.request("CREATE", "org.apache.qpid.Queue", "orders", {}).ok
    return "orders"


def test_rhea_sends_and_receives_where_the_acl_allows_and_is_refused_elsewhere(
    broker: BrokerProcess, orders: str
) -> None:
    RHEA.send(broker.url, orders, [{"body": "one"}], user="bob", password=PASSWORD)
    got = RHEA.receive(broker.url, orders, 1, user="carol", password=PASSWORD)
    assert [m["body"] for m in got] == ["one"]
    with pytest.raises(ClientError, match="unauthorized-access"):
        RHEA.receive(broker.url, orders, 1, user="bob", password=PASSWORD)
    with pytest.raises(ClientError, match="unauthorized-access"):
        RHEA.send(broker.url, orders, [{"body": "no"}], user="carol", password=PASSWORD)


def test_proton_cpp_sends_and_receives_where_the_acl_allows_and_is_refused_elsewhere(
    broker: BrokerProcess, orders: str
) -> None:
    CPP.send(broker.url, orders, [{"body": "two"}], *CPP_PLAIN, user="bob", password=PASSWORD)
    got = CPP.receive(broker.url, orders, 1, options=CPP_PLAIN, user="carol", password=PASSWORD)
    assert [m["body"] for m in got] == ["two"]
    with pytest.raises(ClientError, match="unauthorized-access"):
        CPP.receive(broker.url, orders, 1, options=CPP_PLAIN, user="bob", password=PASSWORD)
