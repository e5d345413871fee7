"""The broker's socket wait (proton_broker/amqp/poller.py) on real socket pairs, with epoll
and with poll: it reports what is ready, follows changes of interest, and expires
deadlines as Proton's own selector does."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import pytest

from proton_broker.amqp import poller

KINDS = [True, False] if hasattr(select, "epoll") else [False]


@pytest.fixture(params=KINDS, ids=lambda epoll: "epoll" if epoll else "poll")
def selector(request: pytest.FixtureRequest) -> poller.PollSelector:
    return poller.PollSelector(use_epoll=request.param)


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


def test_a_socket_with_input_is_reported_readable_and_a_quiet_one_is_not(selector, pair) -> None:
    near, far = Watched(pair[0]), Watched(pair[1])
    selector.add(near)
    selector.add(far)
    pair[1].send(b"x")
    assert selector.select(1.0) == ([near], [], [])


def test_writing_is_reported_only_while_asked_for(selector, pair) -> None:
    watched = Watched(pair[0], reading=False)
    selector.add(watched)
    assert selector.select(0.0) == ([], [], [])
    watched.writing = True
    selector.update(watched)
    assert selector.select(0.0) == ([], [watched], [])


def test_a_removed_selectable_is_no_longer_reported(selector, pair) -> None:
    watched = Watched(pair[0])
    selector.add(watched)
    selector.remove(watched)
    pair[1].send(b"x")
    assert selector.select(0.0) == ([], [], []) and selector.selectables == 0


def test_a_hung_up_socket_is_reported_readable_so_the_next_read_sees_it(selector, pair) -> None:
    watched = Watched(pair[0])
    selector.add(watched)
    pair[1].close()
    assert selector.select(1.0)[0] == [watched]


def test_the_wait_ends_at_the_earliest_deadline_and_names_who_expired(selector) -> None:
    timer, later = Watched(None), Watched(None)
    timer._deadline = time.time() + 0.05
    later._deadline = time.time() + 60
    selector.add(timer)
    selector.add(later)
    started = time.monotonic()
    readable, writable, expired = selector.select(5.0)
    assert 0.04 <= time.monotonic() - started < 1.0
    assert expired == [timer]


def test_a_deadline_moved_later_is_waited_for_and_the_old_one_forgotten(selector) -> None:
    watched = Watched(None)
    watched._deadline = time.time() + 0.05
    selector.add(watched)
    watched._deadline = time.time() + 0.3  # moved later before it passed
    selector.update(watched)
    started = time.monotonic()
    assert selector.select(5.0)[2] == [watched]
    assert 0.25 <= time.monotonic() - started < 1.0


def test_an_expired_deadline_stays_due_until_its_handler_moves_it(selector) -> None:
    watched = Watched(None)
    watched._deadline = time.time() + 0.02
    selector.add(watched)
    assert selector.select(5.0)[2] == [watched]
    assert selector.select(5.0)[2] == [watched]  # not moved: due again at once
    watched._deadline = time.time() + 60  # the handler ticked it
    selector.update(watched)
    assert selector.select(0.05) == ([], [], [])


def test_a_removed_selectables_deadline_ends_no_wait(selector) -> None:
    watched = Watched(None)
    watched._deadline = time.time() + 0.02
    selector.add(watched)
    selector.remove(watched)
    started = time.monotonic()
    assert selector.select(0.2) == ([], [], [])
    assert time.monotonic() - started >= 0.15


def test_a_socket_number_reused_by_a_new_socket_stays_watched_when_the_old_one_goes(
    selector, pair
) -> None:
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


def test_a_new_selectable_for_a_socket_number_still_registered_is_the_one_reported(
    selector, pair
) -> None:
    """Proton may hand a socket number to a new selectable before the old one is removed:
    the newer one is reported, and removing the older one leaves it watched."""
    old, new = Watched(pair[0]), Watched(pair[0])
    selector.add(old)
    selector.add(new)
    pair[1].send(b"x")
    assert selector.select(1.0)[0] == [new]
    selector.remove(old)
    assert selector.select(1.0)[0] == [new]
