"""A judgment, and the result a request gets from it.

What is cached is the judgment, not the credit (docs/design.md "Credit"): the accepted
spans, every rejection (with its round), the judge's usage and, when the
judging request asked for it, the transcript. The credit knobs (λ, κ,
``kappa_mode``, ``min_confidence``, label scores, the encoding) and the
group's advantage are applied per request by `to_result`, so a sweep over them
reuses one judgment and never pays a judge again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from judge_service import credit as credit_mod
from judge_service.credit import FloatArray, GroupAdvantage
from judge_service.judges.base import JudgeOutcome
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.resolve import Resolved
from judge_service.schemas import (
    ContrastOut,
    JudgeAttempt,
    JudgeInfo,
    RejectedSpan,
    Result,
    ReweightDiagnostics,
    SpanOut,
    Status,
    UsageTotals,
)
from judge_service.spans import Rejection, Span
from judge_service.view.source import TraceSource

FORMAT = 2  # of the stored JSON; version 1 stored the credit of the first request


@dataclass
class Judgment:
    status: Status
    num_tokens: int
    info: JudgeInfo  # the judging: name, prompt version, turns, usage, latency, rejections,
    # and the failed attempt of the requested judge, if any
    spans: list[Span] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    label_scores: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LABEL_SCORES))
    error: str | None = None
    transcript: list[dict[str, Any]] | None = None  # kept when the judging request asked
    rollout_id: str = ""  # of the request that judged it (a hit answers with its own id)
    source: TraceSource | None = None  # the text and char ranges its HTML view paints
    session: str | None = None  # the group session that made it (`group.cached`)

    def dumps(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "status": self.status,
                "num_tokens": self.num_tokens,
                "judge": self.info.model_dump(mode="json", exclude_none=True),
                "spans": [_span_dict(span) for span in self.spans],
                "rejected": [_rejection_dict(r) for r in self.rejected],
                "label_scores": self.label_scores,
                "error": self.error,
                "transcript": self.transcript,
                "rollout_id": self.rollout_id,
                "source": None if self.source is None else self.source.as_dict(),
                "session": self.session,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def loads(cls, data: str) -> Judgment:
        stored = json.loads(data)
        if stored.get("format") != FORMAT:
            return _from_stored_result(stored)
        return cls(
            status=stored["status"],
            num_tokens=int(stored["num_tokens"]),
            info=JudgeInfo.model_validate(stored["judge"]),
            spans=[_span(s) for s in stored["spans"]],
            rejected=[_rejection(r) for r in stored["rejected"]],
            label_scores={str(k): float(v) for k, v in stored["label_scores"].items()},
            error=stored.get("error"),
            transcript=stored.get("transcript"),
            rollout_id=str(stored.get("rollout_id", "")),
            # None for a judgment stored before the text was kept: its view says so
            source=TraceSource.from_dict(stored["source"]) if stored.get("source") else None,
            session=stored.get("session"),
        )


def to_result(
    judgment: Judgment,
    *,
    rollout_id: str,
    resolved: Resolved,
    advantage: GroupAdvantage | None,
    key: str | None,
    began: float,
    hit: bool,
    mask: Sequence[int] | None = None,
    reweight: FloatArray | None = None,
    reweight_diagnostics: ReweightDiagnostics | None = None,
) -> tuple[Result, FloatArray]:
    """The result of one request: the judgment with this request's credit options applied.
    A hit reports zero usage (it cost no judge tokens) and this request's latency.
    `mask` is the rollout's response_mask (its length checked by the caller): credit and
    advantage are 0 where it is 0 (docs/design.md "Wire format"); the judgment is the same with or
    without it, so it is applied here, per request, like the other credit options.
    `reweight` is w[t] of options.reweight (methods/reweight.py; 0 where the mask is 0):
    it multiplies A_i; `reweight_diagnostics` (CSCR's) go into the result as they are."""
    scores = resolved.label_scores
    weights = None if mask is None else np.asarray(mask, np.float64)
    span_scores = credit_mod.span_scores(judgment.spans, scores, resolved.min_confidence)
    credit = credit_mod.token_credit(
        judgment.num_tokens,
        judgment.spans,
        scores,
        lam=resolved.lam,
        kappa=resolved.kappa,
        min_confidence=resolved.min_confidence,
        kappa_mode=resolved.kappa_mode,
        group_scale=None if advantage is None else advantage.group_scale,
        mask=weights,
        scores=span_scores,
    )
    info = judgment.info
    if hit:  # the stored judgment's info stays as it was: this result's copy changes
        info = info.model_copy(deep=True)
        for spent in (info, info.attempt):
            if spent is not None:
                spent.input_tokens = spent.cache_write_tokens = spent.cache_read_tokens = 0
                spent.output_tokens = 0
                spent.cost_usd = None if spent.cost_usd is None else 0.0
        info.queue_ms = 0
        info.latency_ms = round((time.perf_counter() - began) * 1000)
    encoding = resolved.encoding
    values = credit.values
    judged = judgment.status != "failed"  # a failed judgment gives no credit at all
    per_token = {
        "credit": credit_mod.encode(values, encoding) if judged else None,
        "advantage": (
            None
            if advantage is None or not judged
            else credit_mod.encode(_outcome(values, advantage.value, weights, reweight), encoding)
        ),
        "weights": None if reweight is None else credit_mod.encode(reweight, encoding),
    }
    dense = encoding == "dense"
    result = Result(
        id=rollout_id,
        status=judgment.status,
        num_tokens=judgment.num_tokens,
        spans=_SPANS_OUT.validate_python(
            [
                {**span.as_dict(), "score": score, "contrast": _contrast_out(span)}
                for span, score in zip(judgment.spans, span_scores, strict=True)
            ]
        ),
        rejected_spans=[RejectedSpan(**_rejection_dict(r)) for r in judgment.rejected],
        credit_scale=credit.scale,
        judge=info,
        cache_key=key,
        error=judgment.error,
        transcript=_transcript(judgment, resolved.include_transcript),
        reweight_diagnostics=reweight_diagnostics,
        **({} if dense else per_token),
    )
    if dense:
        # Lists of Python floats from ndarray.tolist() are already what validation would
        # make of them; validating 3 x 32k floats against the PerToken union cost ~3 ms.
        for name, value in per_token.items():
            if value is not None:
                setattr(result, name, value)
    return result, values


# A list validated in one call: a SpanOut(...) each cost twice as much (256 spans of a 32k
# arithmetic trace: 0.65 -> 0.36 ms).
_SPANS_OUT = TypeAdapter(list[SpanOut])


def _outcome(
    values: FloatArray,
    advantage: float,
    weights: FloatArray | None,
    reweight: FloatArray | None = None,
) -> FloatArray:
    """advantage[t] = A_i·w[t] + credit[t] (w = 1 without a reweight); 0 where the mask is
    0, as those tokens were not the policy's actions and must carry no signal whatever the
    trainer does with its own mask."""
    total = values + (advantage if reweight is None else advantage * reweight)
    return total if weights is None else total * weights


def attempt_of(
    name: str, prompt_version: str, error: str, partial: JudgeOutcome | None
) -> JudgeAttempt:
    """The failed judge's attempt as reported beside the judge whose spans were used: what
    its session had spent when it failed (`partial`; nothing known after a crash)."""
    if partial is None:
        return JudgeAttempt(name=name, prompt_version=prompt_version, error=error)
    return JudgeAttempt(
        name=name,
        prompt_version=prompt_version,
        **spent(partial),
        cost_usd=partial.cost_usd,
        error=error,
    )


def spent(outcome: JudgeOutcome) -> dict[str, Any]:
    """The `JudgeUsage` fields of a session's outcome."""
    usage = outcome.usage
    return {
        "turns": outcome.turns,
        "tool_calls": dict(outcome.tool_calls),
        "input_tokens": usage.input_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def add_usage(totals: UsageTotals, info: JudgeInfo) -> None:
    """Add what a result's judging spent to `totals`: its judge's and a failed attempt's."""
    for spent in (info, info.attempt):
        if spent is None:
            continue
        totals.input_tokens += spent.input_tokens
        totals.cache_write_tokens += spent.cache_write_tokens
        totals.cache_read_tokens += spent.cache_read_tokens
        totals.output_tokens += spent.output_tokens
        if spent.cost_usd is not None:
            totals.cost_usd = (totals.cost_usd or 0.0) + spent.cost_usd


def _transcript(judgment: Judgment, asked: bool) -> list[dict[str, Any]] | None:
    # A cached judgment without one is judged again when one is asked for (pipeline.py).
    return judgment.transcript if asked else None


def _rejection_dict(r: Rejection) -> dict[str, Any]:
    return {"span": dict(r.span), "code": r.code, "reason": r.reason, "round": r.round}


def _rejection(data: dict[str, Any]) -> Rejection:
    return Rejection(
        dict(data.get("span") or {}),
        str(data.get("code", "unclassified")),
        str(data.get("reason", "")),
        int(data.get("round", 1)),
    )


def _span_dict(span: Span) -> dict[str, Any]:
    """A stored span: a continuous score (value judge) is kept with it."""
    out = span.as_dict()
    if span.score is not None:
        out["score"] = span.score
    if span.contrast is not None:
        out["contrast"] = list(span.contrast)
    return out


def _span(data: dict[str, Any]) -> Span:
    return Span(
        int(data["start"]),
        int(data["end"]),
        str(data["label"]),
        float(data["confidence"]),
        str(data.get("evidence", "")),
        data.get("evidence_end"),
        None if data.get("score") is None else float(data["score"]),
        _contrast(data.get("contrast")),
    )


def _contrast_out(span: Span) -> ContrastOut | None:
    if span.contrast is None:
        return None
    rollout, start, end = span.contrast
    return ContrastOut(rollout=rollout, start=start, end=end)


def _contrast(value: Any) -> tuple[int, int, int] | None:
    if not isinstance(value, list) or len(value) != 3:
        return None
    rollout, start, end = (int(v) for v in value)
    return rollout, start, end


def _from_stored_result(stored: dict[str, Any]) -> Judgment:
    """A judgment stored before judgments were (a whole result with its credit)."""
    return Judgment(
        status=stored.get("status", "ok"),
        num_tokens=int(stored.get("num_tokens", 0)),
        info=JudgeInfo.model_validate(stored.get("judge") or {"name": "?", "prompt_version": "?"}),
        spans=[_span(s) for s in stored.get("spans", [])],
        rejected=[_rejection(r) for r in stored.get("rejected_spans", [])],
        error=stored.get("error"),
        rollout_id=str(stored.get("id", "")),
    )
