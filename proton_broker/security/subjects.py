"""Certificate subjects: who a client certificate names, for SASL EXTERNAL.

Rules this module owns:

* The subject is read as the string OpenSSL writes for Proton (RFC 2253, read by the rules
  of RFC 4514 that replaced it): relative distinguished names separated by unescaped
  ``,``, most specific first, each one or more ``type=value`` joined by unescaped ``+``.
  A ``\\`` escapes the next character, or two hex digits give one byte (OpenSSL writes
  control characters and every byte of a non-ASCII character so), and the bytes of a value
  are UTF-8. ``/`` is an ordinary character: ``OU=ops/CN=alice`` is one OU, not a CN.
* A subject that does not read by those rules (an unescaped ``"``, ``;``, ``<`` or ``>``,
  a dangling ``\\``, bytes that are not UTF-8, a part without ``=``) names no one.
* The user is the common name (CN) of the most specific RDN that has one, as Broker-J's
  ``ExternalNegotiator`` takes it (``useFullDN: false``); a subject without a CN, or with an
  empty one, one given only as BER (``#`` and hex), or one holding a control character (a
  NUL, a line break for the log), names no one: the certificate authenticates no user, as
  in Broker-J.
* Proton can also hand over the CN straight from the certificate
  (``SSL.get_cert_common_name``), but it gives the raw ASN.1 bytes up to the first NUL
  (``alice\\0.evil`` would read as ``alice``) with no conversion of the character set, so
  the escaped string, which keeps every byte, is what is read.
"""

from __future__ import annotations

import unicodedata

SPECIAL = frozenset('"+,;<>\\=#')  # may follow a backslash as themselves (RFC 4514 2.4)
UNESCAPED = frozenset('";<>')  # never unescaped inside a value
HEX = frozenset("0123456789abcdefABCDEF")

Attribute = tuple[str, str | None]  # (type upper-cased, value; None: given as BER, #hex)


class SubjectError(ValueError):
    """The subject does not read as RFC 4514 says."""


def common_name(subject: str) -> str | None:
    """The CN a certificate's subject names its holder by (see the module rules); None if
    it names no one."""
    try:
        rdns = parse(subject)
    except SubjectError:
        return None
    for rdn in rdns:
        for kind, value in rdn:
            if kind in ("CN", "2.5.4.3"):
                return value if value and not _controls(value) else None
    return None


def _controls(value: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in value)


def parse(subject: str) -> list[list[Attribute]]:
    """The RDNs of an RFC 4514 string, most specific first (SubjectError if it is not
    one)."""
    rdns: list[list[Attribute]] = []
    rdn: list[Attribute] = []
    position = 0
    while position < len(subject):
        kind, position = _type(subject, position)
        value, position = _value(subject, position)
        rdn.append((kind, value))
        if position < len(subject):
            separator = subject[position]
            position += 1
            if separator == ",":
                rdns.append(rdn)
                rdn = []
            if position == len(subject):
                raise SubjectError(f"nothing after the last {separator!r}")
    if rdn:
        rdns.append(rdn)
    return rdns


def _type(subject: str, position: int) -> tuple[str, int]:
    """An attribute type and the position after its ``=``."""
    end = subject.find("=", position)
    if end < 0:
        raise SubjectError(f"no '=' after {subject[position:]!r}")
    kind = subject[position:end].strip()
    if not kind or any(not (c.isascii() and (c.isalnum() or c in "-.")) for c in kind):
        raise SubjectError(f"{kind!r} is not an attribute type")
    return kind.upper(), end + 1


def _value(subject: str, position: int) -> tuple[str | None, int]:
    """An attribute value (None for the BER form) and the position of the ``,`` or ``+``
    that ends it (or the end)."""
    if subject.startswith("#", position):
        end = position + 1
        while end < len(subject) and subject[end] not in ",+":
            end += 1
        return None, end
    raw = bytearray()
    while position < len(subject):
        char = subject[position]
        if char in ",+":
            break
        if char in UNESCAPED:
            raise SubjectError(f"an unescaped {char!r}")
        if char != "\\":
            raw += char.encode()
            position += 1
            continue
        pair = subject[position + 1 : position + 3]
        if len(pair) == 2 and set(pair) <= HEX:
            raw.append(int(pair, 16))
            position += 3
        elif (escaped := subject[position + 1 : position + 2]) and escaped in SPECIAL | {" "}:
            raw += escaped.encode()
            position += 2
        else:
            raise SubjectError("a backslash that escapes nothing")
    try:
        return raw.decode("utf-8"), position
    except UnicodeDecodeError:
        raise SubjectError("a value that is not UTF-8") from None
