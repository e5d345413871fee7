"""The broker's socket wait (proton_broker/amqp/poller.py) on real socket pairs: it reports
what is ready, follows changes of interest, and finds expired deadlines without letting a
stale bound hide one."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from proton_broker.amqp.poller import PollSelector


class Watched:
    """What the selector reads of a Proton selectable: a socket, its interest, a deadline."""

    def __init__(self, sock: socket.socket | None, reading: bool = True) -> None:
        self.sock = sock
        self.reading, self.writing = reading, False
        self._deadline = 0.0

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else -1


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_socket_with_input_is_reported_readable_and_a_quiet_one_is_not(pair) -> None:
    selector = PollSelector()
    near, far = Watched(pair[0]), Watched(pair[1])
    selector.add(near)
    selector.add(far)
    pair[1].send(b"x")
    assert selector.select(1.0) == ([near], [], [])


def test_writing_is_reported_only_while_asked_for(pair) -> None:
    selector = PollSelector()
    watched = Watched(pair[0], reading=False)
    selector.add(watched)
    assert selector.select(0.0) == ([], [], [])
    watched.writing = True
    selector.update(watched)
    assert selector.select(0.0) == ([], [watched], [])


def test_a_removed_selectable_is_no_longer_reported(pair) -> None:
    selector = PollSelector()
    watched = Watched(pair[0])
    selector.add(watched)
    selector.remove(watched)
    pair[1].send(b"x")
    assert selector.select(0.0) == ([], [], []) and selector.selectables == 0


def test_a_hung_up_socket_is_reported_readable_so_the_next_read_sees_it(pair) -> None:
    selector = PollSelector()
    watched = Watched(pair[0])
    selector.add(watched)
    pair[1].close()
    assert selector.select(1.0)[0] == [watched]


def test_the_wait_ends_at_the_earliest_deadline_and_names_who_expired() -> None:
    selector = PollSelector()
    timer, later = Watched(None), Watched(None)
    timer._deadline = time.time() + 0.05
    later._deadline = time.time() + 60
    selector.add(timer)
    selector.add(later)
    started = time.monotonic()
    readable, writable, expired = selector.select(5.0)
    assert 0.04 <= time.monotonic() - started < 1.0
    assert expired == [timer]


def test_a_deadline_moved_later_ends_one_wait_early_and_expires_nothing() -> None:
    selector = PollSelector()
    watched = Watched(None)
    watched._deadline = time.time() + 0.05
    selector.add(watched)
    watched._deadline = time.time() + 0.3  # moved later: the selector's bound is stale
    selector.update(watched)
    assert selector.select(5.0) == ([], [], [])  # woke at the stale bound: nothing due
    started = time.monotonic()
    assert selector.select(5.0)[2] == [watched]  # the exact bound now: woke when due
    assert time.monotonic() - started < 1.0


def test_a_socket_number_reused_by_a_new_socket_stays_watched_when_the_old_one_goes(
    pair,
) -> None:
    selector = PollSelector()
    old = Watched(pair[0])
    selector.add(old)
    number = pair[0].fileno()
    pair[0].close()  # closed before the selector heard of it going
    a, b = socket.socketpair()
    try:
        if a.fileno() != number:
            a, b = b, a
        assert a.fileno() == number
        new = Watched(a)
        selector.add(new)
        selector.remove(old)
        b.send(b"x")
        assert selector.select(1.0)[0] == [new]
    finally:
        a.close()
        b.close()
