"""``judge: "value:<model>"``: RREDCoT-style credit from the model's own value estimates.

V(cut) is the probe value at a cut: the mean log-probability of the reference
answer's tokens after the forced ending (probe/endings.py), given the problem and
the trace up to the cut. Cuts are the trace's own lines (marker positions: line
starts, and every 64 tokens inside a long line), which are also the lines span
validation counts. Each segment between consecutive cuts becomes a span scored
V(end) - V(start), so the scores of a trace's segments telescope to V(T) - V(0).

The spans look like judge output: labelled by sign (``valid_progress`` up,
``invalid`` down; a segment with no change is left out), confidence 1, evidence
the segment's own first and last characters (what a reader of the result sees).
Their scores are continuous (`JudgeOutcome.scores`) rather than the label's, and
λ and κ apply to them as to any judge's.

They are not claims, so they skip the claim rules (`carries_claims` is false:
evidence anchoring, point and region sizes, the per-line flood limit, the
arithmetic and final-answer grounding; validate.py) and keep the structural
checks (shape, bounds, no overlaps, the span count limit). Until value-v2 they
were validated like an LLM judge's, and on the bundled SmolLM2 samples some were
rejected (mostly ``contradicts_arithmetic``: V rose across a false link, or fell
across lines the checker proves true; once ``evidence_not_anchored``): each
rejection dropped a V difference, so the sum no longer telescoped to V(T) - V(0).
A V that rises over a false line is the model's estimate being wrong, which is
what this judge exists to report, not a judge asserting a falsehood; the
grounding rules are there for the latter.

Blank lines join the segment before them (the first one, the segment after) and
a trace of more lines than JUDGE_MAX_SPANS is cut into that many steps of whole
lines, so the span count limit never cuts a segment off.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from judge_service import labels as L
from judge_service.config import Settings
from judge_service.errors import InputError, LimitError, ValueJudgeError
from judge_service.judges.base import Judge, JudgeLimits, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.methods.models import MODELS, ScorerModel, check_model
from judge_service.trace.decode import Trace
from judge_service.trace.markers import marker_positions

if TYPE_CHECKING:
    from judge_service.schemas import Rollout

MIN_QUOTE = 8  # evidence of at least the validator's shortest quote, as an LLM's would be


def segments(trace: Trace, max_segments: int) -> list[tuple[int, int]]:
    """[start, end) segments tiling the trace: its lines, blank ones joined to a neighbour,
    grouped into at most `max_segments` steps."""
    n = trace.num_tokens
    if n == 0:
        return []
    cuts = [*marker_positions(trace), n]
    lines = [(a, b) for a, b in itertools.pairwise(cuts) if a < b]
    merged: list[list[int]] = []
    for a, b in lines:
        if merged and not trace.span_text(a, b).strip():
            merged[-1][1] = b  # a blank line joins the segment before it
        elif merged and not trace.span_text(*merged[-1]).strip():
            merged[-1][1] = b  # a leading blank segment joins the first real line
        else:
            merged.append([a, b])
    if len(merged) > max_segments:
        step = math.ceil(len(merged) / max_segments)
        merged = [
            [merged[i][0], merged[min(i + step, len(merged)) - 1][1]]
            for i in range(0, len(merged), step)
        ]
    return [(a, b) for a, b in merged]


def _head(text: str) -> str:
    """The segment's opening: its first line, with more lines while under a full quote."""
    out = ""
    for line in text.splitlines(keepends=True):
        out += line
        if len(out.strip()) >= MIN_QUOTE:
            break
    return out


def _tail(text: str) -> str:
    """The segment's close: its last line, with lines before it while under a full quote."""
    out = ""
    for line in reversed(text.splitlines(keepends=True)):
        out = line + out
        if len(out.strip()) >= MIN_QUOTE:
            break
    return out


def value_spans(
    trace: Trace, values: Mapping[int, float], bounds: list[tuple[int, int]]
) -> tuple[list[dict[str, Any]], dict[tuple[int, int], float]]:
    """Raw spans (for the structural checks) and their continuous scores, by (start, end)."""
    spans: list[dict[str, Any]] = []
    scores: dict[tuple[int, int], float] = {}
    for a, b in bounds:
        delta = float(values[b] - values[a])
        if delta == 0.0:
            continue
        text = trace.span_text(a, b)
        span: dict[str, Any] = {
            "start": a,
            "end": b,
            "label": L.VALID_PROGRESS if delta > 0 else L.INVALID,
            "confidence": 1.0,
            "evidence": _head(text),
        }
        tail = _tail(text)
        if tail != text:
            span["evidence_end"] = tail
        spans.append(span)
        scores[(a, b)] = delta
    return spans, scores


def trace_values(
    model: ScorerModel, request: JudgeRequest, cuts: list[int], settings: Settings
) -> dict[int, float]:
    """V at each policy boundary in `cuts`: the reference's mean log-prob after the ending."""
    from judge_service.methods.models import check_length
    from judge_service.probe.endings import encode_suffix, resolve_family

    reference = (request.reference_answer or "").strip()
    prompt = model.aligner.prompt_ids(request.problem)
    aligned = model.align(request.trace, request.tokenizer, prompt)
    check_length(len(aligned.context_ids), settings, "response_token_ids")
    family = resolve_family(model.scorer.hf_tokenizer, model.scorer.model_type)
    suffix = encode_suffix(model.aligner.probe, family.default, reference)
    with model.lock:
        scores = model.scorer.score_cuts(
            aligned.context_ids, [aligned.context_cut(c) for c in cuts], [suffix]
        )
    return {cut: float(v) for cut, v in zip(cuts, scores.mean_logprob[:, 0], strict=True)}


class ValueJudge(Judge):
    # v2: its spans skip the claim rules (validation changed, so must the cache key).
    prompt_version = "value-v2"
    carries_claims = False
    # No ⟦n⟧ view to mark, and no line verdicts to build ahead: the claim rules that read
    # them never see this judge's spans.
    reads_view = False

    def __init__(self, model: str, settings: Settings) -> None:
        check_model(model, settings, "options.judge")
        self.model = model
        self.name = f"value:{model}"
        self.settings = settings

    def key_material(
        self, label_scores: Mapping[str, float], limits: JudgeLimits
    ) -> dict[str, object]:
        # Scores are the model's, not the labels'; only the validation of labels (their
        # names) and the span count limit matter.
        return {**super().key_material(label_scores, limits), "max_spans": self.settings.max_spans}

    def check_input(self, rollout: Rollout, field: str) -> None:
        where = f"{field}." if field else ""
        if not (rollout.reference_answer or "").strip():
            raise InputError(
                "the value judge needs the reference answer (V is its log-probability)",
                field=f"{where}reference_answer",
            )
        if len(rollout.response_token_ids) > self.settings.scorer_max_tokens:
            raise LimitError(
                f"{len(rollout.response_token_ids)} tokens exceed the scorer's limit of "
                f"{self.settings.scorer_max_tokens} (JUDGE_SCORER_MAX_TOKENS)",
                field=f"{where}response_token_ids",
            )

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        if not (request.reference_answer or "").strip():
            raise ValueJudgeError("no reference answer to value")
        try:
            model = await MODELS.aget(self.model, self.settings, "options.judge")
        except InputError as exc:  # a judge failure: the fallback stands in, with this error
            raise ValueJudgeError(exc.message) from exc
        return await asyncio.to_thread(self._judge, model, request)

    def _judge(self, model: ScorerModel, request: JudgeRequest) -> JudgeOutcome:
        bounds = segments(request.trace, self.settings.max_spans)
        if not bounds:
            return JudgeOutcome(spans=[], turns=0)
        cuts = sorted({0, *(a for a, _ in bounds), *(b for _, b in bounds)})
        try:
            values = trace_values(model, request, cuts, self.settings)
        except LimitError as exc:
            raise ValueJudgeError(f"{exc.field}: {exc.message}") from exc
        spans, scores = value_spans(request.trace, values, bounds)
        return JudgeOutcome(spans=spans, turns=0, scores=scores)
