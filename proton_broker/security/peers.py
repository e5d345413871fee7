"""Where a client is: the one rule for settings that allow a thing ``never``, from this
machine only (``loopback``) or ``always`` (``sasl.anonymous``, ``sasl.plain_without_tls``).

A client is on this machine when its address is a loopback address: 127.0.0.0/8, ``::1``,
or an IPv4 loopback address mapped into IPv6 (``::ffff:127.0.0.1``, as a dual-stack socket
reports it). Anything else, including an address that does not parse, is elsewhere.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str | None) -> bool:
    """Whether a client's address is this machine's."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def allowed(policy: str, host: str | None) -> bool:
    """Whether a setting of ``policy`` (never, loopback, always) allows a client at ``host``."""
    return policy == "always" or (policy == "loopback" and is_loopback(host))
