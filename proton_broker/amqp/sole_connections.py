"""One connection per client container, when a client asks for it: Broker-J's
``sole-connection-for-container``, which Qpid JMS asks for when a program sets a JMS client
ID (the JMS rule that a client ID is in use by one connection at a time).

Rules this module owns:

* The broker offers the connection capability ``sole-connection-for-container``. A
  connection whose open desires it may state a policy in its properties,
  ``sole-connection-enforcement-policy``: 0 (refuse-connection, the default) or 1
  (close-existing). Any other value refuses that connection (``amqp:invalid-field``).
* The broker's open says ``sole-connection-detection-policy`` strong (0) to a connection
  that desires the capability, and ``sole-connection-enforcement-policy`` 1 where it asked
  for close-existing, as Broker-J's open does.
* When a connection opens while connections of the same container id are open and a policy
  applies (an open one's, else the new one's: Broker-J's ``StrongConnectionEstablishmentLimiter``),
  refuse-connection refuses the new connection, and close-existing closes the open ones
  (the adapter says how: ``amqp:invalid-field`` naming ``container-id`` for the refused,
  which Qpid JMS reports as ``InvalidClientIDException``; ``amqp:resource-locked`` for the
  closed). Connections that did not ask are never checked while no connection of their
  container asked: container ids may repeat.

Connections are opaque keys; nothing here touches Proton.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from proton_broker.errors import InvalidField

CAPABILITY = "sole-connection-for-container"
POLICY = "sole-connection-enforcement-policy"
DETECTION = "sole-connection-detection-policy"  # said in the broker's open: always strong
STRONG = 0
REFUSE_CONNECTION = 0
CLOSE_EXISTING = 1
POLICY_NAMES = {REFUSE_CONNECTION: "refuse-connection", CLOSE_EXISTING: "close-existing"}


def policy_asked(desired: Iterable[str], properties: Mapping[str, Any]) -> int | None:
    """The policy a connection asks for (None: it does not ask); InvalidField for a policy
    that is neither 0 nor 1."""
    if CAPABILITY not in desired:
        return None
    policy = properties.get(POLICY, REFUSE_CONNECTION)
    if isinstance(policy, bool) or policy not in POLICY_NAMES:
        raise InvalidField(f"Cannot convert '{policy}' into '{POLICY}'", POLICY)
    return int(policy)


class SoleConnections:
    """The open connections of each container id, with the policy each asked for."""

    def __init__(self) -> None:
        self._open: dict[str, dict[Any, int | None]] = {}
        self._container: dict[Any, str] = {}

    def opening(
        self, container: str, connection: Any, policy: int | None
    ) -> tuple[int | None, list[Any]]:
        """``connection`` of ``container`` opens asking for ``policy``: the policy that
        applies and the open connections it applies to, or (None, []) when none applies.
        The connection is counted unless it is to be refused."""
        others = self._open.get(container, {})
        applied = next((p for p in others.values() if p is not None), policy)
        if not others or applied is None:
            self._count(container, connection, policy)
            return None, []
        if applied == CLOSE_EXISTING:
            replaced = list(others)
            self._count(container, connection, policy)
            return applied, replaced
        return applied, list(others)

    def _count(self, container: str, connection: Any, policy: int | None) -> None:
        self._open.setdefault(container, {})[connection] = policy
        self._container[connection] = container

    def closed(self, connection: Any) -> None:
        """``connection`` is gone (nothing happens if it was never counted)."""
        container = self._container.pop(connection, None)
        others = self._open.get(container) if container is not None else None
        if others is not None:
            others.pop(connection, None)
            if not others:
                del self._open[container]
