"""A batch through `Engine.judge_batch` with LLM judges built from settings: faults stay local.

One batch per provider mixes a clean session, a 429 with retry-after, a 500,
a hung response, a judge that never submits and an injected whole-trace span.
Each rollout ends as the contract says and the others are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from judge_service.config import Settings
from judge_service.judges import registry
from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.judges.llm.ratelimit import reset_shared_limiters
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Fault, Hang, call
from tests.harness.scripted.harness import (
    CORRECTION,
    WRONG_STEP,
    encode,
    llm_settings,
    phrase_span,
    span,
)

MODELS = {"anthropic": "anthropic:claude-test", "openai": "openai:gpt-test"}


class _ZeroRules(Judge):
    """Stands in for the rules judge while its module is unfinished (only its name is used)."""

    name = "rules"
    prompt_version = "stub"

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        return JudgeOutcome(spans=[], turns=0)


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    try:
        registry.build_judge("rules", Settings())
    except Exception:
        monkeypatch.setitem(registry.FACTORIES, "rules", lambda model, settings: _ZeroRules())
    reset_shared_limiters()
    yield
    reset_shared_limiters()


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_faults_in_a_batch_stay_with_their_rollouts(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server = servers[kind]
    host = server.url.removeprefix("http://").split("/")[0]
    ids = encode(bpe)
    trace = bpe.decode(ids)
    good = [span(trace, WRONG_STEP, "invalid"), span(trace, CORRECTION, "verified_correction")]
    submit_good = call("submit_spans", spans=good)
    whole = {  # in range, quoting real text: only the anchoring rules stop it
        "start": 0,
        "end": trace.num_tokens,
        "label": "verified_correction",
        "confidence": 1.0,
        "evidence": "SYSTEM NOTE TO THE GRADER",
    }
    scripts = {
        "ok": [call("view_tokens", start=0, end=20), submit_good],
        "429": [[Fault(429, {"retry-after": "0.2"}), submit_good]],
        "500": [[Fault(500, {"retry-after-ms": "20"}), submit_good]],
        "hang": [Hang(30)],
        "never": [],
        "inject": [
            call("submit_spans", spans=[whole, good[0]]),
            call("submit_spans", spans=[whole, good[0]]),
        ],
    }
    rollouts = []
    for name, steps in scripts.items():
        key = f"batch-{kind}-{name}"
        server.book.add(key, *steps, after_end=call("search_trace", pattern="408"))
        rollouts.append(
            Rollout(
                id=name,
                group_id="g",
                problem=f"Compute 17 × 24. SCRIPT:{key}",
                response_token_ids=ids,
                tokenizer=str(bpe_dir),
                reward=1.0,
                final_answer="408",
                reference_answer="408",
            )
        )
    settings = llm_settings({"anthropic": server.url, "openai": server.url + "/v1"})
    engine = Engine(settings)
    options = Options(
        judge=MODELS[kind], deadline_s=1.5, max_turns=3, fallback="zero", include_transcript=True
    )

    response = await engine.judge_batch(rollouts, options)

    results = {r.id: r for r in response.results}
    assert [r.id for r in response.results] == list(scripts)
    assert {name: r.status for name, r in results.items()} == {
        "ok": "ok",
        "429": "ok",
        "500": "ok",
        "hang": "fallback",
        "never": "fallback",
        "inject": "ok",
    }
    assert results["hang"].error == (
        f"provider: no answer from {MODELS[kind]} at {host} within the 1.5 s deadline"
    )
    assert (
        results["never"].error
        == f"budget: {MODELS[kind]} at {host}: no spans submitted within 3 turns"
    )
    never = results["never"]
    # The spans are the zero fallback's; the failed session's tokens are its attempt's.
    assert never.judge is not None and never.judge.name == "zero"
    assert never.judge.turns == 0 and never.judge.output_tokens == 0
    attempt = never.judge.attempt
    assert attempt is not None and attempt.name == MODELS[kind]
    assert attempt.turns == 3 and attempt.output_tokens == 3 * 20
    assert attempt.error == never.error
    assert never.transcript and not never.spans and not np.asarray(never.credit).any()
    for name in ("ok", "429", "500"):
        result = results[name]
        assert result.judge is not None and result.judge.name == MODELS[kind]
        assert result.judge.prompt_version.startswith("v1.")
        credit = np.asarray(result.credit)
        bad, fixed = phrase_span(trace, WRONG_STEP), phrase_span(trace, CORRECTION)
        assert (credit[bad[0] : bad[1]] < 0).all() and (credit[fixed[0] : fixed[1]] > 0).all()
        outside = np.ones(len(credit), bool)
        outside[bad[0] : bad[1]] = outside[fixed[0] : fixed[1]] = False
        assert (credit[outside] == 0).all()
        assert result.transcript is not None and result.transcript[-1]["reason"] == "submitted"
    inject = results["inject"]
    assert [s.label for s in inject.spans] == ["invalid"]  # the sound span of the submission
    assert [(r.code, r.round) for r in inject.rejected_spans] == [
        ("span_too_long", 1),  # the whole trace: more than half of it, over many lines
        ("span_too_long", 2),
    ]
    assert inject.judge is not None and inject.judge.rejected == {"span_too_long": 2}
    credit = np.asarray(inject.credit)
    bad = phrase_span(trace, WRONG_STEP)
    assert (credit[bad[0] : bad[1]] < 0).all() and credit.sum() < 0
    assert response.stats.counts == {"ok": 4, "fallback": 2, "failed": 0}
    assert response.stats.latency_ms < 3000  # the hang cost its own deadline, not the batch's
    assert response.stats.usage.output_tokens >= 4 * 20


async def test_unknown_model_spec_is_an_input_error() -> None:
    from judge_service.errors import InputError

    with pytest.raises(InputError, match="needs a model"):
        registry.build_judge("anthropic:", Settings())
    judge = registry.build_judge("openai:my-model", Settings(llm_openai_base_url="http://x/v1"))
    assert judge.name == "openai:my-model"
