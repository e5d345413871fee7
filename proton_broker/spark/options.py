"""The connector's options, parsed once on the driver into plain values.

Rules this module owns:

* Spark hands options over as strings with case-insensitive names; this is the one place
  that knows them, their defaults and their checks. A bad value fails the query at once
  with a message naming the option, before any connection is made.
* The parsed options are a frozen dataclass: picklable, so readers and writers carry them
  to executors and never re-parse there.
* Names the connector does not know are ignored, as Spark's Kafka source ignores them (so
  one set of options can serve several formats); a misspelt name therefore has no effect.
* Starting offsets are ``earliest``, ``latest``, or JSON mapping queue names to a sequence
  number or to ``"earliest"`` / ``"latest"``; a queue missing from the JSON starts at
  ``earliest``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_URL = "amqp://127.0.0.1:5672"


class OptionError(ValueError):
    """An option is missing or has a bad value."""


@dataclass(frozen=True)
class TlsFiles:
    """What an ``amqps`` connection trusts and shows (PEM files, at the same path on the
    driver and on every executor, as Spark's Kafka connector reads its trust store):
    ``ca_file`` the CAs the broker's certificate is checked against (empty: OpenSSL's
    default store, which ``SSL_CERT_FILE`` can point elsewhere); ``cert_file`` and
    ``key_file`` this client's certificate and key, for a broker with
    ``tls.verify_clients`` (SASL EXTERNAL); ``key_password`` the key's, if it has one."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    key_password: str | None = None


@dataclass(frozen=True)
class SourceOptions:
    url: str
    queues: tuple[str, ...]
    starting: dict[str, int | str] = field(default_factory=dict)  # queue -> number or word
    max_per_batch: int | None = None
    max_per_partition: int | None = None
    fail_on_data_loss: bool = True
    key_property: str | None = None
    timeout: float = 30.0
    credit: int = 10_000  # the browse window: messages the broker may send ahead
    cursor: str | None = None  # committed offsets go to this LVQ on the broker
    fail_once_file: str | None = None  # fault tests: fail one read if this file exists
    tls: TlsFiles | None = None  # an amqps URL's files (None: OpenSSL's defaults)


@dataclass(frozen=True)
class SinkOptions:
    url: str
    queue: str
    write_id: str | None = None  # batch writes: the id prefix of their message ids
    window: int = 1000
    timeout: float = 30.0
    fail_once_file: str | None = None  # fault tests: fail one task half way
    tls: TlsFiles | None = None  # an amqps URL's files (None: OpenSSL's defaults)


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark passes a case-insensitive dict; tests pass plain)."""
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _int(options: Mapping[str, str], name: str, minimum: int = 1) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(f"option {name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise OptionError(f"option {name} must be a finite number of seconds, got {raw!r}")
    if value <= 0:
        raise OptionError(f"option {name} must be greater than 0, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


def _queues(options: Mapping[str, str]) -> tuple[str, ...]:
    if _get(options, "queues") is not None and _get(options, "queue") is not None:
        raise OptionError(
            "options queue and queues are both given: give one of them (queues takes "
            "several names, separated by commas)"
        )
    raw = _get(options, "queues") or _get(options, "queue") or _get(options, "path")
    names = tuple(dict.fromkeys(q.strip() for q in (raw or "").split(",") if q.strip()))
    if not names:
        raise OptionError(
            "option queues (or queue) is required: one queue name or several, separated by commas"
        )
    return names


def parse_starting(raw: str | None, queues: tuple[str, ...]) -> dict[str, int | str]:
    """``startingOffsets`` as a queue -> number / ``earliest`` / ``latest`` map."""
    if raw is None or raw.strip().lower() == EARLIEST:
        return dict.fromkeys(queues, EARLIEST)
    if raw.strip().lower() == LATEST:
        return dict.fromkeys(queues, LATEST)
    try:
        given = json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(
            "option startingOffsets must be earliest, latest or JSON such as "
            f'{{"orders": 42}}, got {raw!r}'
        ) from None
    if not isinstance(given, dict):
        raise OptionError(f"option startingOffsets must be a JSON object, got {raw!r}")
    unknown = sorted(set(given) - set(queues))
    if unknown:
        raise OptionError(f"option startingOffsets names queues that are not read: {unknown}")
    out: dict[str, int | str] = dict.fromkeys(queues, EARLIEST)
    for queue, value in given.items():
        out[queue] = _start_value(queue, value)
    return out


def _start_value(queue: str, value: Any) -> int | str:
    if isinstance(value, str) and value.lower() in (EARLIEST, LATEST):
        return value.lower()
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise OptionError(
        f"option startingOffsets: queue '{queue}' must start at a sequence "
        f"number >= 1, earliest or latest, got {value!r}"
    )


def source_options(options: Mapping[str, str]) -> SourceOptions:
    queues = _queues(options)
    return SourceOptions(
        url=_get(options, "url") or DEFAULT_URL,
        queues=queues,
        starting=parse_starting(_get(options, "startingOffsets"), queues),
        max_per_batch=_int(options, "maxMessagesPerBatch"),
        max_per_partition=_int(options, "maxMessagesPerPartition"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        key_property=_get(options, "keyProperty"),
        timeout=_float(options, "timeout", 30.0),
        credit=_int(options, "credit") or 10_000,
        cursor=_get(options, "cursor"),
        fail_once_file=_get(options, "failOnceFile"),
        tls=_tls(options),
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    queues = _queues(options)
    if len(queues) != 1:
        raise OptionError(f"the sink writes to one queue; option queue names {list(queues)}")
    return SinkOptions(
        url=_get(options, "url") or DEFAULT_URL,
        queue=queues[0],
        write_id=_get(options, "writeId"),
        window=_int(options, "maxInFlight") or 1000,
        timeout=_float(options, "timeout", 30.0),
        fail_once_file=_get(options, "failOnceFile"),
        tls=_tls(options),
    )


_TLS_FILES = {"caFile": "ca_file", "certFile": "cert_file", "keyFile": "key_file"}


def _tls(options: Mapping[str, str]) -> TlsFiles | None:
    """The TLS files named by ``caFile``, ``certFile``, ``keyFile`` and ``keyPassword``
    (None if none is): each must be a file this process can read (checked on the driver,
    so a wrong path fails the query before any connection is made), and a certificate
    goes with its key."""
    files = {field: _get(options, name) or "" for name, field in _TLS_FILES.items()}
    password = _get(options, "keyPassword")
    if not any(files.values()) and password is None:
        return None
    for name, field_name in _TLS_FILES.items():
        path = files[field_name]
        if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            raise OptionError(f"option {name}: no file this process can read at {path}")
    if bool(files["cert_file"]) != bool(files["key_file"]):
        raise OptionError("options certFile and keyFile go together: give both or neither")
    return TlsFiles(**files, key_password=password)
