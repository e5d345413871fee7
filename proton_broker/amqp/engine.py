"""The engine calls on the hot path (docs/performance.md): the single calls every message
makes, and a transfer's steps, one function each.

Rules owned here:

* The single calls (:data:`event_type`, :data:`pop`, :data:`remote_state`,
  :data:`settled`, :data:`settle`) are Proton's, answering as Proton does.
* A producer's transfer is read in two steps: :func:`transfer_size` says whether it is
  complete (its size) or not yet readable, still arriving (:data:`PARTIAL`) or aborted,
  asked in that order; :func:`take` reads a complete transfer's bytes into a new bytes
  object and moves the link on. :func:`accept` settles it accepted (the producer may have
  settled it already: then it is only settled). A consumer's delivery is sent whole, with a
  section inserted into the message's bytes (its queue sequence number), and the link
  moved on by :func:`send_with`; the compiled copy appends the three pieces to the
  delivery without joining them first. The bytes sent count in the consumer's
  :data:`Tally` (amqp/output.py looks at its backlog when they reach the tally's ``due``),
  so the count costs the consumer no step of its own.
* The functions below, and cffi's own for the single calls, are the reference. Where the
  package was built with a C compiler the same steps run compiled (``_engine.pyx``), each
  a single call that makes its engine calls without releasing the GIL: each call through
  cffi releases and retakes it, about 75 ns over a Python call, and a message made about 26
  such calls. ``tests/amqp/test_engine.py`` holds the two to the same answers over real
  links. Without the compiled module the package runs these, as it did before.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from cproton_ffi import ffi, lib

NOT_READABLE = -1  # not a transfer the link can read now (not its current one)
PARTIAL = -2  # more frames to come
ABORTED = -3  # the producer aborted it

_readable, _partial, _aborted = (
    lib.pn_delivery_readable,
    lib.pn_delivery_partial,
    lib.pn_delivery_aborted,
)
_pending, _recv, _advance = lib.pn_delivery_pending, lib.pn_link_recv, lib.pn_link_advance
_settled, _update, _settle = lib.pn_delivery_settled, lib.pn_delivery_update, lib.pn_delivery_settle
_send = lib.pn_link_send
_ACCEPTED = 0x24  # PN_ACCEPTED
_buffer = [ffi.new("char[]", 4096)]  # reused for every transfer's bytes, grown as needed


def transfer_size_python(dlv: Any) -> int:
    """The size of a complete transfer's bytes, or NOT_READABLE, PARTIAL or ABORTED."""
    if not _readable(dlv):
        return NOT_READABLE
    if _partial(dlv):
        return PARTIAL
    if _aborted(dlv):
        return ABORTED
    return int(_pending(dlv))


def take_python(link: Any, size: int) -> bytes:
    """The current transfer's ``size`` bytes; the link moves on to its next transfer."""
    buffer = _buffer[0]
    if size > len(buffer):
        buffer = _buffer[0] = ffi.new("char[]", size * 2)
    got = _recv(link, buffer, size)
    _advance(link)
    return ffi.unpack(buffer, max(0, min(got, size)))  # type: ignore[no-any-return]


def accept_python(dlv: Any) -> None:
    """Settle the transfer accepted (just settle it where the producer settled it)."""
    if not _settled(dlv):
        _update(dlv, _ACCEPTED)
    _settle(dlv)


class TallyPython:
    """The bytes a consumer has sent, and at how many its backlog is next looked at
    (amqp/output.py)."""

    __slots__ = ("handed", "due")

    def __init__(self, due: int) -> None:
        self.handed = 0
        self.due = due


def send_with_python(link: Any, data: bytes, at: int, section: bytes, tally: Any) -> bool:
    """Send ``data`` with ``section`` inserted at offset ``at`` as the link's current
    delivery, whole, and move on to the next. The bytes sent count in ``tally``; whether
    they reached its ``due``."""
    if not 0 <= at <= len(data):
        raise ValueError(f"offset {at} is outside the message")
    whole = data[:at] + section + data[at:]
    _send(link, whole, len(whole))
    _advance(link)
    tally.handed += len(whole)
    return bool(tally.handed >= tally.due)


def _compiled() -> ModuleType | None:
    """The compiled steps, given the engine's functions; None where they were not built or
    cffi's pointer objects are not what they expect (see ``_engine.pyx``)."""
    try:
        from proton_broker.amqp import _engine
    except ImportError:
        return None
    try:
        _engine.use_engine(ffi, lib)
    except ValueError:
        return None
    return _engine


COMPILED = _compiled()
# The single calls: the compiled ones, or cffi's.
event_type: Callable[[Any], int] = lib.pn_event_type if COMPILED is None else COMPILED.event_type
pop: Callable[[Any], None] = lib.pn_collector_pop if COMPILED is None else COMPILED.pop
remote_state: Callable[[Any], int] = (
    lib.pn_delivery_remote_state if COMPILED is None else COMPILED.remote_state
)
settled: Callable[[Any], bool] = _settled if COMPILED is None else COMPILED.settled
settle: Callable[[Any], None] = _settle if COMPILED is None else COMPILED.settle
# A transfer's steps: the compiled ones, or the reference above.
transfer_size: Callable[[Any], int] = (
    transfer_size_python if COMPILED is None else COMPILED.transfer_size
)
take: Callable[[Any, int], bytes] = take_python if COMPILED is None else COMPILED.take
accept: Callable[[Any], None] = accept_python if COMPILED is None else COMPILED.accept
send_with: Callable[[Any, bytes, int, bytes, Any], bool] = (
    send_with_python if COMPILED is None else COMPILED.send_with
)
Tally: Callable[[int], Any] = TallyPython if COMPILED is None else COMPILED.Tally
