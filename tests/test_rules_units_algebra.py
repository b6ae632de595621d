"""Quantities with units and algebra steps are read by the checker (issue 38): a false one
gets no positive credit (validation refuses it, the rules judge marks it invalid), a true
one keeps its credit. The parser never evaluates trace text (no sympify)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from judge_service import spans as S
from judge_service.config import Settings
from judge_service.judges.rules.algebra import algebra_links
from judge_service.judges.rules.claims import find_links
from judge_service.judges.rules.units import unit_links
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import validate_spans
from tests.harness.attacks import quote_span

FALSE = [
    "So 2.5 km = 250 m.",
    "Then 3 h 20 min = 180 min.",
    "The bag holds 1.5 kg = 150 g.",
    "The floor is 2 m^2 = 2000 cm^2.",
    "\\(2 \\text{ hours} = 100 \\text{ minutes}\\)",
    "x^2 = 9 gives x = 4.",
    "2x + 3 = 11, so x = 5.",
    "Factor: x^2 - 5x + 6 = (x - 2)(x + 3).",
    "Expand: (x + 1)^2 = x^2 + 1.",
]
TRUE = [
    "So 2.5 km = 2500 m.",
    "Then 3 h 20 min = 200 min.",
    "The bag holds 1.5 kg = 1500 g.",
    "The floor is 2 m^2 = 20000 cm^2.",
    "\\(2 \\text{ hours} = 120 \\text{ minutes}\\)",
    "x^2 = 9 gives x = 3.",
    "2x + 3 = 11, so x = 4.",
    "Factor: x^2 - 5x + 6 = (x - 2)(x - 3).",
    "Expand: (x + 1)^2 = x^2 + 2x + 1.",
]


@pytest.mark.parametrize(("false", "true"), list(zip(FALSE, TRUE, strict=True)))
def test_each_form_is_read_and_decided(false: str, true: str) -> None:
    (wrong,) = find_links(false)
    (right,) = find_links(true)
    assert not wrong.holds and right.holds and not wrong.trivial


@pytest.mark.parametrize(
    "line",
    [
        "2 hours + 1.5 hours + 2 hours = 5.5 hours",  # a sum the arithmetic checker reads
        "5 m = 5 kg",  # two dimensions
        "Let x = 5.",  # a definition, not a solution
        "2x + 3 = 11",  # a condition, not a claim
        "x + y = 3, so x = 1",  # two letters
        "__import__('os') = 1, so x = 1",
        "x^99 = 1, so x = 1",  # past the degree bound
    ],
)
def test_what_is_not_one_claim_of_these_forms_is_not_read(line: str) -> None:
    assert unit_links(line) == [] and algebra_links(line) == []


@pytest.fixture(scope="module")
def engine(bpe_dir: Any) -> Engine:
    return Engine(Settings(default_tokenizer=str(bpe_dir)))


@pytest.mark.parametrize(("false", "true"), list(zip(FALSE, TRUE, strict=True)))
def test_a_false_one_gets_no_positive_credit_and_a_true_one_keeps_it(
    engine: Engine, bpe: LoadedTokenizer, false: str, true: str
) -> None:
    for line, ok in ((false, False), (true, True)):
        # Long enough that a point label may cover the claim (at most half the trace).
        text = f"We work it out, one quantity at a time.\n{line}\nDone; nothing else to check."
        trace = bpe.decode(bpe.hf.encode(text, add_special_tokens=False))
        report = validate_spans(
            [quote_span(trace, line, "valid_progress")], trace, DEFAULT_LABEL_SCORES
        )
        codes = [r.code for r in report.rejected]
        assert codes == ([] if ok else [S.CONTRADICTS_ARITHMETIC]), (line, codes)
        ids = bpe.hf.encode(text, add_special_tokens=False)
        result = asyncio.run(engine.judge_one(Rollout(id="t", response_token_ids=ids), Options()))
        labels = {s.label for s in result.spans if s.evidence in line}
        assert ("invalid" in labels) is (not ok), (line, result.spans)


def test_a_line_longer_than_a_sentence_is_not_read_for_units_or_algebra() -> None:
    # The bound that keeps a hostile line of thousands of "5 m" terms linear: past 2,000
    # chars no unit or algebra claim is read (an arithmetic one still is).
    claim = "So 2.5 km = 250 m, and 2x + 3 = 11, so x = 5, and 3 + 4 = 8."
    assert len(find_links(claim)) == 3
    long = claim + " filler" * 300
    assert [(lk.left_text, lk.holds) for lk in find_links(long)] == [("3 + 4", False)]
