"""AMQPS: the broker over TLS on its own port (config ``tls``), with certificates made for
each run by trustme (a throwaway CA). Clients are Proton Python's own TLS clients."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection

from proton_broker.config import Config
from proton_broker.testing import server_certificates
from tests.conftest import RunningBroker

HOST = "localhost"  # the name the broker's certificate is for


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PEM files: the CA, the broker's certificate and key, a client's certificate and
    key, and a CA nobody trusts."""
    made = server_certificates(tmp_path_factory.mktemp("tls"), HOST, "127.0.0.1")
    return {name: str(path) for name, path in made.items()}


def tls_config(files: dict[str, str], verify_clients: bool = False) -> Config:
    config = Config()
    config.broker.store = "memory"
    config.tls.enabled = True
    config.tls.port = 0
    config.tls.cert_file, config.tls.key_file = files["cert"], files["key"]
    config.tls.ca_file = files["ca"]
    config.tls.verify_clients = verify_clients
    return config


@pytest.fixture
def tls_broker(files: dict[str, str]) -> Iterator[RunningBroker]:
    running = RunningBroker(tls_config(files))
    yield running
    running.stop()


def client_domain(ca_file: str, cert: tuple[str, str] | None = None) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(ca_file)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, ca_file)
    if cert is not None:
        domain.set_credentials(cert[0], cert[1], None)
    return domain


def amqps(running: RunningBroker, domain: SSLDomain) -> BlockingConnection:
    port = running.server.tls_address[1]
    return BlockingConnection(f"amqps://{HOST}:{port}", ssl_domain=domain, timeout=5)


def round_trip(connection: BlockingConnection, address: str) -> object:
    """Send a message to ``address`` and take it back, then close the connection."""
    try:
        connection.create_sender(address).send(Message(body="over tls"))
        receiver = connection.create_receiver(address)
        body = receiver.receive(timeout=5).body
        receiver.accept()
        return body
    finally:
        connection.close()


def test_a_client_that_trusts_the_broker_ca_sends_and_receives_over_tls(
    tls_broker: RunningBroker, files: dict[str, str]
) -> None:
    assert round_trip(amqps(tls_broker, client_domain(files["ca"])), "tls-q") == "over tls"


def test_a_client_that_does_not_trust_the_broker_ca_cannot_connect_and_others_carry_on(
    tls_broker: RunningBroker, files: dict[str, str]
) -> None:
    with pytest.raises(ConnectionException):
        amqps(tls_broker, client_domain(files["other_ca"])).create_sender("tls-q")
    assert round_trip(amqps(tls_broker, client_domain(files["ca"])), "tls-q2") == "over tls"


def test_the_plain_port_still_serves_and_speaks_no_tls(tls_broker: RunningBroker) -> None:
    assert round_trip(BlockingConnection(tls_broker.url, timeout=5), "plain-q") == "over tls"
    port = tls_broker.server.tls_address[1]
    with pytest.raises(ConnectionException):  # plain AMQP on the TLS port: no handshake
        BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=2).create_sender("x")
    assert tls_broker.alive()


def test_a_sasl_header_in_the_clear_on_the_tls_port_is_answered_with_nothing_and_closed(
    tls_broker: RunningBroker, files: dict[str, str]
) -> None:
    """No SASL header, no mechanisms come back (no password is ever taken there in the
    clear): the connection ends unread, as a failed handshake."""
    port = tls_broker.server.tls_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"AMQP\x03\x01\x00\x00")
        sock.settimeout(5)
        assert sock.recv(4096) == b""
    domain = client_domain(files["ca"])
    assert round_trip(amqps(tls_broker, domain), "tls-after-plain") == "over tls"


def test_with_verify_clients_only_a_client_with_a_certificate_from_the_ca_gets_in(
    files: dict[str, str],
) -> None:
    running = RunningBroker(tls_config(files, verify_clients=True))
    try:
        with pytest.raises(ConnectionException):
            amqps(running, client_domain(files["ca"])).create_sender("tls-q")
        mutual = client_domain(files["ca"], (files["client_cert"], files["client_key"]))
        assert round_trip(amqps(running, mutual), "tls-mutual") == "over tls"
    finally:
        running.stop()


@pytest.mark.parametrize(
    "broken, status, words",
    [
        (  # files that are not there: the configuration step, before the store is opened
            {"cert_file": "/nonexistent/cert.pem"},
            2,
            "configuration key 'tls.cert_file': no such file: /nonexistent/cert.pem",
        ),
        ({"key_file": ""}, 2, "configuration key 'tls.key_file' is required"),
        ({"cert_file": "CA"}, 1, "(AMQPS): tls: cannot use"),  # a CA certificate, no key
    ],
)
def test_a_broker_with_unusable_tls_files_says_which_and_exits(
    files: dict[str, str], tmp_path: Path, broken: dict[str, str], status: int, words: str
) -> None:
    values = {"cert_file": files["cert"], "key_file": files["key"], **broken}
    if values["cert_file"] == "CA":
        values["cert_file"] = files["ca"]
    config = tmp_path / "broker.yaml"
    config.write_text(
        "tls:\n  enabled: true\n  port: 0\n" + "".join(f"  {k}: '{v}'\n" for k, v in values.items())
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "proton_broker",
            "--config",
            str(config),
            "--port",
            "0",
            "--store",
            "memory",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == status
    assert words in done.stderr and "Traceback" not in done.stderr


def tls_handshake(port: int, ca_file: str, newest: ssl.TLSVersion) -> str:
    """The TLS version a client that offers at most ``newest`` agrees with the broker."""
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = newest
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer the old versions
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        with context.wrap_socket(sock, server_hostname=HOST) as secured:
            return str(secured.version())


@pytest.mark.parametrize(
    "minimum, refused, accepted",
    [
        (None, ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2),
        ("TLSv1.3", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3),
    ],
    ids=["default-1.2", "1.3"],
)
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")  # the old versions
def test_tls_older_than_the_minimum_version_is_refused(
    files: dict[str, str], minimum: str | None, refused: ssl.TLSVersion, accepted: ssl.TLSVersion
) -> None:
    config = tls_config(files)
    if minimum is not None:
        config.tls.min_version = minimum
    running = RunningBroker(config)
    try:
        port = running.server.tls_address[1]
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            tls_handshake(port, files["ca"], refused)
        assert tls_handshake(port, files["ca"], accepted) == accepted.name.replace("_", ".")
        assert running.alive()
    finally:
        running.stop()


def test_management_counts_a_tls_connections_bytes_as_they_crossed_the_network(
    tls_broker: RunningBroker, files: dict[str, str]
) -> None:
    """The same open and message over TLS and over the plain port: the TLS connection's
    socket carried the handshake and the broker's certificate too."""
    from tests.amqp.test_management import Node
    from tests.amqp.test_management_connections import listed, statistics_of

    secured = amqps(tls_broker, client_domain(files["ca"]))
    plain = BlockingConnection(tls_broker.url, timeout=5)
    try:
        for connection in (secured, plain):
            connection.create_sender("counted").send(Message(body="x" * 1000))
        node = Node(tls_broker.client())
        rows = listed(node, "clientId", "transport", "port", "localAddress")
        (tls_row,) = [row for row in rows if row["clientId"] == secured.container.container_id]
        assert (tls_row["transport"], tls_row["port"]) == ("SSL", "AMQPS")
        assert tls_row["localAddress"] == f"127.0.0.1:{tls_broker.server.tls_address[1]}"
        over_tls = statistics_of(node, secured.container.container_id)
        in_clear = statistics_of(node, plain.container.container_id)
        assert over_tls["bytesOut"] > in_clear["bytesOut"] + 500  # the certificate, at least
        assert over_tls["bytesIn"] > in_clear["bytesIn"]
        assert in_clear["bytesIn"] > 1000  # the message, in either case
    finally:
        secured.close()
        plain.close()
