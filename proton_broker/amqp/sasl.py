"""Authentication: what each connection is offered, through Cyrus SASL, as qpidd does it.

Rules this module owns:

* Mechanisms with passwords (PLAIN, SCRAM-SHA-1, SCRAM-SHA-256) come from Cyrus SASL, through
  Proton built against it (``SASL.extended()``; ``scripts/setup-sasl.sh`` builds it). Users
  and their passwords are in a Cyrus sasldb file (``sasl.user_db``, by default
  ``users.sasldb`` in the data directory), which ``proton-broker-config user`` manages with
  Cyrus's own ``saslpasswd2``: this code never sees a stored password.
* At start-up the broker writes the Cyrus configuration (sasldb as the password check, the
  mechanism list) to a private directory and asks Cyrus, through an in-memory Proton
  connection, which mechanisms it really offers. A configured mechanism it does not offer
  stops start-up naming ``sasl.mechanisms``, the mechanism and the Debian package that
  provides it, instead of starting a broker that offers clients an empty list. When a
  mechanism reads passwords, a ``sasl.user_db`` that is named must be a readable file
  (fail closed: start-up stops naming the key and the path, rather than every login
  failing); the default one in the data directory may be absent (no users yet).
* Per connection, from the client's address and the listener: ANONYMOUS (and a client that
  sends no SASL header at all) is accepted where ``sasl.anonymous`` allows it (``loopback``
  by default, so the quick start needs no user); PLAIN without TLS where
  ``sasl.plain_without_tls`` allows it (``loopback`` by default; Broker-J's
  ``secureOnlyMechanisms``; over TLS Cyrus allows it whatever that says, as Proton tells it
  the TLS layer's strength); EXTERNAL only on the TLS listener with verified client
  certificates, and only a certificate whose subject has a CN is a user (by default:
  security/subjects.py). A wrong password gets the SASL ``auth`` outcome from Cyrus.
* Cyrus reads its configuration once per process, so one process serves one broker's users
  (the tests that authenticate start brokers as processes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from proton import SASL, Connection, Data, Transport

from proton_broker.config import Config, SaslSection
from proton_broker.errors import ConfigError
from proton_broker.security.peers import allowed
from proton_broker.security.subjects import common_name
from proton_broker.security.users import password_user, user_db_path, user_db_problem

CONFIG_NAME = "proton-broker"  # Cyrus reads <dir>/proton-broker.conf
BUILT_IN = ("ANONYMOUS", "EXTERNAL")  # what Proton offers without Cyrus SASL
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256")
WITHOUT_PASSWORDS = ("EXTERNAL", "GSSAPI")  # mechanisms that never read the sasldb file
# The Debian package that gives Cyrus each mechanism (EXTERNAL is built into libsasl2).
PACKAGES = {
    "PLAIN": "libsasl2-modules (libplain)",
    "LOGIN": "libsasl2-modules (liblogin)",
    "SCRAM-SHA-1": "libsasl2-modules (libscram)",
    "SCRAM-SHA-256": "libsasl2-modules (libscram)",
    "ANONYMOUS": "libsasl2-modules (libanonymous)",
    "DIGEST-MD5": "libsasl2-modules (libdigestmd5)",
    "CRAM-MD5": "libsasl2-modules (libcrammd5)",
    "GSSAPI": "libsasl2-modules-gssapi-mit",
}
_SASL_MECHANISMS_FRAME = 0x40  # the descriptor of sasl-mechanisms (AMQP 1.0 5.3.3.1)


def configured(section: SaslSection) -> list[str]:
    """The mechanisms ``sasl.mechanisms`` names, upper-cased."""
    return [m.upper() for m in section.mechanisms.split()]


def check_mechanisms(config: Config) -> None:
    """ConfigError unless every mechanism the configuration asks for can really be offered;
    with Cyrus SASL, also sets Cyrus up (see the module rules)."""
    section = config.sasl
    if not section.enabled:
        return
    wanted = configured(section)
    if "ANONYMOUS" in wanted:
        raise ConfigError(
            "configuration key 'sasl.mechanisms' names ANONYMOUS: who may stay anonymous is "
            "set by sasl.anonymous (never, loopback or always)"
        )
    if not wanted and section.anonymous == "never":
        raise ConfigError(
            "configuration key 'sasl.mechanisms' names no mechanism and sasl.anonymous is "
            "never: no client could connect"
        )
    if "EXTERNAL" in wanted and not (config.tls.enabled and config.tls.verify_clients):
        raise ConfigError(
            "configuration key 'sasl.mechanisms' names EXTERNAL, which needs a TLS listener "
            "that verifies client certificates (tls.enabled and tls.verify_clients)"
        )
    if not SASL.extended():
        missing = [m for m in wanted if m not in BUILT_IN]
        if missing:
            raise ConfigError(
                f"configuration key 'sasl.mechanisms': {', '.join(missing)} cannot be offered: "
                "this Proton build has no Cyrus SASL, so it offers only "
                f"{' and '.join(BUILT_IN)} (scripts/setup-sasl.sh builds Proton with it)"
            )
        return
    if any(m not in WITHOUT_PASSWORDS for m in wanted):
        problem = user_db_problem(config)
        if problem is not None:
            raise ConfigError(problem)
    offered = _set_up_cyrus(config, wanted)
    missing = [m for m in wanted if m not in offered and m != "EXTERNAL"]
    if missing:
        raise ConfigError(
            f"configuration key 'sasl.mechanisms': Cyrus SASL does not offer "
            f"{', '.join(missing)} here (it offers {' '.join(sorted(offered)) or 'nothing'}); "
            f"install {', '.join(sorted({PACKAGES.get(m, 'its plugin') for m in missing}))}"
        )


def _set_up_cyrus(config: Config, wanted: list[str]) -> set[str]:
    """Write the Cyrus configuration, make Cyrus read it, and return what it offers."""
    mechanisms = " ".join(dict.fromkeys([*wanted, "ANONYMOUS", "EXTERNAL"]))
    text = (
        "pwcheck_method: auxprop\n"
        "auxprop_plugin: sasldb\n"
        f"sasldb_path: {user_db_path(config)}\n"
        f"mech_list: {mechanisms}\n"
    )
    with tempfile.TemporaryDirectory(prefix="proton-broker-sasl-") as directory:
        (Path(directory) / f"{CONFIG_NAME}.conf").write_text(text)
        return _offered(directory, mechanisms)


def _offered(config_dir: str, mechanisms: str) -> set[str]:
    """The mechanisms a server transport configured as the broker's offers a client: its
    sasl-mechanisms frame, read off an in-memory connection."""
    server = Transport(Transport.SERVER)
    sasl = server.sasl()
    sasl.config_path(config_dir)
    sasl.config_name(CONFIG_NAME)
    sasl.allow_insecure_mechs = True
    sasl.allowed_mechs(mechanisms)
    server.bind(Connection())
    server.push(b"AMQP\x03\x01\x00\x00")
    out = server.peek(max(server.pending(), 0))
    return _mechanisms_in(out[8:])


def _mechanisms_in(frame: bytes) -> set[str]:
    if len(frame) < 8:
        return set()
    body = frame[4 * frame[4] :]  # after the frame header (data offset in 4-byte words)
    data = Data()
    data.decode(body)
    value = data.get_object()
    descriptor = getattr(value, "descriptor", None)
    if descriptor != _SASL_MECHANISMS_FRAME or not value.value:
        return set()
    offered = value.value[0]  # a symbol, or an array of them
    return {str(m) for m in getattr(offered, "elements", [offered])}


def configure(
    transport: Transport, section: SaslSection, host: str, tls: bool, passwords: bool = True
) -> bool:
    """Set up one accepted connection's SASL layer for a client at ``host``; without
    ``passwords`` (its address is locked out: security/logins.py) only the mechanisms that
    need none are offered. False when nothing could be offered: the caller refuses it."""
    anonymous = allowed(section.anonymous, host)
    if not section.enabled:
        transport.require_auth(not anonymous)  # no SASL layer: only anonymous clients
        return True
    mechanisms = [
        m
        for m in configured(section)
        if (tls or m != "EXTERNAL") and (passwords or m == "EXTERNAL")
    ]
    if anonymous:
        mechanisms.append("ANONYMOUS")
    if not mechanisms:
        return False
    sasl = transport.sasl()
    if SASL.extended():
        sasl.config_name(CONFIG_NAME)  # Cyrus has read it already (check_mechanisms)
    # Over TLS Cyrus offers PLAIN anyway: Proton gives it the TLS layer's strength when
    # the SASL exchange starts, so this follows whether the bytes really are encrypted.
    sasl.allow_insecure_mechs = allowed(section.plain_without_tls, host)
    sasl.allowed_mechs(" ".join(mechanisms))
    transport.require_auth(not anonymous)
    return True


def password_mechanism(transport: Transport) -> bool:
    """Whether the client chose a mechanism that sends a password (not ANONYMOUS or
    EXTERNAL, and not none: a client that found no mechanism sent nothing)."""
    return _mechanism(transport) not in (None, "ANONYMOUS", "EXTERNAL")


def user_of(transport: Transport | None, section: SaslSection) -> str | None:
    """Who a connection's client authenticated as: for EXTERNAL its certificate's subject's
    CN (security/subjects.py), or the whole subject (``sasl.external_user``, as Broker-J's
    ``useFullDN``); for a password the user without the realm, which is this broker's own
    (security/users.py); ``anonymous`` for SASL ANONYMOUS or no SASL at all. None when the
    certificate names no one (no CN): the client authenticated no user."""
    user = transport.user if transport is not None else None
    if not user:
        return "anonymous"
    if transport is not None and _mechanism(transport) == "EXTERNAL":
        return str(user) if section.external_user == "subject" else common_name(str(user))
    return password_user(str(user))


def _mechanism(transport: Transport) -> str | None:
    mech = transport.sasl().mech
    return str(mech).upper() if mech else None


def check_password(user: str, password: str) -> bool:
    """Whether Cyrus accepts ``password`` for ``user``, as it would from an AMQP client
    using PLAIN: a client and a server engine talk SASL in memory (for the HTTP gateway's
    Basic authentication, which has the password itself). Call it on the broker's loop
    thread, where every other use of Cyrus is."""
    if not SASL.extended():
        return False  # no password mechanism without Cyrus
    server = Transport(Transport.SERVER)
    server_sasl = server.sasl()
    server_sasl.allow_insecure_mechs = True
    server_sasl.allowed_mechs("PLAIN")
    server.require_auth(True)
    server.bind(Connection())
    client = Transport()
    client_sasl = client.sasl()
    client_sasl.allow_insecure_mechs = True
    client_sasl.allowed_mechs("PLAIN")
    connection = Connection()
    connection.user, connection.password = user, password
    client.bind(connection)
    connection.open()
    for _ in range(10):  # PLAIN is one round trip; a few more are slack
        moved = _move(client, server) + _move(server, client)
        if server_sasl.outcome is not None or not moved:
            break
    return server_sasl.outcome == SASL.OK


def _move(source: Transport, sink: Transport) -> int:
    pending = source.pending()
    if pending <= 0 or sink.capacity() <= 0:
        return 0
    data = source.peek(min(pending, sink.capacity()))
    source.pop(len(data))
    sink.push(data)
    return len(data)
