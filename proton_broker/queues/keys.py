"""Keys: the text of a message's last-value, sequence or group key.

A queue keyed by an application property (``qpid.last_value_queue_key``,
``qpid.sequence_key``, ``qpid.group_header_key``) compares the property's *text*, as qpidd
does (its ``Message::getPropertyAsString``, which makes the text of a value that is not a
string with ``boost::lexical_cast``). So one logical key is one key whichever client sent it:
a JMS client's ``setBooleanProperty(k, true)``, a Python client's ``True`` and the string
``"1"`` are the same key, as are the long ``2``, the int ``2`` and the double ``2.0``.

Rules owned here (qpidd's text, except where said):

* A string is itself; a symbol is its text.
* A boolean is ``"1"`` or ``"0"``.
* A double is printed to 17 significant digits, a float (AMQP's 32-bit float) to 9, as C's
  ``%.17g`` and ``%.9g`` print them, trailing zeros dropped: enough for the text to read back
  as the same number of that width. The double ``0.1`` is ``"0.10000000000000001"``, the
  float ``0.1`` ``"0.100000001"``, either ``1.5`` is ``"1.5"`` and ``2.0`` is ``"2"``;
  infinities are ``"inf"`` and ``"-inf"``, a NaN ``"nan"`` or ``"-nan"`` by its sign. Which
  of the two a float was sent as is read from the message's bytes (:func:`value_code`),
  since the decoded value does not tell.
* An integer of any width, and a timestamp (milliseconds since the epoch), is its decimal
  text. qpidd's cast makes a byte or ubyte one character (the byte 65 is ``"A"``, and 200
  a text that is not UTF-8); here it is ``"65"``, as every other integer, so that a JMS
  ``setByteProperty`` and an int property of the same number share a key. Chosen: qpidd's
  is an accident of C++'s ``char``.
* Binary is its UTF-8 text, a uuid its canonical text, a char itself. qpidd's reading
  skips such values (the message has no key); they are keys here, as they were before.
* Broker-J compares keys as Java objects (the boolean ``true``, the string ``"true"`` and
  the int ``1`` are three keys, the int ``1`` and the long ``1`` two): the anchors differ,
  and qpidd's rule is the one kept.

Hot path: nearly every key is a string, and every caller answers that case itself
(``type(value) is str``) before it asks :func:`key_text`; nothing here runs for it.
"""

from __future__ import annotations

import math
from typing import Any

from proton_broker.codec.values import value_code
from proton_broker.message import Message, property_text

__all__ = ["key_text"]

_FLOAT = 0x72  # AMQP's float (32 bits); a double is 0x82


def key_text(value: Any, message: Message, name: str) -> str | None:
    """The key ``value``, read from ``message``'s application property ``name``, as text
    (see the module rules); None when the message has no such property."""
    if type(value) is str or value is None:
        return value
    if value is True or value is False:
        return "1" if value else "0"
    if type(value) is float:
        return _number_text(value, 9 if _sent_as_float(message, name) else 17)
    return property_text(value)


def _sent_as_float(message: Message, name: str) -> bool:
    """Whether ``message`` sent its property ``name`` as AMQP's float, not a double. A
    message whose bytes are paged out (keys are read as messages arrive, when they are not)
    counts as a double."""
    span = message.app_properties_span
    if span is None or message.paged:
        return False
    return value_code(message.data, span[0], span[1], name) == _FLOAT


def _number_text(value: float, digits: int) -> str:
    """``value`` as C's ``%.{digits}g`` prints it, NaN and infinities as boost's cast does."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"
