"""REPORT.json: the figures of one eval run, and one line per record to check them against.

Fields (every rate a fraction; ``None`` where its denominator is 0):

* ``processbench``: ``f1``, ``acc_error``, ``acc_correct``, ``counts`` (see
  `metrics.processbench_scores`); ``None`` without ProcessBench records;
* ``spans``: token-level ``by_label`` and ``micro`` precision/recall/F1 and
  ``boundary_error`` over the gold-span records; ``None`` without them;
* ``records``: ``id``, ``kind``, ``status`` and, for ProcessBench, ``label``,
  ``predicted`` (``None`` when failed) and ``correct``; ``error`` when there is one;
* ``failed``: the records that could not be judged (each also in ``records``);
* ``rejections``: rejected spans ``by_code`` over every round, their ``total``, the
  ``accepted`` spans, and ``rate`` = total / (total + accepted);
* ``fallback_rate``: results with status ``fallback`` / records;
* ``cost_usd``: summed over the results that have a price, a fallback's failed LLM
  attempt (``judge.attempt``) included (``None`` when none has: the rules judge, an
  unpriced model); ``usage``: judge tokens summed the same way;
* ``latency_ms``: ``p50``, ``p95``, mean, max of the judged (not failed) results'
  ``judge.latency_ms``: judging time, the wait for a concurrency slot left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from judge_service import labels as L
from judge_service.evaluation import metrics
from judge_service.evaluation.metrics import Labelled
from judge_service.evaluation.records import Case
from judge_service.schemas import JudgeAttempt, JudgeInfo, Result


def predicted_step(case: Case, result: Result) -> int | None:
    """The step holding the earliest accepted ``invalid`` span's first token; -1 when there
    is none; None when the record failed."""
    if result.status == "failed" or case.segmented is None:
        return None
    starts = [span.start for span in result.spans if span.label == L.INVALID]
    return case.segmented.step_of(min(starts)) if starts else metrics.NO_LABEL


def build_report(
    cases: Sequence[Case], results: Sequence[Result], *, judge: str, source: str, wall_s: float
) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    pairs: list[tuple[int, int | None]] = []
    token_rows: list[tuple[int, Sequence[Labelled], Sequence[Labelled] | None]] = []
    boundary_rows: list[tuple[Sequence[Labelled], Sequence[Labelled] | None]] = []
    for case, result in zip(cases, results, strict=True):
        row: dict[str, Any] = {"id": case.rollout.id, "kind": case.kind, "status": result.status}
        accepted = None if result.status == "failed" else [_labelled(s) for s in result.spans]
        if case.label is not None:
            predicted = predicted_step(case, result)
            pairs.append((case.label, predicted))
            row.update(label=case.label, predicted=predicted, correct=predicted == case.label)
        if case.gold is not None:
            gold = [Labelled(s.start, s.end, s.label) for s in case.gold]
            token_rows.append((len(case.rollout.response_token_ids), gold, accepted))
            boundary_rows.append((gold, accepted))
            row.update(gold_spans=len(gold))
        row["accepted_spans"] = len(accepted or ())
        if result.judge is not None:
            row["judge"] = result.judge.name
        if result.error:
            row["error"] = result.error
        records.append(row)
    spans = None
    if token_rows:
        spans = {
            "records": len(token_rows),
            **metrics.token_scores(token_rows),
            "boundary_error": metrics.boundary_errors(boundary_rows),
        }
    statuses = Counter(r.status for r in results)
    return {
        "source": source,
        "judge": _judges(judge, results),
        "statuses": {s: statuses.get(s, 0) for s in ("ok", "fallback", "failed")},
        "processbench": metrics.processbench_scores(pairs) if pairs else None,
        "spans": spans,
        "rejections": _rejections(results),
        "fallback_rate": statuses.get("fallback", 0) / len(results) if results else None,
        "cost_usd": _cost(results),
        "usage": _usage(results),
        "latency_ms": metrics.latency_summary(
            [r.judge.latency_ms for r in results if r.judge is not None and r.status != "failed"]
        ),
        "wall_s": round(wall_s, 3),
        "failed": [{"id": r.id, "error": r.error} for r in results if r.status == "failed"],
        "records": records,
    }


def _labelled(span: Any) -> Labelled:
    return Labelled(int(span.start), int(span.end), str(span.label))


def _judges(spec: str, results: Sequence[Result]) -> dict[str, Any]:
    """The judge asked for, and those that produced the spans (a fallback's is the rules
    judge), with their prompt versions: what a comparison of prompt versions reads."""
    used = Counter(r.judge.name for r in results if r.judge is not None)
    versions = Counter(
        f"{r.judge.name}/{r.judge.prompt_version}" for r in results if r.judge is not None
    )
    return {
        "spec": spec,
        "used": dict(sorted(used.items())),
        "prompts": dict(sorted(versions.items())),
    }


def _rejections(results: Sequence[Result]) -> dict[str, Any]:
    by_code: Counter[str] = Counter()
    for result in results:
        if result.judge is not None:
            by_code.update(result.judge.rejected)
    total = sum(by_code.values())
    accepted = sum(len(r.spans) for r in results if r.status != "failed")
    return {
        "by_code": dict(sorted(by_code.items())),
        "total": total,
        "accepted": accepted,
        "rate": metrics.ratio(total, total + accepted),
    }


def _spenders(results: Sequence[Result]) -> list[JudgeInfo | JudgeAttempt]:
    """Who spent judge tokens: each result's judge and its failed attempt, if any (a
    fallback's LLM attempt was paid for too)."""
    out: list[JudgeInfo | JudgeAttempt] = []
    for result in results:
        if result.judge is not None:
            out.append(result.judge)
            if result.judge.attempt is not None:
                out.append(result.judge.attempt)
    return out


def _cost(results: Sequence[Result]) -> float | None:
    costs = [s.cost_usd for s in _spenders(results) if s.cost_usd is not None]
    return float(sum(costs)) if costs else None


def _usage(results: Sequence[Result]) -> dict[str, int]:
    fields = ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens", "turns")
    totals = dict.fromkeys(fields, 0)
    for spender in _spenders(results):
        for name in fields:
            totals[name] += int(getattr(spender, name))
    return totals
