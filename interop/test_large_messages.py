"""A message larger than the broker's 1 MiB frames crosses it in many frames, intact."""

from __future__ import annotations

import pytest

from interop.clients import CPP, PYTHON, RHEA, Client

SIZE = 3 * 1024 * 1024


def large_body() -> str:
    # Not one repeated byte: a pattern that would show a lost, doubled or shifted frame.
    pattern = "".join(chr(ord("a") + i % 26) + str(i % 10) for i in range(997))
    return (pattern * (SIZE // len(pattern) + 1))[:SIZE]


@pytest.mark.parametrize(
    ("sender", "receiver"),
    [(CPP, RHEA), (RHEA, CPP), (PYTHON, CPP)],
    ids=["cpp-to-rhea", "rhea-to-cpp", "python-to-cpp"],
)
def test_a_3_mb_message_spanning_many_frames_is_received_intact(
    broker, queue, sender: Client, receiver: Client
) -> None:
    body = large_body()
    sender.send(
        broker.url,
        queue,
        [
            {"id": "big", "body": body, "properties": {"size": SIZE}},
            {"id": "after", "body": "small"},
        ],
    )
    got = receiver.receive(broker.url, queue, 2, timeout=20)
    assert got[0]["properties"] == {"size": SIZE}
    assert len(got[0]["body"]) == SIZE
    assert got[0]["body"] == body
    assert (got[1]["id"], got[1]["body"]) == ("after", "small")
