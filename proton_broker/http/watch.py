"""The gateway's listeners, on the broker's side: everything here runs on the event-loop
thread, the only thread that touches queues.

Each queue the gateway serves gets one :class:`QueueWatch`, registered once in
``queue.history.watchers``; it holds the long polls waiting for a version (one-shot) and the
WebSocket streams following the queue (until they close), indexed by the key they follow
(``None``: every key). A new version is looked up in that index, so one send answers a
thousand waiting polls with one pass, and polls on other keys cost nothing.

Looking at the history and registering a listener happen in the same call on the loop
thread, so no version can arrive in between: a listener sees every version from its start
exactly once. A long poll is answered by the first version only (History.first), never a
list of them; a stream's replay is read a slice at a time (:class:`Replay`), each slice one
call on the loop, up to the newest version when the stream subscribed, its listener getting
the ones after. What a listener is given is ``(key, sequence, bytes)``: the bytes are
immutable, so the gateway's own thread decodes them (off the broker's loop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from proton_broker.message import Message
from proton_broker.queues.history import History, Version
from proton_broker.queues.queue import Queue

log = logging.getLogger("proton_broker.http")

Item = tuple[str, int, bytes]  # key, sequence, the encoded message
Answer = Callable[[Item], object]  # hands an item to the gateway's thread; must not block
REPLAY_SLICE = 500  # kept versions a stream's replay reads in one call on the loop


class Listener:
    """A long poll (``once``) or a stream waiting on one key or all keys of a queue."""

    __slots__ = ("key", "answer", "once")

    def __init__(self, key: str | None, answer: Answer, once: bool) -> None:
        self.key = key
        self.answer = answer
        self.once = once


class QueueWatch:
    """The listeners of one queue, called by the queue for each new version."""

    def __init__(self, queue: Queue) -> None:
        assert queue.history is not None
        self.queue = queue
        self.history: History = queue.history
        self.key_property = queue.history.key_property  # the property an HTTP send sets
        self._by_key: dict[str | None, dict[int, Listener]] = {}
        queue.history.watchers.append(self._new_version)

    @property
    def count(self) -> int:
        return sum(len(listeners) for listeners in self._by_key.values())

    def add(self, listener: Listener) -> None:
        self._by_key.setdefault(listener.key, {})[id(listener)] = listener

    def remove(self, listener: Listener) -> None:
        listeners = self._by_key.get(listener.key)
        if listeners is not None:
            listeners.pop(id(listener), None)
            if not listeners:
                del self._by_key[listener.key]

    def end(self, final: object) -> None:
        """The queue is gone: hand ``final`` to every listener and stop following it."""
        listeners = [listener for by_id in self._by_key.values() for listener in by_id.values()]
        self._by_key.clear()
        if self._new_version in self.history.watchers:
            self.history.watchers.remove(self._new_version)
        for listener in listeners:
            _safely(listener.answer, final)  # type: ignore[arg-type]

    def replay(self, start: int | str | None, key: str | None) -> Replay:
        """A stream's replay of the kept versions from ``start`` (as History.replay;
        ``None``: none), read a slice at a time (:meth:`Replay.next`). Call it in the same
        loop call that adds the stream's listener: the replay ends at the newest version
        there is now, and every later one reaches the listener."""
        return Replay(self, start, key, self.queue.numbers.next - 1)

    def first_kept(self, start: int | str | None, key: str | None) -> Item | None:
        """What a long poll from ``start`` answers at once: the first kept version with a
        number >= start (``first``: the oldest; ``last``: the newest), or None."""
        version = self.history.first(start, key) if start is not None else None
        return None if version is None else self.item(version)

    def item(self, version: Version) -> Item:
        """What a listener is given of a kept ``version`` (its bytes read back from the
        store if its queue flowed it to disk)."""
        message = version.message
        data = message.data
        pager = self.queue.hooks.pager
        if message.paged and pager is not None:  # flowed to disk: read it back
            data = pager.page_in(message)
        return version.key, version.seq, data

    def _new_version(self, key: str, seq: int, message: Message) -> None:
        item = (key, seq, message.data)
        for index in (key, None):
            listeners = self._by_key.get(index)
            if not listeners:
                continue
            for listener in list(listeners.values()):
                if listener.once:
                    self.remove(listener)
                _safely(listener.answer, item)


class Replay:
    """A stream's replay of kept versions, given a slice at a time: each slice is one call
    on the loop, so a replay of 200,000 versions lets the loop serve its sockets between
    slices rather than hold it for the whole list. It lists the versions with queue
    numbers up to ``upto``, the newest when the stream subscribed, and its listener gets
    every version after it: none is sent twice and none is missed where they meet (a
    version the history lets go of before its slice is read is not sent, as it would not
    be to a stream that subscribed then)."""

    __slots__ = ("watch", "start", "key", "upto", "after", "done")

    def __init__(self, watch: QueueWatch, start: int | str | None, key: str | None, upto: int):
        self.watch = watch
        self.start = start
        self.key = key
        self.upto = upto
        self.after = 0  # the queue number of the last version given (numbers start at 1)
        self.done = start is None  # no sequence: new versions only

    def next(self) -> list[Item]:
        """The next slice (on the loop thread): at most :data:`REPLAY_SLICE` versions;
        ``done`` once the replay has given its last."""
        if self.done:
            return []
        assert self.start is not None  # not done
        versions = self.watch.history.replay_slice(
            self.start, self.key, self.after, self.upto, REPLAY_SLICE
        )
        if len(versions) < REPLAY_SLICE:
            self.done = True
        if versions:
            self.after = versions[-1].order
        return [self.watch.item(version) for version in versions]


def _safely(answer: Answer, item: Item) -> None:
    """An answer that fails (the gateway's loop has closed) must not fail the send."""
    try:
        answer(item)
    except Exception:
        log.debug("an HTTP listener could not be answered", exc_info=True)
