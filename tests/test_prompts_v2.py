"""Prompt v2: its worked example is a real marked view, its submit_spans example passes the
tool's schema and the validator on that trace, and the rules it states are the service's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from string import Template
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from judge_service import spans as S
from judge_service.judges.llm.prompt import (
    DEFAULT_PROMPTS_DIR,
    OPTIONAL,
    PLACEHOLDERS,
    PromptSet,
)
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.tools.base import ToolContext
from judge_service.tools.trace_tools import SearchTraceTool, SubmitSpansTool, ViewTokensTool
from judge_service.trace import Trace, mark, strip_markers
from judge_service.trace.tokenizer import TokenizerCache
from judge_service.validate import validate_spans

EXAMPLE_TOKENIZER = Path(__file__).resolve().parent.parent / "examples" / "tokenizer"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)\n```$", re.MULTILINE | re.DOTALL)


def _blocks(text: str, kind: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(text) if lang == kind]


def _placeholders(path: Path) -> set[str]:
    found = set()
    for match in Template.pattern.finditer(path.read_text(encoding="utf-8")):
        name = match.group("named") or match.group("braced")
        if name:
            found.add(name)
    return found


@pytest.fixture(scope="module")
def system() -> str:
    return PromptSet.load("v2").system_text(dict(DEFAULT_LABEL_SCORES))


@pytest.fixture(scope="module")
def example_trace(system: str) -> Trace:
    """The worked example's trace, rebuilt from its view and tokenized for real."""
    view = _blocks(system, "text")[0]
    tokenizer = TokenizerCache().get(str(EXAMPLE_TOKENIZER))
    text = strip_markers(view)
    trace = tokenizer.decode(tokenizer.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return trace


def _example_spans(system: str) -> list[dict[str, Any]]:
    (block,) = _blocks(system, "json")
    spans: list[dict[str, Any]] = json.loads(block)["spans"]
    return spans


def test_v2_has_every_file_and_placeholder_of_v1() -> None:
    v1, v2 = DEFAULT_PROMPTS_DIR / "v1", DEFAULT_PROMPTS_DIR / "v2"
    names = sorted(p.name for p in v1.glob("*.md"))
    assert names == sorted(p.name for p in v2.glob("*.md"))
    assert sorted(f"{name}.md" for name in [*PLACEHOLDERS, *OPTIONAL]) == names
    for name in names:
        assert _placeholders(v2 / name) == _placeholders(v1 / name), name
    v2_set = PromptSet.load("v2")
    assert v2_set.version_for([]).startswith("v2.")
    assert v2_set.version_for([]) != PromptSet.load("v1").version_for([])


def test_worked_example_is_the_real_marked_view(system: str, example_trace: Trace) -> None:
    view = _blocks(system, "text")[0]
    assert mark(example_trace).text == view
    assert f"The view ({example_trace.num_tokens} tokens)" in system
    # The example shows a long line with markers inside it, not only line starts.
    assert "+⟦147⟧ 4x" in view and "x =⟦211⟧ -2" in view


async def test_view_tokens_excerpt_is_the_tools_output(system: str, example_trace: Trace) -> None:
    shown = _blocks(system, "text")[1]
    numbers = re.match(r"tokens \[(\d+), (\d+)\)", shown)
    assert numbers is not None
    start, end = int(numbers.group(1)), int(numbers.group(2))
    result = await ViewTokensTool().call(
        {"start": start, "end": end}, ToolContext(rollout_id="v2", trace=example_trace)
    )
    assert result.ok and result.content == shown
    # The prose reads "x = 1 ± sqrt(5)" off the excerpt as [69, 81).
    assert "alone is [69, 81)" in system
    assert example_trace.text[slice(*example_trace.char_range(69, 81))] == " x = 1 ± sqrt(5)"


def test_submit_example_passes_the_schema_and_the_validator(
    system: str, example_trace: Trace
) -> None:
    (block,) = _blocks(system, "json")
    arguments = json.loads(block)
    schema = SubmitSpansTool(list(DEFAULT_LABEL_SCORES)).parameters
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(arguments)
    report = validate_spans(arguments["spans"], example_trace, DEFAULT_LABEL_SCORES)
    assert report.rejected == []
    assert [(s.start, s.end, s.label) for s in report.accepted] == [
        (19, 52, "invalid"),
        (52, 83, "unsupported"),
        (83, 223, "verified_correction"),
        (225, 238, "valid_progress"),
    ]
    assert arguments["spans"][-1]["end"] == example_trace.num_tokens


def test_the_example_needs_its_evidence_end(system: str, example_trace: Trace) -> None:
    spans = _example_spans(system)
    correction = next(s for s in spans if "evidence_end" in s)
    del correction["evidence_end"]
    report = validate_spans(spans, example_trace, DEFAULT_LABEL_SCORES)
    assert [(r.span["label"], r.code) for r in report.rejected] == [
        ("verified_correction", S.EVIDENCE_NOT_ANCHORED)
    ]


def test_schema_refuses_an_empty_quote_but_not_a_short_whole_span(example_trace: Trace) -> None:
    schema = Draft202012Validator(SubmitSpansTool(list(DEFAULT_LABEL_SCORES)).parameters)
    short = {"start": 225, "end": 226, "label": "neutral", "confidence": 0.6}
    whole = example_trace.text[slice(*example_trace.char_range(225, 226))]
    assert 0 < len(whole) < 8
    for field in ("evidence", "evidence_end"):
        empty = {**short, "evidence": whole, field: ""}
        assert not schema.is_valid({"spans": [empty]}), field
    # A span shorter than 8 characters is quoted whole: schema and validator both accept it.
    quoted = {**short, "evidence": whole}
    assert schema.is_valid({"spans": [quoted]})
    assert validate_spans([quoted], example_trace, DEFAULT_LABEL_SCORES).rejected == []


async def test_search_marks_are_not_trace_text(system: str, example_trace: Trace) -> None:
    assert "Do not copy ⟪ ⟫ or … from search results" in system
    result = await SearchTraceTool().call(
        {"pattern": "Redo:"}, ToolContext(rollout_id="v2", trace=example_trace)
    )
    hit = result.content.splitlines()[1]
    assert re.fullmatch(r"1\. tokens \[\d+, \d+\): ….+⟪Redo:⟫.+…", hit)
    assert "`tokens [a, b): …text before⟪hit⟫text after…`" in system
    copied = hit.split("): ", 1)[1]  # what a careless judge would quote
    span = {
        "start": 83,
        "end": 223,
        "label": "valid_progress",
        "confidence": 0.9,
        "evidence_end": "x = -2 - 2 sqrt(2).",
    }
    report = validate_spans([{**span, "evidence": copied}], example_trace, DEFAULT_LABEL_SCORES)
    assert [r.code for r in report.rejected] == [S.EVIDENCE_NOT_FOUND]
    clean = copied.strip("…").replace("⟪", "").replace("⟫", "")
    ok = validate_spans([{**span, "evidence": clean}], example_trace, DEFAULT_LABEL_SCORES)
    assert ok.rejected == []


def test_neutral_costs_what_the_rubric_says(system: str, example_trace: Trace) -> None:
    assert "it loses to every label except unproductive_repetition" in system

    def span(start: int, end: int, label: str, confidence: float, quote: str) -> dict[str, Any]:
        return {
            "start": start,
            "end": end,
            "label": label,
            "confidence": confidence,
            "evidence": quote,
        }

    neutral = span(52, 83, "neutral", 0.99, "By the quadratic formula")
    point = span(52, 83, "valid_progress", 0.5, "By the quadratic formula")
    repeat = span(52, 83, "unproductive_repetition", 0.6, "By the quadratic formula")
    lost = validate_spans([neutral, point], example_trace, DEFAULT_LABEL_SCORES)
    assert [s.label for s in lost.accepted] == ["valid_progress"]
    won = validate_spans([neutral, repeat], example_trace, DEFAULT_LABEL_SCORES)
    assert [s.label for s in won.accepted] == ["neutral"]
    assert [r.code for r in won.rejected] == [S.OVERLAP]


def test_v2_states_the_rules_the_issue_asks_for(system: str) -> None:
    for phrase in (
        "An algebra slip",
        "A misread problem",
        "A wrong case split",
        "## Re-checks: one rule",
        "- 0.9: verified.",
        "- 0.7: likely.",
        "- 0.5: a toss-up",
        "evidence_end",
    ):
        assert phrase in system, phrase


def test_v2_repair_says_how_to_fix_every_rejection_code() -> None:
    repair = (DEFAULT_PROMPTS_DIR / "v2" / "repair.md").read_text(encoding="utf-8")
    assert [code for code in S.CODES if code not in repair] == []
