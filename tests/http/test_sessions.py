"""Console sessions: random tokens, a CSRF token compared in constant time, an idle
timeout and a bound on how many are open."""

from __future__ import annotations

from proton_broker.http.sessions import Sessions


def test_a_session_is_found_by_its_token_and_checks_its_csrf_token() -> None:
    sessions = Sessions(limit=10, timeout=60)
    token, session = sessions.start("alice", now=0.0)
    assert sessions.find(token, now=1.0) is session and session.user == "alice"
    assert session.allows(session.csrf) and not session.allows("forged")
    assert not session.allows(None) and token != session.csrf
    assert sessions.find("unknown", now=1.0) is None and sessions.find(None, now=1.0) is None


def test_a_session_unused_for_the_timeout_ends_and_use_keeps_it_alive() -> None:
    sessions = Sessions(limit=10, timeout=60)
    token, _ = sessions.start("alice", now=0.0)
    assert sessions.find(token, now=50.0) is not None
    assert sessions.find(token, now=105.0) is not None  # 55 s after its last use
    assert sessions.find(token, now=170.0) is None and len(sessions) == 0


def test_beyond_the_limit_the_session_used_longest_ago_ends() -> None:
    sessions = Sessions(limit=2, timeout=60)
    first, _ = sessions.start("a", now=0.0)
    second, _ = sessions.start("b", now=1.0)
    sessions.find(first, now=2.0)  # used again: second is now the oldest
    sessions.start("c", now=3.0)
    assert sessions.find(second, now=4.0) is None and sessions.find(first, now=4.0) is not None


def test_logging_in_again_and_again_ends_only_the_sessions_of_whoever_holds_the_most() -> None:
    sessions = Sessions(limit=5, timeout=60)
    admin, _ = sessions.start("admin", now=0.0)  # the session used longest ago
    for n in range(50):
        sessions.start("anonymous", now=1.0 + n)
    assert sessions.find(admin, now=60.0) is not None and len(sessions) == 5


def test_an_expired_session_makes_room_before_a_live_one_ends() -> None:
    sessions = Sessions(limit=2, timeout=60)
    old, _ = sessions.start("anonymous", now=0.0)
    live, _ = sessions.start("anonymous", now=50.0)
    sessions.start("anonymous", now=100.0)  # old expired at 60
    assert sessions.find(live, now=101.0) is not None and len(sessions) == 2


def test_a_csrf_token_that_is_not_ascii_is_simply_wrong() -> None:
    _, session = Sessions(limit=2, timeout=60).start("alice", now=0.0)
    assert not session.allows("\u00e9t\u00e9") and not session.allows("\udcff")


def test_logging_out_ends_the_session() -> None:
    sessions = Sessions(limit=2, timeout=60)
    token, _ = sessions.start("a", now=0.0)
    sessions.end(token)
    assert sessions.find(token, now=0.0) is None
