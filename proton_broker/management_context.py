"""Broker-J's ``setContextVariable`` and ``removeContextVariable``: one variable of a queue's
or an exchange's ``context`` set or removed, the rest left as they are.

Rules this module owns:

* Both are operations on any queue or exchange, as on every Broker-J object. Their
  parameters are application properties: ``name``, the variable (so the entity is named by
  ``identity``, or by ``index``=``object-path`` with ``key``, as Broker-J finds every entity:
  a request naming it neither way is a 400), and for setContextVariable ``value``, its text
  (a number or a boolean is taken as its text, as a JMS MapMessage may carry it).
* Each is a READ and an UPDATE of the entity's ``context`` with that one variable changed:
  the ACL's ``access`` and ``update`` on the entity decide (Broker-J's setAttributes asks
  for ``update``), the new
  context is checked as an UPDATE's would be (a queue refuses a
  ``queue.queueFlowResumeLimit`` that is not a percentage, with a 400), and a durable
  entity keeps it across a restart.
* The answer is the variable's value before, as text, or, when it had none, an empty bytes
  message: Broker-J answers its null result so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proton_broker.codec.values import as_text
from proton_broker.errors import InvalidField

SET_CONTEXT_VARIABLE, REMOVE_CONTEXT_VARIABLE = "setContextVariable", "removeContextVariable"
CONTEXT_OPERATIONS = {
    SET_CONTEXT_VARIABLE: ["name", "value"],
    REMOVE_CONTEXT_VARIABLE: ["name"],
}
NO_VALUE = b""  # the answer for a variable that had no value (Broker-J's null)


def entity_properties(operation: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """The request's application properties that name the entity: ``name`` is the
    variable's, so ``identity`` or the object path must name it."""
    if "identity" not in properties and properties.get("index") is None:
        raise InvalidField(
            f"'{operation}' names its entity by 'identity', or by 'index'='object-path' with "
            "'key': its 'name' is the context variable's",
            "identity",
        )
    return {key: value for key, value in properties.items() if key != "name"}


def changed_context(
    operation: str, properties: Mapping[str, Any], context: Mapping[str, str] | None
) -> tuple[dict[str, str], str | None]:
    """The entity's context after ``operation``, and the variable's value before it."""
    variable = _text(properties, "name", operation)
    after = dict(context or {})
    before = after.get(variable)
    if operation == SET_CONTEXT_VARIABLE:
        after[variable] = _text(properties, "value", operation)  # in its place, if it had one
    else:
        after.pop(variable, None)
    return after, before


def _text(properties: Mapping[str, Any], parameter: str, operation: str) -> str:
    value = properties.get(parameter)
    if value is None or isinstance(value, (Mapping, list, bytes)):
        raise InvalidField(f"'{operation}' needs a '{parameter}' (a text)", parameter)
    if isinstance(value, bool):
        return "true" if value else "false"  # Broker-J's (Java's) text of a boolean
    return str(as_text(value))
