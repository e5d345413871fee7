"""Who an HTTP request comes from: HTTP Basic authentication (RFC 7617) against the broker's
users, for every HTTP listener (the gateway, the metrics endpoint).

Rules this module owns (docs/security.md, "HTTP"):

* The same users and the same policies as AMQP. A request without credentials is the user
  ``anonymous`` where ``sasl.anonymous`` allows its client address, and answered 401 with
  ``WWW-Authenticate: Basic`` elsewhere. A request with ``Authorization: Basic`` sends a
  password in the clear, like SASL PLAIN: it is taken over HTTPS and where
  ``sasl.plain_without_tls`` allows the client address, and answered 403 elsewhere, before
  the password is looked at.
* The password itself is checked by the caller, with Cyrus SASL on the broker's loop, as
  an AMQP client's would be; a wrong one is answered 401 and logged by the caller
  (``HTP-1001``) with the client address and the user name, never the password. A client
  address locked out after wrong passwords (:mod:`proton_broker.security.logins`) is
  answered 429 with ``Retry-After``, its password not checked.
"""

from __future__ import annotations

import base64

from proton_broker.config import SaslSection
from proton_broker.security.logins import LockedOut
from proton_broker.security.peers import allowed

REALM = "proton-broker"
ANONYMOUS = "anonymous"
CHALLENGE = {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}


class Refused(Exception):
    """A request refused before any handler runs: its HTTP status, a sentence, headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def locked_out(exc: LockedOut) -> Refused:
    """429 for a client address locked out after wrong passwords (security/logins.py),
    saying when it may try again."""
    return Refused(429, str(exc), {"Retry-After": str(exc.seconds)})


def unauthenticated(message: str) -> Refused:
    """401, saying how to authenticate (Basic)."""
    return Refused(401, message, dict(CHALLENGE))


def credentials(
    section: SaslSection, host: str | None, header: str | None, secure: bool
) -> tuple[str, str] | None:
    """What a request must prove: None when it may stay anonymous, else the user and
    password to check. Refused (401, 403, 400) when it may not go on."""
    if header is None:
        if allowed(section.anonymous, host):
            return None
        raise unauthenticated("authentication required: send a user and password (Basic)")
    name, password = basic_credentials(header)
    check_clear_password(section, host, secure)
    return name, password


def check_clear_password(section: SaslSection, host: str | None, secure: bool) -> None:
    """Refused (403) unless a password may be taken from ``host`` over this connection:
    over TLS, or from where ``sasl.plain_without_tls`` allows (the rules above)."""
    if not (secure or allowed(section.plain_without_tls, host)):
        raise Refused(403, f"a password in the clear is refused from {host}: use HTTPS")


def basic_credentials(header: str) -> tuple[str, str]:
    """The user and password of an ``Authorization: Basic`` header, in UTF-8."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise unauthenticated(f"unsupported authentication scheme {scheme!r}: use Basic")
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8 once decoded
        raise Refused(400, "the Basic credentials are not base64 of UTF-8 text") from None
    name, colon, password = decoded.partition(":")
    if not colon or not name:
        raise Refused(400, "the Basic credentials are not user:password")
    return name, password
