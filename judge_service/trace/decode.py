"""The decoded trace: the text and the exact char range each token owns.

A token owns ``text[offsets[t]:offsets[t + 1]]``. The ranges tile the text, so
the text of a token span ``[a, b)`` is ``text[offsets[a]:offsets[b]]``. A
character split across tokens (byte-level BPE) belongs to the token that
completes it; the tokens before it own an empty range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

D = TypeVar("D")


@dataclass(frozen=True, eq=False)
class Trace:
    token_ids: npt.NDArray[np.int64]
    text: str
    offsets: npt.NDArray[np.int64]  # length T + 1, non-decreasing, offsets[0] == 0
    # What several steps derive from the trace (marker positions, the folded text, each
    # line's arithmetic links), computed by the first step that needs it: see `derived`.
    memo: dict[object, Any] = field(default_factory=dict, repr=False, compare=False)

    def derived(self, key: object, compute: Callable[[], D]) -> D:
        """`compute()`, once per trace and `key`: the judge's view, validation and the rules
        judge share one copy. Values are read-only by convention (arrays are marked so)."""
        try:
            value: D = self.memo[key]
        except KeyError:
            value = self.memo[key] = compute()
        return value

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    def span_text(self, start: int, end: int) -> str:
        """The decoded text of tokens ``[start, end)``."""
        return self.text[int(self.offsets[start]) : int(self.offsets[end])]

    def token_text(self, index: int) -> str:
        return self.span_text(index, index + 1)

    def char_range(self, start: int, end: int) -> tuple[int, int]:
        return int(self.offsets[start]), int(self.offsets[end])

    def tokens_for_chars(self, char_start: int, char_end: int) -> tuple[int, int]:
        """The smallest token span ``[a, b)`` whose text covers chars ``[char_start, char_end)``.

        Empty-range tokens just before the first char are included: they carry the
        leading bytes of a character that the next token completes. (Back over them in
        one search: to the first token whose range starts where this one's does; offsets
        never decrease, so those tokens lie together, however many a trace holds.)
        """
        if char_end <= char_start:
            raise ValueError("empty char range")
        ends = self.offsets[1:]
        first = int(ends.searchsorted(char_start, side="right"))
        last = int(ends.searchsorted(char_end - 1, side="right"))
        return int(self.offsets.searchsorted(self.offsets[first], side="left")), last + 1

    def tokens_for_char_ranges(
        self,
        char_starts: Sequence[int] | npt.NDArray[np.int64],
        char_ends: Sequence[int] | npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """`tokens_for_chars` of many ranges at once: (first tokens, end tokens)."""
        starts = np.asarray(char_starts, np.int64)
        stops = np.asarray(char_ends, np.int64)
        if (stops <= starts).any():
            raise ValueError("empty char range")
        ends = self.offsets[1:]
        first = ends.searchsorted(starts, side="right")
        last = ends.searchsorted(stops - 1, side="right")
        first = self.offsets.searchsorted(self.offsets[first], side="left")
        return first.astype(np.int64), (last + 1).astype(np.int64)
