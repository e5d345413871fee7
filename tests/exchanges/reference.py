"""Topic matching spelled out recursively: the specification the fast matchers must meet."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = st.sampled_from(["a", "b", "c"])
PATTERN_WORDS = st.one_of(WORDS, st.just("*"), st.just("#"))


def topic_reference(pattern: list[str] | tuple[str, ...], key: list[str] | tuple[str, ...]) -> bool:
    """``*`` is one word, ``#`` zero or more, any other word itself."""
    if not pattern:
        return not key
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(topic_reference(rest, key[i:]) for i in range(len(key) + 1))
    return bool(key) and (head == "*" or head == key[0]) and topic_reference(rest, key[1:])
