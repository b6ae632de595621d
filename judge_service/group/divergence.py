"""Where a wrong rollout parts from its correct siblings: divergence credit, no LLM needed.

In a GRPO group the rollouts of one prompt often share their first steps and part at
one. A step is a non-blank line, compared in the checker's form with runs of spaces
folded (`step_key`: "17 times 4" and "17 × 4" are one step). For a wrong rollout W, its
agreement with a correct sibling C is the number of leading steps the two share. The
divergence point is W's step right after its *longest* agreement with any correct
sibling, provided that

- the checker proves it false (``checker_false``: `grounding.LineChecks`, the rules
  judge's own exact arithmetic, as validation reads it), or
- it is not a line the checker proves true whole, and W's wrong final answer stands at
  or after it (``leads_to_wrong_answer``: what W says from there on ends in the answer
  the verifier refused).

Why the longest agreement, and nothing else: every step before it was also made by a
correct sibling, on the same path, so none of them can be the error (a point found
against a sibling that agrees less would blame a step a correct rollout shares). The
correct siblings that agree that long are the point's `siblings`, in group order; the
first is its `sibling`. There is no point when

- no step is shared (agreement 0): the two took different routes from the start, and
  nothing says which of W's steps was the wrong turn (blaming W's first line would mark
  most wrong rollouts' restatement of the problem);
- W is a prefix of a correct sibling (it stopped early; it never parted);
- the step is proven true whole: validation refuses an ``invalid`` there
  (``contradicts_arithmetic``), and the checker's word outranks the group's;
- W's wrong answer comes before the step (the departure did not lead to it).

The point is labelled ``invalid`` (the original material error, docs/design.md
"Labels") and the steps before it carry no divergence credit. `Divergence.span` gives it
as an accepted span (`spans.Span`), `Divergence.submission` as the rules judge submits
its spans (a dict for `validate.validate_spans`); `submissions` per rollout of a group.

A rollout is correct when the verifier's reward says so (``reward > 0``, as
`final_answer.answers_match` reads a reward); without a reward, when its final answer
decidably matches the reference; otherwise it is neither and takes no part.
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
# it, `invalid` in the label table, whatever the reason. (`unsupported` would not do: it
# is a dependence on an earlier error, and credits only after an `invalid`.)
LABELS: dict[Reason, str] = {"checker_false": L.INVALID, "leads_to_wrong_answer": L.INVALID}
# The service found the point itself; its evidence is the step, which the span covers.
CONFIDENCE = 1.0
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Step:
    start: int  # chars of the trace's text, without surrounding white space
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
    sibling: int  # the first correct sibling that agrees as long (`siblings[0]`)
    agreed: int  # steps the two share before the point
    start: int  # the point's tokens in the wrong rollout, [start, end)
    end: int
    reason: Reason
    text: str  # the step as the rollout wrote it
    siblings: tuple[int, ...] = ()  # every correct sibling agreeing `agreed` steps

    @property
    def label(self) -> str:
        return LABELS[self.reason]

    def span(self) -> Span:
        """The point as an accepted span of the wrong rollout."""
        return Span(self.start, self.end, self.label, CONFIDENCE, self.text)

    def submission(self) -> dict[str, object]:
        """The point as a judge submits a span (the rules judge's form), for validation:
        the step quoted whole anchors both ends of the span."""
        return {
            "start": self.start,
            "end": self.end,
            "label": self.label,
            "confidence": CONFIDENCE,
            "evidence": self.text,
        }


def step_key(line: str) -> str:
    """A line as steps are compared: the checker's form ("17 times 4" and "17 × 4" are one
    claim), spaces folded, trimmed."""
    return _SPACES.sub(" ", checker_form(line)).strip()


def steps(text: str) -> list[Step]:
    """The non-blank lines of `text`, with their char ranges (trimmed, no newline)."""
    found: list[Step] = []
    at = 0
    for line in text.split("\n"):
        key = step_key(line)
        if key:
            lead = len(line) - len(line.lstrip())
            found.append(Step(at + lead, at + len(line.rstrip()), key))
        at += len(line) + 1
    return found


def agreement(a: Sequence[Step], b: Sequence[Step]) -> int:
    """How many leading steps `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        n += 1
    return n


def divergences(members: Sequence[Member | None]) -> list[Divergence]:
    """Each wrong member's divergence point against the group's correct members (see the
    module docstring), in group order; wrong members with none are left out. A None
    member (a rollout that could not be decoded, or a copy of an earlier one) takes no
    part. No correct member: no points (nothing right to part from)."""
    verdicts = [None if m is None else m.correct for m in members]
    correct = [i for i, v in enumerate(verdicts) if v is True]
    if not correct:
        return []
    lines = [[] if m is None else steps(m.trace.text) for m in members]
    found: list[Divergence] = []
    for w, verdict in enumerate(verdicts):
        wrong = members[w]
        if verdict is not False or wrong is None:
            continue
        point = _point(w, wrong, lines[w], [(c, lines[c]) for c in correct])
        if point is not None:
            found.append(point)
    return found


def submissions(points: Sequence[Divergence], size: int) -> list[list[dict[str, object]]]:
    """The points as each rollout's submission (`Divergence.submission`): rollout i's
    list holds at most one span (a rollout has one point); correct rollouts' are empty."""
    out: list[list[dict[str, object]]] = [[] for _ in range(size)]
    for point in points:
        out[point.rollout].append(point.submission())
    return out


def _point(
    w: int, wrong: Member, own: list[Step], siblings: list[tuple[int, list[Step]]]
) -> Divergence | None:
    agreements = [(c, agreement(own, s)) for c, s in siblings]
    agreed = max(n for _, n in agreements)
    if agreed == 0 or agreed >= len(own):
        return None  # different routes from the start, or W never parted
    step = own[agreed]
    start, end = wrong.trace.tokens_for_chars(step.start, step.end)
    checks = LineChecks.of(wrong.trace)
    reason: Reason
    if checks.false_on(start, end) is not None:
        reason = "checker_false"
    elif checks.proven_true(start, end):
        return None
    else:
        answer_at = wrong.answer_chars()
        if answer_at is None or answer_at < step.start:
            return None
        reason = "leads_to_wrong_answer"
    best = tuple(c for c, n in agreements if n == agreed)
    text = wrong.trace.text[step.start : step.end]
    return Divergence(w, best[0], agreed, start, end, reason, text, best)
