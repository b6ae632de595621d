"""Where a wrong rollout goes wrong, read against its correct siblings: divergence
credit, no LLM needed.

A group's correct rollouts (and a dataset's reference solution, `Rollout.reference_solution`,
which counts as one more correct sibling) say what the problem's route computes. A wrong
rollout's point is found by claim-level alignment (`alignment.point`): steps are compared
by what they compute (operands, operation, result in exact values; the quantities they
write), never by wording, order, line breaks, markdown or number format. Walking back from
the wrong final answer along what it was computed from, the point is the first step that
computes, from inputs the correct route shares, a quantity no correct sibling reaches, or
that introduces a value from nowhere, and from which the wrong answer follows. So

- a step a correct sibling also makes is never the point, nor a true step of another route
  that rejoins the correct one; a sibling correct by another route gives no false point;
- headings, list markers, rules and display-math fences claim nothing
  (`reading.markup`): a point is never on them;
- the point is dropped when the checker proves its step true whole (validation refuses an
  ``invalid`` there, ``contradicts_arithmetic``: the checker's word outranks the group's).

Its reason is ``checker_false`` when the checker proves the step false
(`grounding.LineChecks`), else ``leads_to_wrong_answer``. The point is labelled
``invalid`` (the original material error, docs/design.md "Labels"). `Divergence.span`
gives it as an accepted span (`spans.Span`), `Divergence.submission` as the rules judge
submits its spans (a dict for `validate.validate_spans`); `submissions` per rollout.

A rollout is correct when the verifier's reward says so (``reward > 0``, as
`final_answer.answers_match` reads a reward); without a reward, when its final answer
decidably matches the reference; otherwise it is neither and takes no part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judge_service import labels as L
from judge_service.alignment.point import Known, final_value, first_wrong_step
from judge_service.grounding import LineChecks
from judge_service.judges.rules.final_answer import answers_match, locate_final_answer
from judge_service.reading.numbers import number_value
from judge_service.spans import Span
from judge_service.trace.decode import Trace

Reason = Literal["checker_false", "leads_to_wrong_answer"]
# A divergence point is the wrong rollout's original material error as the group shows
# it, `invalid` in the label table, whatever the reason. (`unsupported` would not do: it
# is a dependence on an earlier error, and credits only after an `invalid`.)
LABELS: dict[Reason, str] = {"checker_false": L.INVALID, "leads_to_wrong_answer": L.INVALID}
# The service found the point itself; its evidence is the step, which the span covers.
CONFIDENCE = 1.0
REFERENCE = -1  # `Divergence.sibling` when the reference solution is the only correct one


@dataclass(frozen=True)
class Member:
    """One decoded rollout of a group, with what its verdict says."""

    trace: Trace
    final_answer: str | None = None
    reference_answer: str | None = None
    reward: float | None = None
    problem: str = ""

    @property
    def correct(self) -> bool | None:
        """True/False when the reward or a decidable answer says; None when neither does.
        An answer the string check cannot decide (``43 minutes``, no box) is read by value
        (`alignment.point.final_value`) against a reference that is one number."""
        if self.reward is not None:
            return self.reward > 0
        answer = locate_final_answer(self.trace.text, self.final_answer)
        verdict = None
        if answer is not None:
            verdict = answers_match(answer.content, self.reference_answer, None)
            if verdict:
                return verdict
        reference = number_value(self.reference_answer or "")
        value = final_value(self.trace.text, self.final_answer, self.problem)
        if reference is None or value is None:
            return verdict
        # "20%" for 20: the same number read as a percentage is the same answer.
        return value == reference or value * 100 == reference

    def answer_chars(self) -> int | None:
        """Where the final answer starts in the text, if it can be found."""
        answer = locate_final_answer(self.trace.text, self.final_answer)
        return None if answer is None else answer.start


@dataclass(frozen=True)
class Divergence:
    rollout: int  # the wrong rollout's index in the group
    sibling: int  # the first correct sibling (`siblings[0]`), REFERENCE when none but it
    agreed: int  # the rollout's steps before the point (each good by the alignment)
    start: int  # the point's tokens in the wrong rollout, [start, end)
    end: int
    reason: Reason
    text: str  # the step as the rollout wrote it
    siblings: tuple[int, ...] = ()  # every correct sibling read

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


def divergences(
    members: Sequence[Member | None], references: Sequence[str] = ()
) -> list[Divergence]:
    """Each wrong member's point against the group's correct members and the `references`
    (reference solutions, each one more correct sibling), in group order; wrong members
    with none are left out. A None member (a rollout that could not be decoded, or a copy
    of an earlier one) takes no part. Nothing correct: no points."""
    verdicts = [None if m is None else m.correct for m in members]
    correct = [i for i, v in enumerate(verdicts) if v is True]
    texts = [m.trace.text for m in members if m is not None and m.correct is True]
    texts += [r for r in references if r.strip()]
    if not texts:
        return []
    problem = next((m.problem for m in members if m is not None), "")
    known = Known.read(texts, problem)  # once for the group, not once per wrong rollout
    found: list[Divergence] = []
    for w, verdict in enumerate(verdicts):
        wrong = members[w]
        if verdict is not False or wrong is None:
            continue
        point = _point(w, wrong, known, tuple(correct))
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


def _point(w: int, wrong: Member, known: Known, siblings: tuple[int, ...]) -> Divergence | None:
    text = wrong.trace.text
    final = final_value(text, wrong.final_answer, wrong.problem)
    if final is None:
        return None
    point = first_wrong_step(text, final, known)
    if point is None:
        return None
    start, end = wrong.trace.tokens_for_chars(point.start, point.end)
    if end <= start:
        return None
    checks = LineChecks.of(wrong.trace)
    reason: Reason
    if checks.false_on(start, end) is not None:
        reason = "checker_false"
    elif checks.proven_true(start, end):
        return None
    else:
        reason = "leads_to_wrong_answer"
    sibling = siblings[0] if siblings else REFERENCE
    return Divergence(
        w, sibling, point.step, start, end, reason, text[point.start : point.end], siblings
    )
