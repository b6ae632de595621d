"""The page model of one judged trace: what a person reads to see why a token got its credit.

One function, `build_page`, turns a result and its trace (`TraceSource`) into plain
data; the API view and the run report render the same model with the same template.
The text is cut into pieces (`pieces.cut`) at every boundary that changes how it
looks, and at the ⟦n⟧ marker positions the judge saw. Text is shown in the judge's
view form (`escape_chars`: one char for one, so offsets hold): a ⟦n⟧ written by
the policy shows as 〚n〛, exactly as the judge read it, and control or bidi
characters cannot reorder what is shown.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.schemas import CreditRun, Result
from judge_service.trace.markers import escape_chars
from judge_service.view.pieces import Piece, RejectedRow, SpanRow, cut, level_of
from judge_service.view.source import TraceSource

NO_TEXT = (
    "The trace text was not kept with this judgment (it was judged before the service "
    "stored text with judgments): spans are shown by token index only."
)
# CSS classes by label (the colour); labels outside the default set are coloured by the
# sign of their score, so a custom label never becomes a class name.
TONES = {label: "t-" + label.replace("_", "-") for label in DEFAULT_LABEL_SCORES}
TRANSCRIPT_ENTRY_CHARS = 20_000  # one tool result can be a whole file; the rest is cut
EXCERPT_CHARS = 240

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Rect:
    """One span on the credit strip (x and width in thousandths of the response)."""

    x: float
    width: float
    tone: str
    level: int
    rejected: bool
    title: str


@dataclass(frozen=True)
class Entry:
    """One transcript entry: a summary line and its JSON."""

    summary: str
    body: str


@dataclass
class Page:
    id: str
    key: str | None
    status: str
    error: str | None
    num_tokens: int
    facts: list[tuple[str, str]]
    problem: str
    final_answer: str | None
    reference_answer: str | None
    reward: float | None
    text_note: str | None  # why the text is not painted
    pieces: list[Piece]
    strip: list[Rect]
    spans: list[SpanRow]
    rejected: list[RejectedRow]
    transcript: list[Entry] | None


def build_page(
    result: Result, source: TraceSource | None, *, key: str | None = None, note: str = NO_TEXT
) -> Page:
    """The page of `result` painted over `source` (None: shown without text, saying `note`)."""
    n = result.num_tokens
    if source is not None and source.num_tokens != n:
        note = (
            f"The trace has {source.num_tokens} tokens but the result {n}: the text is not "
            "painted, as the spans would fall on the wrong characters."
        )
        source = None
    credit = credit_of(result)
    peak = float(np.abs(credit).max()) if credit.shape[0] else 0.0
    offsets = None if source is None else source.offsets
    spans = [_span_row(s, credit, peak, offsets, source) for s in result.spans]
    rejected = [
        _rejected_row(r.span, r.code, r.reason, r.round, n, offsets) for r in result.rejected_spans
    ]
    return Page(
        id=result.id,
        key=key or result.cache_key,
        status=result.status,
        error=result.error,
        num_tokens=n,
        facts=_facts(result),
        problem=source.problem if source else "",
        final_answer=source.final_answer if source else None,
        reference_answer=source.reference_answer if source else None,
        reward=source.reward if source else None,
        text_note=None if source is not None else note,
        pieces=[] if source is None else cut(source, spans, rejected, credit, peak),
        strip=_strip(spans, rejected, n, peak),
        spans=spans,
        rejected=rejected,
        transcript=None if result.transcript is None else _entries(result.transcript),
    )


def tone_of(label: str, score: float) -> str:
    if label in TONES:
        return TONES[label]
    return "t-pos" if score > 0 else "t-neg" if score < 0 else "t-zero"


def credit_of(result: Result) -> FloatArray:
    """The result's per-token credit, whatever its encoding (zeros when it has none)."""
    n, payload = result.num_tokens, result.credit
    out = np.zeros(n, np.float64)
    if payload is None:
        return out
    if isinstance(payload, str):
        values = np.frombuffer(base64.b64decode(payload), "<f4").astype(np.float64)
        return values if values.shape[0] == n else out
    for item in payload:
        if isinstance(item, CreditRun | dict):
            run = item if isinstance(item, CreditRun) else CreditRun.model_validate(item)
            out[max(0, run.start) : min(n, run.end)] = run.value
        else:  # dense
            values = np.asarray(payload, np.float64)
            return values if values.shape[0] == n else out
    return out


def _span_row(
    span: Any,
    credit: FloatArray,
    peak: float,
    offsets: npt.NDArray[np.int64] | None,
    source: TraceSource | None,
) -> SpanRow:
    chars = None
    excerpt = ""
    n = credit.shape[0]
    # a results file is the user's: a span outside its trace is listed, not painted
    if offsets is not None and source is not None and 0 <= span.start < span.end <= n:
        chars = (int(offsets[span.start]), int(offsets[span.end]))
        excerpt = escape_chars(source.text[chars[0] : chars[1]])
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[: EXCERPT_CHARS // 2] + " … " + excerpt[-EXCERPT_CHARS // 2 :]
    value = float(credit[span.start]) if 0 <= span.start < n else 0.0
    return SpanRow(
        start=span.start,
        end=span.end,
        label=span.label,
        tone=tone_of(span.label, span.score),
        score=span.score,
        confidence=span.confidence,
        evidence=span.evidence,
        evidence_end=span.evidence_end,
        chars=chars,
        credit=value,
        excerpt=excerpt,
    )


def _rejected_row(
    span: dict[str, Any],
    code: str,
    reason: str,
    round_: int,
    n: int,
    offsets: npt.NDArray[np.int64] | None,
) -> RejectedRow:
    start, end = span.get("start"), span.get("end")
    valid = (
        isinstance(start, int)
        and isinstance(end, int)
        and not isinstance(start, bool)
        and not isinstance(end, bool)
        and 0 <= start < end <= n
    )
    chars = None
    if valid and offsets is not None:
        chars = (int(offsets[start]), int(offsets[end]))
    return RejectedRow(
        start=start if valid else None,
        end=end if valid else None,
        label=str(span.get("label", "?")),
        code=code,
        reason=reason,
        round=round_,
        chars=chars,
        submitted=json.dumps(span, ensure_ascii=False, default=str),
    )


def _strip(spans: list[SpanRow], rejected: list[RejectedRow], n: int, peak: float) -> list[Rect]:
    total = max(n, 1)
    rects = [
        Rect(
            x=1000 * row.start / total,
            width=max(1.0, 1000 * (row.end - row.start) / total),
            tone=row.tone,
            level=max(1, level_of(row.credit, peak)),
            rejected=False,
            title=f"[{row.start}, {row.end}) {row.label} {row.score:+g}",
        )
        for row in spans
    ]
    rects.extend(
        Rect(
            x=1000 * rej.start / total,
            width=max(1.0, 1000 * (rej.end - rej.start) / total),
            tone="",
            level=0,
            rejected=True,
            title=f"rejected [{rej.start}, {rej.end}) {rej.label} ({rej.code})",
        )
        for rej in rejected
        if rej.start is not None and rej.end is not None
    )
    return rects


def _facts(result: Result) -> list[tuple[str, str]]:
    facts = [("status", result.status), ("tokens", str(result.num_tokens))]
    judge = result.judge
    if judge is not None:
        facts += [
            ("judge", f"{judge.name} ({judge.prompt_version})"),
            (
                "turns / tool calls",
                f"{judge.turns} / {json.dumps(judge.tool_calls, sort_keys=True)}",
            ),
            (
                "usage (in / cache write / cache read / out)",
                f"{judge.input_tokens} / {judge.cache_write_tokens} / {judge.cache_read_tokens}"
                f" / {judge.output_tokens}",
            ),
            ("cost", "-" if judge.cost_usd is None else f"${judge.cost_usd:.4f}"),
            ("latency", f"{judge.latency_ms} ms (queued {judge.queue_ms} ms)"),
            ("rejected by code", json.dumps(judge.rejected, sort_keys=True)),
        ]
        if judge.attempt is not None:
            facts.append(("failed attempt", f"{judge.attempt.name}: {judge.attempt.error}"))
    facts.append(("credit scale (κ cap)", f"{result.credit_scale:g}"))
    if result.cache_key:
        facts.append(("cache key", result.cache_key))
    return facts


def _entries(transcript: list[dict[str, Any]]) -> list[Entry]:
    entries = []
    for item in transcript:
        kind = str(item.get("type", "?"))
        summary = kind
        if "turn" in item:
            summary += f" (turn {item['turn']})"
        if kind == "tool":
            summary += f": {item.get('name', '?')}" + ("" if item.get("ok", True) else " (error)")
        elif kind == "assistant":
            calls = [
                str(c.get("name", "?")) for c in item.get("tool_calls") or [] if isinstance(c, dict)
            ]
            if calls:
                summary += ": calls " + ", ".join(calls)
        body = json.dumps(item, ensure_ascii=False, indent=2, default=str)
        if len(body) > TRANSCRIPT_ENTRY_CHARS:
            body = (
                body[:TRANSCRIPT_ENTRY_CHARS]
                + f"\n… ({len(body) - TRANSCRIPT_ENTRY_CHARS} more chars)"
            )
        entries.append(Entry(escape_chars(summary), escape_chars(body)))
    return entries
