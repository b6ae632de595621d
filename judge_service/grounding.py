"""The arithmetic links of a trace's lines, found once per line and shared.

Validation asks, for each span with a positive score, whether it contains a
false ``a = b`` link (DESIGN "Span validation", grounding): the judge's word
never outweighs a computation. The checker is the rules judge's
(`judges.rules.claims.find_links`: exact numbers, anything doubtful skipped),
run once per line and only on the lines someone asks about. The rules judge
reads every line's links through the same object, so when it judges a trace,
validation's grounding check finds them already parsed: both ask the same pure
function of the same text, so sharing it trusts nobody's submission.
"""

from __future__ import annotations

import functools
import re
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace

if TYPE_CHECKING:
    from judge_service.judges.rules.claims import Link

_NEWLINE = re.compile("\n")


@functools.cache
def _claims() -> ModuleType:
    """The module of `claims.find_links`, imported on first use: the rules package imports
    the judge interface, which imports validation, which imports this module."""
    from judge_service.judges.rules import claims

    return claims


class TraceLinks:
    """The links of each line of `text` (lines as ``text.split("\\n")``, ``\\r`` stripped)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: npt.NDArray[np.int64] | None = None
        self._line_start_list: list[int] | None = None
        self._false: dict[int, list[tuple[int, int, str]]] = {}

    @classmethod
    def of(cls, trace: Trace) -> TraceLinks:
        """The trace's one instance (see `Trace.derived`)."""
        return trace.derived(cls, lambda: cls(trace.text))

    def _starts(self) -> npt.NDArray[np.int64]:
        if self._line_starts is None:
            self._line_starts = np.asarray(self._start_list(), np.int64)
        return self._line_starts

    def _start_list(self) -> list[int]:
        # A list for the rules judge's line-by-line walk (no numpy scalar per line).
        if self._line_start_list is None:
            self._line_start_list = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return self._line_start_list

    def links(self, line: int) -> list[Link]:
        """Every checkable link of line `line`, offsets relative to the line, parsed now.
        The line is always cut from the trace here, never taken from a caller, and only
        its false links are kept (as char ranges and text): validation's check then finds
        them without parsing again, and a 131k-token trace of 12,851 claims keeps 1.6 MB
        rather than the 5.2 MB its parsed links with their exact values would hold."""
        # The rules judge calls this for every line of a trace (thousands), so the line
        # is cut inline and the checker's module imported once.
        starts = self._line_start_list or self._start_list()
        base = starts[line]
        stop = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        text = self.text[base:stop].rstrip("\r\n")
        found = _claims().find_links(text) if "=" in text else []
        false: list[tuple[int, int, str]] = []
        for link in found:  # a loop, not a comprehension: most lines have one link or none
            if not link.holds and not link.trivial:
                a, b = link.left_start, link.right_end
                false.append((base + a, base + b, text[a:b]))
        self._false[line] = false
        return found

    def _false_links(self, line: int) -> list[tuple[int, int, str]]:
        found = self._false.get(line)
        if found is None:
            self.links(line)
            found = self._false[line]
        return found

    def inside(self, low: int, high: int) -> str | None:
        """The text of a false link lying wholly within chars ``[low, high)``, if any."""
        if high <= low:
            return None
        starts = self._starts()
        first = int(starts.searchsorted(low, side="right")) - 1
        last = int(starts.searchsorted(high - 1, side="right")) - 1
        for line in range(first, last + 1):
            for a, b, text in self._false_links(line):
                if low <= a and b <= high:
                    return text
        return None
