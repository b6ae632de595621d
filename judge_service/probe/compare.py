"""``audit --compare``: credit sources side by side, each from its own probe records.

A run is the probe of one credit source's spans (rules, value, an LLM judge, or
CSCR / CoRT weights turned into spans) over the same rollouts. Per run:

* the probe-progress slope per unit of credit (a span's ``score``), within
  traces, position and length held fixed, with a wild cluster bootstrap CI over
  problems (none below 20 traces with two or more spans), a permutation p and its
  Holm adjustment over every slope the comparison prints: over all spans, and
  over the spans that neither overlap the final answer nor mention the reference
  or wrong answer string;
* the share of credit mass (|score| × tokens) on tokens written after lock-in:
  the first cut from which the reference (the right answer, lockin.py) has probe
  probability at least `lockin_threshold` at every later cut (``lockin_answer=
  "final"``: the trace's own final answer, the wrong one for a trace that ended
  wrong);
* the credit on the final-answer spans against the rest: their share of the
  credit mass, and the mean credit per token on each side;
* the share of equal-reward groups (two or more probed rollouts, one reward: Dr.
  GRPO's advantage is 0 on every token) in which some span of some rollout has
  non-zero credit, with a Wilson 95% CI (one yes or no per group, the unit that was
  sampled; stats.wilson_ci says why not a bootstrap). A source whose equal-reward
  credit is a per-token term and not a span (groupwise judging) is measured on it
  only when its spans were scored from the result's per-token credit
  (``credit_runs --judged-credit``).

Credit units differ between sources (a judge's label scores, the value judge's
nats, a reweight's A·(w − 1)), so slopes compare directions and significance
across sources, not sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge_service.probe.audit import (
    AuditSettings,
    _finite,
    _span_rows,
    adjust_holm,
    effect,
    group_kinds,
    is_answer_span,
)
from judge_service.probe.lockin import lock_in_index
from judge_service.probe.stats import wilson_ci


def lock_cut(record: dict[str, Any], threshold: float, answer: str = "reference") -> int | None:
    """The lock-in cut of a probe record, or None (never locked in, or no such answer)."""
    answers = record.get("answers") or {}
    if answer == "reference" or record.get("correct") is True:
        name = "reference"
    elif record.get("correct") is False and answers.get("wrong_source") == "final_answer":
        name = "wrong"
    else:
        return None
    series = (record.get("values") or {}).get(name)
    n_tokens = (record.get("answer_tokens") or {}).get(name)
    if not series or not n_tokens:
        return None
    probability = [math.exp(v * n_tokens) for v in series]
    index = lock_in_index(probability, threshold)
    return None if index is None else int(record["cuts"][index])


def credit_shares(
    records: Sequence[dict[str, Any]], threshold: float, answer: str = "reference"
) -> dict[str, Any]:
    """Credit mass after lock-in and on final-answer spans, and mean credit per token."""
    total = after = final_mass = 0.0
    final_credit = final_tokens = rest_credit = rest_tokens = 0.0
    locked = 0
    for record in records:
        cut = lock_cut(record, threshold, answer)
        locked += cut is not None
        for span in record.get("spans") or []:
            length = int(span["end"]) - int(span["start"])
            score = float(span["score"])
            mass = abs(score) * length
            total += mass
            if cut is not None:
                after += abs(score) * max(0, int(span["end"]) - max(cut, int(span["start"])))
            if span.get("overlaps_final"):
                final_mass += mass
                final_credit += score * length
                final_tokens += length
            else:
                rest_credit += score * length
                rest_tokens += length
    return {
        "n_locked": locked,
        "share_after_lockin": _finite(after / total) if total else None,
        "share_on_final_answer": _finite(final_mass / total) if total else None,
        "credit_per_token_final": _finite(final_credit / final_tokens) if final_tokens else None,
        "credit_per_token_rest": _finite(rest_credit / rest_tokens) if rest_tokens else None,
    }


def equal_reward_credit(records: Sequence[dict[str, Any]], level: float = 0.95) -> dict[str, Any]:
    """How many equal-reward groups get non-zero credit on some token, with a Wilson CI."""
    kinds = group_kinds(records)
    credited: dict[str, bool] = {}
    for record in records:
        if kinds.get(str(record.get("id"))) != "equal":
            continue
        group = str(record.get("group_id"))
        nonzero = any(
            float(s["score"]) != 0.0 and int(s["end"]) > int(s["start"])
            for s in record.get("spans") or []
        )
        credited[group] = credited.get(group, False) or nonzero
    n, k = len(credited), sum(credited.values())
    low, high = wilson_ci(k, n, level)
    return {
        "n_groups": n,
        "n_credited": k,
        "share": _finite(k / n) if n else None,
        "ci": [_finite(low), _finite(high)],
        "interval": "wilson",
        "level": level,
    }


def compare_runs(
    runs: Mapping[str, Sequence[dict[str, Any]]],
    settings: AuditSettings | None = None,
    lockin_threshold: float = 0.9,
    lockin_answer: str = "reference",
) -> dict[str, Any]:
    """The comparison summary: one entry per run name, in the order given."""
    settings = settings or AuditSettings()
    out: dict[str, Any] = {}
    for name, records in runs.items():
        rows = _span_rows(records)
        scores = np.asarray([r["score"] for r in rows], np.float64)
        out[name] = {
            "n_traces": len(records),
            "n_spans": len(rows),
            "score_sd": _finite(float(scores.std())) if scores.size else None,
            "slope": effect(rows, "progress", settings),
            "slope_clean": effect([r for r in rows if not is_answer_span(r)], "progress", settings),
            "slope_relative": effect(rows, "progress_rel", settings),
            **credit_shares(records, lockin_threshold, lockin_answer),
            "equal_reward_credited": equal_reward_credit(records),
        }
        sd = out[name]["score_sd"]
        slope = out[name]["slope"]["slope"]
        # Per SD of the source's credit: comparable across sources with different units.
        out[name]["slope_per_sd"] = _finite(slope * sd) if slope is not None and sd else None
    # One family: every slope the comparison prints, over all sources.
    adjust_holm(
        [run[key] for run in out.values() for key in ("slope", "slope_clean", "slope_relative")]
    )
    return {
        "runs": out,
        "lockin_threshold": lockin_threshold,
        "lockin_answer": lockin_answer,
        "settings": {
            "permutations": settings.permutations,
            "bootstrap": settings.bootstrap,
            "seed": settings.seed,
        },
    }
