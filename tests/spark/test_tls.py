"""The connector over ``amqps``: TLS to the broker's AMQPS port, the broker's certificate
verified against the trusted CAs (OpenSSL's default store, here pointed at a throwaway CA
made by trustme, or the ``caFile`` option's), a broker it cannot verify refused, and a
client certificate (``certFile``, ``keyFile``) for a broker that asks for one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from proton_broker.config import Config
from proton_broker.spark import encoding
from proton_broker.spark.client import (
    BrokerRequestError,
    TlsFiles,
    browse_range,
    queue_bounds,
    send_all,
)
from proton_broker.spark.options import OptionError, sink_options, source_options
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


@pytest.fixture
def mutual_tls_broker(tmp_path: Path) -> Iterator[tuple[RunningBroker, dict[str, str]]]:
    """A broker that asks every AMQPS client for a certificate its CA signed; the PEM files
    of the CA, of a client the CA signed, and of a CA nobody trusts."""
    files = {name: str(path) for name, path in server_certificates(tmp_path).items()}
    config = Config()
    config.broker.store = "memory"
    config.tls.enabled, config.tls.port = True, 0
    config.tls.cert_file, config.tls.key_file = files["cert"], files["key"]
    config.tls.ca_file, config.tls.verify_clients = files["ca"], True
    running = RunningBroker(config)
    yield running, files
    running.stop()


def test_the_ca_file_and_a_client_certificate_reach_a_broker_that_asks_for_one(
    mutual_tls_broker: tuple[RunningBroker, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    running, files = mutual_tls_broker
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the CA comes from the option alone
    url = f"amqps://localhost:{running.server.tls_address[1]}"  # type: ignore[index]
    tls = TlsFiles(
        ca_file=files["ca"], cert_file=files["client_cert"], key_file=files["client_key"]
    )
    rows = (encoding.message(None, {"n": n}, content=f"m{n}") for n in range(3))
    assert send_all(url, "mtls-q", rows, timeout=10, tls=tls) == 3
    bounds = queue_bounds(url, ["mtls-q"], timeout=10, tls=tls)["mtls-q"]
    browsed = browse_range(url, "mtls-q", bounds.earliest, bounds.next, timeout=10, tls=tls)
    assert len(list(browsed)) == 3


@pytest.mark.parametrize("which", ["no client certificate", "a CA that did not sign the broker"])
def test_without_a_certificate_or_with_the_wrong_ca_nothing_is_sent(
    mutual_tls_broker: tuple[RunningBroker, dict[str, str]], which: str
) -> None:
    running, files = mutual_tls_broker
    url = f"amqps://localhost:{running.server.tls_address[1]}"  # type: ignore[index]
    if which == "no client certificate":
        tls = TlsFiles(ca_file=files["ca"])
    else:
        tls = TlsFiles(files["other_ca"], files["client_cert"], files["client_key"])
    with pytest.raises(BrokerRequestError):
        send_all(
            url, "mtls-refused", iter([encoding.message(None, {}, content="x")]), timeout=5, tls=tls
        )
    assert "mtls-refused" not in running.broker.queues


def test_the_tls_options_name_their_files_and_a_wrong_path_fails_naming_the_option(
    tmp_path: Path,
) -> None:
    ca, cert, key = (tmp_path / name for name in ("ca.pem", "cert.pem", "key.pem"))
    for path in (ca, cert, key):
        path.write_text("PEM")
    options = {"queue": "q", "CAFILE": str(ca), "certFile": str(cert), "keyFile": str(key)}
    assert sink_options(options).tls == TlsFiles(str(ca), str(cert), str(key))
    assert source_options({"queues": "q", "keyPassword": "pw", "caFile": str(ca)}).tls == (
        TlsFiles(ca_file=str(ca), key_password="pw")
    )
    assert source_options({"queues": "q"}).tls is None
    with pytest.raises(OptionError, match=r"option caFile: no file .* at /nowhere/ca\.pem"):
        source_options({"queues": "q", "caFile": "/nowhere/ca.pem"})
    with pytest.raises(OptionError, match="option keyFile: no file"):
        sink_options({"queue": "q", "certFile": str(cert), "keyFile": str(tmp_path)})
    with pytest.raises(OptionError, match="certFile and keyFile go together"):
        sink_options({"queue": "q", "certFile": str(cert)})


def test_a_spark_job_reads_and_writes_over_mutual_tls_with_the_options(
    spark: Any, mutual_tls_broker: tuple[RunningBroker, dict[str, str]]
) -> None:
    running, files = mutual_tls_broker
    url = f"amqps://localhost:{running.server.tls_address[1]}"  # type: ignore[index]
    tls = {"caFile": files["ca"], "certFile": files["client_cert"], "keyFile": files["client_key"]}
    frame = spark.createDataFrame([(f"row {n}",) for n in range(4)], "body string")
    writer = frame.write.format("amqp").mode("append").option("url", url)
    writer.option("queue", "mtls-spark").options(**tls).save()
    read = spark.read.format("amqp").option("url", url).option("queues", "mtls-spark")
    bodies = sorted(r["body_text"] for r in read.options(**tls).load().collect())
    assert bodies == [f"row {n}" for n in range(4)]
