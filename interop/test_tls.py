"""AMQPS with a client nobody here wrote: rhea on Node.js's own TLS, checking the broker's
certificate (made for the run by trustme) against the CA and the host name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from interop.clients import PYTHON, RHEA, ClientError
from proton_broker.testing import BrokerProcess, server_certificates


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker serving AMQPS for ``localhost``, and the CA file that vouches for it."""
    files = server_certificates(tmp_path)
    config = tmp_path / "broker.yaml"
    config.write_text(f"tls:\n  cert_file: '{files['cert']}'\n  key_file: '{files['key']}'\n")
    process = BrokerProcess("--config", str(config), "--tls-port", "0").start()
    yield process, str(files["ca"])
    assert process.alive(), "".join(process.output)
    process.stop()


def test_rhea_sends_and_receives_over_tls_and_the_plain_port_still_works(
    tls_broker: tuple[BrokerProcess, str], queue: str
) -> None:
    broker, ca = tls_broker
    assert broker.tls_port
    amqps = f"amqps://localhost:{broker.tls_port}"
    RHEA.send(amqps, queue, [{"body": "secret"}], "--tls-ca", ca)
    PYTHON.send(broker.url, queue, [{"body": "plain"}])
    got = RHEA.receive(amqps, queue, 2, options=["--tls-ca", ca])
    assert [m["body"] for m in got] == ["secret", "plain"]


def test_rhea_refuses_a_broker_its_ca_does_not_vouch_for(
    tls_broker: tuple[BrokerProcess, str], queue: str, tmp_path: Path
) -> None:
    broker, _ = tls_broker
    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    with pytest.raises(ClientError, match="certificate"):
        RHEA.send(
            f"amqps://localhost:{broker.tls_port}",
            queue,
            [{"body": "x"}],
            "--tls-ca",
            str(stranger),
        )
