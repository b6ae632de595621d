"""Folding: the vectorised fold equals a plain per-char reference, and its origin map is exact."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_service.folding import FoldedText, _fold_arrays, _folds_to_itself, fold, fold_with_origin
from judge_service.trace.markers import escape_chars

ALPHABET = st.sampled_from(
    [*"ab 1=+-<>\n\t\r×⟦⟧é", "\u00a0", "\u0301", "ﬁ", "４", "\x07", "\u202e", "〚", "﹤", "\u3000"]
)


def _reference(text: str) -> str:
    folded = "".join(escape_chars(unicodedata.normalize("NFKD", escape_chars(ch))) for ch in text)
    folded = re.sub(r"<{3,}", lambda m: "‹" * len(m.group()), folded)
    folded = re.sub(r">{3,}", lambda m: "›" * len(m.group()), folded)
    return re.sub(r"\s+", " ", folded)


def test_fold_basics() -> None:
    assert fold("  a\u00a0\tb ⟦12⟧c ") == "a b c"
    assert fold("x⟦3⟧", quote=False) == "x〚3〛"
    assert fold("ﬁ") == "fi"
    assert fold("é") == fold("e\u0301")  # composed and decomposed quote alike
    assert fold("<<<fence>>>") == "‹‹‹fence›››" == fold("‹‹‹fence›››")
    assert fold("a << b") == "a << b"


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=60))
def test_fold_matches_the_per_char_reference(text: str) -> None:
    folded, origin = fold_with_origin(text)
    assert folded == _reference(text)
    assert origin.shape[0] == len(folded)
    assert (np.diff(origin) >= 0).all()
    for position, char in enumerate(folded):
        source = _reference(text[int(origin[position])])
        fence = {"‹": "<", "›": ">"}.get(char)
        assert char in source or (char == " " and source.isspace()) or fence in source


# Chars that fold to themselves (a short trace's usual text) besides whitespace, and a few
# that do not: the regular-expression path must give the numpy path's text and origins.
PLAIN = st.sampled_from(
    [*"ab 1=+-<>\n\t\r×—数", "\u2028", "\u2003", "\x0b", "\u00e9", "\u0301", "⟦", "\u00a0"]
)


@settings(max_examples=500, deadline=None)
@given(st.text(PLAIN, max_size=60))
def test_the_plain_fold_equals_the_array_fold(text: str) -> None:
    folded, origin = fold_with_origin(text)
    expected, expected_origin = _fold_arrays(text)
    assert folded == expected
    assert origin.dtype == expected_origin.dtype and origin.tolist() == expected_origin.tolist()


def test_which_texts_take_the_plain_fold() -> None:
    assert _folds_to_itself("17 × 24 = 408.\n\nSo  the answer\tis 408.")
    for text in ("a\x07b", "a\u00a0b", "ﬁ", "x⟦1⟧", "<<<", "\u00e9"):
        assert not _folds_to_itself(text), text


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=60))
def test_the_string_fold_of_a_quote_equals_the_array_fold(text: str) -> None:
    assert fold(text, quote=False) == fold_with_origin(text)[0].strip(" ")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(ALPHABET, max_size=5), max_size=20))
def test_token_starts_slice_the_folded_text_per_token(pieces: list[str]) -> None:
    text = "".join(pieces)
    offsets = np.cumsum([0, *(len(p) for p in pieces)]).astype(np.int64)
    folded = FoldedText.build(text, offsets)
    assert folded.token_starts[0] == 0 and folded.token_starts[-1] == len(folded.text)
    for t in range(len(pieces)):
        a, b = int(folded.token_starts[t]), int(folded.token_starts[t + 1])
        for position in range(a, b):
            assert folded.token_at(position) == t
