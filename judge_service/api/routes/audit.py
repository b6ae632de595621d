"""The live drift audit of the caller's judges: JSON and a page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse
from judge_service_client.audit import DriftPin, DriftReport

from judge_service.api.deps import EngineDep
from judge_service.api.responses import html_page
from judge_service.drift.report import drift_report, pin_baseline
from judge_service.schemas import ERROR_RESPONSES, ErrorBody

router = APIRouter(prefix="/v1/audit", tags=["audit"])

Points = Annotated[
    int, Query(ge=1, le=500, description="the newest this many points and canary runs per judge")
]


@router.get("/drift", operation_id="get_drift", responses=ERROR_RESPONSES)
async def get_drift(engine: EngineDep, points: Points = 100) -> DriftReport:
    """Each judge (and prompt version) this API key's rollouts were judged by: its verdict
    (`ok`, `drifting`, `bad`) and why, every measure of its window against its baseline
    (Jensen–Shannon divergence), the shadow checks' agreement with the rules judge's
    checker, the verdict after each chunk and its canary runs. Scored now from the store
    every worker writes to; `enabled` false when the server runs without the audit."""
    return await drift_report(engine.audit, engine.tenant, points)


@router.post(
    "/drift/baseline",
    operation_id="pin_drift_baseline",
    responses={
        **ERROR_RESPONSES,
        404: {"model": ErrorBody, "description": "No such judge (or prompt version) judged."},
    },
)
async def pin_drift_baseline(
    body: DriftPin, engine: EngineDep, points: Points = 100
) -> DriftReport:
    """Make a judge's current window its baseline: a stretch known to be good, or the new
    normal after a deliberate change (a new policy phase, a prompt you accept). Every
    process reads the pinned baseline at its next scoring. Answers the report after."""
    await pin_baseline(engine.audit, engine.tenant, body)
    return await drift_report(engine.audit, engine.tenant, points)


@router.get(
    "/drift/view",
    operation_id="view_drift",
    response_class=HTMLResponse,
    responses=ERROR_RESPONSES,
)
async def view_drift(engine: EngineDep, points: Points = 100) -> HTMLResponse:
    """The same as a page: a time series per measure with the thresholds drawn, the window
    against its baseline and the canary runs. No script, and a Content-Security-Policy that
    allows no request."""
    from judge_service.view.drift import drift_html  # on first use (api/responses.py: why)

    report = await drift_report(engine.audit, engine.tenant, points)
    settings = engine.settings
    page = drift_html(report, drifting=settings.drift_drifting_score, bad=settings.drift_bad_score)
    return html_page(page)
