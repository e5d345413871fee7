"""Authentication: users made with ``proton-broker-config user``, checked by Cyrus SASL
through Proton, with Proton's own clients over real sockets to broker processes."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import SASL, Connection, ConnectionException, Message, SSLDomain, Transport
from proton.utils import BlockingConnection

from proton_broker.testing import BrokerProcess, add_user, user_command

PASSWORD = "correct horse"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory with user alice."""
    add_user(tmp_path, "alice", PASSWORD)
    return tmp_path


def broker(data_dir: Path, **sasl: str) -> BrokerProcess:
    env = {f"PROTON_BROKER_SASL_{key.upper()}": value for key, value in sasl.items()}
    return BrokerProcess("--store", "memory", data_dir=str(data_dir), env=env).start()


@pytest.fixture
def running(data_dir: Path) -> Iterator[BrokerProcess]:
    process = broker(data_dir)
    yield process
    process.stop()


def round_trip(url: str, **options: object) -> str:
    """Send and receive one message as the given client; returns its body."""
    conn = BlockingConnection(url, timeout=10, **options)  # type: ignore[arg-type]
    try:
        conn.create_sender("auth-q").send(Message(body="hello"))
        message = conn.create_receiver("auth-q").receive(timeout=10)
        return str(message.body)
    finally:
        conn.close()


def sasl_outcome(
    port: int, mechanism: str, name: str | None, password: str | None, sasl: bool = True
) -> tuple[int | None, bool]:
    """Run a client's handshake with Proton's engine: the SASL outcome it got (None: none)
    and whether the broker's AMQP open arrived."""
    client = Connection()
    if name is not None:
        client.user, client.password = name, password
    transport = Transport()
    if sasl:
        transport.sasl().allowed_mechs(mechanism)
        transport.sasl().allow_insecure_mechs = True
    transport.bind(client)
    client.open()
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline and not transport.closed:
            if (pending := transport.pending()) > 0:
                sock.sendall(transport.peek(pending))
                transport.pop(pending)
            sock.settimeout(0.1)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                transport.close_tail()
                break
            transport.push(data)
            if client.state & Connection.REMOTE_ACTIVE:
                break
    finally:
        sock.close()
    outcome = transport.sasl().outcome if sasl else None
    return outcome, bool(client.state & Connection.REMOTE_ACTIVE)


def test_this_proton_is_built_with_cyrus_sasl() -> None:
    # scripts/setup-sasl.sh builds it; without it no password mechanism exists
    assert SASL.extended()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1", "PLAIN"])
def test_a_user_made_with_the_cli_connects_with_each_password_mechanism(
    running: BrokerProcess, mechanism: str
) -> None:
    body = round_trip(
        running.url,
        user="alice",
        password=PASSWORD,
        allowed_mechs=mechanism,
        allow_insecure_mechs=True,
    )
    assert body == "hello"
    assert running.logged("Client ID", "User : alice")


@pytest.mark.parametrize(
    "name, password", [("alice", "wrong"), ("mallory", PASSWORD)], ids=["wrong", "unknown"]
)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_wrong_password_or_an_unknown_user_gets_the_sasl_auth_outcome_and_a_log_line(
    running: BrokerProcess, mechanism: str, name: str, password: str
) -> None:
    outcome, opened = sasl_outcome(running.port, mechanism, name, password)
    assert (outcome, opened) == (SASL.AUTH, False)
    failed = running.logged("CON-1007 : Authentication failed")
    assert failed and "amqp://127.0.0.1:" in failed[-1] and f"mechanism {mechanism}" in failed[-1]


def test_clients_on_this_machine_may_stay_anonymous_by_default(running: BrokerProcess) -> None:
    assert sasl_outcome(running.port, "ANONYMOUS", None, None) == (SASL.OK, True)
    assert sasl_outcome(running.port, "", None, None, sasl=False) == (None, True)
    assert round_trip(running.url) == "hello"


def test_with_anonymous_never_only_users_get_in(data_dir: Path) -> None:
    process = broker(data_dir, anonymous="never")
    try:
        assert sasl_outcome(process.port, "ANONYMOUS", None, None)[1] is False
        assert sasl_outcome(process.port, "", None, None, sasl=False)[1] is False
        assert sasl_outcome(process.port, "SCRAM-SHA-256", "alice", PASSWORD) == (SASL.OK, True)
    finally:
        process.stop()


def test_a_password_in_the_clear_is_refused_without_tls_when_not_allowed(data_dir: Path) -> None:
    process = broker(data_dir, plain_without_tls="never")
    try:
        assert sasl_outcome(process.port, "PLAIN", "alice", PASSWORD)[1] is False
        assert sasl_outcome(process.port, "SCRAM-SHA-256", "alice", PASSWORD) == (SASL.OK, True)
    finally:
        process.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_over_tls_a_plain_password_is_accepted_though_not_without_it(
    data_dir: Path, tmp_path: Path, mechanism: str
) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    env = {
        "PROTON_BROKER_SASL_PLAIN_WITHOUT_TLS": "never",
        "PROTON_BROKER_SASL_ANONYMOUS": "never",
        "PROTON_BROKER_TLS_CERT_FILE": str(tmp_path / "server.pem"),
        "PROTON_BROKER_TLS_KEY_FILE": str(tmp_path / "server.pem"),
    }
    process = BrokerProcess(
        "--store", "memory", "--tls-port", "0", data_dir=str(data_dir), env=env
    ).start()
    try:
        assert process.tls_port
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(str(tmp_path / "ca.pem"))
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        body = round_trip(
            f"amqps://localhost:{process.tls_port}",
            ssl_domain=domain,
            user="alice",
            password=PASSWORD,
            allowed_mechs=mechanism,
        )
        assert body == "hello"
        assert sasl_outcome(process.port, "PLAIN", "alice", PASSWORD)[1] is False
    finally:
        process.stop()


def test_the_cli_changes_and_deletes_users_and_the_broker_sees_it_at_once(
    running: BrokerProcess, data_dir: Path
) -> None:
    assert user_command(data_dir, "passwd", "alice", password="new one").returncode == 0
    assert sasl_outcome(running.port, "SCRAM-SHA-256", "alice", PASSWORD)[1] is False
    assert sasl_outcome(running.port, "SCRAM-SHA-256", "alice", "new one") == (SASL.OK, True)
    assert user_command(data_dir, "delete", "alice").returncode == 0
    assert sasl_outcome(running.port, "SCRAM-SHA-256", "alice", "new one")[1] is False


@pytest.fixture
def issuer() -> Any:
    """A throwaway CA (trustme)."""
    return pytest.importorskip("trustme").CA()


@pytest.fixture
def pki(tmp_path: Path, issuer: Any) -> dict[str, str]:
    """PEM files from the throwaway CA: the broker's certificate, and alice's (CN=alice)."""
    ca = issuer
    files = {name: str(tmp_path / f"{name}.pem") for name in ("ca", "server", "alice")}
    ca.cert_pem.write_to_path(files["ca"])
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(files["server"])
    alice = ca.issue_cert("alice@example.com", common_name="alice")
    alice.private_key_and_cert_chain_pem.write_to_path(files["alice"])
    return files


def tls_broker(
    data_dir: Path, pki: dict[str, str], acl_file: str = "", **sasl: str
) -> BrokerProcess:
    env = {f"PROTON_BROKER_SASL_{key.upper()}": value for key, value in sasl.items()}
    env |= {"PROTON_BROKER_ACL_FILE": acl_file} if acl_file else {}
    env |= {
        "PROTON_BROKER_TLS_CERT_FILE": pki["server"],
        "PROTON_BROKER_TLS_KEY_FILE": pki["server"],
        "PROTON_BROKER_TLS_CA_FILE": pki["ca"],
        "PROTON_BROKER_TLS_VERIFY_CLIENTS": "true",
    }
    args = ("--store", "memory", "--tls-port", "0")
    return BrokerProcess(*args, data_dir=str(data_dir), env=env).start()


@pytest.mark.parametrize("external_user, expected", [("cn", "alice"), ("subject", "CN=alice,")])
def test_a_verified_client_certificate_is_the_user_with_external(
    data_dir: Path, pki: dict[str, str], external_user: str, expected: str
) -> None:
    process = tls_broker(
        data_dir,
        pki,
        mechanisms="SCRAM-SHA-256 EXTERNAL",
        anonymous="never",
        external_user=external_user,
    )
    try:
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(pki["ca"])
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        domain.set_credentials(pki["alice"], pki["alice"], None)
        url = f"amqps://localhost:{process.tls_port}"
        assert round_trip(url, ssl_domain=domain, allowed_mechs="EXTERNAL") == "hello"
        opened = process.logged("CON-1001")
        assert f"User : {expected}" in opened[-1]
    finally:
        process.stop()


def test_a_client_in_the_clear_on_the_tls_port_gets_no_sasl_exchange_so_no_password_is_checked(
    data_dir: Path, pki: dict[str, str]
) -> None:
    """Not even with verify_clients: before, PLAIN was offered and answered ok or auth."""
    process = tls_broker(data_dir, pki, anonymous="never", plain_without_tls="never")
    try:
        for password in (PASSWORD, "wrong"):
            assert sasl_outcome(process.tls_port, "PLAIN", "alice", password) == (None, False)
        assert len(process.logged("CON-1010 : Not TLS", count=2)) == 2
        assert not process.logged("CON-1007", timeout=0.2)
    finally:
        process.stop()


def external(pki: dict[str, str], cert: str) -> SSLDomain:
    """A client's TLS domain that trusts the test CA and presents ``cert`` (a PEM file)."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(pki["ca"])
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    domain.set_credentials(cert, cert, None)
    return domain


def certificates(ca: Any, tmp_path: Path, **subjects: dict[str, str]) -> dict[str, str]:
    """PEM files (certificate and key) of client certificates from ``ca``, by name."""
    files = {}
    for name, subject in subjects.items():
        issued = ca.issue_cert(f"{name}@example.com", **subject)
        issued.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / f"{name}.pem"))
        files[name] = str(tmp_path / f"{name}.pem")
    return files


def test_external_reads_the_cn_by_rfc_4514_and_a_certificate_without_one_is_no_user(
    data_dir: Path, pki: dict[str, str], issuer: Any, tmp_path: Path
) -> None:
    certs = certificates(
        issuer,
        tmp_path,
        slashed={"organization_unit_name": "ops/CN=alice"},  # no CN: '/' separates nothing
        comma={"common_name": "eve,CN=alice"},  # one CN, with an escaped comma
        accent={"common_name": "café"},  # non-ASCII: escaped as hex pairs
    )
    process = tls_broker(data_dir, pki, mechanisms="EXTERNAL", anonymous="never")
    try:
        url = f"amqps://localhost:{process.tls_port}"
        with pytest.raises(ConnectionException):
            round_trip(url, ssl_domain=external(pki, certs["slashed"]), allowed_mechs="EXTERNAL")
        assert process.logged("CON-1007", "mechanism EXTERNAL", "its subject has no CN")
        assert not process.logged("CON-1001", timeout=0.2)
        for name, user in (("comma", "eve,CN=alice"), ("accent", "café")):
            domain = external(pki, certs[name])
            assert round_trip(url, ssl_domain=domain, allowed_mechs="EXTERNAL") == "hello"
            assert f"User : {user} :" in process.logged("CON-1001")[-1]
    finally:
        process.stop()


def test_a_certificate_for_alice_at_another_domain_or_realm_gets_none_of_alices_acl_rules(
    data_dir: Path, pki: dict[str, str], issuer: Any, tmp_path: Path
) -> None:
    certs = certificates(
        issuer,
        tmp_path,
        evil={"common_name": "alice@evil.example"},
        realm={"common_name": "alice@QPID"},
    )
    (tmp_path / "broker.acl").write_text("acl allow alice all\nacl deny all all\n")
    process = tls_broker(
        data_dir,
        pki,
        mechanisms="SCRAM-SHA-256 EXTERNAL",
        anonymous="never",
        acl_file=str(tmp_path / "broker.acl"),
    )
    try:
        url = f"amqps://localhost:{process.tls_port}"
        for name in ("evil", "realm"):
            with pytest.raises(Exception, match="unauthorized-access"):
                round_trip(url, ssl_domain=external(pki, certs[name]), allowed_mechs="EXTERNAL")
        for name in ("alice", f"alice@{socket.gethostname()}"):  # a password user's realm
            options = {"user": name, "password": PASSWORD, "allowed_mechs": "SCRAM-SHA-256"}
            assert round_trip(process.url, **options) == "hello"  # is this broker's own
        assert "User : alice :" in process.logged("CON-1001", count=2)[-1]
    finally:
        process.stop()


def test_each_user_has_its_own_connection_limit(data_dir: Path) -> None:
    add_user(data_dir, "bob", PASSWORD)
    process = BrokerProcess(
        "--store",
        "memory",
        data_dir=str(data_dir),
        env={"PROTON_BROKER_BROKER_MAX_CONNECTIONS_PER_USER": "1"},
    ).start()
    try:
        options = {"user": "alice", "password": PASSWORD, "allowed_mechs": "SCRAM-SHA-256"}
        first = BlockingConnection(process.url, timeout=10, **options)  # type: ignore[arg-type]
        with pytest.raises(Exception, match="user 'alice' has 1 connections open already"):
            BlockingConnection(process.url, timeout=10, **options).create_sender("q")  # type: ignore[arg-type]
        options["user"] = "bob"  # another user is not limited by alice's connections
        assert round_trip(process.url, **options) == "hello"
        first.close()
    finally:
        process.stop()


def test_an_address_that_gives_wrong_passwords_is_locked_out_of_password_logins(
    data_dir: Path,
) -> None:
    """Three wrong passwords in a minute: the right one is not even asked for, while what
    needs no password (anonymous, from this machine) goes on."""
    process = broker(data_dir, max_failed_logins="3", failed_login_window="60")
    try:
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "PLAIN"):
            assert sasl_outcome(process.port, mechanism, "alice", "wrong") == (SASL.AUTH, False)
        assert sasl_outcome(process.port, "SCRAM-SHA-256", "alice", PASSWORD)[1] is False
        assert sasl_outcome(process.port, "PLAIN", "alice", PASSWORD)[1] is False
        assert sasl_outcome(process.port, "ANONYMOUS", None, None) == (SASL.OK, True)
        locked = process.logged("too many failed logins from 127.0.0.1: try again in")
        assert locked and "CON-1007" in locked[-1]
    finally:
        process.stop()


def test_without_anonymous_a_locked_out_address_cannot_connect_until_the_window_passes(
    data_dir: Path,
) -> None:
    process = broker(data_dir, anonymous="never", max_failed_logins="2", failed_login_window="1")
    try:
        for _ in range(2):
            assert sasl_outcome(process.port, "PLAIN", "alice", "wrong") == (SASL.AUTH, False)
        assert sasl_outcome(process.port, "PLAIN", "alice", PASSWORD)[1] is False
        time.sleep(1.1)  # the window: the oldest failure has aged out
        assert sasl_outcome(process.port, "PLAIN", "alice", PASSWORD) == (SASL.OK, True)
    finally:
        process.stop()


def client_frames(container: str, address: str) -> bytes:
    """The AMQP frames a Proton client without SASL writes to open, begin and attach a
    receiver (with credit) and a sender on ``address``: its AMQP header and all."""
    client = Connection()
    client.container = container
    transport = Transport()
    transport.bind(client)
    client.open()
    session = client.session()
    session.open()
    receiver = session.receiver(f"{container}-in")
    receiver.source.address = address
    receiver.open()
    receiver.flow(10)
    sender = session.sender(f"{container}-out")
    sender.target.address = f"made-by-{container}"
    sender.open()
    return bytes(transport.peek(transport.pending()))


def read_until_closed(sock: socket.socket, seconds: float = 5.0) -> tuple[bytes, bool]:
    """What the broker sent until it closed the socket, and whether it did in time."""
    got, deadline = b"", time.monotonic() + seconds
    sock.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return got, True
        if not data:
            return got, True
        got += data
    return got, False


def test_amqp_frames_sent_in_place_of_the_sasl_exchange_are_refused_as_a_failed_login(
    data_dir: Path,
) -> None:
    """A client that begins SASL and then sends AMQP frames instead of a sasl-init gets
    nothing it asks for: Proton's engine hands the frames on, and the broker closes the
    connection as a failed login before it opens, attaches or creates anything."""
    process = broker(data_dir, anonymous="never")
    try:
        round_trip(f"amqp://alice:{PASSWORD}@127.0.0.1:{process.port}", allowed_mechs="PLAIN")
        with socket.create_connection(("127.0.0.1", process.port), timeout=5) as sock:
            sock.sendall(b"AMQP\x03\x01\x00\x00")
            time.sleep(0.3)  # the broker's SASL header and mechanisms
            sock.sendall(client_frames("intruder", "auth-q")[8:])  # no AMQP header
            answer, closed = read_until_closed(sock)
        assert closed
        assert b"\x00\x53\x10" not in answer  # no open frame came back
        time.sleep(0.3)
        log = "".join(process.output)
        assert "CON-1007" in log and "complete the SASL exchange first" in log
        assert "made-by-intruder" not in log and "intruder" not in log.split("CON-1007")[0]
    finally:
        process.stop()
