"""A divergence point settled into a judge's accepted spans, and the evidence that may
overrule it.

Used for a group's points (`group.judge`) and for a lone rollout that carries a
reference solution (`reference_settler`, from the pipeline): the reference is one correct
sibling, so a rollout judged alone gets its point too.

The point passes the same checks as a judge's span (its size within
JUDGE_MAX_POINT_SPAN_TOKENS, its step not proven true), so the service's own spans get no
credit a judge's could not. A judge's span over it with a non-negative label stands only
with evidence (`overruled`); a negative one is the judge's own word on a step it also
finds wrong, and stands.

`overruled` reads what the cited sibling says **whole** (issue 43): the cited tokens must
cover a whole step as the sibling's own reading splits its whole text (`alignment.steps`),
the sibling must assert that step (not quote it to reject it, and the checker must not
prove it false), and it must compute what the point's step computes. A fragment cut out
of a sibling's line, such as the wrong step quoted in "Someone might say 17 × 4 = 78.
That is wrong", overrules nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction

from judge_service.alignment.steps import Step, read_steps
from judge_service.group.divergence import Divergence, Member, divergences
from judge_service.judges.rules.forms import checker_form
from judge_service.resolve import Resolved
from judge_service.schemas import Rollout
from judge_service.spans import Span, merge_spans
from judge_service.trace import Trace, last_boxed
from judge_service.validate import Verdict, validate_spans

__all__ = ["Settle", "overruled", "reference_settler", "settler"]

Settle = Callable[[Trace, Sequence[Span]], list[Span]]

# Words with which a text quotes a step to reject it, not to make it.
_REJECTS = re.compile(
    r"\b(?:wrong|incorrect|mistaken?|error|erroneous|false|not (?:right|correct|true)"
    r"|isn't (?:right|correct)|might (?:say|think|write)|would (?:say|think)|tempting"
    r"|instead of|rather than)\b",
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")


def final_of(rollout: Rollout, trace: Trace) -> str | None:
    """The rollout's stated final answer, else the content of its trace's last box."""
    if rollout.final_answer is not None:
        return rollout.final_answer
    boxed = last_boxed(trace.text)
    return boxed.content if boxed else None


def settler(
    point: Divergence, rollout: Rollout, resolved: Resolved, members: Sequence[Member | None]
) -> Settle:
    """The judge's accepted spans with `point` settled in, on the trace the rollout is
    judged on (see the module docstring)."""

    def settle(trace: Trace, spans: Sequence[Span]) -> list[Span]:
        verdict = Verdict(final_of(rollout, trace), rollout.reference_answer, rollout.reward)
        report = validate_spans(
            [point.submission()],
            trace,
            resolved.label_scores,
            limits=resolved.span_limits,
            verdict=verdict,
        )
        if not report.accepted:
            return list(spans)
        added = report.accepted[0]
        scores = resolved.label_scores
        kept = [
            s
            for s in spans
            if not (s.start < added.end and added.start < s.end)
            or scores.get(s.label, 0.0) < 0
            or overruled(s, point, members)
        ]
        return merge_spans(kept, [added])

    return settle


def reference_settler(rollout: Rollout, resolved: Resolved) -> Settle | None:
    """For a rollout judged alone with a `reference_solution`: its point against the
    reference (one correct sibling), settled in as a group's is; None without one."""
    reference = rollout.reference_solution
    if reference is None or not reference.strip():
        return None

    def settle(trace: Trace, spans: Sequence[Span]) -> list[Span]:
        member = Member(
            trace, rollout.final_answer, rollout.reference_answer, rollout.reward, rollout.problem
        )
        points = divergences([member], [reference])
        if not points:
            return list(spans)
        return settler(points[0], rollout, resolved, [member])(trace, spans)

    return settle


def overruled(span: Span, point: Divergence, members: Sequence[Member | None]) -> bool:
    """Whether `span` carries the evidence that overrules `point`: a contrast citing, in a
    correct sibling, a whole step that the sibling asserts and that computes what the
    point's step computes."""
    if span.contrast is None:
        return False
    rollout, start, end = span.contrast
    sibling = members[rollout] if 0 <= rollout < len(members) else None
    if sibling is None or sibling.correct is not True:
        return False
    low, high = sibling.trace.char_range(start, end)
    text = sibling.trace.text
    own = read_steps(point.text)
    return any(
        low <= step.start
        and step.end <= high
        and _asserted(text, step)
        and any(_same(step, text, mine, point.text) for mine in own)
        # Read once per sibling: a judge may cite it from many spans.
        for step in sibling.trace.derived("alignment steps", lambda: read_steps(text))
    )


def _asserted(text: str, step: Step) -> bool:
    """The sibling states the step as its own: no claim of it proven false, no words
    that quote it to reject it."""
    return all(c.holds for c in step.claims) and not _REJECTS.search(text[step.start : step.end])


def _same(theirs: Step, their_text: str, mine: Step, my_text: str) -> bool:
    """Two steps make the same step: a claim in common (the same operands and result),
    or, where neither computes, the same words in the checker's form."""
    if theirs.claims or mine.claims:
        return bool(_computations(theirs) & _computations(mine))
    return _key(their_text[theirs.start : theirs.end]) == _key(my_text[mine.start : mine.end])


def _computations(step: Step) -> set[tuple[tuple[Fraction, ...], Fraction | None]]:
    return {(tuple(sorted(c.operands)), c.result) for c in step.claims}


def _key(text: str) -> str:
    return _SPACES.sub(" ", checker_form(text)).strip()
