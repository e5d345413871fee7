"""Every client pair: what one client sends, another receives exactly, types included.

The receiver runs after the sender has finished and detached, as in the Qpid interop suite,
so every pair also relies on queues made on demand by either side and kept between them.
"""

from __future__ import annotations

import itertools

import pytest

from interop.clients import ALL_CLIENTS, Client, expected, typed

PROPERTIES = {"colour": "red", "count": 42, "urgent": True}

# One message per body type; application properties of each simple type on every message.
MESSAGES = [
    {"id": "string", "subject": "a string", "body": "hello, wörld ✓", "properties": PROPERTIES},
    {"id": "int", "body": -123456, "properties": {"negative": -1, "big": 2_000_000_000}},
    {"id": "double", "body": 3.25, "properties": {"label": "pi-ish", "flag": False}},
    {"id": "bool", "body": False, "properties": PROPERTIES},
    {"id": "binary", "body": {"$binary": "00ff7f80"}, "properties": PROPERTIES},
    {
        "id": "map",
        "subject": "a map",
        "properties": PROPERTIES,
        "body": {
            "name": "widget",
            "price": 9.75,
            "stock": 12,
            "active": True,
            "note": None,
            "tags": ["a", "b"],
            "dims": {"w": 1.5, "h": 2},
        },
    },
    {
        "id": "list",
        "body": [1, "two", 3.5, False, None, {"$binary": "0a0b"}, {"k": "v"}],
        "properties": PROPERTIES,
    },
    {"id": "null", "body": None, "properties": {"empty": ""}},
]

PAIRS = list(itertools.product(ALL_CLIENTS, ALL_CLIENTS))


@pytest.mark.parametrize(
    ("sender", "receiver"), PAIRS, ids=[f"{s.name}-to-{r.name}" for s, r in PAIRS]
)
def test_bodies_and_properties_arrive_exactly_as_sent(
    broker, queue, sender: Client, receiver: Client
) -> None:
    sender.send(broker.url, queue, MESSAGES)
    got = receiver.receive(broker.url, queue, len(MESSAGES))
    want = [expected(spec, i) for i, spec in enumerate(MESSAGES)]
    for got_one, want_one in zip(got, want, strict=True):
        assert typed(got_one) == typed(want_one), f"message {want_one['id']}"
