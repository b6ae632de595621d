"""The drift audit's wire format: ``GET /v1/audit/drift`` (docs/serving.md "Drift audit")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DriftLevel = Literal["ok", "drifting", "bad"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DriftMeasure(_Closed):
    measure: str = Field(
        description="status, labels, spans, rejections, credit, shadow_agreement, shadow_integrity"
    )
    score: float | None = Field(
        description="Jensen–Shannon divergence (bits, 0-1) of the window from the baseline; "
        "null until both hold 20 counts of it"
    )
    baseline: dict[str, float] = Field(description="category -> share in the baseline")
    window: dict[str, float] = Field(description="category -> share in the window")
    moved: str | None = Field(description="the category whose share moved most")


class DriftPoint(_Closed):
    t: float = Field(description="unix time of the window's last judgment")
    judgments: int = Field(description="judgments in the window then")
    verdict: DriftLevel
    score: float
    scores: dict[str, float | None] = Field(description="measure -> its divergence then")


class CanaryRun(_Closed):
    t: float
    period: str = Field(description="t<n>: the n-th interval; k<n>: the n-th count mark")
    judge: str
    prompt_version: str
    records: int
    failed: int
    skipped_for_cost: int
    fallback_rate: float | None
    f1: float | None = Field(description="ProcessBench F1, else span micro F1")
    processbench_f1: float | None
    span_f1: float | None
    span_precision: float | None
    span_recall: float | None
    label_mix: dict[str, int]
    rejection_rate: float | None
    tool_calls: int
    turns: int
    latency_ms_p50: float | None
    cost_usd: float


class ShadowSummary(_Closed):
    false_lines: int = Field(description="checker-false lines in the window's shadow checks")
    true_lines: int = Field(description="checker-true lines")
    agreement: float | None = Field(description="share of decided lines the judge agrees on")
    positive_on_false: float | None = Field(description="share of false lines given credit")
    negative_on_true: float | None = Field(description="share of true lines marked negative")


class DriftJudge(_Closed):
    judge: str
    prompt_version: str
    verdict: DriftLevel
    reason: str
    score: float = Field(description="the worst measure's divergence")
    window_judgments: int
    baseline_judgments: int | None = Field(description="null while it is being collected")
    baseline_pinned_at: float | None = Field(
        description="unix time the baseline was pinned (POST /v1/audit/drift/baseline); "
        "null: the series' first window"
    )
    measures: list[DriftMeasure]
    shadow: ShadowSummary
    points: list[DriftPoint] = Field(description="the verdict after each chunk, oldest first")
    canaries: list[CanaryRun] = Field(description="the judge's canary runs, oldest first")


class DriftReport(_Closed):
    enabled: bool = Field(description="JUDGE_DRIFT_ENABLED (and a store) on this server")
    verdict: DriftLevel = Field(description="the worst verdict of the caller's judges")
    judges: list[DriftJudge]


class DriftPin(_Closed):
    """``POST /v1/audit/drift/baseline``: make a judge's current window its baseline."""

    judge: str = Field(min_length=1, max_length=512, description="the judge spec, as reported")
    prompt_version: str | None = Field(
        default=None,
        max_length=256,
        description="which of the judge's prompt versions; needed when it has several",
    )
