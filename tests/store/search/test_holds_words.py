"""`holds_words` (the find-then-match word test) answers exactly as the word pattern's plain search."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentdesk.store.search.query import holds_words, word_pattern, words_of

ALPHABET = st.sampled_from([*'abAB12 _.-\n"\\', "é", "É", "\u017f", "\u212a", "\u0130", "ß"])
"""ASCII, separators, and letters whose case folding differs from `lower` (long s, Kelvin sign, dotted I)."""
texts = st.lists(ALPHABET, max_size=40).map("".join)
word_lists = st.lists(st.lists(ALPHABET, min_size=1, max_size=3).map("".join), min_size=1, max_size=3).map(
    lambda parts: words_of(" ".join(parts))).filter(bool)


@settings(max_examples=300, deadline=None)
@given(words=word_lists, text=texts)
def test_holds_words_is_the_patterns_search(words: tuple[str, ...], text: str) -> None:
    assert holds_words(words, text) == (word_pattern(words).search(text) is not None)


def test_a_long_ascii_text_is_searched_at_the_first_words_places() -> None:
    text = "mod_51.py and Module\n 5 " * 200 + "MODULE 51x"
    assert holds_words(("module", "51"), text)
    assert not holds_words(("module", "52"), text)
    assert not holds_words(("odule",), text)
