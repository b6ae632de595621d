"""Where a trace starts writing its final answer, and which spans touch it.

The audit's gate must read the probe *before* the final answer is written: at the
end of a trace the answer is on the page and the probe only measures copying.
The final answer starts at, in order of preference:

1. the last ``</think>`` (all that follows a closed thinking block is the answer);
2. the last "final answer" (any case), backed up to the start of its line when
   only words or markup precede it there ("The final answer is", "**Final Answer**");
3. the last ``\\boxed{`` (backed up over ``$``, ``\\(`` or ``\\[`` and spaces before it);
4. the last standalone occurrence of the trace's own final answer string.

The cut is the last policy-token boundary at or before that character, so the
probed prefix never holds a character of the answer block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_THINK = "</think>"
_FINAL = re.compile(r"final\s+answer", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LEAD_WORDS = re.compile(r"[A-Za-z\s*#_:>-]*")
_BOX_OPENERS = ("$", "\\(", "\\[", " ", "\t")


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def answer_occurrence(text: str, answer: str) -> int | None:
    """Char offset of the last occurrence of `answer` not inside a longer number or word."""
    answer = answer.strip()
    if not answer:
        return None
    pattern = re.compile(r"(?<![\w.])" + re.escape(answer) + r"(?![\w]|\.\d)")
    found = _last(pattern, text)
    return found.start() if found else None


def final_answer_start(text: str, final: str | None = None) -> tuple[int, str] | None:
    """(char offset where the final answer block starts, which rule found it), or None."""
    think = text.rfind(_THINK)
    if think >= 0:
        return think, "think"
    phrase = _last(_FINAL, text)
    if phrase is not None:
        start = _line_start(text, phrase.start())
        lead = text[start : phrase.start()]
        return (start if _LEAD_WORDS.fullmatch(lead) else phrase.start()), "final_answer"
    boxed = _last(_BOXED, text)
    if boxed is not None:
        pos = boxed.start()
        moved = True
        while moved:
            moved = False
            for opener in _BOX_OPENERS:
                if text.endswith(opener, 0, pos):
                    pos -= len(opener)
                    moved = True
        return pos, "boxed"
    if final:
        found = answer_occurrence(text, final)
        if found is not None:
            return found, "answer_string"
    return None


def char_to_cut(offsets: npt.NDArray[np.int64] | Sequence[int], char: int) -> int:
    """The last token boundary whose char offset is at or before `char`."""
    bounds = np.asarray(offsets, dtype=np.int64)
    found = int(np.searchsorted(bounds, char, side="right")) - 1
    return max(0, found)


def mentions(text: str, answers: Sequence[str | None]) -> bool:
    """Whether the span text contains any of the answers as a standalone string."""
    return any(a and answer_occurrence(text, a) is not None for a in answers)
