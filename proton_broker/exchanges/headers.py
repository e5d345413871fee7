"""Headers bindings: which messages a binding's arguments select.

Rules this module owns (qpidd's headers exchange, ``amq.match``):

* A binding's arguments must hold ``x-match``, ``all`` or ``any``; every other argument
  (but the binding's selector, ``x-filter-jms-selector``) is a property to match against
  the message's application properties.
* An argument whose value is null (void) asks only that the property be present; any
  other value asks that it be equal. Numbers compare by value whatever their AMQP type
  (a ``uint`` 5 equals a ``long`` 5), booleans are not numbers, text compares exactly
  (a symbol equals the string of the same characters).
* ``all``: every property argument matches; ``any``: at least one does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proton_broker.errors import InvalidField

X_MATCH = "x-match"
SELECTOR_ARGUMENT = "x-filter-jms-selector"  # a binding's selector (exchange.py), not a header
MATCH_ALL = "all"
MATCH_ANY = "any"


@dataclass(frozen=True)
class HeadersMatch:
    """The selection a headers binding makes, parsed from its arguments."""

    every: bool  # x-match all (else any)
    required: tuple[tuple[str, Any], ...]  # (property, value or None for "present")

    @classmethod
    def parse(cls, arguments: Mapping[str, Any] | None) -> HeadersMatch:
        """InvalidField (naming ``x-match``) unless the arguments say all or any."""
        mode = (arguments or {}).get(X_MATCH)
        if mode not in (MATCH_ALL, MATCH_ANY):
            raise InvalidField(
                f"a headers binding needs {X_MATCH} set to '{MATCH_ALL}' or '{MATCH_ANY}' "
                f"in its arguments, not {mode!r}",
                X_MATCH,
            )
        required = tuple(
            (str(key), value)
            for key, value in (arguments or {}).items()
            if key not in (X_MATCH, SELECTOR_ARGUMENT)
        )
        return cls(mode == MATCH_ALL, required)

    def matches(self, properties: Mapping[Any, Any]) -> bool:
        hits = (
            _matches(want, key in properties, properties.get(key)) for key, want in self.required
        )
        return all(hits) if self.every else any(hits)


def _matches(want: Any, present: bool, have: Any) -> bool:
    if not present:
        return False
    if want is None:
        return True
    if isinstance(want, bool) or isinstance(have, bool):
        return type(want) is type(have) and want == have
    return bool(want == have)  # numbers by value; text, binary, others exactly
