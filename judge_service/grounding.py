"""The arithmetic links of a trace that the exact checker proves false, found lazily.

Validation asks, for each span with a positive score, whether it contains a
false ``a = b`` link (DESIGN "Span validation", grounding): the judge's word
never outweighs a computation. The checker is the rules judge's
(`judges.rules.claims.find_links`: exact numbers, anything doubtful skipped),
run once per line and only on the lines such spans touch.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

_NEWLINE = re.compile("\n")


class FalseLinks:
    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: npt.NDArray[np.int64] | None = None
        self._by_line: dict[int, list[tuple[int, int, str]]] = {}

    def _starts(self) -> npt.NDArray[np.int64]:
        if self._line_starts is None:
            ends = [m.end() for m in _NEWLINE.finditer(self.text)]
            self._line_starts = np.asarray([0, *ends], np.int64)
        return self._line_starts

    def _links(self, line: int) -> list[tuple[int, int, str]]:
        found = self._by_line.get(line)
        if found is None:
            # Imported here: the rules package imports the judge interface, which imports
            # validation, which imports this module.
            from judge_service.judges.rules.claims import find_links

            starts = self._starts()
            base = int(starts[line])
            stop = int(starts[line + 1]) if line + 1 < starts.shape[0] else len(self.text)
            text = self.text[base:stop].rstrip("\r\n")
            found = []
            if "=" in text:
                for link in find_links(text):
                    if not link.holds and not link.trivial:
                        a, b = link.left_start, link.right_end
                        found.append((base + a, base + b, text[a:b]))
            self._by_line[line] = found
        return found

    def inside(self, low: int, high: int) -> str | None:
        """The text of a false link lying wholly within chars ``[low, high)``, if any."""
        if high <= low:
            return None
        starts = self._starts()
        first = int(np.searchsorted(starts, low, side="right")) - 1
        last = int(np.searchsorted(starts, high - 1, side="right")) - 1
        for line in range(first, last + 1):
            for a, b, text in self._links(line):
                if low <= a and b <= high:
                    return text
        return None
