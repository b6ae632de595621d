"""Near-duplicate detection for the rules judge: which sentences repeat an earlier one?

Sentences are normalised (case, punctuation, whitespace) and compared as sets of word
trigrams. Sentence k repeats an earlier one when its normalised words equal an earlier
sentence's, or when the Jaccard similarity of the two trigram sets is at least
`THRESHOLD`. A trigram shared by more than `MAX_POSTINGS` sentences ("let me check")
says nothing about a repeat: only its first `MAX_POSTINGS` sentences are compared through
it. Sentences shorter than `MIN_CHARS` or `MIN_WORDS` never repeat and are not compared.

The answer for a whole trace is computed at once: the per-sentence work is one regex and
a dictionary lookup per word; the trigrams, their first holders and the shared counts are
numpy arrays (1,744 sentences of prose, 218k characters: 11 ms, where an inverted index
probed one sentence at a time took 21 ms), and repetitive text costs at most
`MAX_POSTINGS` comparisons per trigram. That is the definition; the compiled count
(_similar.pyx) meets the same pairs one unit at a time through a hash table of trigrams,
with no pair arrays (the same prose: 2.3 -> 0.3 ms; 12,000 near-duplicates: 1.1 s -> 30 ms).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

try:  # the compiled scanners (_words.pyx, _similar.pyx), where the install built them
    from judge_service.judges.rules import _similar as _compiled_similar
    from judge_service.judges.rules import _words as _compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    _compiled = None  # type: ignore[assignment]
    _compiled_similar = None  # type: ignore[assignment]

_WORD = re.compile(r"[^\W_]+(?:[.,/^*+=×·][^\W_]+)*", re.UNICODE)
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:[.,/^*+=][a-z0-9]+)*", re.ASCII)  # _WORD, lowered ASCII
MIN_CHARS = 20
MIN_WORDS = 4  # at least 3: every compared sentence has a trigram
THRESHOLD = 0.8
MAX_POSTINGS = 256
# The compiled tables' probe budget (_words.pyx `sentence_units`, _similar.pyx
# `similar_units`): ordinary text visits ~2 slots a lookup; past this, the trace is read
# by the definition instead.
PROBES_PER_LOOKUP = 32
BASE_PROBES = 4096
# Sentence pairs counted at a time: ~50 MB of index arrays, whatever the trace.
PAIRS_PER_CHUNK = 1 << 20

IntArray = npt.NDArray[np.int64]


def normalise(sentence: str) -> list[str]:
    if sentence.isascii():
        # Lowercasing ASCII changes no char's class or length, so the whole sentence may
        # be lowered first (one call, not one per word). Not so beyond ASCII: "İ" lowers
        # to "i" and a combining dot, which would split the word.
        return _ASCII_WORD.findall(sentence.lower())
    return list(map(str.lower, _WORD.findall(sentence)))


class Units(NamedTuple):
    """A trace's sentences sorted for the trigram comparison."""

    repeats: list[int]  # sentences equal, once normalised, to an earlier one
    units: list[int]  # the sentences to compare by trigrams, in order
    ids: IntArray  # their words' ids (by first appearance), one unit after another
    lengths: list[int]  # how many words each unit has
    vocabulary: int  # how many distinct words


def repeated_sentences(sentences: Sequence[str], threshold: float = THRESHOLD) -> list[bool]:
    """For each sentence, in order: whether it repeats one before it."""
    result = [False] * len(sentences)
    found = sentence_units(sentences)
    for k in found.repeats:
        result[k] = True
    if len(found.units) > 1:
        for unit in similar_units(found, threshold):
            result[found.units[unit]] = True
    return result


def similar_units(found: Units, threshold: float = THRESHOLD) -> list[int] | IntArray:
    """The units whose trigram set is similar enough to an earlier unit's: compiled, one
    unit at a time against an index of the earlier ones (no pair arrays), where it is
    built and its trigram table stays within its probe budget; else the definition."""
    if _compiled_similar is not None:
        chosen = _compiled_similar.similar_units(
            found.ids, found.lengths, threshold, MAX_POSTINGS, PROBES_PER_LOOKUP, BASE_PROBES
        )
        if chosen is not None:
            return chosen
    lengths = np.asarray(found.lengths, np.int64)
    return python_similar_units(found.ids, lengths, found.vocabulary, threshold)


def python_sentence_units(sentences: Sequence[str]) -> Units:
    """The definition, which the compiled `_words.sentence_units` equals: each sentence
    normalised; too short to compare, an exact repeat, or a unit."""
    repeats: list[int] = []
    seen: set[str] = set()
    units: list[int] = []
    words: list[str] = []  # the units' words, one after another
    lengths: list[int] = []
    for k, sentence in enumerate(sentences):
        found = normalise(sentence)
        joined = " ".join(found)
        if len(joined) < MIN_CHARS or len(found) < MIN_WORDS:
            continue
        if joined in seen:
            repeats.append(k)
            continue
        seen.add(joined)
        units.append(k)
        words.extend(found)
        lengths.append(len(found))
    vocabulary = {w: i for i, w in enumerate(dict.fromkeys(words))}
    ids = np.fromiter(map(vocabulary.__getitem__, words), np.int64, len(words))
    return Units(repeats, units, ids, lengths, len(vocabulary))


def sentence_units(sentences: Sequence[str]) -> Units:
    if _compiled is None:
        return python_sentence_units(sentences)
    found = _compiled.sentence_units(
        sentences, MIN_CHARS, MIN_WORDS, PROBES_PER_LOOKUP, BASE_PROBES
    )
    if found is None:  # words crafted to collide in the compiled table's hash
        return python_sentence_units(sentences)
    repeats, units, ids, lengths, vocabulary = found
    return Units(repeats, units, np.frombuffer(ids, np.int64), lengths, vocabulary)


def python_similar_units(
    ids: IntArray, lengths: IntArray, vocabulary: int, threshold: float
) -> IntArray:
    """The units (their word ids one after another, `lengths` words each) whose trigram
    set is similar enough to an earlier unit's, in order. The definition, which the
    compiled `_similar.similar_units` equals."""
    unit, key = _trigrams(ids, lengths, vocabulary)
    # One entry per (trigram, unit), by trigram then unit: a trigram's holders in order.
    order = np.lexsort((unit, key))
    unit, key = unit[order], key[order]
    fresh = np.ones(key.shape[0], np.bool_)
    fresh[1:] = (key[1:] != key[:-1]) | (unit[1:] != unit[:-1])
    unit, key = unit[fresh], key[fresh]  # a set: a trigram counts once per unit
    sizes = np.bincount(unit, minlength=lengths.shape[0])
    first = np.ones(key.shape[0], np.bool_)
    first[1:] = key[1:] != key[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(key.shape[0]), 0))
    rank = np.arange(key.shape[0]) - start  # 0 for a trigram's first holder
    # Each holder meets the earlier holders the index kept (the first MAX_POSTINGS).
    met = np.minimum(rank, MAX_POSTINGS)
    # A unit's pairs are counted together, a few units at a time: a flood of near-identical
    # sentences meets up to MAX_POSTINGS others per trigram, tens of millions of pairs
    # for a long trace, which at once would be gigabytes of index arrays.
    # Stable: each unit's entries stay in trigram order. A 16-bit copy sorts by radix,
    # 3x faster than int64's merge sort (1,736 sentences: 1.9 -> 0.6 ms).
    small = lengths.shape[0] <= 1 << 16
    by_unit = np.argsort(unit.astype(np.uint16) if small else unit, kind="stable")
    ends = np.cumsum(met[by_unit])
    unit_end = np.flatnonzero(np.r_[unit[by_unit][1:] != unit[by_unit][:-1], True])
    found: list[IntArray] = []
    lo, done = 0, 0
    while lo < unit_end.shape[0]:
        # Whole units up to PAIRS_PER_CHUNK pairs (at least one unit, however many it has).
        hi = max(lo, int(np.searchsorted(ends[unit_end], done + PAIRS_PER_CHUNK, "right")) - 1)
        first_entry = 0 if lo == 0 else int(unit_end[lo - 1]) + 1
        chunk = by_unit[first_entry : int(unit_end[hi]) + 1]
        found.append(_similar_in(chunk, unit, start, met, sizes, threshold))
        done, lo = int(ends[unit_end[hi]]), hi + 1
    return np.unique(np.concatenate(found))


def _similar_in(
    holders: IntArray,
    unit: IntArray,
    start: IntArray,
    met: IntArray,
    sizes: IntArray,
    threshold: float,
) -> IntArray:
    """Of the units owning entries `holders` (all of each unit's entries), those similar
    enough to an earlier unit."""
    counts = met[holders]
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    holder = np.repeat(holders, counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    later, earlier = unit[holder], unit[start[holder] + offset]
    units = np.int64(sizes.shape[0])
    pairs, shared = np.unique(later * units + earlier, return_counts=True)
    later, earlier = pairs // units, pairs % units
    similar = shared / (sizes[later] + sizes[earlier] - shared) >= threshold
    chosen: IntArray = later[similar]
    return chosen


def _trigrams(flat: IntArray, lengths: IntArray, vocabulary: int) -> tuple[IntArray, IntArray]:
    """(unit, trigram key) for every trigram of every unit; a key packs three word ids."""
    owner = np.repeat(np.arange(lengths.shape[0]), lengths)
    # A trigram starts at i when i + 2 is still in the same unit.
    starts = np.flatnonzero(owner[:-2] == owner[2:]) if flat.shape[0] >= 3 else flat[:0]
    base = np.int64(vocabulary + 1)
    if vocabulary + 1 > 2_000_000:  # three ids would not fit in 63 bits: pair them up
        pair = np.unique(flat[starts] * base + flat[starts + 1], return_inverse=True)[1]
        key = pair.astype(np.int64) * base + flat[starts + 2]
    else:
        key = (flat[starts] * base + flat[starts + 1]) * base + flat[starts + 2]
    return owner[starts], key
