"""SASL: which mechanisms this Proton build can offer, checked before the broker starts.

Rules this module owns: Proton's own SASL implementation (a build without Cyrus SASL, such
as the wheel from the package index) offers only ANONYMOUS and, on a TLS connection with a
verified client certificate, EXTERNAL; everything else (PLAIN, SCRAM-*) needs a build
against Cyrus SASL (``SASL.extended()``). A configured mechanism the build cannot offer
stops start-up naming ``sasl.mechanisms`` and the mechanism, instead of starting a broker
that offers clients an empty list.
"""

from __future__ import annotations

from proton import SASL

from proton_broker.config import SaslSection
from proton_broker.errors import ConfigError

BUILT_IN = ("ANONYMOUS", "EXTERNAL")  # what Proton offers without Cyrus SASL


def check_mechanisms(section: SaslSection) -> None:
    """ConfigError if ``section`` asks for a mechanism this build cannot offer."""
    if not section.enabled:
        return
    wanted = section.mechanisms.split()
    if not wanted:
        raise ConfigError("configuration key 'sasl.mechanisms' names no mechanism")
    if SASL.extended():
        return  # Cyrus SASL decides what it offers
    missing = [m for m in wanted if m.upper() not in BUILT_IN]
    if missing:
        raise ConfigError(
            f"configuration key 'sasl.mechanisms': {', '.join(missing)} cannot be offered: "
            "this Proton build has no Cyrus SASL, so it offers only "
            f"{' and '.join(BUILT_IN)}"
        )
