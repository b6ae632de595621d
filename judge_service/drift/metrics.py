"""The drift audit's Prometheus metrics, in the process registry (``GET /metrics``).

Set where each is known: the verdict and scores after a chunk is scored (every process
that scores a series reports the same values: aggregate with max), the canary figures
after a run, the shadow's rates with the window. Labels are bounded: judge specs by
the allow-list, prompt versions by the prompt directories, tenants by the API keys.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge

from judge_service.drift.verdict import LEVELS, Verdict
from judge_service.drift.window import Tally, shares
from judge_service.metrics import REGISTRY

_SERIES = ["judge", "prompt_version", "tenant"]

VERDICT = Gauge(
    "judge_drift_verdict",
    "The judge's drift verdict: 0 ok, 1 drifting, 2 bad (JUDGE_DRIFT_* thresholds).",
    _SERIES,
    registry=REGISTRY,
)
SCORE = Gauge(
    "judge_drift_score",
    "Jensen–Shannon divergence (bits, 0-1) of a measure's window from its baseline (absent "
    "until both hold enough counts).",
    [*_SERIES, "measure"],
    registry=REGISTRY,
)
WINDOW = Gauge(
    "judge_drift_window_judgments",
    "Judgments in the window last scored.",
    _SERIES,
    registry=REGISTRY,
)
SHADOW_AGREEMENT = Gauge(
    "judge_shadow_agreement",
    "Share of the checker-decided lines (proven false or true) where the judge's spans "
    "agree with the rules judge's checker, over the window's shadow checks.",
    _SERIES,
    registry=REGISTRY,
)
SHADOW_POSITIVE_ON_FALSE = Gauge(
    "judge_shadow_positive_on_false",
    "Share of checker-false lines the judge gave positive credit (accepted or rejected "
    "spans), over the window's shadow checks.",
    _SERIES,
    registry=REGISTRY,
)
CANARY_F1 = Gauge(
    "judge_canary_f1",
    "The last canary run's F1 (ProcessBench, else span micro F1).",
    ["judge", "prompt_version"],
    registry=REGISTRY,
)
CANARY_SPAN_F1 = Gauge(
    "judge_canary_span_f1",
    "The last canary run's token-level span micro F1 on the gold-span records.",
    ["judge", "prompt_version"],
    registry=REGISTRY,
)
CANARY_RUNS = Counter(
    "judge_canary_runs_total",
    "Canary runs this process made.",
    ["judge"],
    registry=REGISTRY,
)
CANARY_COST = Counter(
    "judge_canary_cost_usd_total",
    "Estimated cost of the canary runs (kept out of judge_llm_cost_usd_total).",
    ["judge"],
    registry=REGISTRY,
)


def set_verdict(judge: str, version: str, tenant: str, verdict: Verdict, window: Tally) -> None:
    labels = (judge, version, tenant)
    VERDICT.labels(*labels).set(LEVELS.index(verdict.verdict))
    WINDOW.labels(*labels).set(window.n)
    for measure in verdict.measures:
        if measure.score is not None:
            SCORE.labels(*labels, measure.measure).set(measure.score)
    agreement = shares(window.counts.get("shadow_agreement", {}))
    if agreement:
        SHADOW_AGREEMENT.labels(*labels).set(agreement.get("agree", 0.0))
    false_lines = window.counts.get("shadow_lines", {}).get("false", 0.0)
    if false_lines:
        positive = window.counts.get("shadow_integrity", {}).get("positive_on_false", 0.0)
        SHADOW_POSITIVE_ON_FALSE.labels(*labels).set(positive / false_lines)


def set_canary(judge: str, run: dict[str, Any]) -> None:
    version = str(run.get("prompt_version", ""))
    CANARY_RUNS.labels(judge).inc()
    if run.get("cost_usd"):
        CANARY_COST.labels(judge).inc(float(run["cost_usd"]))
    if run.get("f1") is not None:
        CANARY_F1.labels(judge, version).set(float(run["f1"]))
    if run.get("span_f1") is not None:
        CANARY_SPAN_F1.labels(judge, version).set(float(run["span_f1"]))
