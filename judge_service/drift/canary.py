"""Canary runs: the canary records judged by one judge, scored as ``judge-service eval`` scores.

A run judges the first ``JUDGE_DRIFT_CANARY_MAX_RECORDS`` records with the cache bypassed
(``use_cache: false``) and ``fallback: none`` (a judge that fails scores its failures, not
the rules judge's spans), through a quiet view of the engine: its results feed neither
the drift window nor ``judge_results_total`` / ``judge_llm_cost_usd_total``; the cost is
counted apart (``judge_canary_cost_usd_total``). It never passes the API, so no tenant's
rate limit or quota sees it. It stops starting records once its priced cost reaches
``JUDGE_DRIFT_CANARY_MAX_COST_USD``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from judge_service.drift import metrics as drift_metrics
from judge_service.drift.store import DriftStore
from judge_service.evaluation.records import Case, read_cases
from judge_service.evaluation.report import build_report
from judge_service.schemas import Options, Result

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.pipeline import Engine
    from judge_service.trace.tokenizer import TokenizerCache

RUNS_KEPT = 500
CONCURRENCY = 4


def canary_series(judge: str) -> str:
    return f"canary|{judge}"


class Canaries:
    def __init__(self, settings: Settings, store: DriftStore) -> None:
        self.settings = settings
        self.store = store
        self._cases: list[Case] | None = None
        self._tokenizers: TokenizerCache | None = None

    def _load(self) -> tuple[list[Case], TokenizerCache]:
        if self._cases is None or self._tokenizers is None:
            from judge_service.config.drift import BUNDLED_TOKENIZER
            from judge_service.trace.tokenizer import TokenizerCache

            # The operator's own files: any tokenizer they name loads, as for `eval`.
            tokenizers = TokenizerCache.from_settings(self.settings, trusted=True)
            name = self.settings.drift_canary_tokenizer or (
                str(BUNDLED_TOKENIZER)
                if BUNDLED_TOKENIZER.exists()
                else self.settings.default_tokenizer
            )
            cases: list[Case] = []
            for path in self.settings.canary_files:
                cases.extend(read_cases(path, tokenizers.get, tokenizer=name))
            self._cases = cases[: self.settings.drift_canary_max_records]
            self._tokenizers = tokenizers
        return self._cases, self._tokenizers

    async def run(self, engine: Engine, judge: str, period: str = "") -> dict[str, Any]:
        """Judge the canaries with `judge`; the run's record, stored and in the metrics.
        `period`: the schedule's claim it runs under (``t<n>`` by time, ``k<n>`` by count)."""
        cases, tokenizers = await asyncio.to_thread(self._load)
        quiet = engine.quiet(tokenizers)
        options = Options.model_validate({"judge": judge, "use_cache": False, "fallback": "none"})
        cap = self.settings.drift_canary_max_cost_usd
        spent = 0.0
        slots = asyncio.Semaphore(CONCURRENCY)
        began = time.perf_counter()

        async def one(case: Case) -> Result | None:
            nonlocal spent
            async with slots:
                if spent >= cap > 0:
                    return None
                result, _ = await quiet.judge_or_fail(
                    case.rollout, options, None, field=f"canary line {case.line}"
                )
            spent += _cost(result)
            return result

        results = await asyncio.gather(*(one(case) for case in cases))
        judged = [(c, r) for c, r in zip(cases, results, strict=True) if r is not None]
        report = build_report(
            [c for c, _ in judged],
            [r for _, r in judged],
            judge=judge,
            source="canary",
            wall_s=time.perf_counter() - began,
        )
        version = quiet.judge_for(judge).prompt_version
        run = summary(report, [r for _, r in judged], judge, version)
        run["skipped_for_cost"] = len(cases) - len(judged)
        run["period"] = period
        await self.store.push(canary_series(judge), "runs", run, RUNS_KEPT)
        drift_metrics.set_canary(judge, run)
        return run


def _cost(result: Result) -> float:
    info = result.judge
    if info is None:
        return 0.0
    return (info.cost_usd or 0.0) + ((info.attempt.cost_usd or 0.0) if info.attempt else 0.0)


def summary(
    report: dict[str, Any], results: list[Result], judge: str, version: str
) -> dict[str, Any]:
    """What a run keeps of its eval report: the figures the page and the verdict read."""
    pb = report["processbench"]
    spans = report["spans"]
    span_f1 = spans["micro"]["f1"] if spans else None
    labels: Counter[str] = Counter(s.label for r in results for s in r.spans)
    tools: Counter[str] = Counter()
    for result in results:
        if result.judge is not None:
            tools.update(result.judge.tool_calls)
    return {
        "t": time.time(),
        "judge": judge,
        "prompt_version": version,
        "records": len(results),
        "failed": report["statuses"]["failed"],
        "fallback_rate": report["fallback_rate"],
        "f1": pb["f1"] if pb else span_f1,
        "processbench_f1": pb["f1"] if pb else None,
        "span_f1": span_f1,
        "span_precision": spans["micro"]["precision"] if spans else None,
        "span_recall": spans["micro"]["recall"] if spans else None,
        "label_mix": dict(sorted(labels.items())),
        "rejection_rate": report["rejections"]["rate"],
        "tool_calls": sum(tools.values()),
        "turns": report["usage"]["turns"],
        "latency_ms_p50": report["latency_ms"]["p50"],
        "cost_usd": report["cost_usd"] or 0.0,
    }
