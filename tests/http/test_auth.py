"""HTTP authentication: the gateway and the metrics endpoint take the broker's users (HTTP
Basic, checked by Cyrus SASL) under the same policies as AMQP. Brokers run as processes,
because Cyrus reads its configuration once per process."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proton import ConnectionException
from proton.utils import BlockingConnection

from proton_broker.config import Config
from proton_broker.testing import BrokerProcess, add_user, server_certificates
from tests.http.conftest import Http, http_config
from tests.http.console_client import ConsoleClient

PASSWORD = "s3cret"


def call(
    url: str,
    body: object = None,
    user: str | None = None,
    password: str = PASSWORD,
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], str]:
    """One request: its status, headers and body (POST when ``body`` is given)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    add_user(tmp_path, "alice", PASSWORD)
    return tmp_path


def start(data_dir: Path, *args: str, **env: str) -> BrokerProcess:
    variables = {f"PROTON_BROKER_{key.upper()}": value for key, value in env.items()}
    argv = ("--store", "memory", "--http-port", "0", "--metrics-port", "0", *args)
    return BrokerProcess(*argv, data_dir=str(data_dir), env=variables).start()


@pytest.fixture
def users_only(data_dir: Path) -> Iterator[BrokerProcess]:
    """A broker that lets nobody in without a user."""
    process = start(data_dir, sasl_anonymous="never")
    yield process
    process.stop()


SEND = {"id": "k", "payload": "v"}


def test_on_this_machine_the_gateway_is_open_by_default(data_dir: Path) -> None:
    process = start(data_dir)
    try:
        assert process.http_base
        status, _, _ = call(f"{process.http_base}/queue/send/prices", SEND)
        assert status == 200
    finally:
        process.stop()


def test_without_credentials_a_users_only_gateway_answers_401_with_a_basic_challenge(
    users_only: BrokerProcess,
) -> None:
    status, headers, body = call(f"{users_only.http_base}/queue/send/prices", SEND)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Basic realm="proton-broker"')
    assert json.loads(body)["error"].startswith("authentication required")


def test_the_right_password_is_served_and_a_wrong_one_is_refused_and_logged(
    users_only: BrokerProcess,
) -> None:
    url = f"{users_only.http_base}/queue/send/prices"
    assert call(url, SEND, user="alice")[0] == 200
    status, headers, _ = call(url, SEND, user="alice", password="wrong")
    assert status == 401 and "WWW-Authenticate" in headers
    assert call(url, SEND, user="mallory")[0] == 401
    failed = users_only.logged("HTP-1001 : Authentication failed", count=2)
    assert len(failed) == 2 and "127.0.0.1 : user 'alice'" in failed[0]
    assert not any("wrong" in line for line in users_only.output)  # never the password


def test_malformed_credentials_are_a_bad_request(users_only: BrokerProcess) -> None:
    not_base64 = ("Basic !!!", "Basic \u00e9\u00e9")  # the second: not even ASCII
    for header in (*not_base64, "Basic " + base64.b64encode(b"no-colon").decode()):
        request = urllib.request.Request(f"{users_only.http_base}/queue/listen/longpoll/q")
        request.add_header("Authorization", header)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400


def test_the_metrics_listener_takes_the_same_users(users_only: BrokerProcess) -> None:
    url = f"http://127.0.0.1:{users_only.metrics_port}/metrics"
    status, headers, _ = call(url)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    status, _, text = call(url, user="alice")
    assert status == 200 and "proton_broker_connections" in text
    assert call(url, user="alice", password="wrong")[0] == 401
    gateway = call(f"{users_only.http_base}/metrics")
    assert gateway[0] == 401


def test_metrics_may_be_left_open_by_configuration_only(data_dir: Path) -> None:
    process = start(data_dir, sasl_anonymous="never", metrics_open="true")
    try:
        assert call(f"http://127.0.0.1:{process.metrics_port}/metrics")[0] == 200
        assert call(f"{process.http_base}/metrics")[0] == 200
        assert call(f"{process.http_base}/queue/send/q", SEND)[0] == 401  # the rest is not
    finally:
        process.stop()


def test_a_password_in_the_clear_is_refused_without_https_and_taken_over_it(
    data_dir: Path, tmp_path: Path
) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem")
    )
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    plain = start(data_dir, sasl_anonymous="never", sasl_plain_without_tls="never")
    try:
        status, _, body = call(f"{plain.http_base}/queue/send/q", SEND, user="alice")
        assert status == 403 and "use HTTPS" in body
    finally:
        plain.stop()
    secured = start(
        data_dir,
        sasl_anonymous="never",
        sasl_plain_without_tls="never",
        http_tls="true",
        tls_cert_file=str(tmp_path / "server.pem"),
        tls_key_file=str(tmp_path / "server.pem"),
    )
    try:
        assert secured.http_base and secured.http_base.startswith("https://")
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        port = secured.http_base.rsplit(":", 1)[1]
        url = f"https://localhost:{port}/queue/send/q"
        assert call(url, SEND, user="alice", context=context)[0] == 200
        assert call(url, SEND, context=context)[0] == 401
    finally:
        secured.stop()


def test_an_address_locked_out_by_wrong_passwords_is_answered_429_on_http_and_amqp_alike(
    data_dir: Path,
) -> None:
    """The gateway's wrong passwords and the AMQP listener's count together: the client
    address is locked out of both, its passwords not checked, and told when to try again."""
    process = start(data_dir, sasl_anonymous="never", sasl_max_failed_logins="2")
    try:
        url = f"{process.http_base}/queue/send/prices"
        assert [call(url, SEND, user="alice", password="wrong")[0] for _ in range(2)] == [401, 401]
        status, headers, body = call(url, SEND, user="alice")  # the right password
        assert status == 429 and 55 <= int(headers["Retry-After"]) <= 60
        assert json.loads(body)["error"].startswith("too many failed logins from 127.0.0.1")
        with pytest.raises(ConnectionException):
            BlockingConnection(f"amqp://alice:{PASSWORD}@127.0.0.1:{process.port}", timeout=5)
    finally:
        process.stop()


def test_the_consoles_login_counts_wrong_passwords_and_is_locked_out_too(data_dir: Path) -> None:
    process = start(data_dir, sasl_anonymous="never", sasl_max_failed_logins="2")
    try:
        console = ConsoleClient(process.http_base)
        assert [console.login("alice", "wrong")[0] for _ in range(2)] == [401, 401]
        status, body = console.login("alice", PASSWORD)
        assert status == 429 and body["error"].startswith("too many failed logins")
        assert call(f"{process.http_base}/queue/send/prices", SEND, user="alice")[0] == 429
    finally:
        process.stop()


def test_with_verify_clients_https_takes_only_clients_with_a_certificate_from_the_ca(
    start_gateway: Callable[[Config], Http], tmp_path: Path
) -> None:
    """tls.verify_clients holds for HTTPS as for AMQPS: no certificate, no handshake, so
    no Basic password or anonymous request gets past a deployment that requires mutual TLS."""
    files = server_certificates(tmp_path)
    config = http_config()
    config.http.tls = True
    config.tls.cert_file, config.tls.key_file = str(files["cert"]), str(files["key"])
    config.tls.ca_file, config.tls.verify_clients = str(files["ca"]), True
    gateway = start_gateway(config)
    url = f"https://localhost:{gateway.running.app.http.address[1]}/queue/send/q"
    without = ssl.create_default_context(cafile=str(files["ca"]))
    (tmp_path / "other").mkdir()
    other_ca = server_certificates(tmp_path / "other")  # a certificate another CA signed
    from_another_ca = ssl.create_default_context(cafile=str(files["ca"]))
    from_another_ca.load_cert_chain(str(other_ca["cert"]), str(other_ca["key"]))
    for refused in (without, from_another_ca):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            call(url, SEND, context=refused)
    with_certificate = ssl.create_default_context(cafile=str(files["ca"]))
    # the CA's certificate for "localhost" may serve as a client's too (trustme allows both)
    with_certificate.load_cert_chain(str(files["cert"]), str(files["key"]))
    assert call(url, SEND, context=with_certificate)[0] == 200
