"""What goes over HTTP: the send request's JSON, the AMQP message made of it, and the JSON
a listener gets for each stored version.

Kept apart from aiohttp and from the broker loop so the rules are plain functions:

* A send body is a JSON object with ``id`` (a non-empty string or an integer), ``payload``
  (any JSON value) and optionally ``sequence`` (an integer that fits AMQP's 64-bit long);
  any other field, or a value of the wrong type, is a :class:`RequestError` naming the
  field (the config file's rule: a typo is never silently ignored).
* Every JSON body the HTTP side reads (:func:`load_json`) is UTF-8 and holds only text
  that is Unicode: JSON's ``\\ud800`` escapes can spell a lone surrogate, which no AMQP
  string can carry, so such a body is a 400 before anything is made of it.
* The message is an ordinary AMQP message, so AMQP consumers see it: body an AMQP string
  holding the JSON text of ``payload``, content type ``application/json``, the key as the
  application property the queue numbers by, and a custom sequence as the application
  property ``x-opt-sequence`` (the queue checks it and stamps the number it keeps).
* A send (the gateway's ``POST /queue/send``, the console's test message) while the
  broker's memory budget is full (``broker.max_memory``, queues/budget.py) is a 503 and
  nothing is enqueued (:func:`refuse_when_full`): an AMQP producer is stopped by having its
  credit withdrawn, and HTTP has no credit, so its producer is told to come back later.
* A version is shown as ``{"id": key, "sequence": n, "payload": ...}``: the payload is the
  body parsed as JSON when the message says it is JSON (content type
  ``application/json``), otherwise the body's value made JSON-safe (strings as they are,
  binary as UTF-8 text, maps with text keys); a body that does not decode gives ``null``.

Messages are built and read with the broker's own codec (:mod:`proton_broker.codec`), not
Proton: only ``amqp/`` and the client packages import Proton.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton_broker.codec.encode import encode_message
from proton_broker.codec.sections import body_of, parse_message
from proton_broker.codec.values import DecodeError
from proton_broker.message import Message
from proton_broker.queues.budget import MemoryBudget
from proton_broker.queues.history import SEQUENCE

JSON_TYPE = "application/json"
_SEND_FIELDS = ("id", "sequence", "payload")


class RequestError(Exception):
    """A request the gateway refuses: ``status`` and a description for the JSON body."""

    def __init__(self, status: int, description: str, field: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.field = field
        self.headers: dict[str, str] = {}  # sent with the answer (WWW-Authenticate on a 401)

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.description, "status": self.status}
        if self.field is not None:
            out["field"] = self.field
        return out


class Deferred:
    """An answer the broker's loop gives after the call that asked for it has returned
    (a message it writes to the store first): the gateway's ``_on_broker`` waits until it
    is resolved, once, with a result or an error."""

    __slots__ = ("_then", "_outcome")

    def __init__(self) -> None:
        self._then: Callable[[Any, BaseException | None], None] | None = None
        self._outcome: tuple[Any, BaseException | None] | None = None

    def resolve(self, result: Any, error: BaseException | None = None) -> None:
        self._outcome = (result, error)
        if self._then is not None:
            self._then(result, error)

    def then(self, fn: Callable[[Any, BaseException | None], None]) -> None:
        if self._outcome is not None:
            fn(*self._outcome)
        else:
            self._then = fn


def when_written(
    answer: Callable[[], Any], what: str = "the message"
) -> tuple[Deferred, Callable[[BaseException | None], None]]:
    """A Deferred for a message the broker writes first (or ``what`` else it writes: a
    purge's removals), and the completion to give the write (Broker.publish): it resolves
    with ``answer()`` once that is on disk, or with a 503 when it could not be written."""
    deferred = Deferred()

    def written(error: BaseException | None) -> None:
        if error is None:
            deferred.resolve(answer())
        else:
            deferred.resolve(None, RequestError(503, f"{what} could not be stored: {error}"))

    return deferred, written


@dataclass(frozen=True, slots=True)
class SendRequest:
    key: str
    sequence: int | None
    payload: Any


LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  # AMQP's long: the widest signed integer


def refuse_when_full(budget: MemoryBudget) -> None:
    """A 503 naming ``broker.max_memory`` while the memory budget is full (see the module
    rules)."""
    if budget.full:
        raise RequestError(
            503,
            f"the broker's memory budget is full ({budget.used} bytes queued, "
            f"broker.max_memory {budget.limit}): nothing was enqueued; try again once "
            "consumers have made room",
        )


def load_json(raw: bytes) -> Any:
    """A request body as JSON: RequestError (400) unless it is UTF-8 JSON whose text is all
    Unicode (see the module rules)."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:  # json gives up on deep nesting before it runs out of stack
        raise RequestError(
            400, "the request body is not valid JSON: it is nested too deeply"
        ) from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise RequestError(400, "the request body is nested too deeply") from None
    except UnicodeEncodeError:
        raise RequestError(
            400, "the request body holds a lone surrogate (\\ud800-\\udfff): not Unicode text"
        ) from None
    return value


def check_long(value: int, field: str) -> int:
    """``value`` if it fits AMQP's long; RequestError (400) naming ``field`` if not."""
    if not LONG_MIN <= value <= LONG_MAX:
        raise RequestError(400, f"field {field!r} must fit in a signed 64-bit integer", field)
    return value


def parse_send(raw: bytes) -> SendRequest:
    """The body of ``POST /queue/send/{queue}``, checked; RequestError (400) if it is not
    what the API takes."""
    body = load_json(raw)
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, got {_json_type(body)}")
    unknown = sorted(set(body) - set(_SEND_FIELDS))
    if unknown:
        raise RequestError(
            400,
            f"unknown field {unknown[0]!r} (the fields are id, sequence and payload)",
            unknown[0],
        )
    if "id" not in body:
        raise RequestError(400, "missing field 'id' (the message's key)", "id")
    key = body["id"]
    if isinstance(key, bool) or not isinstance(key, (str, int)) or key == "":
        raise RequestError(
            400, f"field 'id' must be a non-empty string or an integer, got {_json_type(key)}", "id"
        )
    sequence = body.get("sequence")
    if sequence is not None and (isinstance(sequence, bool) or not isinstance(sequence, int)):
        raise RequestError(
            400, f"field 'sequence' must be an integer, got {_json_type(sequence)}", "sequence"
        )
    if sequence is not None:
        check_long(sequence, "sequence")
    if "payload" not in body:
        raise RequestError(400, "missing field 'payload'", "payload")
    return SendRequest(str(key), sequence, body["payload"])


def build_message(request: SendRequest, key_property: str) -> Message:
    """The broker's record of the AMQP message a send request stands for."""
    properties: dict[str, Any] = {key_property: request.key}
    if request.sequence is not None:
        properties[SEQUENCE] = request.sequence
    return parse_message(
        encode_message(json.dumps(request.payload, separators=(",", ":")), JSON_TYPE, properties)
    )


def version_json(key: str, sequence: int, data: bytes) -> dict[str, Any]:
    """One stored version (the encoded message ``data``) as listeners see it."""
    return {"id": key, "sequence": sequence, "payload": payload_of(data)}


def payload_of(data: bytes) -> Any:
    try:
        message = parse_message(data)
        body = body_of(message)
        content_type = message.properties_field(6)
    except DecodeError:
        return None
    if content_type == JSON_TYPE and isinstance(body, (str, bytes)):
        try:
            return json.loads(body)
        except ValueError:
            pass
    return json_safe(body)


def json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_key_text(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)  # UUIDs, decimals, described values


def _key_text(key: Any) -> str:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).decode("utf-8", "replace")
    return key if isinstance(key, str) else str(key)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        list: "an array",
        dict: "an object",
    }
    return names.get(type(value), type(value).__name__)
