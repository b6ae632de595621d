"""The figures of an eval: ProcessBench F1, token-level span precision/recall, boundary error.

ProcessBench (Zheng et al., "ProcessBench: Identifying Process Errors in
Mathematical Reasoning", ACL 2025, arXiv:2412.06559; the evaluation code in
https://github.com/QwenLM/ProcessBench, ``code/run_eval_prm_rlhflow.py``): a
prediction is the index of the earliest wrong step, -1 for none, and it matches
when it equals the label. ``acc_error`` is the share of matches among the
erroneous samples (label != -1), ``acc_correct`` among the correct ones (label
== -1), and F1 is their harmonic mean, ``2·a·b / (a + b)``. The repository
reports them in percent; here they are fractions. A record that could not be
judged (status ``failed``) has no prediction and counts as a miss in its group.
An accuracy over an empty group is ``None``, and so is F1 then; F1 is 0 when
both accuracies are 0 (the repository's formula divides by zero there).

Spans are scored token by token, per label, over all gold-span records: a token
is a true positive for a label when a gold span and an accepted span of that
label both cover it. Boundary error: each gold span is paired with the accepted
span of its label that overlaps it most (ties: the nearer boundaries); its error
is ``|Δstart|`` and ``|Δend|`` in tokens. A gold span nothing of its label
overlaps is ``unmatched``, and a failed record's gold spans are all unmatched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

NO_LABEL = -1


@dataclass(frozen=True)
class Labelled:
    """A token range ``[start, end)`` with a label: a gold span or an accepted one."""

    start: int
    end: int
    label: str


def ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def harmonic_mean(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 2 * a * b / (a + b) if a + b else 0.0


def processbench_scores(pairs: Iterable[tuple[int, int | None]]) -> dict[str, Any]:
    """F1 and the two accuracies over ``(label, predicted)`` pairs; predicted None: failed."""
    erroneous = correct = erroneous_matched = correct_matched = failed = 0
    for label, predicted in pairs:
        failed += predicted is None
        matched = predicted is not None and predicted == label
        if label == NO_LABEL:
            correct += 1
            correct_matched += matched
        else:
            erroneous += 1
            erroneous_matched += matched
    acc_error = ratio(erroneous_matched, erroneous)
    acc_correct = ratio(correct_matched, correct)
    return {
        "f1": harmonic_mean(acc_error, acc_correct),
        "acc_error": acc_error,
        "acc_correct": acc_correct,
        "counts": {
            "records": erroneous + correct,
            "erroneous": erroneous,
            "correct": correct,
            "erroneous_matched": erroneous_matched,
            "correct_matched": correct_matched,
            "failed": failed,
        },
    }


def token_scores(
    records: Iterable[tuple[int, Sequence[Labelled], Sequence[Labelled] | None]],
) -> dict[str, Any]:
    """Precision, recall and F1 by label, and over all labels (micro), over records of
    ``(num_tokens, gold, predicted)``; predicted None: the record failed (predicts nothing)."""
    tp: dict[str, int] = {}
    gold_n: dict[str, int] = {}
    pred_n: dict[str, int] = {}
    for num_tokens, gold, predicted in records:
        gold_masks = _masks(num_tokens, gold)
        pred_masks = _masks(num_tokens, predicted or ())
        for label in gold_masks.keys() | pred_masks.keys():
            g = gold_masks.get(label)
            p = pred_masks.get(label)
            gold_n[label] = gold_n.get(label, 0) + (int(g.sum()) if g is not None else 0)
            pred_n[label] = pred_n.get(label, 0) + (int(p.sum()) if p is not None else 0)
            both = int((g & p).sum()) if g is not None and p is not None else 0
            tp[label] = tp.get(label, 0) + both
    by_label = {
        label: _prf(tp.get(label, 0), gold_n.get(label, 0), pred_n.get(label, 0))
        for label in sorted(gold_n.keys() | pred_n.keys())
    }
    overall = _prf(sum(tp.values()), sum(gold_n.values()), sum(pred_n.values()))
    return {"by_label": by_label, "micro": overall}


def _masks(num_tokens: int, spans: Sequence[Labelled]) -> dict[str, np.ndarray[Any, Any]]:
    masks: dict[str, np.ndarray[Any, Any]] = {}
    for span in spans:
        mask = masks.setdefault(span.label, np.zeros(num_tokens, dtype=bool))
        mask[max(0, span.start) : min(num_tokens, span.end)] = True
    return masks


def _prf(tp: int, gold: int, predicted: int) -> dict[str, Any]:
    precision = ratio(tp, predicted)
    recall = ratio(tp, gold)
    return {
        "precision": precision,
        "recall": recall,
        "f1": harmonic_mean(precision, recall),
        "gold_tokens": gold,
        "predicted_tokens": predicted,
        "true_positive_tokens": tp,
    }


def boundary_errors(
    records: Iterable[tuple[Sequence[Labelled], Sequence[Labelled] | None]],
) -> dict[str, Any]:
    """Mean |Δstart|, |Δend| (tokens) of gold spans against their best accepted match, over
    records of ``(gold, predicted)``; predicted None: the record failed."""
    starts: list[int] = []
    ends: list[int] = []
    unmatched = 0
    for gold, predicted in records:
        for span in gold:
            match = best_match(span, predicted or ())
            if match is None:
                unmatched += 1
                continue
            starts.append(abs(match.start - span.start))
            ends.append(abs(match.end - span.end))
    both = [s + e for s, e in zip(starts, ends, strict=True)]
    return {
        "matched": len(starts),
        "unmatched": unmatched,
        "exact": sum(1 for total in both if total == 0),
        "mean_start": float(np.mean(starts)) if starts else None,
        "mean_end": float(np.mean(ends)) if ends else None,
        # per boundary: a span off by 2 at its start and 0 at its end is off by 1
        "mean": float(np.mean(both)) / 2 if both else None,
    }


def best_match(gold: Labelled, predicted: Sequence[Labelled]) -> Labelled | None:
    """The accepted span of `gold`'s label overlapping it most (ties: nearer boundaries)."""
    best: tuple[int, int] | None = None
    chosen = None
    for span in predicted:
        if span.label != gold.label:
            continue
        overlap = min(span.end, gold.end) - max(span.start, gold.start)
        if overlap <= 0:
            continue
        key = (overlap, -(abs(span.start - gold.start) + abs(span.end - gold.end)))
        if best is None or key > best:
            best, chosen = key, span
    return chosen


def latency_summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """p50 and p95 (numpy's linear interpolation between ranks), mean and max."""
    if not values:
        return {"p50": None, "p95": None, "mean": None, "max": None, "n": 0}
    data = np.asarray(values, dtype=float)
    return {
        "p50": float(np.percentile(data, 50)),
        "p95": float(np.percentile(data, 95)),
        "mean": float(data.mean()),
        "max": float(data.max()),
        "n": len(values),
    }
