"""Divergence points on constructed groups (judge_service/group/divergence.py), decoded by
real tokenizers (the byte-level BPE and SentencePiece-style ones tests build, and the
examples' own), so token spans are the tokenizer's, not char indices. The points then
go through validation and the credit formula as a judge's spans do."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service import labels as L
from judge_service import spans as S
from judge_service.credit import token_credit
from judge_service.grounding import Verdict
from judge_service.group.divergence import (
    Divergence,
    Member,
    divergences,
    submissions,
)
from judge_service.spans import Span, merge_spans
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from judge_service.validate import validate_spans
from tests.conftest import EXAMPLES

PROBLEM_STEPS = [
    "We need 17 × 24.",
    "Split 24 into 20 + 4.",
    "17 × 20 = 340.",
]
RIGHT = [*PROBLEM_STEPS, "17 × 4 = 68.", "340 + 68 = 408.", "So the answer is \\boxed{408}."]
# A copy of RIGHT up to one false line, then on to the wrong answer it implies.
FALSE_AT_3 = [*PROBLEM_STEPS, "17 × 4 = 78.", "340 + 78 = 418.", "So the answer is \\boxed{418}."]
# Parts with no false arithmetic: a plan that leads to the wrong answer.
WRONG_PLAN = [
    *PROBLEM_STEPS[:2],
    "Only the 20 matters, so take 17 × 20 = 340 alone.",
    "So the answer is \\boxed{340}.",
]
# Another route to the right answer, sharing only the first step.
OTHER_ROUTE = ["We need 17 × 24.", "24 × 17 = 408.", "So the answer is \\boxed{408}."]


@pytest.fixture(params=["bpe", "metaspace", "examples"])
def tok(
    request: pytest.FixtureRequest, bpe: LoadedTokenizer, tokenizer_cache: TokenizerCache
) -> LoadedTokenizer:
    if request.param == "bpe":
        return bpe
    if request.param == "metaspace":
        return tokenizer_cache.get(str(request.getfixturevalue("metaspace_dir")))
    return tokenizer_cache.get(str(EXAMPLES / "tokenizer"))


def member(
    tok: LoadedTokenizer, lines: list[str], reward: float | None, final: str | None = None
) -> Member:
    text = "\n".join(lines)
    trace = tok.decode(tok.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return Member(trace, final_answer=final, reference_answer="408", reward=reward)


def credit_of(group: list[Member], point: Divergence) -> np.ndarray:
    """The point fed to validation as the rules judge's spans are, then to the credit
    formula; fails the test if validation refuses it."""
    wrong = group[point.rollout]
    verdict = Verdict(wrong.final_answer, wrong.reference_answer, wrong.reward)
    report = validate_spans(
        [point.submission()], wrong.trace, L.DEFAULT_LABEL_SCORES, verdict=verdict
    )
    assert report.rejected == [] and report.accepted == [point.span()]
    n = wrong.trace.num_tokens
    return token_credit(
        n, report.accepted, L.DEFAULT_LABEL_SCORES, lam=0.25, kappa=0.25, min_confidence=0.5
    ).values


def test_a_copy_up_to_one_false_line_diverges_on_that_line_only(tok: LoadedTokenizer) -> None:
    group = [member(tok, RIGHT, 1.0), member(tok, FALSE_AT_3, 0.0)]
    (point,) = divergences(group)
    assert (point.rollout, point.sibling, point.siblings, point.agreed) == (1, 0, (0,), 3)
    assert point.reason == "checker_false" and point.text == "17 × 4 = 78."
    trace = group[1].trace
    line_start = trace.text.index("17 × 4 = 78.")
    line_end = line_start + len("17 × 4 = 78.")
    # The span's tokens cover the line, and all they hold beside it is white space: no
    # char of an earlier line (or a later one) is inside.
    low, high = trace.char_range(point.start, point.end)
    assert low <= line_start and line_end <= high
    assert not trace.text[low:line_start].strip() and not trace.text[line_end:high].strip()
    # The smallest such span: without its first or last token it no longer covers the line.
    assert trace.char_range(point.start + 1, point.end)[0] > line_start
    assert trace.char_range(point.start, point.end - 1)[1] < line_end
    credit = credit_of(group, point)
    assert (credit[point.start : point.end] == -0.25).all()
    assert not credit[: point.start].any() and not credit[point.end :].any()
    assert point.span() == Span(point.start, point.end, L.INVALID, 1.0, "17 × 4 = 78.")


def test_a_departure_that_is_not_false_but_ends_wrong_is_still_invalid(
    tok: LoadedTokenizer,
) -> None:
    # The plan line computes a true partial product the correct route shares (340), and
    # takes it for the answer: the answer is computed there, and that is the point.
    group = [member(tok, RIGHT, 1.0), member(tok, WRONG_PLAN, 0.0)]
    (point,) = divergences(group)
    assert (point.agreed, point.reason) == (2, "leads_to_wrong_answer")
    assert point.text == WRONG_PLAN[2] and point.label == L.INVALID
    credit = credit_of(group, point)
    assert (credit[point.start : point.end] < 0).all() and np.count_nonzero(credit) == len(
        range(point.start, point.end)
    )


def test_a_sibling_by_another_route_moves_no_point(tok: LoadedTokenizer) -> None:
    # Sibling 0 takes another route; the point is still the false line, with or without
    # it, and every correct sibling is named in group order.
    group = [member(tok, OTHER_ROUTE, 1.0), member(tok, FALSE_AT_3, 0.0), member(tok, RIGHT, 1.0)]
    (point,) = divergences(group)
    assert (point.sibling, point.siblings, point.agreed) == (0, (0, 2), 3)
    assert point.reason == "checker_false" and point.text == "17 × 4 = 78."
    (alone,) = divergences([member(tok, OTHER_ROUTE, 1.0), member(tok, FALSE_AT_3, 0.0)])
    assert (alone.start, alone.end) == (point.start, point.end)


def test_no_point_without_a_correct_sibling_or_a_departure(tok: LoadedTokenizer) -> None:
    # All wrong: nothing right to part from.
    assert divergences([member(tok, FALSE_AT_3, 0.0), member(tok, WRONG_PLAN, 0.0)]) == []
    # The wrong rollout stops early: a prefix of the correct one, no departure.
    assert divergences([member(tok, RIGHT, 1.0), member(tok, RIGHT[:3], 0.0)]) == []
    # Correct rollouts get no divergence span.
    assert divergences([member(tok, RIGHT, 1.0), member(tok, RIGHT, 1.0)]) == []


def test_a_wrong_rollout_that_shares_no_line_is_still_pointed(tok: LoadedTokenizer) -> None:
    # No line in common with any correct sibling, but steps are compared by what they
    # compute: its wrong value 400 comes from nothing written; the reasoning that made it
    # ("Let x be", no number) begins on its first line, and that is the point.
    alone = ["Let x be the product.", "Then x is about 400.", "So the answer is \\boxed{400}."]
    group = [member(tok, RIGHT, 1.0), member(tok, alone, 0.0), member(tok, OTHER_ROUTE, 1.0)]
    (point,) = divergences(group)
    assert (point.rollout, point.text, point.agreed) == (1, "Let x be the product.", 0)
    # Given a number it starts from, the reasoning is no longer from nothing.
    counted = ["We need 17 × 24.", "Then it is about 400.", "So the answer is \\boxed{400}."]
    (point,) = divergences([member(tok, RIGHT, 1.0), member(tok, counted, 0.0)])
    assert (point.text, point.agreed) == ("Then it is about 400.", 1)


def test_a_step_a_correct_sibling_shares_is_never_the_point(tok: LoadedTokenizer) -> None:
    # Stopped early, with a stated (wrong) answer: a prefix of RIGHT. Against OTHER_ROUTE
    # alone it would part at "Split 24 into 20 + 4." with its answer after; but RIGHT made
    # that step too and was right, so there is no point at all.
    stopped = member(tok, RIGHT[:4], 0.0, final="68")
    assert stopped.answer_chars() is not None
    group = [member(tok, RIGHT, 1.0), stopped, member(tok, OTHER_ROUTE, 1.0)]
    assert divergences(group) == []
    assert divergences([member(tok, OTHER_ROUTE, 1.0), stopped])[0].agreed == 1


def test_a_departure_the_checker_proves_true_is_no_point(tok: LoadedTokenizer) -> None:
    # "340 + 4 = 344." is the wrong plan, but true arithmetic: validation refuses an
    # invalid there (the claim checks out), and so does divergence.
    true_turn = [*PROBLEM_STEPS, "340 + 4 = 344.", "So the answer is \\boxed{344}."]
    group = [member(tok, RIGHT, 1.0), member(tok, true_turn, 0.0)]
    assert divergences(group) == []
    wrong = group[1].trace
    at = wrong.text.index("340 + 4 = 344.")
    start, end = wrong.tokens_for_chars(at, at + len("340 + 4 = 344."))
    forced = Divergence(1, 0, 3, start, end, "leads_to_wrong_answer", "340 + 4 = 344.", (0,))
    report = validate_spans([forced.submission()], wrong, L.DEFAULT_LABEL_SCORES)
    assert [r.code for r in report.rejected] == [S.CONTRADICTS_ARITHMETIC]


def test_going_on_past_a_correct_sibling_to_a_wrong_answer(tok: LoadedTokenizer) -> None:
    # The correct sibling ends where the wrong one goes on: the first step past it is
    # the point.
    on = [*RIGHT[:5], "Add the carry: \\boxed{418}."]
    group = [member(tok, RIGHT[:5], 1.0), member(tok, on, 0.0)]
    (point,) = divergences(group)
    assert (point.agreed, point.reason, point.text) == (5, "leads_to_wrong_answer", on[5])


def test_a_wrong_answer_a_sibling_wrote_and_retracted_is_still_the_point(
    tok: LoadedTokenizer,
) -> None:
    # Both wrote 418 first; the correct one then corrected itself. Its retracted 418 is
    # no step of the correct route: the wrong rollout's point is where it writes 418.
    right = [*PROBLEM_STEPS, "\\boxed{418}", "No: 340 + 68 = 408, so \\boxed{408}."]
    wrong = [*PROBLEM_STEPS, "\\boxed{418}", "Done."]
    (point,) = divergences([member(tok, right, 1.0), member(tok, wrong, 0.0)])
    assert (point.text, point.agreed) == ("\\boxed{418}", 3)


def test_without_a_reward_the_answer_against_the_reference_decides(
    tok: LoadedTokenizer,
) -> None:
    group = [member(tok, RIGHT, None), member(tok, FALSE_AT_3, None)]
    assert [m.correct for m in group] == [True, False]
    assert [d.rollout for d in divergences(group)] == [1]
    # No box and no reward: its last result (340) is read against the reference.
    assert member(tok, RIGHT[:3], None).correct is False
    # Nothing to read against: neither right nor wrong, no part in the group.
    assert Member(group[0].trace, reference_answer=None).correct is None


def test_undecoded_members_take_no_part_and_submissions_go_per_rollout(
    tok: LoadedTokenizer,
) -> None:
    assert divergences([None, member(tok, FALSE_AT_3, 0.0)]) == []
    group = [member(tok, RIGHT, 1.0), None, member(tok, FALSE_AT_3, 0.0)]
    points = divergences(group)
    assert [p.rollout for p in points] == [2]
    per_rollout = submissions(points, len(group))
    assert per_rollout[:2] == [[], []] and per_rollout[2] == [points[0].submission()]
    assert per_rollout[2][0]["evidence"] == "17 × 4 = 78."


def test_merge_leaves_the_judges_own_spans_standing() -> None:
    judged = [Span(10, 20, L.VALID_PROGRESS, 0.9, "x")]
    points = [Span(15, 25, L.INVALID, 1.0, "y"), Span(30, 40, L.UNSUPPORTED, 1.0, "z")]
    merged = merge_spans(judged, points)
    assert [(s.start, s.label) for s in merged] == [(10, L.VALID_PROGRESS), (30, L.UNSUPPORTED)]


@st.composite
def running_sums(draw: st.DrawFn) -> tuple[list[int], int, int]:
    """Addends of a running sum, the step k where a wrong rollout misreads its addend, and
    by how much."""
    addends = draw(st.lists(st.integers(2, 60), min_size=2, max_size=6, unique=True))
    return addends, draw(st.integers(0, len(addends) - 1)), draw(st.integers(1, 9))


def _sum_lines(addends: list[int], slip_at: int | None, slip: int, styled: bool) -> list[str]:
    lines, total = [], 0
    for k, a in enumerate(addends):
        read = a + slip if k == slip_at else a
        line = f"Add {read}: {total} + {read} = {total + read}."
        if styled:
            lines += [f"### Step {k + 1}", f"{k + 1}. {line}"]
        else:
            lines.append(line)
        total += read
    return [*lines, f"So the answer is \\boxed{{{total}}}."]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(running_sums(), st.booleans())
def test_the_point_is_the_misread_step_however_the_rollout_is_laid_out(
    bpe: LoadedTokenizer, drawn: tuple[list[int], int, int], styled: bool
) -> None:
    # A wrong rollout reads one addend wrong and carries on with true arithmetic; laid out
    # as markdown or not, the point is that step, whatever its headings and list numbers.
    addends, at, slip = drawn
    problem = "Add " + ", ".join(map(str, addends)) + "."
    right = Member(
        bpe.decode(bpe.hf.encode("\n".join(_sum_lines(addends, None, 0, False)))),
        reward=1.0,
        problem=problem,
    )
    lines = _sum_lines(addends, at, slip, styled)
    text = "\n".join(lines)
    wrong = Member(bpe.decode(bpe.hf.encode(text)), reward=0.0, problem=problem)
    points = divergences([right, wrong])
    sums = [sum(addends[: k + 1]) for k in range(len(addends))]
    wrong_values = [addends[at] + slip] + [s + slip for s in sums[at:]]
    if set(wrong_values) & set(addends + sums):
        # A misread value that the correct route also reaches (2 read as 5 where 2 + 3 =
        # 5): comparing values cannot tell them apart. Such draws test nothing here.
        return
    (point,) = points
    # The step, without its list number: the marker is structure, not part of the claim.
    assert point.text.startswith("Add ") and f"+ {addends[at] + slip} =" in point.text
    low, _ = wrong.trace.char_range(point.start, point.end)
    assert not wrong.trace.text[low : text.index(point.text)].strip(" ")


def test_a_dead_end_before_the_answer_is_the_first_wrong_turn(tok: LoadedTokenizer) -> None:
    # It adds where the problem multiplies, drops that sum, and later takes a partial
    # product for the answer: the sum it never uses again is still its first wrong turn.
    # (Its lines say what they count: a bare true line could carry no negative label.)
    turn = "The boxes hold 17 + 24 = 41 cans."
    plan = "Only the 20 matters, so take 17 × 20 = 340 alone."
    wrong = [*PROBLEM_STEPS[:1], turn, *PROBLEM_STEPS[1:2], plan, "\\boxed{340}"]
    (point,) = divergences([member(tok, RIGHT, 1.0), member(tok, wrong, 0.0)])
    assert (point.text, point.agreed) == (turn, 1)
    # A turn that lands on a value of the correct route (17 + 3 = 20, and 20 + 4 = 24 as
    # the split has it) is no wrong turn: the point is the plan again.
    back = [*PROBLEM_STEPS[:1], "The boxes hold 17 + 3 = 20 cans.", "So 20 + 4 = 24 cans.", plan]
    (point,) = divergences([member(tok, RIGHT, 1.0), member(tok, [*back, "\\boxed{340}"], 0.0)])
    assert point.text == plan
