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

That cut still lets the gate copy: a trace often writes its answer in a step
before the block ("so 6 × 3 = 18. The final answer is 18"). The gate's cut
(`gate_start`) is therefore before the **first** place the trace writes its own
final answer or the reference, read as the equivalence checker reads them: a
number by its value, read by the project's one reader of written numbers
(`reading.numbers`: ``1,000`` = ``1000.0``, ``\\frac{1}{2}`` = ``\\tfrac12`` = ``0.5`` =
``1/2``, other-script and fullwidth digits, numbers in words such as ``one hundred and
five``; sign ignored), any other
answer as its text without spaces, ``$`` and sizing commands; or before the
answer block, if that comes first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from judge_service.reading.numbers import number_value, read_numbers

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


_NOISE = re.compile(r"\s+|\$|\\left|\\right|\\[,!;: ]|\\displaystyle")


def _text_pattern(answer: str) -> re.Pattern[str] | None:
    """A pattern for `answer` as text: spaces, ``$`` and sizing commands may come between
    its characters, ``\\frac`` may be ``\\dfrac`` or ``\\tfrac``."""
    target = _NOISE.sub("", answer).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    if not target:
        return None
    units = re.findall(r"\\frac|.", target, re.DOTALL)
    # One noise item per repetition: `\s+` inside the star would let a run of spaces split
    # in exponentially many ways before a mismatch (a hostile trace's 100k spaces).
    gap = r"(?:\s|\$|\\left|\\right|\\[,!;: ]|\\displaystyle)*"
    body = gap.join(r"\\[dt]?frac" if u == "\\frac" else re.escape(u) for u in units)
    return re.compile(r"(?<![A-Za-z0-9])" + body + r"(?![A-Za-z0-9])")


def first_occurrence(text: str, answer: str | None) -> int | None:
    """Char offset of the first place `text` writes `answer`, read by value when it is a
    number (see the module docstring), else as normalised text; None if it never does."""
    if not answer or not answer.strip():
        return None
    value = number_value(answer)
    if value is not None:
        return min((n.start for n in read_numbers(text) if n.value == value), default=None)
    pattern = _text_pattern(answer.strip())
    found = pattern.search(text) if pattern is not None else None
    return None if found is None else found.start()


def gate_start(text: str, final: str | None, reference: str | None) -> tuple[int, str] | None:
    """(char offset, rule) before which the gate reads the probe: the first occurrence of
    the trace's own final answer or of the reference, or the answer block if earlier."""
    found: list[tuple[int, str]] = []
    block = final_answer_start(text, final)
    if block is not None:
        found.append(block)
    for answer, rule in ((final, "first_final"), (reference, "first_reference")):
        at = first_occurrence(text, answer)
        if at is not None:
            found.append((at, rule))
    return min(found) if found else None
