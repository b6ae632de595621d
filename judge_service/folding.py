"""The comparison form of text, with a map back to the original characters.

Validation compares a judge's quotes with the trace after *folding* both:
the view's escapes (forged ⟦ ⟧ and fence runs, control characters), Unicode
compatibility decomposition (NFKD, char by char, so that every folded char
keeps the index of the original char it came from; NFKD and NFKC identify the
same strings), and whitespace runs collapsed to one space. A quote also loses
the ⟦n⟧ markers it copied from the view.

The trace is folded once per rollout, with numpy: the per-char work is done
once per *distinct* code point, so a 100k-token trace folds in milliseconds and
a hostile submission of hundreds of spans only slices the folded text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from judge_service.trace.markers import escape_chars, strip_markers

IntArray = npt.NDArray[np.int64]

_WHITESPACE = np.array([c for c in range(0x3001) if chr(c).isspace()], np.uint32)
# Whitespace by code point, for one gather instead of `np.isin`; every code from 0x3001 on
# (U+3000 is the last whitespace) looks up the final, False entry.
_IS_SPACE = np.zeros(0x3002, np.bool_)
_IS_SPACE[_WHITESPACE] = True
_SPACE = ord(" ")


@lru_cache(maxsize=65536)
def _fold_char(code: int) -> str:
    # Escape first (a C1 control must not survive NFKD), then again: NFKD can produce
    # characters the view escapes (e.g. a compatibility form of a bracket or control).
    char = chr(code)
    return escape_chars(unicodedata.normalize("NFKD", escape_chars(char)))


_ASCII_FOLDS = np.array([_fold_char(c) != chr(c) for c in range(0x80)], np.bool_)


def _codes(text: str) -> npt.NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")


def _text(codes: npt.NDArray[np.uint32]) -> str:
    return codes.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _substitute(codes: npt.NDArray[np.uint32]) -> tuple[npt.NDArray[np.uint32], IntArray]:
    """Each code point replaced by its folded form; the origin of every output char."""
    n = codes.shape[0]
    origin = np.arange(n, dtype=np.int64)
    if n == 0:
        return codes, origin
    # Folding changes no printable ASCII char (NFKD leaves it, the view does not escape
    # it), so only the rest is looked at: most traces are mostly ASCII.
    candidates = np.flatnonzero((codes >= 0x80) | _ASCII_FOLDS[np.minimum(codes, 0x7F)])
    if candidates.shape[0] == 0:
        return codes, origin
    changed = {c: _fold_char(c) for c in np.unique(codes[candidates]).tolist()}
    changed = {c: s for c, s in changed.items() if s != chr(c)}
    if not changed:
        return codes, origin
    hit = np.isin(codes[candidates], np.fromiter(changed, np.uint32, len(changed)))
    positions = candidates[hit]
    at_codes = codes[positions]
    sizes = np.ones(positions.shape[0], np.int64)
    for code, replacement in changed.items():
        sizes[at_codes == code] = len(replacement)
    lengths = np.ones(n, np.int64)
    lengths[positions] = sizes
    out = np.repeat(codes, lengths)  # the changed chars are overwritten below
    extra = sizes - 1
    starts = positions + np.cumsum(extra) - extra  # where each changed char's form begins
    for code, replacement in changed.items():
        at = starts[at_codes == code]
        for k, char in enumerate(replacement):
            out[at + k] = ord(char)
    return out, np.repeat(origin, lengths)


def _escape_fences(codes: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Runs of three or more ``<`` / ``>`` as the view shows them (‹ ›): a fence can't be forged."""
    out = codes.copy()
    for raw, shown in (("<", "‹"), (">", "›")):
        hit = (codes == ord(raw)).astype(np.int8)
        if not hit.any():
            continue
        edges = np.diff(np.concatenate(([0], hit, [0])))
        run_starts, run_ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        for a, b in zip(run_starts.tolist(), run_ends.tolist(), strict=True):
            if b - a >= 3:
                out[a:b] = ord(shown)
    return out


def _collapse(codes: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
    """Which chars survive whitespace collapsing (the first of each run); spaces become ' '."""
    space = _IS_SPACE[np.minimum(codes, 0x3001)]
    keep = ~space
    keep[1:] |= space[1:] & ~space[:-1]
    if space.shape[0]:
        keep[0] |= space[0]
    codes[space] = _SPACE
    return keep


# Below this many chars, a text whose chars all fold to themselves (but whitespace) is
# folded with two regular expressions instead of numpy (whose fixed cost, ~0.1 ms, was
# most of a small rollout's evidence index); above it the numpy path is as fast.
PLAIN_FOLD_CHARS = 8192
_ASCII_FOLDING = frozenset(chr(c) for c in range(0x80) if _ASCII_FOLDS[c])
_SPACE_RUNS = re.compile(r"\s{2,}")


def _folds_to_itself(text: str) -> bool:
    """Whether folding changes `text` only in its whitespace runs: no char it escapes or
    decomposes, no fence run."""
    if "<<<" in text or ">>>" in text:
        return False
    for char in set(text):
        if char in _ASCII_FOLDING or (not char.isascii() and _fold_char(ord(char)) != char):
            return False
    return True


def fold_with_origin(text: str) -> tuple[str, IntArray]:
    """`text` folded (not stripped), and for each folded char the index of its source char."""
    if len(text) <= PLAIN_FOLD_CHARS and _folds_to_itself(text):
        return _fold_plain(text)
    return _fold_arrays(text)


def _fold_plain(text: str) -> tuple[str, IntArray]:
    """`fold_with_origin` of a text `_folds_to_itself`: each whitespace run becomes one
    space, which comes from the run's first char."""
    origin = np.arange(len(text), dtype=np.int64)
    runs = [(m.start() + 1, m.end()) for m in _SPACE_RUNS.finditer(text)]
    if runs:
        keep = np.ones(len(text), np.bool_)
        for a, b in runs:
            keep[a:b] = False
        origin = origin[keep]
    return _SPACES.sub(" ", text), origin


def _fold_arrays(text: str) -> tuple[str, IntArray]:
    """`fold_with_origin` of any text, with numpy (per distinct code point)."""
    codes, origin = _substitute(_codes(text))
    codes = _escape_fences(codes)
    keep = _collapse(codes)
    return _text(codes[keep]), origin[keep]


_FENCE_RUN = re.compile(r"<{3,}|>{3,}")
_SPACES = re.compile(r"\s+")


def _fence(match: re.Match[str]) -> str:
    return ("‹" if match.group()[0] == "<" else "›") * len(match.group())


def fold(text: str, *, quote: bool = True) -> str:
    """The comparison form of `text`, stripped; a quote loses copied ⟦n⟧ markers first.

    Plain string work (the same per-char map as `fold_with_origin`): for the short texts
    it is used on, numpy's fixed cost per call would dominate.
    """
    if quote:
        text = strip_markers(text)
    # NFKD leaves ASCII alone; only the view's escapes (control characters) apply to it.
    folded = escape_chars(text) if text.isascii() else text.translate(_FOLD_TABLE)
    if "<<<" in folded or ">>>" in folded:
        folded = _FENCE_RUN.sub(_fence, folded)
    # Whitespace runs as one space, none at the ends (`_SPACES.sub(" ", folded).strip(" ")`:
    # str.split's whitespace is the regex's \s, both Py_UNICODE_ISSPACE). A quote of 150
    # chars and 30 spaces took 5.5 µs with the regex, 1 µs so; both judges fold each quote.
    return " ".join(folded.split())


class _FoldTable(dict[int, str]):
    """`_fold_char` of each code point asked, for str.translate (a char's fold looked up in
    C: half the cost of joining `_fold_char` of each); kept for the first 65,536 code points
    asked, as `_fold_char`'s own cache, and computed each time past that."""

    def __missing__(self, code: int) -> str:
        folded = _fold_char(code)
        if len(self) < 65536:
            self[code] = folded
        return folded


_FOLD_TABLE = _FoldTable()


@dataclass(frozen=True, eq=False)
class FoldedText:
    """A trace's folded text, with the folded position of every token boundary."""

    text: str
    origin: IntArray  # folded char -> original char
    token_starts: IntArray  # token t starts at folded position token_starts[t]; [T] = len(text)
    char_ends: IntArray  # the trace's offsets[1:], for char -> token lookups

    @classmethod
    def build(cls, text: str, offsets: IntArray) -> FoldedText:
        folded, origin = fold_with_origin(text)
        # searchsorted(origin, offsets, side="left"): for each offset, how many folded chars
        # come from chars before it. Counted in one pass (origin never decreases), not
        # searched for each of a long trace's tokens (0.6 -> 0.2 ms at 32k tokens).
        before = np.zeros(len(text) + 1, np.int64)
        np.cumsum(np.bincount(origin, minlength=len(text))[: len(text)], out=before[1:])
        starts = before[np.asarray(offsets, np.int64)]
        return cls(folded, origin, starts, np.asarray(offsets[1:], np.int64))

    def token_at(self, position: int) -> int:
        """The token owning the original char behind folded position `position`."""
        char = int(self.origin[position])
        return int(self.char_ends.searchsorted(char, side="right"))

    def tokens_of(self, position: int, length: int) -> tuple[int, int]:
        """The token range ``[a, b)`` covering folded chars ``[position, position + length)``."""
        return self.token_at(position), self.token_at(position + length - 1) + 1
