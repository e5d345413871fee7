"""What the in-process queue benchmarks (bench/queue_ops.py, bench/group_dispatch.py)
share: cheap fresh copies of a parsed message record, and set-up without cyclic GC."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from proton_broker.message import Message


def clone(
    base: Message, data: bytes | None = None, properties: dict[Any, Any] | None = None
) -> Message:
    """A new record of ``base`` (optionally of other bytes of the same shape), its
    application properties decoded only when ``properties`` gives them. Positional
    construction: ``dataclasses.replace`` is about 4x slower, and this runs in timed loops."""
    return Message(
        base.data if data is None else data,
        base.header_end,
        base.durable,
        base.priority,
        base.ttl,
        base.first_acquirer,
        base.delivery_count,
        base.message_id,
        base.to,
        base.subject,
        base.group_id,
        base.absolute_expiry_time,
        base.creation_time,
        base.app_properties_span,
        base.annotations_span,
        base.delivery_annotations_end,
        app_properties_cache=properties,
    )


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while building messages or pre-filling (set-up only, never timed)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
