"""What a queue's Python objects cost per message, for the tests that hold those figures."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterable

from proton_broker.codec.sections import parse_message
from proton_broker.queues.queue import Queue


def traced_bytes_per_message(queue: Queue, messages: Iterable[bytes]) -> float:
    """The Python memory ``queue`` holds for each of ``messages`` (encoded, each parsed
    from bytes of its own, as off the wire) once it has taken them all, by tracemalloc:
    object sizes, so exact, not timing. The cyclic collector runs before the count."""
    count = 0
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for encoded in messages:
            queue.enqueue(parse_message(encoded[:1] + encoded[1:]))
            count += 1
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert queue.depth == count
    return grown / count
