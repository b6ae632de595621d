"""Where a wrong rollout parts from its correct siblings: divergence credit, no LLM needed.

In a GRPO group the rollouts of one prompt often share their first steps and part at
one. For a wrong rollout W and a correct sibling C, the divergence point is W's first
step (a non-blank line, compared in the checker's form with runs of spaces folded:
`step_key`) that differs from C's step at the same place, provided that

- the checker proves it false (``checker_false``: `grounding.LineChecks`, the rules
  judge's own exact arithmetic), or
- W's wrong final answer stands at or after it (``leads_to_wrong_answer``): what W says
  from there on ends in the answer the verifier refused.

A W that is a prefix of C, or whose wrong answer comes before the point, has none
against C. Against several correct siblings, W's point is the one after the longest
agreement (the sibling that went along with W the furthest pins the departure most
closely); a tie goes to the sibling first in the group. Steps before the point carry no
divergence credit: C made them too and was right.

A rollout is correct when the verifier's reward says so (``reward > 0``); without a
reward, when its final answer decidably matches the reference; otherwise it is neither
and takes no part.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judge_service import labels as L
from judge_service.grounding import LineChecks
from judge_service.judges.rules.final_answer import answers_match, locate_final_answer
from judge_service.judges.rules.forms import checker_form
from judge_service.spans import Span
from judge_service.trace.decode import Trace

Reason = Literal["checker_false", "leads_to_wrong_answer"]
# A divergence point is the wrong rollout's original material error as the group shows
# it, `invalid` in the label table (docs/design.md "Labels"), whatever the reason: a
# step the checker proves false, or the step from which the rollout goes on to its wrong
# answer where a correct sibling did something else. (`unsupported` would not do: it
# is a dependence on an earlier error, and credits only after an `invalid`.)
LABELS: dict[Reason, str] = {"checker_false": L.INVALID, "leads_to_wrong_answer": L.INVALID}
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Step:
    start: int  # chars of the trace's text
    end: int
    key: str  # what two steps are compared by


@dataclass(frozen=True)
class Member:
    """One decoded rollout of a group, with what its verdict says."""

    trace: Trace
    final_answer: str | None = None
    reference_answer: str | None = None
    reward: float | None = None

    @property
    def correct(self) -> bool | None:
        """True/False when the reward or a decidable answer says; None when neither does."""
        if self.reward is not None:
            return self.reward > 0
        answer = locate_final_answer(self.trace.text, self.final_answer)
        if answer is None:
            return None
        return answers_match(answer.content, self.reference_answer, None)

    def answer_chars(self) -> int | None:
        """Where the final answer starts in the text, if it can be found."""
        answer = locate_final_answer(self.trace.text, self.final_answer)
        return None if answer is None else answer.start


@dataclass(frozen=True)
class Divergence:
    rollout: int  # the wrong rollout's index in the group
    sibling: int  # the correct sibling it parts from
    agreed: int  # steps the two share before the point
    start: int  # the point's tokens in the wrong rollout
    end: int
    reason: Reason
    text: str  # the step as the rollout wrote it

    def span(self) -> Span:
        """The point as a span of the wrong rollout (service-made: its evidence is the
        step itself, which the span covers)."""
        return Span(self.start, self.end, LABELS[self.reason], 1.0, self.text)


def step_key(line: str) -> str:
    """A line as steps are compared: the checker's form ("17 times 4" and "17 × 4" are one
    claim), spaces folded, trimmed."""
    return _SPACES.sub(" ", checker_form(line)).strip()


def steps(text: str) -> list[Step]:
    """The non-blank lines of `text`, with their char ranges (without the newline)."""
    found: list[Step] = []
    at = 0
    for line in text.split("\n"):
        key = step_key(line)
        if key:
            lead = len(line) - len(line.lstrip())
            found.append(Step(at + lead, at + len(line.rstrip()), key))
        at += len(line) + 1
    return found


def _agreement(a: Sequence[Step], b: Sequence[Step]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        n += 1
    return n


def divergences(members: Sequence[Member | None]) -> list[Divergence]:
    """Each wrong member's divergence point against the group's correct members (see the
    module docstring); wrong members with none are left out. A None member (a rollout
    that could not be decoded, or a copy of an earlier one) takes no part."""
    verdicts = [None if m is None else m.correct for m in members]
    correct = [i for i, v in enumerate(verdicts) if v is True]
    if not correct:
        return []  # nothing right to part from
    lines = [[] if m is None else steps(m.trace.text) for m in members]
    found: list[Divergence] = []
    for w, verdict in enumerate(verdicts):
        wrong = members[w]
        if verdict is not False or wrong is None:
            continue
        point = _point(wrong, lines[w], [(c, lines[c]) for c in correct])
        if point is not None:
            found.append(Divergence(w, *point))
    return found


def _point(
    wrong: Member, own: list[Step], siblings: list[tuple[int, list[Step]]]
) -> tuple[int, int, int, int, Reason, str] | None:
    # The longest agreement first; among equal ones the sibling first in the group.
    ranked = sorted(((_agreement(own, s), -c, c) for c, s in siblings), reverse=True)
    checks = LineChecks.of(wrong.trace)
    answer_at = wrong.answer_chars()
    for agreed, _, sibling in ranked:
        if agreed >= len(own):
            continue  # the wrong rollout is a prefix of this sibling: no departure
        step = own[agreed]
        start, end = wrong.trace.tokens_for_chars(step.start, step.end)
        if end <= start:
            continue
        reason: Reason
        if checks.false_on(start, end) is not None:
            reason = "checker_false"
        elif answer_at is not None and answer_at >= step.start:
            reason = "leads_to_wrong_answer"
        else:
            continue
        text = wrong.trace.text[step.start : step.end]
        return sibling, agreed, start, end, reason, text
    return None
