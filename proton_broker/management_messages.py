"""Broker-J's message operations on a queue, on the ``$management`` node: what an operator's
tool reads about the messages waiting (the queue operations themselves are in
:mod:`management`).

Rules this module owns (Broker-J's ``Queue.getMessageInfo`` and ``getMessageInfoById``, its
``MessageInfo`` names):

* ``getMessageInfo(first, last, includeHeaders)``: the messages at positions ``first`` to
  ``last`` (0: the oldest; -1: from the start, or to the end), in arrival order, taking
  none. At most :data:`MAX_MESSAGE_INFO` are answered at once (Broker-J has no bound): a
  tool pages through a deep queue with ``first`` and ``last``.
* ``getMessageInfoById(messageId, includeHeaders)``: one message, by its ``id``; 404 if it
  is not on the queue. A message's ``id`` is its queue position, the number consumers see
  as ``x-opt-sequence-number``.
* Each message is a map of Broker-J's names: ``id``, ``size``, ``messageType`` (``AMQP
  1.0``), ``state`` (``Available``, ``Held`` for one not valid yet, ``Acquired``),
  ``deliveryCount``, ``arrivalTime`` (ms since the epoch), ``persistent``, and from its
  properties ``messageId``, ``correlationId`` (as text), ``userId``, ``to``, ``replyTo``,
  ``type`` (the subject, as Broker-J reads it), ``mimeType``, ``encoding``, ``groupId``,
  ``timestamp`` (its creation time), ``expirationTime`` (when it expires on this queue),
  ``priority``; with ``includeHeaders`` its application properties as ``headers``. A field
  the message does not have is left out, as Broker-J leaves out nulls.
* ``deleteMessages(messageIds, selector, limit)``: removes the messages with those ids (a
  list; none given: any) that the JMS selector selects (none given: all), oldest first, at
  most ``limit`` (-1: no bound), and answers their ids. Only messages nobody holds go
  (available ones, and held ones not valid yet): those consumers hold stay with them, as a
  purge leaves them (Broker-J takes them from their consumers), and none goes to the
  alternate. The ACL's ``purge queue`` guards it.
* Broker-J's secure operations, getMessageContent and the two above when they show the
  application properties (``includeHeaders``: Broker-J's ``paramRequiringSecure``), are
  answered only over TLS, or from where ``broker.confidential_without_tls`` allows (403
  otherwise, in Broker-J's words).
* ``getMessageContent(messageId, limit, returnJson, decompressBeforeLimiting)`` answers
  message ``messageId``'s content as Broker-J gives an AMQP 1.0 message's: its body
  sections as encoded (from the first to the end of the message, a footer too), the first
  ``limit`` bytes (-1: all), as a data section; 404 if it is not on the queue (Broker-J:
  200 and nothing). With ``returnJson``, the body's value as JSON text
  (Broker-J's conversion: an amqp-value's value, the bytes of data sections joined as a
  list of signed byte values, amqp-sequence lists joined; a type JSON has not as its
  text), and when ``limit`` is below the content's size, cut to about that many
  characters as Broker-J's ``MessageContentJsonConverter`` cuts (a text ends in ``...``,
  what does not fit is left out). With ``decompressBeforeLimiting`` and a limit, a body
  whose content-encoding is ``gzip`` is decompressed, cut and compressed again; another
  content-encoding is a 400.
* Parameters are application properties of the request; numbers and booleans may be given
  as text, and lists as JSON text, as JMS management clients send them. The ACL's
  ``browse queue`` (falling back to ``consume``, as for a browser) guards the three that
  show messages: they show what messages say.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Mapping
from typing import Any

from proton_broker.codec.sections import body_of, body_start, parse_message
from proton_broker.codec.values import as_text
from proton_broker.errors import InvalidField, NotFound
from proton_broker.management_exchanges import integer, integer_parameter, json_text
from proton_broker.queues.entries import ACQUIRED, HELD, Entry
from proton_broker.queues.ports import MessageFilter
from proton_broker.queues.queue import Queue
from proton_broker.selector import parse_selector

GET_MESSAGE_INFO, GET_MESSAGE_INFO_BY_ID = "getMessageInfo", "getMessageInfoById"
DELETE_MESSAGES = "deleteMessages"
MOVE_MESSAGES, COPY_MESSAGES = "moveMessages", "copyMessages"  # proton_broker/moving.py
GET_MESSAGE_CONTENT = "getMessageContent"
MESSAGE_OPERATIONS = {
    GET_MESSAGE_INFO: ["first", "last", "includeHeaders"],
    GET_MESSAGE_INFO_BY_ID: ["messageId", "includeHeaders"],
    GET_MESSAGE_CONTENT: ["messageId", "limit", "returnJson", "decompressBeforeLimiting"],
    DELETE_MESSAGES: ["messageIds", "selector", "limit"],
    MOVE_MESSAGES: ["destination", "messageIds", "selector", "limit"],
    COPY_MESSAGES: ["destination", "messageIds", "selector", "limit"],
}
Selection = tuple[set[int] | None, MessageFilter | None, int]  # ids, selector, limit
GZIP = "gzip"
MAX_MESSAGE_INFO = 1000  # messages one getMessageInfo answers at most
_STATES = {ACQUIRED: "Acquired", HELD: "Held"}  # otherwise Available
# Fields of the properties section (AMQP 1.0 3.2.4) and Broker-J's names for them.
_PROPERTY_FIELDS = {
    0: "messageId",
    1: "userId",
    2: "to",
    3: "type",  # subject
    4: "replyTo",
    5: "correlationId",
    6: "mimeType",  # content-type
    7: "encoding",  # content-encoding
    10: "groupId",
}
_TEXT = frozenset({"messageId", "correlationId", "userId"})  # ids of any type, as text


def confidential(operation: Any, properties: Mapping[str, Any]) -> bool:
    """Whether ``operation`` asked with ``properties`` is one of Broker-J's secure ones
    (see the module rules): getMessageContent, and the two getMessageInfo operations when
    they show the application properties (``includeHeaders``, with its default)."""
    if operation == GET_MESSAGE_CONTENT:
        return True
    if operation in (GET_MESSAGE_INFO, GET_MESSAGE_INFO_BY_ID):
        return _boolean(properties, "includeHeaders", operation == GET_MESSAGE_INFO_BY_ID)
    return False


def message_operation(queue: Queue, operation: str, properties: Mapping[str, Any]) -> Any:
    """Answer ``operation`` (one of :data:`MESSAGE_OPERATIONS` but deleteMessages, which
    management runs in slices) on ``queue``."""
    if operation == GET_MESSAGE_CONTENT:
        return message_content(queue, properties)
    headers = _boolean(properties, "includeHeaders", operation == GET_MESSAGE_INFO_BY_ID)
    if operation == GET_MESSAGE_INFO_BY_ID:
        number = integer_parameter(properties, "messageId")
        found = None if number is None else queue.numbered(number)
        if found is None:
            raise NotFound(f"no message {number} on queue '{queue.name}'")
        return _info(*found, headers)
    first = max(integer_parameter(properties, "first") or 0, 0)
    last = integer_parameter(properties, "last")
    count = MAX_MESSAGE_INFO if last is None or last < 0 else last - first + 1
    listed = queue.listed(first, min(count, MAX_MESSAGE_INFO))
    return [_info(entry, data, headers) for entry, data in listed]


def selection(properties: Mapping[str, Any]) -> Selection:
    """The messages deleteMessages, moveMessages and copyMessages are asked for: the ids
    (a list; None: any), the selector (None: all) and the limit (-1: no bound)."""
    ids = json_text(properties.get("messageIds"), "messageIds", "a list")
    wanted: set[int] | None = None
    if ids is not None:
        numbers = [integer(each) for each in ids] if isinstance(ids, list) else [None]
        if None in numbers:
            raise InvalidField("'messageIds' must be a list of message ids (numbers)", "messageIds")
        wanted = {number for number in numbers if number is not None}
    selector = properties.get("selector")
    if selector is not None and not isinstance(selector, str):
        raise InvalidField("'selector' must be a JMS selector (text)", "selector")
    matches = parse_selector(selector) if selector else None
    limit = integer_parameter(properties, "limit")
    return wanted, matches, -1 if limit is None or limit < 0 else limit


def message_content(queue: Queue, properties: Mapping[str, Any]) -> bytes:
    """Broker-J's getMessageContent (see the module rules): the body of message
    ``messageId`` as encoded, or with ``returnJson`` as JSON text, cut at ``limit``."""
    number = integer_parameter(properties, "messageId")
    if number is None:
        raise InvalidField("'messageId' is required: the message's id", "messageId")
    found = queue.numbered(number)
    if found is None:
        raise NotFound(f"no message {number} on queue '{queue.name}'")
    data = found[1]
    message = parse_message(data)  # a copy: the queued record keeps no decoded fields
    limit = integer_parameter(properties, "limit")
    limit = -1 if limit is None or limit < 0 else limit
    content = data[body_start(data) :]
    if _boolean(properties, "returnJson", False):
        cut = limit if 0 <= limit < len(content) else -1
        return _json_body(body_of(message), cut).encode()
    if _boolean(properties, "decompressBeforeLimiting", False):
        encoding = message.properties_field(7)  # content-encoding
        if encoding not in (None, "", "identity", GZIP):
            raise InvalidField(
                f"Requested decompression of message with unknown compression '{encoding}'",
                "decompressBeforeLimiting",
            )
        if encoding == GZIP and limit >= 0:
            return _gzip_cut(body_of(message), limit)
    return content if limit < 0 else content[:limit]


def _gzip_cut(body: Any, limit: int) -> bytes:
    """A gzip-compressed body's first ``limit`` bytes once decompressed, compressed again
    (Broker-J's decompressBeforeLimiting); 400 if it is not gzip data."""
    if not isinstance(body, bytes):
        raise InvalidField("only a binary body can be decompressed", "decompressBeforeLimiting")
    try:
        plain = gzip.decompress(body)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidField(
            f"the body is not gzip data: {exc}", "decompressBeforeLimiting"
        ) from None
    return gzip.compress(plain[:limit])


def _json_body(body: Any, limit: int) -> str:
    """``body`` as JSON text as Broker-J writes it: binary as a list of signed byte values,
    other types the JSON has not as their text; with ``limit`` (not -1) cut to about that
    many characters (Broker-J's MessageContentJsonConverter: texts end in ``...``)."""
    value = _Cut(math.inf if limit < 0 else limit).copy(body)  # no limit: nothing is cut
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _signed(data: bytes | bytearray) -> list[int]:
    return [byte - 256 if byte > 127 else byte for byte in data]


class _Cut:
    """Broker-J's truncation of a body shown as JSON: a budget of characters, spent as
    the value is written; what does not fit is left out (texts cut, ending in ``...``)."""

    def __init__(self, limit: float) -> None:
        self.remaining = limit

    def copy(self, value: Any) -> Any:
        if value is None:
            self.remaining -= 4
            return None
        if isinstance(value, bool | int | float):
            self.remaining -= len(json.dumps(value))
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, Mapping):
            return self._map(value)
        if isinstance(value, list | tuple):
            return self._list(list(value))
        if isinstance(value, bytes | bytearray):
            return self._list(_signed(value))
        return self._text(str(value))

    def _text(self, text: str) -> str:
        written = len(json.dumps(text, ensure_ascii=False))
        if self.remaining >= written:
            self.remaining -= written
            return text
        if self.remaining > 0:
            cut = text[: int(self.remaining)] + "..."
            self.remaining -= len(cut)
            return cut
        return "..."

    def _list(self, items: list[Any]) -> list[Any]:
        self.remaining -= 2  # the brackets
        copied = []
        for item in items:
            if self.remaining <= 0:
                break
            copied.append(self.copy(item))
            self.remaining -= 1  # a comma
        return copied

    def _map(self, source: Mapping[Any, Any]) -> dict[str, Any]:
        self.remaining -= 2  # the braces
        copied = {}
        for key, value in source.items():
            if self.remaining <= 0:
                break
            name = self.copy(key)
            copied[name if isinstance(name, str) else str(name)] = self.copy(value)
            self.remaining -= 2  # a colon and a comma
        return copied


def _info(entry: Entry, data: bytes, headers: bool) -> dict[str, Any]:
    """One message as Broker-J's MessageInfo, nulls left out."""
    message = parse_message(data)  # a copy: the queued record keeps no decoded fields
    info: dict[str, Any] = {
        "id": entry.seq,
        "size": len(data),
        "messageType": "AMQP 1.0",
        "state": _STATES.get(entry.state, "Available"),
        "deliveryCount": entry.delivery_count,
        "arrivalTime": int(entry.message.arrival * 1000),
        "persistent": message.durable,
        "priority": message.priority,
    }
    for index, name in _PROPERTY_FIELDS.items():
        value = message.properties_field(index)
        if value is not None:
            info[name] = as_text(value) if name in _TEXT else value
    if message.creation_time is not None:
        info["timestamp"] = message.creation_time
    if entry.expires_at is not None:
        info["expirationTime"] = int(entry.expires_at * 1000)
    if headers:
        info["headers"] = dict(message.application_properties)
    return info


def _boolean(properties: Mapping[str, Any], name: str, default: bool) -> bool:
    value = properties.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidField(f"'{name}' must be true or false, not {value!r}", name)
