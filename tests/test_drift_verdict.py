"""The drift audit's verdict on live judgments (issue 40): a scripted judge that degrades
mid-run, through the real Anthropic SDK and the Engine, flips its judge's verdict to
``bad`` (errors labelled valid_progress, no spans, half the sessions failing into the
fallback); the same judge left alone stays ``ok`` over a long noisy run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_service.config import Settings
from judge_service.drift.monitor import series_of
from judge_service.drift.verdict import Thresholds, decide
from judge_service.drift.window import Tally, js_divergence, newest, oldest
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.degrade import Degrader, engine_settings

JUDGE = "anthropic:claude-test"
WINDOW = 100


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


def test_divergence_is_bounded_symmetric_and_zero_for_equal_mixes() -> None:
    a, b = {"x": 90.0, "y": 10.0}, {"y": 100.0, "z": 40.0}
    assert js_divergence(a, a) == 0.0
    assert js_divergence(a, b) == pytest.approx(js_divergence(b, a))
    assert 0.5 < js_divergence(a, b) <= 1.0
    assert js_divergence({"x": 1e9}, {"z": 1e9}) == pytest.approx(1.0, abs=1e-6)


def test_window_is_the_newest_chunks_and_baseline_the_first() -> None:
    chunks = []
    for i in range(6):
        chunk = Tally(n=10)
        chunk.add("status", "ok" if i < 3 else "fallback", 10)
        chunks.append(chunk)
    assert newest(chunks, 25).counts["status"] == {"fallback": 30.0}
    first = oldest(chunks, 25)
    assert first is not None and first.counts["status"] == {"ok": 30.0}
    assert oldest(chunks[:2], 25) is None


def test_a_rise_in_failed_sessions_is_bad_from_a_noisy_baseline() -> None:
    # 14% -> 52% of sessions falling back is only ~0.12 bits apart: the rate rule decides.
    baseline, window = Tally(n=200), Tally(n=200)
    baseline.add("status", "ok", 172)
    baseline.add("status", "fallback", 28)
    window.add("status", "ok", 96)
    window.add("status", "fallback", 104)
    limits = Thresholds(0.08, 0.2, 0.2, rate_rise=0.2)
    verdict = decide(baseline, window, limits, baseline_size=200)
    assert verdict.score < 0.2 and verdict.verdict == "bad"
    assert verdict.reason == "status: sessions failed 14% -> 52% (+0.38)"
    window.counts["status"] = {"ok": 150.0, "fallback": 50.0}  # +0.11: drifting
    assert decide(baseline, window, limits, baseline_size=200).verdict == "drifting"


def _engine(server: FakeProviderServer, **extra: Any) -> Engine:
    settings = engine_settings(
        server,
        max_concurrency=8,
        drift_window=WINDOW,
        drift_chunk=10,
        drift_shadow_rate=0.2,
        **extra,
    )
    return Engine(Settings(**settings), store=MemoryStore())


async def _judge(
    engine: Engine, degrader: Degrader, first: int, count: int, tokenizer: str
) -> list[str]:
    """Judge `count` rollouts ten at a time; the verdict after each ten."""
    options = Options(judge=JUDGE, use_cache=False)
    assert engine.audit is not None
    series = series_of("open", JUDGE, engine.judge_for(JUDGE).prompt_version)
    verdicts: list[str] = []
    for at in range(first, first + count, 10):
        rollouts = [
            Rollout.model_validate(degrader.rollout(i, tokenizer)) for i in range(at, at + 10)
        ]
        await engine.judge_batch(rollouts, options)
        await engine.audit.drain()
        verdicts.append(engine.audit.verdicts[series].verdict)
    return verdicts


@pytest.mark.parametrize("mode", ["mislabel", "lazy", "half_fail"])
async def test_a_degrading_judge_turns_bad(
    mode: str,
    server: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    provider_keys: None,
) -> None:
    engine = _engine(server)
    degrader = Degrader(bpe, seed=1)
    degrader.install(server)
    try:
        clean = await _judge(engine, degrader, 0, 2 * WINDOW, str(bpe_dir))
        assert set(clean) == {"ok"}, clean
        degrader.mode = mode
        after = await _judge(engine, degrader, 2 * WINDOW, 2 * WINDOW, str(bpe_dir))
    finally:
        await engine.aclose()
    assert "bad" in after, after
    assert after[-1] == "bad"
    series = series_of("open", JUDGE, engine.judge_for(JUDGE).prompt_version)
    assert engine.audit is not None
    measures = {m.measure: m for m in engine.audit.verdicts[series].measures}
    # what the degradation moved, as the window counted it
    moved = {
        "mislabel": ("rejections", "contradicts_arithmetic", 0.2),
        "lazy": ("spans", "0", 0.99),
        "half_fail": ("status", "fallback", 0.3),
    }
    measure, category, share = moved[mode]
    assert measures[measure].window[category] >= share
    assert (measures[measure].score or 0.0) >= engine.settings.drift_drifting_score


async def test_a_steady_judge_stays_ok_over_a_long_noisy_run(
    server: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, provider_keys: None
) -> None:
    engine = _engine(server)
    degrader = Degrader(bpe, seed=2)
    degrader.install(server)
    try:
        verdicts = await _judge(engine, degrader, 0, 10 * WINDOW, str(bpe_dir))
    finally:
        await engine.aclose()
    assert set(verdicts) == {"ok"}, verdicts
    assert engine.audit is not None
    series = series_of("open", JUDGE, engine.judge_for(JUDGE).prompt_version)
    window = engine.audit.verdicts[series]
    scored = {m.measure for m in window.measures if m.score is not None}
    assert {"status", "labels", "spans", "rejections", "credit"} <= scored
    # the shadow's checker read the wrong step false and the judge's invalid agreed
    agreement = next(m for m in window.measures if m.measure == "shadow_agreement")
    assert agreement.window.get("agree", 0.0) > 0.8
