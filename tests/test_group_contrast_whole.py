"""A contrast overrules a divergence point only with what the cited sibling says whole
(issue 43): a whole step as the sibling's own reading splits its text, one it asserts
(not one it quotes to reject, not one the checker proves false there), computing what the
point's step computes (judge_service/group/settle.py). Real BPE tokens throughout."""

from __future__ import annotations

from judge_service import labels as L
from judge_service.group.divergence import Divergence, Member, divergences
from judge_service.group.settle import overruled
from judge_service.spans import Span
from judge_service.trace.tokenizer import LoadedTokenizer

SHARED = ["We need 17 × 24.", "Split 24 into 20 + 4."]
RIGHT = [*SHARED, "17 × 20 = 340.", "17 × 4 = 68.", "340 + 68 = 408.", "So \\boxed{408}."]
PLAN = [*SHARED, "Only the 20 matters, so take 17 × 20 = 340 alone.", "So \\boxed{340}."]
# A correct sibling that quotes the wrong step to reject it, then goes on right.
QUOTES = [
    *SHARED,
    "Someone might say 17 × 20 = 340 alone is the answer. That is wrong.",
    "17 × 4 = 68, and 340 + 68 = 408.",
    "So \\boxed{408}.",
]


def member(tok: LoadedTokenizer, lines: list[str], reward: float) -> Member:
    text = "\n".join(lines)
    trace = tok.decode(tok.hf.encode(text, add_special_tokens=False))
    return Member(trace, reference_answer="408", reward=reward)


def cite(group: list[Member], rollout: int, text: str) -> tuple[int, int, int]:
    trace = group[rollout].trace
    at = trace.text.index(text)
    start, end = trace.tokens_for_chars(at, at + len(text))
    return rollout, start, end


def overrules(group: list[Member], point: Divergence, cited: tuple[int, int, int]) -> bool:
    span = Span(point.start, point.end, L.VALID_PROGRESS, 0.9, point.text, contrast=cited)
    return overruled(span, point, group)


def test_a_sibling_quoting_the_wrong_step_to_reject_it_overrules_nothing(
    bpe: LoadedTokenizer,
) -> None:
    group = [member(bpe, QUOTES, 1.0), member(bpe, PLAN, 0.0)]
    (point,) = divergences(group)
    assert point.text == PLAN[2]
    # Exactly the quoted tokens: a fragment of the sibling's step, which rejects it.
    assert not overrules(group, point, cite(group, 0, "17 × 20 = 340"))
    # The whole line: the sibling's own step, but one that quotes to reject.
    assert not overrules(group, point, cite(group, 0, QUOTES[2]))


def test_half_a_step_overrules_nothing_and_a_whole_asserted_one_does(
    bpe: LoadedTokenizer,
) -> None:
    group = [member(bpe, RIGHT, 1.0), member(bpe, PLAN, 0.0)]
    (point,) = divergences(group)
    assert not overrules(group, point, cite(group, 0, "17 × 20"))
    assert not overrules(group, point, cite(group, 0, "17 × 4 = 68."))  # another step
    assert overrules(group, point, cite(group, 0, "17 × 20 = 340."))
    # No contrast, or one citing a wrong rollout: nothing.
    assert not overruled(Span(point.start, point.end, L.VALID_PROGRESS, 0.9, "x"), point, group)
    assert not overrules(group, point, cite(group, 1, PLAN[2]))
