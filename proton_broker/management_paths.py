"""Broker-J's object paths on ``$management``: how an entity's ``object-path`` is written, and
how a request's ``index``=``object-path`` with ``key`` names one.

Rules this module owns (after Broker-J's ``ConfiguredObjectFinder``):

* A path is its elements joined by ``/``; within an element a ``/`` is written ``\\/`` and a
  ``\\`` is written ``\\\\``. So a queue named ``x/b`` has the path ``x\\/b``, and no name
  can be read as another's path.
* The path of a queue or an exchange, as this broker's node (the virtual host's) answers it,
  is its name alone. A key of one element names that entity. A key of three elements is
  read as a path from the broker's node (virtual-host node, virtual host, entity): its last
  element names the entity. Any other key names nothing: ``x/b`` (unescaped) is not the
  queue ``b``, nor the queue ``x/b``.
"""

from __future__ import annotations

_BROKER_DEPTH = 3  # virtual-host node, virtual host, entity


def object_path(name: str) -> str:
    """The object path of an entity named ``name``."""
    return name.replace("\\", "\\\\").replace("/", "\\/")


def elements(path: str) -> list[str]:
    """A path's elements, unescaped."""
    parts, current, escaped = [], [], False
    for char in path:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "/":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def named_by_path(key: str) -> str | None:
    """The name of the entity a request's object-path ``key`` names, or None when the key
    is no path to an entity of this node (see the module rules)."""
    found = elements(key)
    if len(found) == 1 or len(found) == _BROKER_DEPTH:
        return found[-1] or None
    return None
