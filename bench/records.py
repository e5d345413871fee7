"""What the in-process queue benchmarks (bench/queue_ops.py, bench/group_dispatch.py)
share: cheap fresh copies of a parsed message record, and set-up without cyclic GC."""

from __future__ import annotations

import contextlib
import copy
import gc
from collections.abc import Iterator
from typing import Any

from proton_broker.message import Message


def clone(
    base: Message, data: bytes | None = None, properties: dict[Any, Any] | None = None
) -> Message:
    """A new record of ``base`` (optionally of other bytes of the same shape), its
    application properties decoded only when ``properties`` gives them."""
    message = copy.copy(base)
    if data is not None:
        message.data = data
    if properties is not None:
        message.app_properties_cache = properties
    return message


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while building messages or pre-filling (set-up only, never timed)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
