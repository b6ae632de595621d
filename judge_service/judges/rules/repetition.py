"""Near-duplicate detection for the rules judge: has this sentence been said before?

Sentences are normalised (case, punctuation, whitespace) and compared as sets of
word trigrams through an inverted index, so a 64k-token trace with thousands of
sentences costs about linear time instead of all pairs.
"""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[^\W_]+(?:[.,/^*+=×·][^\W_]+)*", re.UNICODE)
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:[.,/^*+=][a-z0-9]+)*", re.ASCII)  # _WORD, lowered ASCII
MIN_CHARS = 20
MIN_WORDS = 4
THRESHOLD = 0.8
# A trigram shared by this many sentences ("let me check") says nothing about a
# repeat and would make lookups quadratic; stop indexing it.
MAX_POSTINGS = 256


def normalise(sentence: str) -> list[str]:
    if sentence.isascii():
        # Lowercasing ASCII changes no char's class or length, so the whole sentence may
        # be lowered first (one call, not one per word). Not so beyond ASCII: "İ" lowers
        # to "i" and a combining dot, which would split the word.
        return _ASCII_WORD.findall(sentence.lower())
    return [w.lower() for w in _WORD.findall(sentence)]


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < 3:
        return {tuple(words)}
    return set(zip(words, words[1:], words[2:], strict=False))


class RepetitionIndex:
    """Sentences seen so far; `seen_before` answers and then remembers."""

    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold
        self._exact: set[str] = set()
        self._sizes: list[int] = []
        self._index: dict[tuple[str, ...], list[int]] = {}

    def seen_before(self, sentence: str) -> bool:
        words = normalise(sentence)
        joined = " ".join(words)
        if len(joined) < MIN_CHARS or len(words) < MIN_WORDS:
            return False
        if joined in self._exact:
            return True
        shingles = _shingles(words)
        index, size = self._index, len(shingles)
        found = [postings for shingle in shingles if (postings := index.get(shingle))]
        repeat = False
        if found:  # most sentences of a trace share no trigram with an earlier one
            shared: Counter[int] = Counter()
            for postings in found:
                shared.update(postings)
            sizes, threshold = self._sizes, self.threshold
            repeat = any(
                count / (size + sizes[other] - count) >= threshold
                for other, count in shared.items()
            )
        self._exact.add(joined)
        unit = len(self._sizes)
        self._sizes.append(size)
        for shingle in shingles:
            postings = index.get(shingle)
            if postings is None:
                index[shingle] = [unit]
            elif len(postings) < MAX_POSTINGS:
                postings.append(unit)
        return repeat
