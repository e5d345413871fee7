"""Overflow: what a queue does at its limits (ring, reject, producer flow control).

Sources: the Qpid Broker-J book, 4.7.5 "Controlling Queue Size", and the C++ broker's
``LossyQueue`` and ``QueueFlowLimit`` (qpid-cpp ``src/qpid/broker``). One small class per
policy; each looks only at the queue's depth (messages) and size (bytes: the encoded size,
``len(message.data)``, what ``Queue.bytes`` counts) and answers with a decision. The queue
carries the decisions out and the protocol adapter turns them into outcomes and credit: no
Proton and no sockets here.

Rules this module owns:

* A limit is a message count and/or a byte size; ``None`` leaves a measure unchecked. A
  queue is *over* a limit when either measure is strictly above it (Broker-J's
  ``depth > maximum``), so a limit of 5 messages holds 5.
* **reject** refuses a message that would take the queue over a limit, before anything
  changes, with a description naming the queue and the limit. Messages sent to the queue
  under transactions still open count as if they were on it (queues/limits.py).
* **ring** only says whether the queue is over; which messages go is the queue's business
  (:meth:`proton_broker.queues.queue.Queue.enqueue`), since it owns the orderings.
* **self-destruct** (the C++ broker's ``SelfDestructQueue``; Broker-J has no such policy):
  the message that takes the queue over a limit joins it, and the queue is then deleted,
  once, by the broker (queues/limits.py asks it): its consumers are detached, and its
  messages go to its alternate or are discarded, as a forced delete does. qpidd's answer to
  a subscriber too slow for its topic: its subscription ends, the publisher and the other
  subscribers go on.
* **producer flow control** (policy ``producer_flow_control``, whose stop thresholds are the
  limits, or the C++ ``qpid.flow_stop_count/size`` with any policy but ring) *stops* the
  queue's producers once a measure goes over its stop threshold, and *resumes* them once
  every measure with a threshold is at or below its resume threshold.
* **Resume thresholds**: an explicit C++ ``qpid.flow_resume_count/size`` R means "below R"
  (``QueueFlowLimit``: ``count < R``), so at or below R - 1; otherwise Broker-J's rule, at
  or below ``ceil(percent * stop / 100)`` (``ProducerFlowControlOverflowPolicyHandler``),
  the percent from the queue's ``queueFlowResumeLimit`` option, else from Broker-J's
  context variable ``queue.queueFlowResumeLimit`` in its ``context`` (a number from 0 to
  100, decimals allowed, as Broker-J reads a double), else 80. Hysteresis keeps producers from
  flapping at the limit. (Ring and reject log that they are back at the percent rounded
  down, so always below the limit.)
* **Operational log** (logger ``proton_broker.queues``, Broker-J's codes): QUE-1003 once
  when a queue goes over a limit (a ring starts deleting, a reject queue refuses, producers
  are stopped) and QUE-1004 once when it is back at its resume level. Ring and reject use
  the resume rule only for this, so a queue hovering at its limit logs one pair, not one
  line per message; their QUE-1004 says how many messages were deleted or refused meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from proton_broker.queues.settings import (
    FLOW_TO_DISK,
    PRODUCER_FLOW_CONTROL,
    REJECT,
    RING,
    SELF_DESTRUCT,
    QueueSettings,
)

log = logging.getLogger("proton_broker.queues")

DEFAULT_RESUME_PERCENT = 80  # Broker-J's queue.queueFlowResumeLimit


@dataclass(frozen=True)
class Thresholds:
    """A message count and a byte size; ``None`` leaves that measure unchecked."""

    count: int | None = None
    size: int | None = None

    def over(self, depth: int, nbytes: int) -> bool:
        """Either measure is strictly above its threshold."""
        return (self.count is not None and depth > self.count) or (
            self.size is not None and nbytes > self.size
        )

    def reached_down_to(self, depth: int, nbytes: int) -> bool:
        """Every measure with a threshold is at or below it."""
        return (self.count is None or depth <= self.count) and (
            self.size is None or nbytes <= self.size
        )

    def __str__(self) -> str:
        parts = []
        if self.count is not None:
            parts.append(f"{self.count} messages")
        if self.size is not None:
            parts.append(f"{self.size} bytes")
        return ", ".join(parts)


class _Watch:
    """One limit's over/back state, logged once per transition (QUE-1003 / QUE-1004)."""

    action = ""  # what the queue does while over, for the log line
    cleared = ""  # what changes when it is back
    dropping = ""  # what happens to the messages it counts in ``dropped`` (ring, reject)

    def __init__(self, queue: str, limit: Thresholds, resume: Thresholds) -> None:
        self.queue = queue
        self.limit = limit
        self.resume = resume
        self.over = False
        self.dropped = 0  # messages deleted or refused since it went over

    def went_over(self, depth: int, nbytes: int) -> bool:
        """Note that the limit was breached; True if that is news (it was logged)."""
        if self.over:
            return False
        self.over = True
        self.dropped = 0
        log.warning(
            "QUE-1003 : Maximum depth exceeded on '%s' : current %d messages, %d bytes "
            ": limit %s : %s",
            self.queue,
            depth,
            nbytes,
            self.limit,
            self.action,
        )
        return True

    def removed(self, depth: int, nbytes: int) -> bool:
        """A message left the queue; True if the queue is now back at its resume level."""
        if not self.over or not self.resume.reached_down_to(depth, nbytes):
            return False
        self.over = False
        meanwhile = (
            f" : {self.dropped} messages {self.dropping} while over" if self.dropping else ""
        )
        log.info(
            "QUE-1004 : Maximum depth no longer exceeded on '%s' : current %d messages, "
            "%d bytes : resume at %s : %s%s",
            self.queue,
            depth,
            nbytes,
            self.resume,
            self.cleared,
            meanwhile,
        )
        return True


class RejectPolicy(_Watch):
    """Refuse what would take the queue over its limit."""

    action = "rejecting new messages"
    cleared = "accepting new messages"
    dropping = "refused"

    def refusal(
        self, depth: int, nbytes: int, size: int, pending: int = 0, pending_bytes: int = 0
    ) -> str | None:
        """Why a message of ``size`` bytes may not join the queue now (None: it may).
        ``depth`` and ``nbytes`` include ``pending`` messages of ``pending_bytes``, sent to
        the queue under transactions still open (see queues/limits.py)."""
        limit = self.limit
        if limit.count is not None and depth + 1 > limit.count:
            staged = f", {pending} of them in open transactions" if pending else ""
            why = (
                f"Maximum depth exceeded on '{self.queue}': {depth} messages{staged} "
                f"(limit {limit.count})"
            )
        elif limit.size is not None and nbytes + size > limit.size:
            staged = f" ({pending_bytes} of them in open transactions)" if pending_bytes else ""
            why = (
                f"Maximum depth exceeded on '{self.queue}': {nbytes} bytes{staged} plus "
                f"{size} bytes for this message (limit {limit.size} bytes)"
            )
        else:
            return None
        self.went_over(depth, nbytes)
        self.dropped += 1
        return why


class RingPolicy(_Watch):
    """Delete the least significant available messages while the queue is over its limit."""

    action = "deleting the oldest messages (ring)"
    cleared = "nothing to delete"
    dropping = "deleted"

    def needs_room(self, depth: int, nbytes: int) -> bool:
        return self.limit.over(depth, nbytes)


class FlowToDiskPolicy(_Watch):
    """Over the limit, new messages are paged out: their bytes go to the store and only a
    small record stays in memory until a consumer needs them (Broker-J's flow to disk)."""

    action = "paging new messages out to disk (flow to disk)"
    cleared = "new messages stay in memory"

    def pages_out(self, depth: int, nbytes: int) -> bool:
        if self.limit.over(depth, nbytes):
            self.went_over(depth, nbytes)
            return True
        return False


class SelfDestructPolicy(_Watch):
    """qpidd's ``self-destruct``: a message that takes the queue over its limit joins it,
    and the queue then deletes itself (``SelfDestructQueue``), once."""

    action = "deleting the queue (self-destruct)"
    cleared = "nothing to delete"

    def __init__(self, queue: str, limit: Thresholds, resume: Thresholds) -> None:
        super().__init__(queue, limit, resume)
        self.destroying = False

    def destructs(self, depth: int, nbytes: int) -> bool:
        """Whether the queue, over its limit and not on its way out yet, is to be deleted
        (the caller says so with :meth:`destroyed`, once the broker takes it on)."""
        return not self.destroying and self.limit.over(depth, nbytes)

    def destroyed(self, depth: int, nbytes: int) -> None:
        self.destroying = True
        self.went_over(depth, nbytes)


class FlowControl(_Watch):
    """Stop producers over the stop thresholds; resume them at the resume thresholds."""

    action = "producers stopped (producer flow control)"
    cleared = "producers resumed"

    def enqueued(self, depth: int, nbytes: int) -> bool:
        """True if this arrival just stopped the producers."""
        return not self.over and self.limit.over(depth, nbytes) and self.went_over(depth, nbytes)


def _percent_of(percent: float, stop: int | None) -> int | None:
    """``percent`` of ``stop``, rounded down: where ring and reject log that they are back
    (hysteresis for the log alone, so at least one below the limit)."""
    return None if stop is None else int(percent * stop // 100)


def _resume_at(explicit: int | None, stop: int | None, percent: float) -> int | None:
    """The depth at or below which a measure lets producers resume (see the rules): the
    percent rounded up, as Broker-J rounds its resume limit."""
    if stop is None:
        return None
    return explicit - 1 if explicit is not None else int(-(-percent * stop // 100))


# A queue's limit policy: what it does when a message takes it over its limit.
LimitPolicy = RingPolicy | RejectPolicy | FlowToDiskPolicy | SelfDestructPolicy

_LIMITS: dict[str, type[LimitPolicy]] = {
    RING: RingPolicy,
    REJECT: RejectPolicy,
    SELF_DESTRUCT: SelfDestructPolicy,
    FLOW_TO_DISK: FlowToDiskPolicy,
}


def make_limit(name: str, settings: QueueSettings) -> LimitPolicy | None:
    """The ring, reject or flow-to-disk policy ``settings`` ask for, or None when nothing
    is enforced."""
    policy, count, size = settings.overflow_policy, settings.max_count, settings.max_size
    if (count is None and size is None) or policy not in _LIMITS:
        return None
    percent = _resume_percent(settings)
    limit = Thresholds(count, size)
    resume = Thresholds(_percent_of(percent, count), _percent_of(percent, size))
    return _LIMITS[policy](name, limit, resume)


def make_flow_control(name: str, settings: QueueSettings) -> FlowControl | None:
    """Producer flow control, if ``settings`` ask for it (see the rules). Thresholds that
    cannot act are ignored with a warning, as qpid-cpp's ``QueueFlowLimit`` does: stop
    thresholds on a ring queue (bounded by design), resume thresholds without a stop."""
    pfc = settings.overflow_policy == PRODUCER_FLOW_CONTROL
    stop_count = settings.flow_stop_count
    if stop_count is None and pfc:
        stop_count = settings.max_count
    stop_size = settings.flow_stop_size
    if stop_size is None and pfc:
        stop_size = settings.max_size
    if settings.overflow_policy == RING and (stop_count is not None or stop_size is not None):
        log.warning("queue '%s': flow stop thresholds are ignored on a ring queue", name)
        return None
    if (settings.flow_resume_count is not None and stop_count is None) or (
        settings.flow_resume_size is not None and stop_size is None
    ):
        log.warning("queue '%s': a flow resume threshold without a stop threshold is ignored", name)
    if stop_count is None and stop_size is None:
        return None
    percent = _resume_percent(settings)
    resume = Thresholds(
        _resume_at(settings.flow_resume_count, stop_count, percent),
        _resume_at(settings.flow_resume_size, stop_size, percent),
    )
    return FlowControl(name, Thresholds(stop_count, stop_size), resume)


def _resume_percent(settings: QueueSettings) -> float:
    percent = settings.resume_percent  # the queue's option, or Broker-J's context variable
    return DEFAULT_RESUME_PERCENT if percent is None else percent
