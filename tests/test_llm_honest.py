"""Honest results: a failed LLM attempt is reported apart from the judge whose spans were used,
a submission rejected whole is no judgment, queueing is not judging, the endpoint is part of
the cache key, and /metrics counts by provider and model.

`Engine` with LLM judges built from settings, against the scripted servers over HTTP with the
real SDK clients; the CLI through `main`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from judge_service import metrics
from judge_service.cli.main import main
from judge_service.config import Settings
from judge_service.judges import registry
from judge_service.judges.llm.conversation import Completion, Prompt, Turn
from judge_service.judges.llm.llm_judge import LLMJudge, endpoint
from judge_service.judges.llm.provider import Provider
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.judgment import Judgment, to_result
from judge_service.pipeline import Engine
from judge_service.resolve import cache_key, resolve
from judge_service.schemas import JudgeAttempt, JudgeInfo, Options, Rollout
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Fault, Hang, View, call
from tests.harness.scripted.harness import (
    CORRECTION,
    PROVIDERS,
    WRONG_STEP,
    encode,
    llm_settings,
    phrase_span,
    span,
)

pytestmark = pytest.mark.usefixtures("provider_keys")
MODELS = {"anthropic": "anthropic:claude-test", "openai": "openai:gpt-test"}


def _urls(server: FakeProviderServer) -> dict[str, str]:
    return {"anthropic": server.url, "openai": server.url + "/v1"}


def _sample(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _rollout(bpe: LoadedTokenizer, bpe_dir: Path, script: str) -> Rollout:
    return Rollout(
        id=script,
        problem=f"Compute 17 × 24. SCRIPT:{script}",
        response_token_ids=encode(bpe),
        tokenizer=str(bpe_dir),
        reward=1.0,
        final_answer="408",
        reference_answer="408",
    )


def _misplaced(trace: Trace) -> dict[str, Any]:
    fixed = phrase_span(trace, CORRECTION)
    return {**span(trace, WRONG_STEP, "invalid"), "start": fixed[0], "end": fixed[1]}


def _good(trace: Trace) -> list[dict[str, Any]]:
    return [span(trace, WRONG_STEP, "invalid"), span(trace, CORRECTION, "verified_correction")]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_rejected_then_a_500_is_a_fallback_with_the_attempt_kept_apart(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server, spec = servers[kind], MODELS[kind]
    trace = bpe.decode(encode(bpe))
    script = f"honest-{kind}-rejected-500"
    server.book.add(script, call("submit_spans", spans=[_misplaced(trace)]), [Fault(500)])
    labels = {"provider": kind, "judge": spec}
    before = {
        "fallback": _sample("judge_results_total", {"judge": spec, "status": "fallback"}),
        "ok_rules": _sample("judge_results_total", {"judge": "rules", "status": "ok"}),
        "errors": _sample(
            "judge_session_errors_total", {**labels, "boundary": "provider", "outcome": "fallback"}
        ),
        "fallbacks": _sample("judge_fallbacks_total", {"judge": spec, "boundary": "provider"}),
        "output": _sample("judge_llm_tokens_total", {**labels, "kind": "output"}),
        "input": _sample("judge_llm_tokens_total", {**labels, "kind": "input"}),
    }
    engine = Engine(llm_settings(_urls(server), llm_max_retries=0))
    response = await engine.judge_batch(
        [_rollout(bpe, bpe_dir, script)], Options(judge=spec, deadline_s=10.0)
    )

    (result,) = response.results
    assert result.status == "fallback"
    assert result.error is not None and result.error.startswith("provider: ")
    assert (
        "500" in result.error and "every one of the 1 submitted spans was rejected" in result.error
    )
    info = result.judge
    assert info is not None and info.name == "rules"  # the judge whose spans were used
    assert info.output_tokens == info.input_tokens == info.cache_read_tokens == 0
    attempt = info.attempt
    assert attempt is not None and attempt.name == spec and attempt.error == result.error
    assert attempt.prompt_version is not None and attempt.prompt_version.startswith("v1.")
    assert attempt.turns == 1 and attempt.tool_calls == {"submit_spans": 1}
    assert attempt.output_tokens == 20
    assert attempt.input_tokens + attempt.cache_write_tokens + attempt.cache_read_tokens > 0
    # The batch's usage counts the money the attempt spent.
    assert response.stats.usage.output_tokens == 20
    assert response.stats.counts == {"ok": 0, "fallback": 1, "failed": 0}
    # /metrics: the fallback under the judge asked for; the tokens under the one that spent them.
    assert _sample("judge_results_total", {"judge": spec, "status": "fallback"}) == (
        before["fallback"] + 1
    )
    assert _sample("judge_results_total", {"judge": "rules", "status": "ok"}) == before["ok_rules"]
    errors = {**labels, "boundary": "provider", "outcome": "fallback"}
    assert _sample("judge_session_errors_total", errors) == before["errors"] + 1
    assert _sample("judge_fallbacks_total", {"judge": spec, "boundary": "provider"}) == (
        before["fallbacks"] + 1
    )
    assert _sample("judge_llm_tokens_total", {**labels, "kind": "output"}) == before["output"] + 20
    assert _sample("judge_llm_tokens_total", {**labels, "kind": "input"}) == (
        before["input"] + attempt.input_tokens
    )
    rules = {"provider": "rules", "judge": "rules", "kind": "output"}
    assert metrics.REGISTRY.get_sample_value("judge_llm_tokens_total", rules) is None
    alone = await engine.judge_one(_rollout(bpe, bpe_dir, script), Options(judge="rules"))
    assert alone.judge is not None and info.turns == alone.judge.turns  # not the sum
    await engine.aclose()


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_fallback_none_is_a_failed_result_without_credit(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server, spec = servers[kind], MODELS[kind]
    script = f"honest-{kind}-none"
    server.book.add(script, call("view_tokens", start=0, end=4), [Fault(503)])
    failed_before = _sample(
        "judge_session_errors_total",
        {"provider": kind, "judge": spec, "boundary": "provider", "outcome": "failed"},
    )
    engine = Engine(llm_settings(_urls(server), llm_max_retries=0))
    response = await engine.judge_batch(
        [_rollout(bpe, bpe_dir, script)], Options(judge=spec, fallback="none")
    )
    await engine.aclose()

    (result,) = response.results
    assert result.status == "failed" and result.credit is None and result.spans == []
    assert result.error is not None and result.error.startswith("provider: ")
    assert result.judge is not None and result.judge.name == "none"
    attempt = result.judge.attempt
    assert attempt is not None and attempt.name == spec and attempt.turns == 1
    assert attempt.tool_calls == {"view_tokens": 1} and attempt.output_tokens == 20
    assert response.stats.counts == {"ok": 0, "fallback": 0, "failed": 1}
    assert response.stats.usage.output_tokens == 20 and response.stats.judge_share is None
    assert (
        _sample(
            "judge_session_errors_total",
            {"provider": kind, "judge": spec, "boundary": "provider", "outcome": "failed"},
        )
        == failed_before + 1
    )


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_queue_time_is_reported_apart_from_judging_time(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server, spec = servers[kind], MODELS[kind]
    trace = bpe.decode(encode(bpe))
    first, second = f"honest-{kind}-slot-first", f"honest-{kind}-slot-second"
    arrived = threading.Event()

    def hang(view: View) -> Hang:
        arrived.set()  # called as the request arrives, before the hang
        return Hang(1.0)

    server.book.add(first, hang, call("submit_spans", spans=_good(trace)))
    server.book.add(second, call("submit_spans", spans=_good(trace)))
    engine = Engine(llm_settings(_urls(server), max_concurrency=1))
    options = Options(judge=spec, deadline_s=20.0)
    holding = asyncio.create_task(engine.judge_one(_rollout(bpe, bpe_dir, first), options))
    while not arrived.is_set() and not holding.done():
        await asyncio.sleep(0.01)  # the first rollout holds the only slot
    waiting = await engine.judge_one(_rollout(bpe, bpe_dir, second), options)
    held = await holding
    await engine.aclose()

    assert held.status == waiting.status == "ok"
    assert held.judge is not None and waiting.judge is not None
    assert waiting.judge.queue_ms > 0 and waiting.judge.queue_ms > held.judge.queue_ms
    # It waited for the other's whole (hanging) session, then judged in one quick turn.
    assert waiting.judge.queue_ms > waiting.judge.latency_ms
    assert held.judge.latency_ms > waiting.judge.latency_ms


def test_an_llm_judges_cache_key_names_its_endpoint(bpe: LoadedTokenizer, bpe_dir: Path) -> None:
    rollout = _rollout(bpe, bpe_dir, "key")

    def key(spec: str, wire: dict[str, Any] | None = None, **urls: str) -> str:
        values: dict[str, Any] = {f"llm_{k}_base_url": v for k, v in urls.items()}
        settings = Settings(**values, **(wire or {}))
        judge = registry.build_judge(spec, settings)
        return cache_key(rollout, str(bpe_dir), judge, resolve(Options(judge=spec), settings))

    for kind in PROVIDERS:
        spec = MODELS[kind]
        one = key(spec, **{kind: "http://10.0.0.1:8000/v1"})
        assert one == key(spec, **{kind: "http://10.0.0.1:8000/v1/"})  # the same endpoint
        assert one != key(spec, **{kind: "http://10.0.0.2:8000/v1"})
        # What the model is asked to do differs with the tool mode and choice: not one key.
        for wire in ({"llm_tool_mode": "json"}, {"llm_tool_choice": "submit_spans"}):
            assert one != key(spec, wire, **{kind: "http://10.0.0.1:8000/v1"})


class _Wrapper(Provider):
    """A provider wrapping another (as the JSON tool mode does): no base_url of its own."""

    kind = "openai"

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner.model, RateLimiter(), 1.0)
        self.inner = inner

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def test_the_endpoint_is_read_through_a_wrapping_provider() -> None:
    settings = Settings(llm_openai_base_url="http://gpu-box:8000/v1")
    judge = registry.build_judge("openai:m", settings)
    assert isinstance(judge, LLMJudge)
    assert endpoint(judge.provider) == "http://gpu-box:8000/v1"
    assert endpoint(_Wrapper(judge.provider)) == "http://gpu-box:8000/v1"


def test_a_judgment_keeps_its_attempt_through_the_cache() -> None:
    attempt = JudgeAttempt(
        name="openai:gpt-test",
        prompt_version="v1.abc",
        turns=2,
        tool_calls={"view_tokens": 1},
        input_tokens=100,
        cache_write_tokens=5,
        cache_read_tokens=7,
        output_tokens=40,
        cost_usd=0.25,
        error="provider: HTTP 500",
    )
    info = JudgeInfo(name="rules", prompt_version="r1", queue_ms=12, latency_ms=34, attempt=attempt)
    judgment = Judgment(status="fallback", num_tokens=3, info=info, error="provider: HTTP 500")
    loaded = Judgment.loads(judgment.dumps())
    assert loaded.info == info and loaded.info.attempt == attempt
    resolved = resolve(Options(), Settings())
    hit, _ = to_result(
        loaded, rollout_id="r", resolved=resolved, advantage=None, key=None, began=0.0, hit=True
    )
    assert hit.judge is not None and hit.judge.attempt is not None
    assert hit.judge.attempt.output_tokens == 0 and hit.judge.attempt.cost_usd == 0.0
    assert hit.judge.attempt.name == "openai:gpt-test" and hit.judge.queue_ms == 0


@pytest.mark.parametrize("kind", PROVIDERS)
def test_cli_no_fallback_writes_a_failed_line(
    kind: str,
    servers: dict[str, FakeProviderServer],
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = servers[kind], MODELS[kind]
    script = f"honest-{kind}-cli"
    server.book.add(script, [Fault(500)])
    monkeypatch.setenv(f"JUDGE_LLM_{kind.upper()}_BASE_URL", _urls(server)[kind])
    monkeypatch.setenv("JUDGE_ALLOWED_JUDGES", f"{spec},rules")
    monkeypatch.setenv("JUDGE_LLM_MAX_RETRIES", "0")
    src = tmp_path / "in.jsonl"
    src.write_text(_rollout(bpe, bpe_dir, script).model_dump_json() + "\n", encoding="utf-8")
    lines: dict[str, dict[str, Any]] = {}
    for flag in ("--no-fallback", None):
        out = tmp_path / f"{flag or 'default'}.jsonl"
        args = ["judge", str(src), "-o", str(out), "--judge", spec, "--no-progress"]
        args += ["--skip-preflight", *([flag] if flag else [])]
        assert main(args) == 0
        (lines[flag or "default"],) = [json.loads(x) for x in out.read_text().splitlines()]
    failed, fallback = lines["--no-fallback"], lines["default"]
    assert failed["status"] == "failed" and "credit" not in failed
    assert failed["error"].startswith("provider: ") and "500" in failed["error"]
    assert failed["judge"]["name"] == "none" and failed["judge"]["attempt"]["name"] == spec
    assert fallback["status"] == "fallback" and fallback["judge"]["name"] == "rules"
    assert fallback["error"] == failed["error"] and "credit" in fallback
