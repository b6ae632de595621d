"""Finding the final answer in a trace: the content of the last ``\\boxed{...}``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass(frozen=True)
class BoxedAnswer:
    content: str
    start: int  # char offset of the content, inside the braces
    end: int


# The text last asked about, and its answer: a rollout's trace is asked three times in a
# row (its final answer, the rules judge's verdict, validation's wrong-answer lines). The
# very same string object only (`is`), which the entry keeps alive: one text, never a copy.
_last: tuple[str, BoxedAnswer | None] = ("", None)


def last_boxed(text: str) -> BoxedAnswer | None:
    """The last balanced ``\\boxed{...}`` of `text`, or None."""
    global _last
    seen, answer = _last  # one read: another thread may replace the entry meanwhile
    if seen is text:
        return answer
    answer = _find_last_boxed(text)
    _last = (text, answer)
    return answer


def _find_last_boxed(text: str) -> BoxedAnswer | None:
    found: BoxedAnswer | None = None
    for match in _BOX.finditer(text):
        depth = 1
        pos = match.end()
        while pos < len(text) and depth:
            char = text[pos]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            pos += 1
        if depth == 0:
            found = BoxedAnswer(text[match.end() : pos - 1], match.end(), pos - 1)
    return found
