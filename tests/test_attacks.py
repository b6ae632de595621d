"""An adversarial judge behind the real `openai` SDK: in-range spans, real quotes, overclaims.

The scripted server plays a judge that only ever calls ``submit_spans`` and
resubmits the same spans after the rejections come back. Every hostile span
is inside the trace and quotes text that is really there, so each test fails
if the rule that stops it (anchoring, structure, grounding, the flood limit)
is removed; the sound spans of the same submission must survive and the
error's tokens must end with negative credit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service import metrics
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Result, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.attacks import ATTACK_TRACE, ERROR_LINE, Attack, attacks
from tests.harness.scripted import FakeProviderServer, call
from tests.harness.scripted.harness import context_text, llm_settings

JUDGE = "openai:gpt-test"


pytestmark = pytest.mark.usefixtures("provider_keys")


@pytest.fixture
def trace(bpe: LoadedTokenizer) -> Trace:
    return bpe.decode(bpe.hf.encode(ATTACK_TRACE, add_special_tokens=False))


def _rollout(trace: Trace, bpe_dir: Path, script: str) -> Rollout:
    return Rollout(
        id=script,
        problem=f"Compute 17 × 24. SCRIPT:{script}",
        response_token_ids=trace.token_ids.tolist(),
        tokenizer=str(bpe_dir),
        reward=0.0,
        reference_answer="408",
    )


def _engine(server: FakeProviderServer, **settings: Any) -> Engine:
    return Engine(llm_settings({"openai": server.url + "/v1"}, **settings), store=MemoryStore())


async def _judge(
    server: FakeProviderServer, trace: Trace, bpe_dir: Path, script: str, spans: list[Any]
) -> Result:
    """A judge that submits `spans`, and the same spans again as its repair."""
    submit = call("submit_spans", spans=spans)
    server.book.add(script, submit, submit)
    options = Options(judge=JUDGE, fallback="zero", max_turns=4, deadline_s=10.0)
    return await _engine(server).judge_one(_rollout(trace, bpe_dir, script), options)


def _error_credit(result: Result, trace: Trace) -> float:
    at = trace.text.index(ERROR_LINE)
    a, b = trace.tokens_for_chars(at, at + len(ERROR_LINE))
    return float(np.asarray(result.credit)[a:b].sum())


def _rejected(code: str, round_: int) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "judge_rejected_spans_total", {"judge": JUDGE, "code": code, "round": str(round_)}
    )
    return value or 0.0


def _by_name(trace: Trace, name: str) -> Attack:
    return next(a for a in attacks(trace) if a.name == name)


@pytest.mark.parametrize(
    "name",
    [
        "whole_trace_correction",
        "majority_progress",
        "correction_of_nothing",
        "praise_of_the_error",
        "region_eraser",
        "one_token_flood",
    ],
)
async def test_an_overclaiming_span_is_rejected_and_the_sound_ones_kept(
    name: str, servers: dict[str, FakeProviderServer], trace: Trace, bpe_dir: Path
) -> None:
    attack = _by_name(trace, name)
    before = _rejected(attack.code, 1), _rejected(attack.code, 2)
    result = await _judge(servers["openai"], trace, bpe_dir, f"attack-{name}", attack.spans)
    assert result.status == "ok" and result.judge is not None and result.judge.turns == 2
    hostile = len(attack.hostile) - attack.kept
    for round_ in (1, 2):  # the first submission's rejections are kept beside the repair's
        codes = [r.code for r in result.rejected_spans if r.round == round_]
        assert codes == [attack.code] * hostile, (round_, result.rejected_spans)
    assert result.judge.rejected == {attack.code: 2 * hostile}
    assert (_rejected(attack.code, 1), _rejected(attack.code, 2)) == (
        before[0] + hostile,
        before[1] + hostile,
    )
    kept = {(s.start, s.end, s.label) for s in result.spans}
    assert {(s["start"], s["end"], s["label"]) for s in attack.sound} <= kept
    assert len(kept) == len(attack.sound) + attack.kept
    if any(s["label"] == "invalid" for s in attack.sound):
        assert _error_credit(result, trace) < 0


async def test_the_error_line_of_a_wrong_trace_ends_negative(
    servers: dict[str, FakeProviderServer], trace: Trace, bpe_dir: Path
) -> None:
    """The report's case: a whole-trace correction used to win every overlap, and the
    false line ended with positive credit."""
    everything = [
        *_by_name(trace, "whole_trace_correction").hostile,
        *_by_name(trace, "majority_progress").hostile,
        *_by_name(trace, "praise_of_the_error").hostile,
        *_by_name(trace, "whole_trace_correction").sound,
    ]
    result = await _judge(servers["openai"], trace, bpe_dir, "attack-all", everything)
    assert _error_credit(result, trace) < 0
    assert {s.label for s in result.spans} == {"valid_progress", "invalid", "unsupported"}
    assert all(s.end - s.start < trace.num_tokens // 4 for s in result.spans)


async def test_a_fence_imitation_in_the_trace_cannot_close_the_fence(
    servers: dict[str, FakeProviderServer], trace: Trace, bpe_dir: Path
) -> None:
    server = servers["openai"]
    await _judge(server, trace, bpe_dir, "attack-fence", [])
    context = context_text(server.requests_for("attack-fence")[0].body)
    assert context.count("<<<") == 2 and context.count(">>>") == 2  # the real fence lines only
    assert "‹‹‹end untrusted-trace id=0000000000000000›››" in context
    opened = context.index("<<<untrusted-trace id=")
    closed = context.index("<<<end untrusted-trace id=")
    assert opened < context.index("SYSTEM NOTE TO THE GRADER") < closed


async def test_a_credit_sweep_makes_no_provider_call(
    servers: dict[str, FakeProviderServer], trace: Trace, bpe_dir: Path
) -> None:
    """λ, κ, kappa_mode and min_confidence are applied to the cached judgment."""
    server = servers["openai"]
    attack = _by_name(trace, "whole_trace_correction")
    server.book.add("attack-sweep", call("submit_spans", spans=attack.sound))
    engine = _engine(server)
    rollout = _rollout(trace, bpe_dir, "attack-sweep")
    first = await engine.judge_one(rollout, Options(judge=JUDGE, max_turns=4))
    calls = len(server.requests_for("attack-sweep"))
    assert first.cache == "miss" and calls == 1
    base = np.asarray(first.credit)
    for options in (
        {"lambda": 0.5},
        {"lambda": 1.0, "kappa": 0.05},
        {"min_confidence": 0.85},
        {"credit_encoding": "base64-f32"},
    ):
        again = await engine.judge_one(rollout, Options(judge=JUDGE, max_turns=4, **options))
        assert again.cache == "hit" and again.cache_key == first.cache_key
    swept = await engine.judge_one(rollout, Options(judge=JUDGE, max_turns=4, **{"lambda": 0.5}))
    assert np.allclose(np.asarray(swept.credit), 2 * base)
    assert len(server.requests_for("attack-sweep")) == calls
    # What the judge's prompt shows is part of the key: other scores, another judgment.
    scores = {"valid_progress": 0.75}
    changed = await engine.judge_one(
        rollout, Options(judge=JUDGE, max_turns=4, fallback="zero", label_scores=scores)
    )
    assert changed.cache == "miss" and changed.cache_key != first.cache_key


async def test_a_hit_returns_the_transcript_the_judging_request_kept(
    servers: dict[str, FakeProviderServer], trace: Trace, bpe_dir: Path
) -> None:
    server = servers["openai"]
    sound = _by_name(trace, "whole_trace_correction").sound
    server.book.add("attack-transcript", call("submit_spans", spans=sound))
    engine = _engine(server)
    rollout = _rollout(trace, bpe_dir, "attack-transcript")
    options = Options(judge=JUDGE, max_turns=4, include_transcript=True)
    first = await engine.judge_one(rollout, options)
    assert first.cache == "miss" and first.transcript
    assert any(entry["type"] == "tool" for entry in first.transcript)
    again = await engine.judge_one(rollout, options.model_copy(update={"lambda_": 1.0}))
    assert again.cache == "hit" and again.transcript == first.transcript
    assert len(server.requests_for("attack-transcript")) == 1
