"""Consumer filters the queue applies itself: the replay period (Broker-J 4.7.3).

``x-qpid-replay-period`` is the time, in seconds, for which a consumer wishes to see messages
already on the queue: it receives the messages that arrived in the last N seconds, then every
new one; ``0`` means only new messages. It comes from the attach (a source filter or a link
property, see :mod:`proton_broker.amqp.terminus`) or, when the attach names no replay
period, from the queue's ``defaultFilters`` (a map from filter name to ``{type: [args]}``,
e.g. ``{"x-qpid-replay-period": {"x-qpid-replay-period": ["0"]}}``).

Values are seconds as a number or a numeric string; anything else, or a negative number, is
refused with :class:`~proton_broker.errors.InvalidField` naming the value (Broker-J
QPID-8067).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from proton_broker.errors import InvalidField

REPLAY_PERIOD = "x-qpid-replay-period"


def replay_seconds(value: Any) -> float:
    """A replay period in seconds, from a number or a numeric string."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number < 0:
        raise InvalidField(
            f"{REPLAY_PERIOD} must be a number of seconds (0 or more), got {value!r}", REPLAY_PERIOD
        )
    return number


def default_replay_seconds(default_filters: Mapping[str, Any] | None) -> float | None:
    """The replay period a queue's ``defaultFilters`` gives consumers that set none."""
    if not default_filters or REPLAY_PERIOD not in default_filters:
        return None
    spec = default_filters[REPLAY_PERIOD]
    args = spec.get(REPLAY_PERIOD) if isinstance(spec, Mapping) else spec
    if isinstance(args, (list, tuple)):
        if len(args) != 1:
            raise InvalidField(
                f"defaultFilters {REPLAY_PERIOD} takes one argument, got {args!r}", "defaultFilters"
            )
        args = args[0]
    return replay_seconds(args)


def check_default_filters(default_filters: Mapping[str, Any]) -> None:
    """Refuse default filters the broker cannot apply (only the replay period exists)."""
    for name in default_filters:
        if name != REPLAY_PERIOD:
            raise InvalidField(
                f"defaultFilters: unknown filter {name!r} (supported: {REPLAY_PERIOD})",
                "defaultFilters",
            )
    default_replay_seconds(default_filters)
