"""``audit --compare`` as one HTML page: a table per credit source and the slopes plotted."""

from __future__ import annotations

from html import escape
from typing import Any

from judge_service.probe.report import _STYLE, _ci, _effect_ci, _figure, _num, _table
from judge_service.probe.svg import interval_plot


def _equal_reward_cells(found: dict[str, Any] | None) -> list[str]:
    # Summaries written before the statistic existed have no such key.
    if not found:
        return ["–", "–"]
    count = f"{found['n_credited']} of {found['n_groups']}"
    if found["share"] is None:
        return [count, "–"]
    return [f"{count} ({_num(found['share'])})", _ci(found["ci"])]


def render_compare(summary: dict[str, Any]) -> str:
    runs: dict[str, dict[str, Any]] = summary["runs"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Credit sources compared</title>"
        f"<style>{_STYLE}</style></head><body><h1>Credit sources compared with the probe</h1>",
        "<p>Each run is the probe of one credit source's spans over the same rollouts. Slope: "
        "probe progress toward the reference per unit of credit, within traces, position and "
        "length held fixed (95% wild cluster bootstrap CI over problems, none with fewer than 20 "
        "traces of two or more spans; permutation p, and Holm-adjusted over every slope "
        "here). <i>Clean</i>: without "
        "spans that overlap the final answer or mention the reference or wrong answer. Credit "
        "units differ between sources; <i>per SD</i> multiplies the slope by the SD of the "
        "source's credit. <i>Equal-reward groups credited</i>: of the groups whose rollouts "
        "all have one reward (advantage 0 on every token), those in which some span gets "
        "non-zero credit, with a 95% Wilson interval (one yes or no per group).</p>",
    ]
    rows = []
    for name, run in runs.items():
        rows.append(
            [
                escape(name),
                str(run["n_spans"]),
                _num(run["slope"]["slope"]),
                _effect_ci(run["slope"]),
                _num(run["slope"]["p_value"], 4),
                _num(run["slope"].get("p_holm"), 4),
                _num(run["slope_clean"]["slope"]),
                _effect_ci(run["slope_clean"]),
                _num(run["slope_clean"]["p_value"], 4),
                _num(run["slope_clean"].get("p_holm"), 4),
                _num(run.get("slope_per_sd")),
                _num(run["share_after_lockin"]),
                _num(run["share_on_final_answer"]),
                _num(run["credit_per_token_final"]),
                _num(run["credit_per_token_rest"]),
                *_equal_reward_cells(run.get("equal_reward_credited")),
            ]
        )
    parts.append(
        _table(
            [
                "source",
                "spans",
                "slope",
                "95% CI",
                "p",
                "p (Holm)",
                "slope, clean",
                "95% CI",
                "p",
                "p (Holm)",
                "slope per SD",
                "credit after lock-in",
                "credit on final answer",
                "credit/token, final",
                "credit/token, rest",
                "equal-reward groups credited",
                "95% CI (Wilson)",
            ],
            rows,
        )
    )
    for key, title in (("slope", "all spans"), ("slope_clean", "clean spans")):
        points = [
            (name, run[key]["slope"], run[key]["ci"][0], run[key]["ci"][1])
            for name, run in runs.items()
            if run[key]["slope"] is not None
        ]
        parts.append(
            _figure(
                interval_plot(points, f"Probe progress per unit of credit, {title}", "slope"),
                "Dots: within-trace slope; bars: 95% wild cluster bootstrap CI over problems.",
            )
        )
    shares = [
        (f"{name}: {label}", run[key], None, None)
        for name, run in runs.items()
        for key, label in (
            ("share_after_lockin", "after lock-in"),
            ("share_on_final_answer", "final answer"),
        )
        if run[key] is not None
    ]
    if shares:
        parts.append(
            _figure(
                interval_plot(shares, "Share of credit mass", "share of |credit| × tokens"),
                f"Lock-in at probe probability {summary['lockin_threshold']}.",
            )
        )
    parts.append(f"<h2>Settings</h2><p>{escape(str(summary['settings']))}</p></body></html>")
    return "\n".join(parts)
