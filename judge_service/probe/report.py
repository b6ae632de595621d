"""The audit as one self-contained HTML page: verdict first, then plots, then the tables."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from judge_service.probe.svg import histogram, interval_plot, scatter_plot, strip_plot

_STYLE = """
body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:0.6em 0 1.4em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.bad{background:#fde2e1;border:1px solid #d62728;padding:0.8em}
.good{background:#e3f4e1;border:1px solid #2ca02c;padding:0.8em}
figure{margin:1em 0} figcaption{font-size:0.9em;color:#555}
"""

_OUTCOME_NAMES = {
    "reference": "toward the reference answer",
    "relative": "relative to a wrong answer",
    "reference_alt": "toward the reference, second wording",
    "relative_alt": "relative to a wrong answer, second wording",
}


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return escape(str(value))


def _ci(pair: Sequence[Any]) -> str:
    return f"[{_num(pair[0])}, {_num(pair[1])}]"


def _effect_ci(effect: dict[str, Any]) -> str:
    """The effect's CI, or why it has none (too few traces with within-trace contrast)."""
    if effect.get("ci_note") and effect.get("slope") is not None:
        note = escape(str(effect["ci_note"]))
        few = effect.get("n_contrast_traces")
        return f"<span title='{note}'>no CI ({few} traces with 2+ spans)</span>"
    return _ci(effect.get("ci", [None, None]))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _effects_table(effects: dict[str, dict[str, Any]], names: dict[str, str]) -> str:
    rows = [
        [
            escape(names.get(key, key)),
            _num(e.get("slope")),
            _effect_ci(e),
            _num(e.get("p_value"), 4),
            _num(e.get("p_holm"), 4),
            str(e.get("n_spans")),
            str(e.get("n_traces")),
        ]
        for key, e in effects.items()
    ]
    return _table(
        [
            "outcome",
            "slope per score point",
            "95% CI",
            "p (permutation)",
            "p (Holm)",
            "spans",
            "traces",
        ],
        rows,
    )


def _labels_table(labels: dict[str, dict[str, Any]]) -> str:
    rows = [
        [escape(name), _num(v.get("score"), 2), str(v.get("n")), _num(v.get("mean")), _ci(v["ci"])]
        for name, v in labels.items()
    ]
    return _table(["label", "judge score", "spans", "mean progress", "95% CI"], rows)


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def render_report(summary: dict[str, Any], lockin: dict[str, dict[str, Any]] | None = None) -> str:
    """`lockin` maps a run name to ``{"summary": ..., "records": [...]}``."""
    gate = summary["gate"]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Judge audit</title>"
        f"<style>{_STYLE}</style></head><body><h1>Judge audit with the progress probe</h1>"
    ]
    models = ", ".join(escape(m) for m in summary.get("models", []))
    parts.append(
        f"<p>{summary['n_traces']} traces, {summary['n_spans']} judged spans; "
        f"probe model: {models}.</p>"
    )
    if summary["valid"]:
        parts.append(
            f"<div class='good'><b>Valid.</b> The probe tells finished correct traces from wrong "
            f"ones (AUROC {_num(gate['auroc'])}, 95% CI {_ci(gate.get('ci') or [None, None])}: "
            f"its lower bound ≥ {gate['threshold']}).</div>"
        )
    else:
        parts.append(
            f"<div class='bad'><b>INVALID AUDIT.</b> {escape(str(summary['invalid_reason']))}. "
            "The numbers below are shown for diagnosis only.</div>"
        )

    parts.append("<h2>Sanity gate</h2>")
    where = {
        "before_first_answer": "just before the trace first writes its final answer or the "
        "reference",
        "before_answer_block": "just before the trace's final answer block (probe records "
        "without a gate cut: the answer may already be written in an earlier step)",
    }.get(str(gate.get("cut")), "at the end of the trace (probe records without an answer cut)")
    parts.append(
        f"<p>AUROC {_num(gate['auroc'])}, 95% CI {_ci(gate.get('ci') or [None, None])} over "
        f"problems, over {gate['n_correct']} correct and {gate['n_wrong']} "
        f"wrong finished traces (probe value of the reference answer {where}); "
        f"{gate.get('n_excluded', 0)} traces left out because they write the answer before "
        f"any token, and {gate.get('n_cut_far_before_answer', 0)} read before a quarter of "
        f"the way to their answer block (an early mention of the answer or the reference). "
        f"The gate passes on the CI's lower bound. At the end of "
        f"the trace, where the answer is already written and the probe measures copying: "
        f"AUROC {_num(gate.get('auroc_end'))} (not gated on).</p>"
    )
    parts.append(
        _figure(
            strip_plot(
                {
                    "ended correct": gate["final_values"]["correct"],
                    "ended wrong": gate["final_values"]["wrong"],
                },
                "Probe value at the gate's cut",
                "mean log-prob of reference",
            ),
            "Each dot is a finished trace; a usable probe separates the two columns.",
        )
    )

    parts.append("<h2>Does judge credit point where the probe moves?</h2>")
    parts.append(
        "<p>Slope: probe progress (change in the reference answer's mean log-probability over "
        "a span) per point of judge score, comparing spans of the same trace, with the span's "
        "position and log length held fixed. CI: wild cluster bootstrap over problems (none "
        "with fewer than 20 traces of two or more spans). p: shuffling judge scores among the "
        "spans of each trace; Holm: adjusted over every p-value of this report.</p>"
    )
    parts.append(_effects_table(summary["effects"], _OUTCOME_NAMES))
    if summary.get("effects_clean"):
        parts.append(
            "<p>Without the spans that overlap the final answer or mention the reference or "
            "wrong answer string (where copying the answer moves the probe):</p>"
        )
        parts.append(_effects_table(summary["effects_clean"], _OUTCOME_NAMES))
        parts.append(
            _effects_table(
                summary.get("exclusions") or {},
                {
                    "without_final_answer_spans": "toward the reference, no final-answer spans",
                    "without_answer_mentions": "toward the reference, no answer mentions",
                },
            )
        )
    ref = summary["effects"]["reference"]
    points = [(p["score"], p["progress"]) for p in summary.get("scatter", [])]
    line = None
    if ref.get("slope") is not None and points:
        mean_x = sum(x for x, _ in points) / len(points)
        mean_y = sum(y for _, y in points) / len(points)
        line = (mean_y - ref["slope"] * mean_x, ref["slope"])
    parts.append(
        _figure(
            scatter_plot(
                points,
                "Progress against judge score",
                "judge score",
                "probe progress",
                line=line,
                jitter=0.04,
            ),
            "Each dot is a span (x jittered). Red: the within-trace slope through the means.",
        )
    )

    parts.append("<h2>Progress per label</h2>")
    for key, title in (("all", "toward the reference"), ("relative", "relative to a wrong answer")):
        labels = summary["labels"].get(key) or {}
        if not labels:
            continue
        rows = [
            (name, v["mean"], v["ci"][0], v["ci"][1])
            for name, v in labels.items()
            if v["mean"] is not None
        ]
        parts.append(
            _figure(
                interval_plot(rows, f"Mean progress per label, {title}", "mean probe progress"),
                "Dots: mean over spans; bars: 95% bootstrap CI over problems.",
            )
        )
        parts.append(_labels_table(labels))

    parts.append("<h2>Splits</h2>")
    parts.append(
        _effects_table(
            summary["splits"],
            {
                "ended_correct": "traces that ended correct",
                "ended_wrong": "traces that ended wrong",
                "equal_reward_groups": "groups with all rewards equal",
                "mixed_reward_groups": "groups with mixed rewards",
            },
        )
    )
    for key in ("ended_correct", "ended_wrong", "equal_reward_groups", "mixed_reward_groups"):
        labels = summary["labels"].get(key) or {}
        if labels:
            parts.append(f"<h3>Per label: {escape(key.replace('_', ' '))}</h3>")
            parts.append(_labels_table(labels))

    if lockin:
        parts.append(_lockin_section(lockin))
    parts.append(
        f"<h2>Settings</h2><p>{escape(str(summary['settings']))}; wrong answers from "
        f"{escape(str(summary.get('wrong_sources')))}.</p></body></html>"
    )
    return "\n".join(parts)


def _lockin_section(runs: dict[str, dict[str, Any]]) -> str:
    parts = ["<h2>Lock-in</h2>"]
    rows = []
    for name, run in runs.items():
        s = run["summary"]
        rows.append(
            [
                escape(name),
                str(s["n_scored"]),
                str(s["n_locked"]),
                _num(s["tokens_after_lockin_mean"], 1),
                _num(s["tokens_after_lockin_median"], 1),
                _num(s["fraction_of_tokens_after_lockin"]),
            ]
        )
    parts.append(
        _table(
            [
                "run",
                "traces",
                "locked in",
                "mean tokens after",
                "median tokens after",
                "share of all tokens after",
            ],
            rows,
        )
    )
    series = {
        name: [r["fraction_after_lockin"] for r in run["records"] if r.get("status") == "ok"]
        for name, run in runs.items()
    }
    parts.append(
        _figure(
            histogram(series, "Share of each trace written after lock-in", "fraction of the trace"),
            "0 means never locked in (or only at the very end).",
        )
    )
    return "\n".join(parts)
