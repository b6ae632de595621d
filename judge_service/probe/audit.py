"""The audit of a judge from probe records: a sanity gate, then the effects, then the breakdowns.

1. Gate. Just before finished traces (those with a final answer) write that
   answer (the record's ``answer_cut``), the probe must tell the traces that
   ended correct from those that ended wrong: AUROC of the reference answer's
   probe value against the verdict, at least `auroc_threshold` (0.9). Read at
   the end of the trace instead, the answer is on the page and the AUROC only
   measures copying; that AUROC is reported next to it, never gated on. (Records
   of probe v1, without ``answer_cut``, fall back to the end and say so.) Below
   the threshold, or without both kinds of trace, the probe cannot be trusted on
   these traces and the audit is marked invalid; the numbers are still computed
   and shown, under that warning.
2. Effects: progress per point of judge score within a trace, with position and
   length controlled, a 95% bootstrap CI over traces and a within-trace
   permutation p-value, for four outcomes: progress toward the reference,
   progress relative to the wrong answer, and both with the second wording; once
   over all spans and once without the spans that overlap the final answer or
   mention the reference or wrong answer string (where copying moves the probe).
3. Breakdowns: mean progress per label (with CIs over traces), and the effect
   and per-label means split by traces that ended correct or wrong and by
   groups whose rewards were all equal (where judge credit is the only signal)
   or mixed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judge_service.probe.stats import (
    SlopeData,
    auroc,
    bootstrap_slope_ci,
    cluster_mean_ci,
    permutation_p_value,
    within_slope,
)

OUTCOMES = {
    "reference": "progress",
    "relative": "progress_rel",
    "reference_alt": "progress_alt",
    "relative_alt": "progress_rel_alt",
}


@dataclass(frozen=True)
class AuditSettings:
    auroc_threshold: float = 0.9
    permutations: int = 10_000
    bootstrap: int = 2000
    seed: int = 0


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def value_at(record: dict[str, Any], cut: int | None, name: str = "reference") -> float | None:
    """The probe value of `name` at policy cut `cut` (None: the end of the trace)."""
    series = record["values"][name]
    if cut is None:
        return float(series[-1])
    cuts = record.get("cuts") or []
    return float(series[cuts.index(cut)]) if cut in cuts else None


def _gate_values(
    records: Sequence[dict[str, Any]], before_answer: bool
) -> tuple[list[float], list[bool]]:
    values: list[float] = []
    labels: list[bool] = []
    for record in records:
        if not record.get("finished") or record.get("correct") is None:
            continue
        if before_answer and record.get("answer_cut") is None:
            continue  # a finished trace whose answer start was not found
        value = value_at(record, record.get("answer_cut") if before_answer else None)
        if value is not None:
            values.append(value)
            labels.append(bool(record["correct"]))
    return values, labels


def gate(records: Sequence[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """AUROC of the probe value (reference answer) for correct vs wrong finished traces, read
    before the final answer is written (end of trace for probe records that lack the cut)."""
    before = any("answer_cut" in r for r in records)
    end_values, end_labels = _gate_values(records, before_answer=False)
    values, labels = (
        _gate_values(records, before_answer=True)
        if before
        else (
            end_values,
            end_labels,
        )
    )
    n_correct = sum(labels)
    n_wrong = len(labels) - n_correct
    area = auroc(values, labels)
    if n_correct == 0 or n_wrong == 0:
        passed, reason = False, "the gate needs finished traces that ended correct and wrong"
    elif area < threshold:
        passed = False
        reason = (
            f"the probe tells correct from wrong finished traces with AUROC {area:.3f} "
            f"< {threshold}: its progress numbers cannot be trusted on these traces"
        )
    else:
        passed, reason = True, None
    if passed is False and reason and before:
        reason += " (read before the final answer is written)"
    return {
        "auroc": _finite(area),
        "cut": "before_answer" if before else "end",
        "auroc_end": _finite(auroc(end_values, end_labels)),
        "threshold": threshold,
        "n_correct": n_correct,
        "n_wrong": n_wrong,
        "passed": passed,
        "reason": reason,
        "final_values": {
            "correct": _vals(values, labels, True),
            "wrong": _vals(values, labels, False),
        },
        "end_values": {
            "correct": _vals(end_values, end_labels, True),
            "wrong": _vals(end_values, end_labels, False),
        },
    }


def _vals(values: list[float], labels: list[bool], want: bool) -> list[float]:
    return [round(v, 6) for v, lab in zip(values, labels, strict=True) if lab is want]


def _span_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        for span in record.get("spans") or []:
            rows.append({**span, "trace": str(record.get("id")), "correct": record.get("correct")})
    return rows


def is_answer_span(row: dict[str, Any]) -> bool:
    """A span where copying the answer moves the probe: it overlaps the final answer or
    mentions the reference or wrong answer string."""
    return bool(row.get("overlaps_final")) or bool(row.get("mentions_answer"))


def effect(rows: Sequence[dict[str, Any]], field: str, settings: AuditSettings) -> dict[str, Any]:
    """β with CI and p-value for one outcome field over the given span rows."""
    used = [r for r in rows if r.get(field) is not None]
    traces = {r["trace"] for r in used}
    out: dict[str, Any] = {"n_spans": len(used), "n_traces": len(traces)}
    if len(used) < 3:
        return {**out, "slope": None, "ci": [None, None], "p_value": None}
    data = SlopeData.build(
        [r[field] for r in used],
        [r["score"] for r in used],
        [r["trace"] for r in used],
        [[r["position"], math.log(max(1, r["length"]))] for r in used],
    )
    slope = within_slope(data)
    if not math.isfinite(slope):
        return {**out, "slope": None, "ci": [None, None], "p_value": None}
    low, high = bootstrap_slope_ci(data, reps=settings.bootstrap, seed=settings.seed)
    p = permutation_p_value(data, permutations=settings.permutations, seed=settings.seed)
    return {
        **out,
        "slope": _finite(slope),
        "ci": [_finite(low), _finite(high)],
        "p_value": _finite(p),
    }


def label_means(
    rows: Sequence[dict[str, Any]], field: str, settings: AuditSettings
) -> dict[str, dict[str, Any]]:
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get(field) is not None:
            by_label[str(row.get("label"))].append(row)
    out = {}
    for label, items in sorted(by_label.items(), key=lambda kv: -kv[1][0]["score"]):
        mean, low, high = cluster_mean_ci(
            [r[field] for r in items],
            [r["trace"] for r in items],
            reps=settings.bootstrap,
            seed=settings.seed,
        )
        out[label] = {
            "score": items[0]["score"],
            "n": len(items),
            "mean": _finite(mean),
            "ci": [_finite(low), _finite(high)],
        }
    return out


def group_kinds(records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Trace id -> ``equal`` (group of 2+ with one reward), ``mixed`` or ``ungrouped``."""
    rewards: dict[str, set[float]] = defaultdict(set)
    sizes: dict[str, int] = defaultdict(int)
    for record in records:
        group = record.get("group_id")
        if group is not None and record.get("reward") is not None:
            rewards[str(group)].add(float(record["reward"]))
            sizes[str(group)] += 1
    kinds = {}
    for record in records:
        group = record.get("group_id")
        key = str(group) if group is not None else None
        if key is None or sizes.get(key, 0) < 2:
            kinds[str(record.get("id"))] = "ungrouped"
        else:
            kinds[str(record.get("id"))] = "equal" if len(rewards[key]) == 1 else "mixed"
    return kinds


def run_audit(
    records: Sequence[dict[str, Any]], settings: AuditSettings | None = None
) -> dict[str, Any]:
    settings = settings or AuditSettings()
    checked = gate(records, settings.auroc_threshold)
    rows = _span_rows(records)
    kinds = group_kinds(records)
    subsets = {
        "ended_correct": [r for r in rows if r["correct"] is True],
        "ended_wrong": [r for r in rows if r["correct"] is False],
        "equal_reward_groups": [r for r in rows if kinds.get(r["trace"]) == "equal"],
        "mixed_reward_groups": [r for r in rows if kinds.get(r["trace"]) == "mixed"],
    }
    return {
        "valid": checked["passed"],
        "invalid_reason": checked["reason"],
        "gate": checked,
        "n_traces": len(records),
        "n_spans": len(rows),
        "settings": {
            "auroc_threshold": settings.auroc_threshold,
            "permutations": settings.permutations,
            "bootstrap": settings.bootstrap,
            "seed": settings.seed,
        },
        "models": sorted({str(r.get("model")) for r in records}),
        "effects": {name: effect(rows, field, settings) for name, field in OUTCOMES.items()},
        "effects_clean": {
            name: effect([r for r in rows if not is_answer_span(r)], field, settings)
            for name, field in OUTCOMES.items()
        },
        "exclusions": {
            "without_final_answer_spans": effect(
                [r for r in rows if not r.get("overlaps_final")], "progress", settings
            ),
            "without_answer_mentions": effect(
                [r for r in rows if not r.get("mentions_answer")], "progress", settings
            ),
        },
        "labels": {
            "all": label_means(rows, "progress", settings),
            "relative": label_means(rows, "progress_rel", settings),
            **{name: label_means(subset, "progress", settings) for name, subset in subsets.items()},
        },
        "splits": {name: effect(subset, "progress", settings) for name, subset in subsets.items()},
        "scatter": [
            {"score": r["score"], "progress": r["progress"], "label": r.get("label")}
            for r in rows
            if r.get("progress") is not None
        ],
        "wrong_sources": _count(str(r.get("answers", {}).get("wrong_source")) for r in records),
    }


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return dict(counts)
