"""The audit of a judge from probe records: a sanity gate, then the effects, then the breakdowns.

1. Gate. Before finished traces (those with a final answer) first write their
   final answer or the reference (the record's ``gate_cut``, answer_cut.py), the
   probe must tell the traces that ended correct from those that ended wrong:
   the AUROC of the reference answer's probe value against the verdict, with a
   95% bootstrap CI over problems, and the gate passes when the CI's **lower
   bound** is at least `auroc_threshold` (0.9). A trace whose answer is written
   before any of its tokens (gate cut 0) is left out: the probe would read the
   bare prompt. Read later, the answer is on the page and the AUROC measures
   copying; the AUROC at the end of the trace is reported next to it, never
   gated on. (Probe records without ``gate_cut`` fall back to ``answer_cut``,
   before the answer block only, and then to the end, and say so.) Below the
   threshold, or without both kinds of trace, the probe cannot be trusted on
   these traces and the audit is marked invalid; the numbers are still computed
   and shown, under that warning.
2. Effects: progress per point of judge score within a trace, with position and
   length controlled, a 95% CI from a wild cluster bootstrap by problem (stats.py)
   and a within-trace permutation p-value, for four outcomes: progress toward the
   reference, progress relative to the wrong answer, and both with the second
   wording; once over all spans and once without the spans that overlap the final
   answer or mention the reference or wrong answer string (where copying moves the
   probe). Only traces with two or more spans carry within-trace contrast; with
   fewer than `min_contrast_traces` (20) of them no CI is printed, and the effect
   says why (a CI from a handful of traces covered 0 far less often than 95% under
   the null). Every p-value a report prints is also given Holm-adjusted over all
   of them (``p_holm``).
3. Breakdowns: mean progress per label (with CIs over problems), and the effect
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
    auroc_ci,
    cluster_mean_ci,
    holm,
    permutation_p_value,
    wild_cluster_ci,
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
    min_contrast_traces: int = 20


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def value_at(record: dict[str, Any], cut: int | None, name: str = "reference") -> float | None:
    """The probe value of `name` at policy cut `cut` (None: the end of the trace)."""
    series = record["values"][name]
    if cut is None:
        return float(series[-1])
    cuts = record.get("cuts") or []
    return float(series[cuts.index(cut)]) if cut in cuts else None


def _problem(record: dict[str, Any]) -> str:
    """The cluster a trace was sampled in: its problem (group), else the trace itself."""
    group = record.get("group_id")
    return f"group:{group}" if group is not None else f"trace:{record.get('id')}"


def _gate_cut_field(records: Sequence[dict[str, Any]]) -> tuple[str | None, str]:
    """Which cut the gate reads: (record field, name in the report)."""
    if any("gate_cut" in r for r in records):
        return "gate_cut", "before_first_answer"
    if any("answer_cut" in r for r in records):
        return "answer_cut", "before_answer_block"
    return None, "end"


# A gate cut before this share of the answer block's cut reads a trace far before its
# answer: the reference (or a form of it) written early, or an early mention the reader
# took for the answer. Counted, so a reader sees what the gate read so early.
FAR_BEFORE = 0.25


def far_before_answer(records: Sequence[dict[str, Any]]) -> int:
    """Finished traces whose gate cut is above 0 but below FAR_BEFORE of their answer
    block's cut."""
    count = 0
    for record in records:
        gate_cut, block = record.get("gate_cut"), record.get("answer_cut")
        if not record.get("finished") or gate_cut is None or block is None:
            continue
        count += 0 < gate_cut < FAR_BEFORE * block
    return count


def _gate_values(
    records: Sequence[dict[str, Any]], field: str | None
) -> tuple[list[float], list[bool], list[str], int]:
    """Values, verdicts and problems of the finished traces the gate reads, and how many
    it left out because their answer comes before any token (cut 0)."""
    values: list[float] = []
    labels: list[bool] = []
    problems: list[str] = []
    excluded = 0
    for record in records:
        if not record.get("finished") or record.get("correct") is None:
            continue
        cut = None
        if field is not None:
            cut = record.get(field)
            if cut is None:
                continue  # a finished trace whose answer was not found
            if field == "gate_cut" and cut == 0:
                excluded += 1
                continue
        value = value_at(record, cut)
        if value is not None:
            values.append(value)
            labels.append(bool(record["correct"]))
            problems.append(_problem(record))
    return values, labels, problems, excluded


def gate(
    records: Sequence[dict[str, Any]], threshold: float, settings: AuditSettings | None = None
) -> dict[str, Any]:
    """AUROC of the probe value (reference answer) for correct vs wrong finished traces, read
    before the answer is first written, with its CI over problems; passes on the CI's lower
    bound."""
    settings = settings or AuditSettings()
    field, cut_name = _gate_cut_field(records)
    end_values, end_labels, _, _ = _gate_values(records, None)
    values, labels, problems, excluded = _gate_values(records, field)
    n_correct = sum(labels)
    n_wrong = len(labels) - n_correct
    area = auroc(values, labels)
    low, high = (
        auroc_ci(values, labels, problems, reps=settings.bootstrap, seed=settings.seed)
        if n_correct and n_wrong
        else (float("nan"), float("nan"))
    )
    if n_correct == 0 or n_wrong == 0:
        passed, reason = False, "the gate needs finished traces that ended correct and wrong"
    elif not low >= threshold:
        passed = False
        reason = (
            f"the probe tells correct from wrong finished traces with AUROC {area:.3f} "
            f"(95% CI {low:.3f}–{high:.3f}, n = {len(labels)}), whose lower bound is below "
            f"{threshold}: its progress numbers cannot be trusted on these traces"
        )
    else:
        passed, reason = True, None
    if passed is False and reason and field == "gate_cut":
        reason += " (read before the answer is first written)"
    elif passed is False and reason and field == "answer_cut":
        reason += " (read before the answer block only: these probe records predate gate_cut)"
    return {
        "auroc": _finite(area),
        "ci": [_finite(low), _finite(high)],
        "n": len(labels),
        "n_excluded": excluded,
        "excluded_reason": "the answer is written before the trace's first token boundary",
        "n_cut_far_before_answer": far_before_answer(records),
        "cut": cut_name,
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
            rows.append(
                {
                    **span,
                    "trace": str(record.get("id")),
                    "problem": _problem(record),
                    "correct": record.get("correct"),
                }
            )
    return rows


def is_answer_span(row: dict[str, Any]) -> bool:
    """A span where copying the answer moves the probe: it overlaps the final answer or
    mentions the reference or wrong answer string."""
    return bool(row.get("overlaps_final")) or bool(row.get("mentions_answer"))


def effect(rows: Sequence[dict[str, Any]], field: str, settings: AuditSettings) -> dict[str, Any]:
    """β with CI and p-value for one outcome field over the given span rows."""
    used = [r for r in rows if r.get(field) is not None]
    per_trace: dict[str, int] = defaultdict(int)
    for r in used:
        per_trace[r["trace"]] += 1
    contrast = sum(1 for n in per_trace.values() if n >= 2)
    out: dict[str, Any] = {
        "n_spans": len(used),
        "n_traces": len(per_trace),
        "n_contrast_traces": contrast,
        "n_problems": len({r.get("problem", r["trace"]) for r in used}),
        "ci_note": None,
    }
    if contrast < settings.min_contrast_traces:
        out["ci_note"] = (
            f"no CI: only {contrast} traces have two or more spans (a CI needs "
            f"{settings.min_contrast_traces}; with fewer, a 95% interval covers the truth far "
            "less often than 95%)"
        )
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
    if contrast < settings.min_contrast_traces:
        low = high = float("nan")
    else:
        low, high = wild_cluster_ci(
            data,
            reps=settings.bootstrap,
            seed=settings.seed,
            clusters=[r.get("problem", r["trace"]) for r in used],
        )
    p = permutation_p_value(data, permutations=settings.permutations, seed=settings.seed)
    return {
        **out,
        "slope": _finite(slope),
        "ci": [_finite(low), _finite(high)],
        "p_value": _finite(p),
    }


def adjust_holm(effects: Sequence[dict[str, Any]]) -> None:
    """Add ``p_holm`` to each effect: Holm over every p-value in `effects` (in place)."""
    for item, adjusted in zip(effects, holm([e.get("p_value") for e in effects]), strict=True):
        item["p_holm"] = None if adjusted is None else round(adjusted, 6)


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
            [r.get("problem", r["trace"]) for r in items],
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
    checked = gate(records, settings.auroc_threshold, settings)
    rows = _span_rows(records)
    kinds = group_kinds(records)
    subsets = {
        "ended_correct": [r for r in rows if r["correct"] is True],
        "ended_wrong": [r for r in rows if r["correct"] is False],
        "equal_reward_groups": [r for r in rows if kinds.get(r["trace"]) == "equal"],
        "mixed_reward_groups": [r for r in rows if kinds.get(r["trace"]) == "mixed"],
    }
    summary = {
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
            "min_contrast_traces": settings.min_contrast_traces,
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
    adjust_holm(printed_effects(summary))
    return summary


def printed_effects(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Every effect the report prints a p-value for: the family Holm adjusts over."""
    return [
        *summary["effects"].values(),
        *summary["effects_clean"].values(),
        *summary["exclusions"].values(),
        *summary["splits"].values(),
    ]


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return dict(counts)
