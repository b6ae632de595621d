"""Divergence points on constructed groups (judge_service/group/divergence.py), decoded by
a real byte-level BPE tokenizer, so token spans are the tokenizer's, not char indices."""

from __future__ import annotations

from judge_service import labels as L
from judge_service.group.divergence import Member, divergences, step_key, steps
from judge_service.spans import Span, merge_spans
from judge_service.trace.tokenizer import LoadedTokenizer

PROBLEM_STEPS = [
    "We need 17 × 24.",
    "Split 24 into 20 + 4.",
    "17 × 20 = 340.",
]
RIGHT = [*PROBLEM_STEPS, "17 × 4 = 68.", "340 + 68 = 408.", "So the answer is \\boxed{408}."]
# A copy of RIGHT up to one false line, then on to the wrong answer it implies.
FALSE_AT_3 = [*PROBLEM_STEPS, "17 × 4 = 78.", "340 + 78 = 418.", "So the answer is \\boxed{418}."]
# Parts with no false arithmetic: a plan that leads to the wrong answer.
WRONG_PLAN = [*PROBLEM_STEPS[:2], "Only the 20 matters here.", "So the answer is \\boxed{340}."]


def member(bpe: LoadedTokenizer, lines: list[str], reward: float | None) -> Member:
    text = "\n".join(lines)
    trace = bpe.decode(bpe.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return Member(trace, reference_answer="408", reward=reward)


def test_a_copy_up_to_one_false_line_diverges_on_that_line_only(bpe: LoadedTokenizer) -> None:
    group = [member(bpe, RIGHT, 1.0), member(bpe, FALSE_AT_3, 0.0)]
    (point,) = divergences(group)
    assert (point.rollout, point.sibling, point.agreed) == (1, 0, 3)
    assert point.reason == "checker_false"
    trace = group[1].trace
    # The span is exactly the false line's tokens: its text is the line, and no token of
    # the common steps before it is inside.
    assert trace.span_text(point.start, point.end).strip() == "17 × 4 = 78."
    line_start = trace.text.index("17 × 4 = 78.")
    assert trace.char_range(point.start, point.start + 1)[0] <= line_start
    assert trace.char_range(point.start, point.end)[1] <= trace.text.index("\n340 + 78") + 1
    common_end = trace.tokens_for_chars(0, line_start - 1)[1]
    assert point.start >= common_end - 1  # at most the newline token is shared
    span = point.span()
    assert (span.label, span.start, span.end) == (L.INVALID, point.start, point.end)


def test_a_departure_that_is_not_false_but_ends_wrong_is_still_invalid(
    bpe: LoadedTokenizer,
) -> None:
    group = [member(bpe, RIGHT, 1.0), member(bpe, WRONG_PLAN, 0.0)]
    (point,) = divergences(group)
    assert (point.agreed, point.reason) == (2, "leads_to_wrong_answer")
    assert point.text == "Only the 20 matters here."
    assert point.span().label == L.INVALID


def test_the_sibling_that_agrees_longest_pins_the_point(bpe: LoadedTokenizer) -> None:
    # Sibling 0 parts at step 1 already (another route); sibling 2 follows the wrong
    # rollout to its false line: the point is there, found against sibling 2.
    other_route = ["We need 17 × 24.", "24 × 17 = 408.", "So the answer is \\boxed{408}."]
    group = [member(bpe, other_route, 1.0), member(bpe, FALSE_AT_3, 0.0), member(bpe, RIGHT, 1.0)]
    (point,) = divergences(group)
    assert (point.sibling, point.agreed, point.reason) == (2, 3, "checker_false")
    # Two siblings agreeing as long: the first in the group wins.
    group = [member(bpe, RIGHT, 1.0), member(bpe, FALSE_AT_3, 0.0), member(bpe, RIGHT, 1.0)]
    assert divergences(group)[0].sibling == 0


def test_no_point_without_a_correct_sibling_or_a_departure(bpe: LoadedTokenizer) -> None:
    # All wrong: nothing right to part from.
    assert divergences([member(bpe, FALSE_AT_3, 0.0), member(bpe, WRONG_PLAN, 0.0)]) == []
    # The wrong rollout stops early: a prefix of the correct one, no departure.
    assert divergences([member(bpe, RIGHT, 1.0), member(bpe, RIGHT[:3], 0.0)]) == []
    # Correct rollouts get no divergence span.
    assert divergences([member(bpe, RIGHT, 1.0), member(bpe, RIGHT, 1.0)]) == []


def test_without_a_reward_the_answer_against_the_reference_decides(
    bpe: LoadedTokenizer,
) -> None:
    group = [member(bpe, RIGHT, None), member(bpe, FALSE_AT_3, None)]
    assert [m.correct for m in group] == [True, False]
    assert [d.rollout for d in divergences(group)] == [1]


def test_steps_compare_in_the_checkers_form() -> None:
    # The checker reads "times" as ×; spacing never makes two steps differ.
    assert step_key("  17 times 4  =   68. ") == step_key("17 × 4 = 68.")
    found = steps("a\n\n  b  \n")
    assert [(s.key, "a\n\n  b  \n"[s.start : s.end]) for s in found] == [("a", "a"), ("b", "b")]


def test_merge_leaves_the_judges_own_spans_standing() -> None:
    judged = [Span(10, 20, L.VALID_PROGRESS, 0.9, "x")]
    points = [Span(15, 25, L.INVALID, 1.0, "y"), Span(30, 40, L.UNSUPPORTED, 1.0, "z")]
    merged = merge_spans(judged, points)
    assert [(s.start, s.label) for s in merged] == [(10, L.VALID_PROGRESS), (30, L.UNSUPPORTED)]
