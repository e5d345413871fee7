"""Queue settings: one dataclass, one parser for every place settings come from.

Attach properties, the config file and management all call :func:`parse_settings`, so an
option has the same names, types and checks wherever it is given. The parser returns the
keys it does not recognise instead of dropping them, so each caller can refuse them in its
own terms (``amqp:invalid-field`` on an attach, a start-up error for the config file).
Values may arrive as AMQP longs or strings (qpid::messaging sends ``1`` or ``'1'``), so
conversion accepts both where the meaning is clear.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from proton_broker.errors import InvalidField


@dataclass(frozen=True)
class QueueSettings:
    """Everything that defines a queue's behaviour; immutable once the queue exists."""

    durable: bool = False


def to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no"):
        return value.strip().lower() in ("1", "true", "yes")
    raise InvalidField(f"queue option '{name}' must be a boolean, got {value!r}", name)


# option name (every alias) -> (settings field, converter)
_OPTIONS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "durable": ("durable", to_bool),
}


def parse_settings(options: Mapping[str, Any]) -> tuple[QueueSettings, dict[str, Any]]:
    """Build settings from ``options``; return them with the options not recognised."""
    values: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in options.items():
        spec = _OPTIONS.get(str(key))
        if spec is None:
            unknown[str(key)] = value
            continue
        target, convert = spec
        values[target] = convert(str(key), value)
    return QueueSettings(**values), unknown
