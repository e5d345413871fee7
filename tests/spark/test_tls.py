"""The connector's client over ``amqps``: TLS to the broker's AMQPS port, the broker's
certificate verified against the trusted CAs (OpenSSL's default store, here pointed at a
throwaway CA made by trustme), and a broker it cannot verify refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from proton_broker.config import Config
from proton_broker.spark import encoding
from proton_broker.spark.client import BrokerRequestError, browse_range, queue_bounds, send_all
from proton_broker.testing import server_certificates
from tests.conftest import RunningBroker


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[RunningBroker, Path]]:
    """A broker with AMQPS on, its certificate for localhost; and the CA's file."""
    files = server_certificates(tmp_path)
    config = Config()
    config.broker.store = "memory"
    config.tls.enabled, config.tls.port = True, 0
    config.tls.cert_file, config.tls.key_file = str(files["cert"]), str(files["key"])
    running = RunningBroker(config)
    yield running, files["ca"]
    running.stop()


def test_an_amqps_url_sends_and_browses_over_tls_to_a_verified_broker(
    tls_broker: tuple[RunningBroker, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    running, ca_file = tls_broker
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # trust the throwaway CA
    port = running.server.tls_address[1]  # type: ignore[index]
    url = f"amqps://localhost:{port}"
    sent = send_all(
        url, "tls-q", (encoding.message(None, {"n": n}, content=f"m{n}") for n in range(3))
    )
    assert sent == 3
    bounds = queue_bounds(url, ["tls-q"], timeout=10)["tls-q"]
    numbers = [
        seq for seq, _ in browse_range(url, "tls-q", bounds.earliest, bounds.next, timeout=10)
    ]
    assert numbers == list(range(bounds.earliest, bounds.next)) and len(numbers) == 3


def test_an_amqps_url_to_a_broker_it_cannot_verify_fails_and_sends_nothing(
    tls_broker: tuple[RunningBroker, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    running, _ = tls_broker
    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    monkeypatch.setenv("SSL_CERT_FILE", str(stranger))  # a CA that did not sign the broker
    port = running.server.tls_address[1]  # type: ignore[index]
    with pytest.raises(BrokerRequestError):
        send_all(
            f"amqps://localhost:{port}",
            "tls-refused",
            iter([encoding.message(None, {}, content="x")]),
            timeout=5,
        )
    assert "tls-refused" not in running.broker.queues
