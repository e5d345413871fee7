"""Topic patterns: matching one key, and an index of many patterns.

Rules this module owns (AMQP 0-10's topic exchange, as qpidd and Broker-J implement it):

* A routing key and a binding pattern are words separated by ``.``; the empty string is no
  words at all. In a pattern ``*`` stands for exactly one word and ``#`` for zero or more;
  every other word matches only itself.
* :class:`TopicIndex` keeps patterns in a trie of words, so matching a key walks only the
  branches that can match it: the cost grows with the key's length and the patterns that
  match, not with how many patterns there are. A key reaches each bound value once, however
  many of its patterns match.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

ONE_WORD = "*"
ANY_WORDS = "#"

V = TypeVar("V", bound=Hashable)


def words(text: str) -> tuple[str, ...]:
    """A key or pattern as its words (``""`` has none)."""
    return tuple(text.split(".")) if text else ()


def pattern_matches(pattern: tuple[str, ...], key: tuple[str, ...]) -> bool:
    """Whether ``key`` matches ``pattern`` (both as :func:`words`), for one-off checks such
    as an ACL rule's ``routingkey``; the exchange uses :class:`TopicIndex`."""
    # reachable[j]: the pattern so far can take exactly the first j words of the key
    reachable = [True] + [False] * len(key)
    for word in pattern:
        if word == ANY_WORDS:
            for j in range(1, len(key) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            for j in range(len(key), 0, -1):
                reachable[j] = reachable[j - 1] and (word == ONE_WORD or word == key[j - 1])
            reachable[0] = False
    return reachable[len(key)]


class _Node(Generic[V]):
    __slots__ = ("children", "values")

    def __init__(self) -> None:
        self.children: dict[str, _Node[V]] = {}
        self.values: set[V] = set()


class TopicIndex(Generic[V]):
    """Patterns, each bound to values (queue names): which values does a key reach?"""

    def __init__(self) -> None:
        self._root: _Node[V] = _Node()
        self._size = 0

    def __len__(self) -> int:
        """How many (pattern, value) pairs are bound."""
        return self._size

    def add(self, pattern: str, value: V) -> bool:
        """Bind ``value`` under ``pattern``; False if it already was."""
        node = self._root
        for word in words(pattern):
            node = node.children.setdefault(word, _Node())
        if value in node.values:
            return False
        node.values.add(value)
        self._size += 1
        return True

    def remove(self, pattern: str, value: V) -> bool:
        """Unbind ``value`` from ``pattern`` (False if it was not bound); branches left
        empty are pruned, so the trie holds only what is bound."""
        path = [self._root]
        for word in words(pattern):
            child = path[-1].children.get(word)
            if child is None:
                return False
            path.append(child)
        if value not in path[-1].values:
            return False
        path[-1].values.discard(value)
        self._size -= 1
        for parent, word, child in zip(
            reversed(path[:-1]), reversed(words(pattern)), reversed(path[1:]), strict=True
        ):
            if child.values or child.children:
                break
            del parent.children[word]
        return True

    def match(self, key: str) -> set[V]:
        """Every value bound under a pattern that ``key`` matches."""
        return self.match_words(words(key))

    def match_words(self, key: tuple[str, ...]) -> set[V]:
        found: set[V] = set()
        end = len(key)
        seen: set[tuple[int, int]] = set()  # (node, position): '#'s can reach one twice
        stack = [(self._root, 0)]
        while stack:
            node, at = stack.pop()
            mark = (id(node), at)
            if mark in seen:
                continue
            seen.add(mark)
            if at == end and node.values:
                found |= node.values
            children = node.children
            if not children:
                continue
            any_words = children.get(ANY_WORDS)
            if any_words is not None:  # '#' takes zero or more of the words left
                stack.extend((any_words, position) for position in range(at, end + 1))
            if at < end:
                exact = children.get(key[at])
                if exact is not None:
                    stack.append((exact, at + 1))
                one = children.get(ONE_WORD)
                if one is not None:
                    stack.append((one, at + 1))
        return found

    def patterns(self) -> Iterable[tuple[str, V]]:
        """Every (pattern, value) bound, for listings."""
        stack: list[tuple[_Node[V], tuple[str, ...]]] = [(self._root, ())]
        while stack:
            node, path = stack.pop()
            for value in node.values:
                yield ".".join(path), value
            stack.extend((child, (*path, word)) for word, child in node.children.items())
