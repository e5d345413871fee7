"""Topic patterns: one pattern against one key, and the trie of many patterns, both held to a
reference matcher; unbinding prunes; a key reaches each value once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proton_broker.exchanges.topic import TopicIndex, pattern_matches, words
from tests.exchanges.reference import PATTERN_WORDS, WORDS, topic_reference

PATTERNS = st.lists(PATTERN_WORDS, min_size=0, max_size=5).map(".".join)
KEYS = st.lists(WORDS, min_size=0, max_size=6).map(".".join)


def test_the_reference_matcher_knows_the_textbook_cases():
    assert topic_reference(["a", "#"], ["a"]) and topic_reference(["#", "b"], ["a", "b"])
    assert not topic_reference(["a", "*"], ["a"]) and not topic_reference(["*"], ["a", "b"])


def test_the_empty_string_is_no_words():
    assert words("") == ()
    assert pattern_matches(words("#"), words(""))
    assert not pattern_matches(words("*"), words(""))
    assert pattern_matches(words(""), words(""))


def test_star_is_one_word_and_hash_any_number():
    index: TopicIndex[str] = TopicIndex()
    index.add("news.*", "one")
    index.add("news.#", "any")
    index.add("#.sport", "sport")
    index.add("news.uk.sport", "exact")
    assert index.match("news") == {"any"}
    assert index.match("news.uk") == {"one", "any"}
    assert index.match("news.uk.sport") == {"any", "sport", "exact"}
    assert index.match("weather.sport") == {"sport"}
    assert index.match("weather") == set()


@given(PATTERNS, KEYS)
def test_one_pattern_matches_as_the_reference_says(pattern, key):
    assert pattern_matches(words(pattern), words(key)) == topic_reference(
        words(pattern), words(key)
    )


@given(st.lists(st.tuples(PATTERNS, st.integers(0, 4)), max_size=12), KEYS)
def test_the_index_reaches_exactly_the_values_whose_patterns_match(bindings, key):
    index: TopicIndex[int] = TopicIndex()
    for pattern, value in bindings:
        index.add(pattern, value)
    expected = {v for p, v in bindings if topic_reference(words(p), words(key))}
    assert index.match(key) == expected


@given(st.lists(st.tuples(PATTERNS, st.integers(0, 4)), max_size=12), st.data())
def test_unbinding_leaves_the_index_as_if_the_binding_never_was(bindings, data):
    index: TopicIndex[int] = TopicIndex()
    for pattern, value in bindings:
        index.add(pattern, value)
    removed = data.draw(st.sets(st.sampled_from(bindings))) if bindings else set()
    for pattern, value in removed:
        assert index.remove(pattern, value)
        assert not index.remove(pattern, value)
    left = set(bindings) - removed
    assert len(index) == len(left)
    assert sorted(index.patterns()) == sorted(left)
    key = data.draw(KEYS)
    assert index.match(key) == {v for p, v in left if topic_reference(words(p), words(key))}


def test_binding_twice_is_one_binding_and_the_trie_is_pruned():
    index: TopicIndex[str] = TopicIndex()
    assert index.add("a.b.c", "q")
    assert not index.add("a.b.c", "q")
    assert len(index) == 1
    assert index.remove("a.b.c", "q")
    assert list(index.patterns()) == [] and index._root.children == {}


def test_many_hashes_do_not_make_matching_explode():
    index: TopicIndex[str] = TopicIndex()
    index.add(".".join(["#"] * 12 + ["z"]), "deep")
    assert index.match(".".join(["a"] * 40)) == set()
    assert index.match(".".join(["a"] * 40 + ["z"])) == {"deep"}
