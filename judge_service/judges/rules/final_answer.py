"""The rules judge's final-answer check: where is the answer, and does it match the reference?"""

from __future__ import annotations

import re

from judge_service.equivalence.coverage import unaccounted
from judge_service.errors import ParseError
from judge_service.judges.rules.arithmetic import parse_number_expr
from judge_service.reading.markup import structure_end
from judge_service.trace.boxed import BoxedAnswer, last_boxed
from judge_service.trace.decode import Trace

_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")
_NOISE = re.compile(r"\\[,;:! ]|\\left|\\right|\$|\s")


def locate_final_answer(text: str, final_answer: str | None) -> BoxedAnswer | None:
    """The char range of the final answer: the last ``\\boxed{}``, else the last occurrence
    of the rollout's stated `final_answer`."""
    boxed = last_boxed(text)
    if boxed is not None and boxed.content.strip():
        return boxed
    if final_answer and final_answer.strip():
        needle = final_answer.strip()
        at = _last_standalone(text, needle)
        if at is not None:
            return BoxedAnswer(needle, at, at + len(needle))
    return None


def _last_standalone(text: str, needle: str) -> int | None:
    """The last place `text` writes `needle` as itself: not inside a longer number or
    word (``12`` holds no ``2``), and not in a line's structural lead (the ``2.`` of a
    list item ``2. Food`` is markup, not the answer: `reading.markup.structure_end`)."""
    at = len(text)
    while (at := text.rfind(needle, 0, at)) >= 0:
        if not _inside(text, at, at + len(needle)):
            line = text.rfind("\n", 0, at) + 1
            stop = text.find("\n", at)
            if at - line >= structure_end(text[line : len(text) if stop < 0 else stop]):
                return at
    return None


def _inside(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] continues a number or word on either side."""
    before = text[start - 1] if start else " "
    after, next_after = text[end : end + 1], text[end + 1 : end + 2]
    joined_before = text[start].isalnum() and (before.isalnum() or before in "._")
    joined_after = text[end - 1].isalnum() and (
        after.isalnum() or after == "_" or (after in (".", ",") and next_after.isdigit())
    )
    return joined_before or joined_after


def normalise_answer(answer: str, spaces: str = "") -> str:
    """`answer` without wrappers, LaTeX spacing, dollars or a leading ``x =``; runs of
    white space become `spaces` (kept, they tell the list ``1, 234`` from ``1,234``)."""
    answer = _WRAPPERS.sub(r"\1", answer)
    answer = _NOISE.sub(lambda m: spaces if m.group().isspace() else "", answer)
    answer = answer.strip().rstrip(".")
    answer = re.sub(r"^[a-zA-Z]\s*=\s*", "", answer)
    return answer.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def answers_match(answer: str, reference: str | None, reward: float | None) -> bool | None:
    """True/False when decidable: equal normalised strings, or exact numbers whose parse
    accounts for the whole answer (the equivalence checker's rule). Otherwise the
    verifier's verdict (reward > 0) when there is one, else None (no label)."""
    if reference is None or not reference.strip():
        return None
    left, right = normalise_answer(answer), normalise_answer(reference)
    if left == right:
        return True
    try:
        values = parse_number_expr(left), parse_number_expr(right)
    except ParseError:
        pass
    else:
        # The lexer drops the spaces that made "1, 234" a list: the checker's rule on
        # the spaced text keeps such a parse from deciding.
        texts = normalise_answer(answer, " "), normalise_answer(reference, " ")
        if all(unaccounted(t, v) is None for t, v in zip(texts, values, strict=True)):
            return bool(values[0] == values[1])
    if reward is not None:
        return reward > 0
    return None


def judged_answer(
    trace: Trace, final_answer: str | None, reference: str | None, reward: float | None
) -> tuple[BoxedAnswer | None, bool | None]:
    """The trace's final answer (`locate_final_answer`) and whether it matches the reference
    (`answers_match`; None when it is not decidable or there is no answer), once per trace
    and verdict: the rules judge and validation's wrong-answer lines both ask."""

    def judge() -> tuple[BoxedAnswer | None, bool | None]:
        answer = locate_final_answer(trace.text, final_answer)
        if answer is None:
            return None, None
        return answer, answers_match(answer.content, reference, reward)

    return trace.derived(("final answer", final_answer, reference, reward), judge)


def answer_is_wrong(match: bool | None, reward: float | None) -> bool:
    """Whether the verdict says the final answer is wrong: the verifier gave no reward
    (``reward <= 0``), or the answer decidably does not match the reference (`match`, as
    `judged_answer` gives it)."""
    return (reward is not None and reward <= 0) or match is False
