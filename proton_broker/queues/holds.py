"""Messages kept from consumers and browsers until a time they carry: hold until valid
(Broker-J ``holdOnPublishEnabled``) and delivery delay (JMS 2.0, as Qpid JMS and Artemis
send it).

Rules this module owns: on a queue with hold on publish, a message's valid-from time is its
``x-qpid-not-valid-before`` message annotation, else the application property of that name
(milliseconds since the epoch, a number or numeric text; anything else means no hold). On
every queue, a message's delivery time is its ``x-opt-delivery-time`` message annotation
(ms since the epoch, as Qpid JMS sets it), else its arrival plus its ``x-opt-delivery-delay``
annotation (ms); other types mean no delay, and so do a NaN and an infinity (a time that
orders against nothing would stall the heap below; Broker-J reads NaN as 0). A message
with a delivery time waits for it alone, its valid-from time unread, as Broker-J reads the
two (``MessageMetaData_1_0.getNotValidBefore``). One whose time has already come when it
arrives is not held; the arrival of a recovered message is its first arrival, so a restart
does not restart a delay.

Held entries wait in a min-heap by time, so holding and releasing cost O(log n) and nothing
scans the queue; the event loop is asked to wake the queue when the earliest time changes.
Entries due together are released :data:`RELEASE_BATCH` a loop turn (as qpidd's
``Queue::purgeExpired`` takes ``maxPurgeBatch``, 1000, a call), the loop asked to wake the
queue again at once while more are due: 10^6 messages due at one instant stopped every
connection for 1.4 s in one go, and now go out while the loop serves its sockets.
What a released entry rejoins (its own position in the ordering, browsers that passed it)
is the queue's business; this module only says which entries are held and which are due.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator

from proton_broker.message import Message
from proton_broker.queues.entries import AVAILABLE, HELD, Entry

RELEASE_BATCH = 1000  # held entries released a loop turn, as qpidd's maxPurgeBatch

NOT_VALID_BEFORE = "x-qpid-not-valid-before"
DELIVERY_TIME = "x-opt-delivery-time"
DELIVERY_DELAY = "x-opt-delivery-delay"


class Holds:
    """The held entries of one queue, by the time (ms since the epoch) they become valid.
    ``wake_at(when)`` asks for the queue to release them at ``when`` (seconds)."""

    def __init__(self, wake_at: Callable[[float], object]) -> None:
        self._heap: list[tuple[float, int, Entry]] = []
        self._wake_at = wake_at

    def hold(self, entry: Entry, until: float) -> bool:
        """Hold ``entry`` until ``until`` (ms since the epoch; see :func:`held_until`): it
        becomes HELD (the caller takes it out of the ordering) and True; False if it is no
        longer available (a ring queue evicted it on arrival)."""
        if entry.state != AVAILABLE:
            return False
        entry.state = HELD
        heapq.heappush(self._heap, (until, entry.seq, entry))
        if self._heap[0][2] is entry:  # the first due now: the wake-up time changed
            self._wake_at(until / 1000.0)
        return True

    def due(self, now: float, most: int | None = None) -> Iterator[Entry]:
        """Take out the entries still held whose time (``now``, seconds) has come, looking
        at ``most`` at most (None: all), then ask to be woken for the next: at once, if
        more are due (see the module rules)."""
        heap = self._heap
        left = len(heap) if most is None else most
        while left > 0 and heap and heap[0][0] <= now * 1000.0:
            left -= 1
            entry = heapq.heappop(heap)[2]
            if entry.state == HELD:
                yield entry
        if heap:
            self._wake_at(heap[0][0] / 1000.0)

    def clear(self) -> None:
        self._heap.clear()


def held_until(message: Message, arrival: float, on_publish: bool) -> float | None:
    """When (ms since the epoch) ``message``, which arrived at ``arrival`` (seconds), may go
    to consumers, if that is later than its arrival (``on_publish``: the queue holds until
    valid too); None: at once."""
    valid_from = delivery_time(message, arrival)
    if on_publish and valid_from is None:  # a delivery time wins (see the module rules)
        valid_from = not_valid_before(message)
    if valid_from is None or valid_from <= arrival * 1000.0:
        return None
    return valid_from


def delivery_time(message: Message, arrival: float) -> float | None:
    """When (ms since the epoch) ``message``, which arrived at ``arrival`` (seconds), may be
    delivered, by its delivery-time or delivery-delay annotation; None: at once."""
    if message.annotations_span is None:
        return None  # the common case: no annotations, nothing to look up
    when = message.message_annotation(DELIVERY_TIME)
    if _number(when):
        return float(when)
    delay = delivery_delay(message)
    return None if delay is None else arrival * 1000.0 + delay


def delivery_delay(message: Message) -> float | None:
    """``message``'s ``x-opt-delivery-delay`` (ms) if it is one that holds a message (see
    the module rules); None otherwise."""
    delay = message.message_annotation(DELIVERY_DELAY)
    return float(delay) if _number(delay) and delay > 0 else None


def _number(value: object) -> bool:
    """A time or delay a message may carry: an int, or a float that is finite."""
    if type(value) is float:
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


def not_valid_before(message: Message) -> float | None:
    """The time (ms since the epoch) before which ``message`` may not be delivered."""
    value = message.message_annotation(NOT_VALID_BEFORE)
    if value is None:
        value = message.application_property(NOT_VALID_BEFORE)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return float(value) if _number(value) else None
