"""``GET /v1/audit/drift``: the caller's judges, each scored now from the shared store."""

from __future__ import annotations

from typing import Any

from judge_service_client.audit import (
    CanaryRun,
    DriftJudge,
    DriftMeasure,
    DriftPin,
    DriftPoint,
    DriftReport,
    ShadowSummary,
)

from judge_service.drift.canary import canary_series
from judge_service.drift.monitor import DriftMonitor, split_series
from judge_service.drift.verdict import LEVELS
from judge_service.drift.window import Tally, newest
from judge_service.errors import InputError, NotFoundError


def shadow_summary(window: Tally) -> ShadowSummary:
    lines = window.counts.get("shadow_lines", {})
    agreement = window.counts.get("shadow_agreement", {})
    integrity = window.counts.get("shadow_integrity", {})
    false_n, true_n = int(lines.get("false", 0)), int(lines.get("true", 0))
    decided = sum(agreement.values())
    return ShadowSummary(
        false_lines=false_n,
        true_lines=true_n,
        agreement=agreement.get("agree", 0.0) / decided if decided else None,
        positive_on_false=integrity.get("positive_on_false", 0.0) / false_n if false_n else None,
        negative_on_true=integrity.get("negative_on_true", 0.0) / true_n if true_n else None,
    )


async def pin_baseline(monitor: DriftMonitor | None, tenant: str, pin: DriftPin) -> None:
    """Pin the current window of the caller's series `pin` names as its baseline; a 404
    naming the field when there is no such series, a 422 when the version is ambiguous."""
    if monitor is None:
        raise NotFoundError("the drift audit is off on this server", field="judge")
    found = []
    for series in await monitor.store.series():
        owner, judge, version = split_series(series)
        if owner == tenant and judge == pin.judge and pin.prompt_version in (None, version):
            found.append(series)
    if not found:
        field = "judge" if pin.prompt_version is None else "prompt_version"
        raise NotFoundError(f"no drift series of {pin.judge!r} for this API key", field=field)
    if len(found) > 1:
        versions = ", ".join(split_series(s)[2] for s in found)
        raise InputError(
            f"{pin.judge!r} has several prompt versions ({versions}): name one",
            field="prompt_version",
        )
    if not await monitor.pin(found[0]):
        raise NotFoundError(f"{pin.judge!r} has no judgments in its window yet", field="judge")
    await monitor.score(found[0])


async def drift_report(monitor: DriftMonitor | None, tenant: str, points: int) -> DriftReport:
    if monitor is None:
        return DriftReport(enabled=False, verdict="ok", judges=[])
    store = monitor.store
    judges: list[DriftJudge] = []
    for series in await store.series():
        owner, judge, version = split_series(series)
        if owner != tenant:
            continue
        verdict = await monitor.score(series)
        chunks = [Tally.from_json(c) for c in await store.read(series, "chunks")]
        window = newest(chunks, monitor.settings.drift_window)
        baseline = await store.baseline(series)
        runs: list[dict[str, Any]] = await store.read(canary_series(judge), "runs")
        judges.append(
            DriftJudge(
                judge=judge,
                prompt_version=version,
                verdict=verdict.verdict,
                reason=verdict.reason,
                score=verdict.score,
                window_judgments=window.n,
                baseline_judgments=None if baseline is None else int(baseline.get("n", 0)),
                baseline_pinned_at=None if baseline is None else baseline.get("pinned_at"),
                measures=[
                    DriftMeasure(
                        measure=m.measure,
                        score=m.score,
                        baseline=m.baseline,
                        window=m.window,
                        moved=m.moved,
                    )
                    for m in verdict.measures
                ],
                shadow=shadow_summary(window),
                points=[
                    DriftPoint.model_validate(p)
                    for p in (await store.read(series, "points"))[-points:]
                ],
                canaries=[
                    CanaryRun.model_validate(r) for r in runs if r.get("prompt_version") == version
                ][-points:],
            )
        )
    worst = max((LEVELS.index(j.verdict) for j in judges), default=0)
    return DriftReport(enabled=True, verdict=LEVELS[worst], judges=judges)
