"""Near-duplicate detection for the rules judge: has this sentence been said before?

Sentences are normalised (case, punctuation, whitespace) and compared as sets of
word trigrams through an inverted index, so a 64k-token trace with thousands of
sentences costs about linear time instead of all pairs.
"""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[^\W_]+(?:[.,/^*+=×·][^\W_]+)*", re.UNICODE)
MIN_CHARS = 20
MIN_WORDS = 4
THRESHOLD = 0.8
# A trigram shared by this many sentences ("let me check") says nothing about a
# repeat and would make lookups quadratic; stop indexing it.
MAX_POSTINGS = 256


def normalise(sentence: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(sentence)]


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < 3:
        return {tuple(words)}
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


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
        shared: Counter[int] = Counter()
        for shingle in shingles:
            shared.update(self._index.get(shingle, ()))
        repeat = any(
            count / (len(shingles) + self._sizes[other] - count) >= self.threshold
            for other, count in shared.items()
        )
        self._exact.add(joined)
        unit = len(self._sizes)
        self._sizes.append(len(shingles))
        for shingle in shingles:
            postings = self._index.setdefault(shingle, [])
            if len(postings) < MAX_POSTINGS:
                postings.append(unit)
        return repeat
