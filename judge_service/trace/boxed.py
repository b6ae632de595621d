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


def last_boxed(text: str) -> BoxedAnswer | None:
    """The last balanced ``\\boxed{...}`` of `text`, or None."""
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
