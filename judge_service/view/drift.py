"""The drift audit as a page in the viewer's style: per judge its verdict, a time series per
measure (the divergence after each chunk, the two thresholds drawn) and the canary runs'
F1, the window's measures against their baseline, and the canary table.

The series are drawn as inline SVG polylines computed here; like every page of the
viewer it carries no script and no style attribute, under the same locked
Content-Security-Policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from judge_service_client.audit import DriftJudge, DriftReport

from judge_service.drift.verdict import MEASURES
from judge_service.view.html import render_page

WIDTH, HEIGHT = 600.0, 60.0


@dataclass(frozen=True)
class Series:
    name: str
    last: float | None
    points: str  # the polyline's "x,y x,y ..."
    drifting_y: float
    bad_y: float


def _polyline(values: list[float | None], top: float) -> str:
    shown = [(i, v) for i, v in enumerate(values) if v is not None]
    if not shown:
        return ""
    step = WIDTH / max(1, len(values) - 1)
    return " ".join(f"{i * step:.1f},{HEIGHT - min(v, top) / top * HEIGHT:.1f}" for i, v in shown)


def series_of(judge: DriftJudge, drifting: float, bad: float) -> list[Series]:
    top = max(bad * 1.5, 0.05)
    out = []
    for name in MEASURES:
        values = [p.scores.get(name) for p in judge.points]
        last = next((v for v in reversed(values) if v is not None), None)
        out.append(
            Series(
                name,
                last,
                _polyline(values, top),
                HEIGHT - drifting / top * HEIGHT,
                HEIGHT - bad / top * HEIGHT,
            )
        )
    f1 = [run.f1 for run in judge.canaries]
    last_f1 = next((v for v in reversed(f1) if v is not None), None)
    out.append(Series("canary F1", last_f1, _polyline(f1, 1.0), -1.0, -1.0))
    return out


def drift_html(report: DriftReport, *, drifting: float, bad: float) -> str:
    """The whole document; serve it with `view.html.PAGE_CSP`."""
    charts = {j.judge + "|" + j.prompt_version: series_of(j, drifting, bad) for j in report.judges}
    return render_page("drift.html.j2", report=report, charts=charts, width=WIDTH, height=HEIGHT)
