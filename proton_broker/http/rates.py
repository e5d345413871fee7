"""The web console's figures over time: the broker's own counters, sampled on its loop.

Rules this module owns (docs/console.md, "Rates and plots"):

* A sample is taken every ``console.sample_interval`` seconds, on the broker's event loop
  (the gateway's thread asks for it; only the loop reads queues). It reads each queue's
  depth and its enqueued and dequeued counts: O(queues), as a metrics scrape is, about 2 µs
  a queue. So that many queues do not make the console a burden, a sample that took t
  seconds is followed by the next no sooner than 100 t later (console.py): at most 1% of
  the loop's time (100,000 queues: a sample every 20 s or so).
* A rate is the difference of a counter between two samples over the time between them:
  messages in are the queues' enqueued counts, messages out their dequeued ones (accepted
  by a consumer; expiries, purges and replacements are not deliveries). A queue that is
  new or was deleted between two samples is left out of that difference, and one whose
  counters were reset between them (management's ``resetStatistics``) counts from zero, so
  no rate is ever negative.
* The broker's figures (messages in and out per second, messages queued) are kept for the
  last ``console.history`` samples. A queue's are kept for at most
  ``console.max_plotted_queues`` queues, those whose page was looked at most recently: a
  queue's plot starts when its page is first opened, and the queue looked at longest ago
  loses its plot first. Per queue the console otherwise keeps only its last two counts
  (for the queue table's rates).
* Connections are sampled with the queues: the messages each has taken from its producers
  and sent to its consumers, for the connection table's rates (O(links)).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from proton_broker.queues.queue import Queue


class Point(NamedTuple):
    """One sample of a plot: when, messages queued, messages in and out per second (None
    on the first sample of a series: a rate needs two)."""

    t: float
    depth: int
    rate_in: float | None
    rate_out: float | None


class Rates:
    """The samples (broker loop thread only)."""

    def __init__(self, history: int, max_plotted: int) -> None:
        self.history = history
        self.max_plotted = max_plotted
        self.broker: deque[Point] = deque(maxlen=history)
        self._plots: OrderedDict[str, deque[Point]] = OrderedDict()
        self._counts: dict[str, tuple[int, int]] = {}  # queue -> (enqueued, dequeued)
        self._rates: dict[str, tuple[float, float]] = {}  # queue -> (in, out) per second
        self._when: float | None = None  # the last sample's time
        self._connection_counts: dict[str, tuple[int, int]] = {}  # id -> (in, out)
        self._connection_rates: dict[str, tuple[float, float]] = {}
        self._connections_when: float | None = None

    def sample(self, queues: Iterable[Queue], now: float) -> None:
        """Read every queue's counters (see the module rules)."""
        elapsed = None if self._when is None else now - self._when
        previous, counts, rates = self._counts, {}, {}
        depth, moved_in, moved_out, compared = 0, 0, 0, False
        plots = self._plots
        for queue in queues:
            name, stats = queue.name, queue.stats
            count = counts[name] = (stats.enqueued, stats.dequeued)
            depth += queue.depth
            before = previous.get(name)
            if before is not None and (count[0] < before[0] or count[1] < before[1]):
                before = (0, 0)  # its counters were reset (management's resetStatistics)
            rate: tuple[float, float] | None = None
            if before is not None and elapsed:
                compared = True
                moved_in += count[0] - before[0]
                moved_out += count[1] - before[1]
                rate = rates[name] = (
                    (count[0] - before[0]) / elapsed,
                    (count[1] - before[1]) / elapsed,
                )
            plot = plots.get(name)
            if plot is not None:
                plot.append(Point(now, queue.depth, *(rate or (None, None))))
        self._counts, self._rates, self._when = counts, rates, now
        if compared and elapsed:
            self.broker.append(Point(now, depth, moved_in / elapsed, moved_out / elapsed))
        else:
            self.broker.append(Point(now, depth, None, None))

    def sample_connections(self, counts: dict[str, tuple[int, int]], now: float) -> None:
        """Each open connection's (messages in, messages out) so far, by its id."""
        before, when = self._connection_counts, self._connections_when
        elapsed = None if when is None else now - when
        self._connection_rates = {
            key: ((count[0] - old[0]) / elapsed, (count[1] - old[1]) / elapsed)
            for key, count in counts.items()
            if elapsed and (old := before.get(key)) is not None
        }
        self._connection_counts, self._connections_when = counts, now

    def connection_rate(self, key: str) -> tuple[float, float] | None:
        """Connection ``key``'s messages in and out per second between the last samples."""
        return self._connection_rates.get(key)

    def rate_of(self, name: str) -> tuple[float, float] | None:
        """Queue ``name``'s messages in and out per second between the last two samples."""
        return self._rates.get(name)

    def plot_of(self, name: str) -> list[Point]:
        """Queue ``name``'s samples so far; from now on it is sampled (see the rules)."""
        plots = self._plots
        plot = plots.get(name)
        if plot is not None:
            plots.move_to_end(name)
            return list(plot)
        if self.max_plotted:
            plots[name] = deque(maxlen=self.history)
            while len(plots) > self.max_plotted:
                plots.popitem(last=False)
        return []

    def forget(self, name: str) -> None:
        """Queue ``name`` was deleted: its plot goes (a new queue of that name starts anew)."""
        self._plots.pop(name, None)
        self._counts.pop(name, None)
        self._rates.pop(name, None)


def series(points: Iterable[Point]) -> dict[str, list[float | int | None]]:
    """Points as the columns a plot takes (``t``, ``depth``, ``in``, ``out``)."""
    columns: dict[str, list[float | int | None]] = {"t": [], "depth": [], "in": [], "out": []}
    for point in points:
        columns["t"].append(point.t)
        columns["depth"].append(point.depth)
        columns["in"].append(point.rate_in)
        columns["out"].append(point.rate_out)
    return columns
