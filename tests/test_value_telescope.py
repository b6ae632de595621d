"""The value judge's segments claim nothing, so validation keeps only its structural checks
and the segment scores telescope to V(T) - V(0) (issue 26), while an LLM judge's identical
spans still meet every claim rule. Through the Engine, on a tiny random Llama saved with a
local BPE tokenizer; the LLM judge is the real one playing a script in process."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from judge_service import spans as S  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.judges import registry  # noqa: E402
from judge_service.judges.base import JudgeRequest  # noqa: E402
from judge_service.judges.llm.llm_judge import LLMJudge  # noqa: E402
from judge_service.judges.llm.loop import LoopConfig  # noqa: E402
from judge_service.labels import DEFAULT_LABEL_SCORES  # noqa: E402
from judge_service.methods.models import MODELS  # noqa: E402
from judge_service.methods.value import ValueJudge, segments, trace_values  # noqa: E402
from judge_service.pipeline import Engine  # noqa: E402
from judge_service.schemas import Options, Result, Rollout  # noqa: E402
from judge_service.validate import Validator, Verdict  # noqa: E402
from tests.harness.scripted.harness import judge_tools  # noqa: E402
from tests.harness.scripted.inprocess import ScriptedProvider  # noqa: E402
from tests.harness.scripted.script import ScriptBook, submit  # noqa: E402
from tests.test_probe_support import tiny_model_dir  # noqa: E402

# A false link, a line built on it, a wrong final answer (the reference is 408), and a line
# followed by two blank lines: its segment ends two lines below its only quote, which the
# evidence rule calls unanchored. With this model V rises over the false link, the line
# built on it and the answer, so the claim rules would reject 4 of the 7 segments.
FALSE_LINE = "17 × 4 = 78."
TEXT = (
    "<think>\nWe need 17 × 24.\n17 × 20 = 340.\n\n\n"
    f"{FALSE_LINE}\n340 + 78 = 418.\n</think>\n"
    "The answer is \\boxed{418}."
)
PROBLEM = "What is 17 × 24? SCRIPT:claims"  # the tag names the scripted LLM's script


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_model_dir()


def _settings(model_dir: Path) -> Settings:
    return Settings(
        default_tokenizer=str(model_dir),
        allowed_scorer_models=[str(model_dir)],
        allowed_judges=["anthropic:*", "rules"],
    )


def _rollout(model_dir: Path) -> Rollout:
    model = MODELS.get(str(model_dir), _settings(model_dir))
    ids = model.scorer.hf_tokenizer.encode(TEXT, add_special_tokens=False)
    fields = {
        "id": "telescope",
        "problem": PROBLEM,
        "response_token_ids": ids,
        "reference_answer": "408",
        "reward": 0.0,
    }
    return Rollout.model_validate(fields)


def _judge(engine: Engine, rollout: Rollout, judge: str) -> Result:
    options = Options.model_validate({"judge": judge, "use_cache": False})
    return asyncio.run(engine.judge_one(rollout, options))


def _raw(span: Any) -> dict[str, Any]:
    """A result span as a judge would submit it."""
    raw = {k: getattr(span, k) for k in ("start", "end", "label", "confidence", "evidence")}
    if span.evidence_end is not None:
        raw["evidence_end"] = span.evidence_end
    return raw


def test_value_segments_telescope_over_false_and_wrong_lines(model_dir: Path) -> None:
    settings = _settings(model_dir)
    engine = Engine(settings)
    rollout = _rollout(model_dir)
    result = _judge(engine, rollout, f"value:{model_dir}")
    assert result.status == "ok", result.error
    assert result.rejected_spans == []
    assert result.judge is not None and result.judge.prompt_version == "value-v2"
    spans = result.spans
    trace = engine.decode(rollout)
    n = trace.num_tokens
    assert spans[0].start == 0 and spans[-1].end == n
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))
    # The segments the claim rules stop are among the accepted ones.
    texts = [trace.span_text(s.start, s.end) for s in spans]
    rising = {t.strip() for t, s in zip(texts, spans, strict=True) if s.score > 0}
    assert {FALSE_LINE, "340 + 78 = 418.", "The answer is \\boxed{418}."} <= rising
    assert "17 × 20 = 340.\n\n\n" in texts
    # V by the judge's own code, called apart from the pipeline on the judge's cuts.
    bounds = segments(trace, settings.max_spans)
    cuts = sorted({0, *(a for a, _ in bounds), *(b for _, b in bounds)})
    request = JudgeRequest(
        rollout_id=rollout.id,
        trace=trace,
        problem=rollout.problem,
        final_answer=None,
        reward=rollout.reward,
        reference_answer=rollout.reference_answer,
        reference_solution=None,
        label_scores=DEFAULT_LABEL_SCORES,
        tokenizer=engine.tokenizers.get(str(model_dir)),
    )
    values = trace_values(MODELS.get(str(model_dir), settings), request, cuts, settings)
    assert sum(s.score for s in spans) == pytest.approx(values[n] - values[0], abs=1e-9)
    for span in spans:
        assert span.score == pytest.approx(values[span.end] - values[span.start], abs=1e-9)


def test_an_llm_judges_identical_spans_still_meet_the_claim_rules(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = ScriptBook()

    def scripted(model: str, settings: Settings) -> LLMJudge:
        config = LoopConfig(max_tokens_per_call=100, tool_timeout_s=0.2)
        return LLMJudge(ScriptedProvider(book), tools=judge_tools(), config=config)

    monkeypatch.setitem(registry.FACTORIES, "anthropic", scripted)
    engine = Engine(_settings(model_dir))
    rollout = _rollout(model_dir)
    valued = _judge(engine, rollout, f"value:{model_dir}")
    assert valued.rejected_spans == [] and len(valued.spans) == 7
    book.add("claims", submit([_raw(s) for s in valued.spans]))  # the LLM repairs nothing
    claimed = _judge(engine, rollout, "anthropic:scripted")
    assert claimed.status == "ok", claimed.error
    assert claimed.judge is not None and claimed.judge.name.startswith("scripted:")
    trace = engine.decode(rollout)
    false_span = next(
        s for s in valued.spans if trace.span_text(s.start, s.end).strip() == FALSE_LINE
    )
    rejected = {(r.span["start"], r.span["end"]): r.code for r in claimed.rejected_spans}
    assert rejected[(false_span.start, false_span.end)] == S.CONTRADICTS_ARITHMETIC
    assert {S.WRONG_FINAL_ANSWER, S.BUILT_ON_ERROR, S.EVIDENCE_NOT_ANCHORED} <= set(
        rejected.values()
    )
    assert [(s.start, s.end) for s in claimed.spans] == [
        (s.start, s.end) for s in valued.spans if (s.start, s.end) not in rejected
    ]


def test_spans_that_claim_nothing_keep_the_structural_checks(model_dir: Path) -> None:
    rollout = _rollout(model_dir)
    trace = Engine(_settings(model_dir)).decode(rollout)
    n = trace.num_tokens
    limits = S.SpanLimits(max_spans=4)
    validator = Validator(trace, DEFAULT_LABEL_SCORES, limits, verdict=Verdict(None, "408", 0.0))
    quote = {"label": "valid_progress", "confidence": 1.0, "evidence": "not in the trace"}
    raw = [
        {"start": 0, "end": n // 2, **quote},  # a quote found nowhere: a claim rule
        {"start": n // 2 - 1, "end": n // 2 + 1, **quote},  # overlaps the first
        {"start": n // 2, "end": n + 1, **quote},  # past the trace
        {"start": n // 2, "end": n, **quote, "confidence": "sure"},  # malformed
        {"start": n - 1, "end": n, **quote},  # the fifth of a limit of four
    ]
    report = validator.check(raw, claims=ValueJudge.carries_claims)
    assert [(s.start, s.end) for s in report.accepted] == [(0, n // 2)]
    assert [r.code for r in report.rejected] == [
        S.OUT_OF_RANGE,
        S.BAD_CONFIDENCE,
        S.TOO_MANY_SPANS,
        S.OVERLAP,
    ]
    claims = validator.check(raw[:1], claims=LLMJudge.carries_claims)
    assert [r.code for r in claims.rejected] == [S.EVIDENCE_NOT_FOUND]
