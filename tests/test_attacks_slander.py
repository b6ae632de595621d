"""No negative label on a line whose every claim the checker proves true (issue 38): words
around the true claim that claim nothing (a lead-in label, a sanity-check phrase, unicode
operators, a percentage's "of") do not make room for slander, and the rejection names the
proven claim. A line that also says something about the problem or the method keeps the
judge's word (the honest case: a true sum where the problem asked a product)."""

from __future__ import annotations

import pytest

from judge_service import spans as S
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import validate_spans
from tests.harness.attacks import quote_span


def _trace(bpe: LoadedTokenizer, text: str) -> Trace:
    trace = bpe.decode(bpe.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return trace


def _submit(trace: Trace, line: str, label: str) -> tuple[list[str], list[str]]:
    span = quote_span(trace, line, label)
    report = validate_spans([span], trace, DEFAULT_LABEL_SCORES)
    return [r.code for r in report.rejected], [r.reason for r in report.rejected]


SLANDER = [
    "Week 2: 5 + 3 = 8.",
    "Check one part: 12 × 4 = 48.",
    "As a sanity check, 120 / 4 = 30.",
    "So 7 · 6 = 42, yes.",
    "Then 100 − 37 = 63.",
    "And 84 ÷ 4 = 21.",
    "10% of 150 = 15.",
    "**Step 3:** 25 × 4 = 100",
]


@pytest.mark.parametrize("line", SLANDER)
@pytest.mark.parametrize("label", ["invalid", "unsupported"])
def test_a_negative_label_on_a_line_of_true_claims_is_refused(
    bpe: LoadedTokenizer, line: str, label: str
) -> None:
    trace = _trace(bpe, f"We work it out.\n{line}\nDone.")
    codes, reasons = _submit(trace, line, label)
    assert codes == [S.CONTRADICTS_ARITHMETIC], (line, reasons)
    # The rejection names the computation it proved.
    assert "holds" in reasons[0] and "=" in reasons[0]


@pytest.mark.parametrize(
    "line",
    [
        "She has 12 + 6 = 18 pink flamingos left.",  # about the problem: the judge's word
        "The problem asks for a product, so 17 + 24 = 41 is the wrong operation.",
        "Week 2: 5 + 3 = 9.",  # false: invalid is right
    ],
)
def test_a_line_that_says_more_than_its_arithmetic_keeps_the_judges_word(
    bpe: LoadedTokenizer, line: str
) -> None:
    trace = _trace(bpe, f"We work it out.\n{line}\nDone.")
    codes, _ = _submit(trace, line, "invalid")
    assert codes == []
