"""TLS for the AMQPS listener: the server's Proton ``SSLDomain``, built from config ``tls``.

Proton does the TLS itself, inside the transport, so the broker's socket loop is the same
for both listeners; only the acceptor differs (``Acceptor.set_ssl_domain``). The files are
checked at start-up, by the configuration step (:func:`proton_broker.config.tls_file_problem`,
which the HTTPS gateway's check shares) and here again, so that a missing or unreadable
certificate is a clear error naming the key and the file rather than every client's
handshake failing later.

The TLS listener speaks TLS only, as qpidd's and Broker-J's TLS ports: the domain never
allows unsecured clients (``SSLDomain.allow_unsecured_client``), and since Proton's server
transport still sniffs the protocol and would take a plain AMQP or SASL header (it refuses
only the AMQP open that follows), the loop closes a connection whose first byte is not a
TLS handshake record's (:func:`starts_handshake`) before Proton reads it.
"""

from __future__ import annotations

from cproton_ffi import lib
from proton import Condition, Connection, SSLDomain, SSLException, Transport

from proton_broker.config import TLS_VERSIONS, TlsSection, tls_file_problem

TLS_HANDSHAKE = 0x16  # the content type of a handshake record (RFC 8446 5.1): a ClientHello
TLS_ON_PLAIN_PORT = "TLS handshake on the plain AMQP port: connect with amqps to the TLS port"
FRAMING_ERROR = "amqp:connection:framing-error"


def starts_handshake(data: bytes) -> bool:
    """Whether the first bytes a client sends open a TLS handshake (a plain AMQP or SASL
    header starts with ``AMQP``)."""
    return bool(data) and data[0] == TLS_HANDSHAKE


def refusal(name: str, description: str) -> bytes:
    """What Proton writes to a client it refuses before reading a word from it: the AMQP
    header, an open and a close carrying the condition ``name`` and ``description`` (to
    which Proton adds "(connection aborted)"). Made by a Proton transport of its own, on
    Proton's error path (a condition, then the input closed), so the frames are Proton's."""
    transport = Transport(Transport.SERVER)
    transport.bind(Connection())
    transport.push(b"AMQP\x00\x01\x00\x00")  # as if the client had spoken AMQP
    transport.condition = Condition(name, description)
    transport.close_tail()
    return bytes(transport.peek(transport.pending()))


class TlsConfigError(OSError):
    """The TLS listener cannot be set up from its configuration (an OSError, as any
    listener that cannot start)."""


def server_domain(section: TlsSection) -> SSLDomain:
    """The server-side domain: the broker's certificate and key; client certificates
    required and checked against ``ca_file`` when ``verify_clients``, else not asked for."""
    problem = tls_file_problem(section)
    if problem is not None:
        raise TlsConfigError(problem)
    domain = SSLDomain(SSLDomain.MODE_SERVER)
    try:
        domain.set_credentials(section.cert_file, section.key_file, section.key_password or None)
        if section.ca_file:
            domain.set_trusted_ca_db(section.ca_file)
        if section.verify_clients:
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER, section.ca_file)
        else:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        _accept_from(domain, section.min_version)
    except SSLException as exc:
        raise TlsConfigError(
            f"tls: cannot use {section.cert_file} / {section.key_file}"
            f"{' / ' + section.ca_file if section.ca_file else ''}: "
            f"{exc or 'rejected by the TLS library'}"
        ) from exc
    return domain


def _accept_from(domain: SSLDomain, oldest: str) -> None:
    """Accept TLS ``oldest`` and newer only (OpenSSL would otherwise still take TLS 1.0
    and 1.1 from a client that asks), with the engine's C function, which Proton's Python
    class does not wrap (``_domain`` is the C object)."""
    versions = TLS_VERSIONS[TLS_VERSIONS.index(oldest) :]
    if lib.pn_ssl_domain_set_protocols(domain._domain, " ".join(versions).encode()) != 0:
        raise SSLException(f"this TLS library cannot limit the protocol to {' '.join(versions)}")
