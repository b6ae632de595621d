"""The rules judge's candidate token spans: a `TokenSpan` each, or all of them as columns.

A 32k-token arithmetic trace has thousands of candidates and keeps a few hundred
(`shape.shape_spans`), so `rules_judge.to_token_spans` hands them over as `SpanColumns`:
arrays the shaping steps read as they are, and a `TokenSpan` made only for a span that
is kept (a tuple per candidate, then a transpose back to columns, was a tenth of the judge).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, overload

import numpy as np
import numpy.typing as npt

__all__ = ["SpanColumns", "TokenSpan"]

IntArray = npt.NDArray[np.int64]


class TokenSpan(NamedTuple):
    start: int
    end: int
    label: str
    confidence: float


@dataclass(frozen=True, eq=False)
class SpanColumns(Sequence[TokenSpan]):
    """Spans as columns, row i the span ``TokenSpan(start[i], end[i], names[label[i]],
    confidence[i])``; rows by start when `shape_spans` is given them."""

    start: IntArray
    end: IntArray
    label: IntArray  # an index into names
    names: list[str]  # distinct
    confidence: npt.NDArray[np.float64]

    @classmethod
    def of(cls, spans: Sequence[TokenSpan]) -> SpanColumns:
        """`spans` as columns (one transpose, in C)."""
        n = len(spans)
        if not n:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, [], np.zeros(0, np.float64))
        starts, ends, labels, confidences = zip(*spans, strict=True)
        names = list(dict.fromkeys(labels))  # distinct, in first-seen order
        code = {name: i for i, name in enumerate(names)}
        return cls(
            np.fromiter(starts, np.int64, n),
            np.fromiter(ends, np.int64, n),
            np.fromiter(map(code.__getitem__, labels), np.int64, n),
            names,
            np.fromiter(confidences, np.float64, n),
        )

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @overload
    def __getitem__(self, index: int) -> TokenSpan: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TokenSpan]: ...
    def __getitem__(self, index: int | slice) -> TokenSpan | Sequence[TokenSpan]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start, end, label, confidence = self._lists
        # tuple.__new__ from C: TokenSpan(...) runs a Python-level __new__, and shaping a
        # crowded trace asks for a span here hundreds of times.
        return _new_tuple(
            TokenSpan, (start[index], end[index], self.names[label[index]], confidence[index])
        )

    @cached_property
    def _lists(self) -> tuple[list[int], list[int], list[int], list[float]]:
        """The columns as Python lists, for the spans asked for one at a time."""
        return (
            self.start.tolist(),
            self.end.tolist(),
            self.label.tolist(),
            self.confidence.tolist(),
        )


_new_tuple = tuple.__new__
