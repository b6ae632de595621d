"""The run report: a rollout file and its results file as one self-contained HTML page.

Totals (statuses, fallbacks by error, rejections by code, judge share, cost, latency
percentiles), credit by label, a sortable and filterable table of rollouts, and each
rollout's judged trace (`model.build_page`, the API view's model) kept as an inert
data block that the page's one script renders only when the rollout is opened, so a
10,000-rollout report opens in seconds.

Neither file is held in memory: the results are read once for the table (only
their summaries kept, with each line's offset), the rollouts twice (rewards and
groups for the judge share first; then one at a time, decoded and painted, its
result read back by offset), and the page is written as it is rendered.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from judge_service import credit as credit_mod
from judge_service.judgment import add_usage
from judge_service.schemas import Result, Rollout, UsageTotals
from judge_service.trace import last_boxed
from judge_service.trace.decode import Trace
from judge_service.view.html import fragment_html, report_chunks
from judge_service.view.model import NO_TEXT, build_page, credit_of, tone_of
from judge_service.view.source import TraceSource

Decoder = Callable[[Rollout], Trace]


@dataclass
class Row:
    index: int
    id: str
    status: str
    error: str  # the boundary of a fallback's or failure's error ("" when none)
    reward: float | None
    score_sum: float  # Σ of the accepted spans' scores
    credit_sum: float  # Σ_t credit[t]
    rejections: int
    tokens: int
    cost: float | None
    latency_ms: int | None
    judge: str
    offset: int  # of its line in the results file
    has_rollout: bool = False

    @property
    def flags(self) -> str:
        flags = [self.status]
        if self.rejections:
            flags.append("rejected")
        if self.disagrees:
            flags.append("disagree")
        if not self.has_rollout:
            flags.append("no-trace")
        return " ".join(flags)

    @property
    def disagrees(self) -> bool:
        """The judge's net verdict has the other sign from the verifier's: a passing rollout
        whose spans score below zero, or a failing one whose spans score above."""
        if self.reward is None or self.status == "failed":
            return False
        return (self.reward > 0 and self.score_sum < 0) or (self.reward <= 0 and self.score_sum > 0)

    @property
    def search(self) -> str:
        return f"{self.id} {self.status} {self.error} {self.judge}".lower()


@dataclass
class LabelTotal:
    label: str
    tone: str
    spans: int = 0
    tokens: int = 0
    credit: float = 0.0
    confidence: float = 0.0  # sum, for the mean


@dataclass
class RunReport:
    rollouts_path: str
    results_path: str
    rows: list[Row] = field(default_factory=list)
    totals: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: list[tuple[str, int]] = field(default_factory=list)
    rejections: list[tuple[str, int]] = field(default_factory=list)
    labels: list[LabelTotal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_report(rollouts: Path, results: Path, out: Path, decode: Decoder) -> RunReport:
    """Write the run report of `rollouts` and `results` to `out`; returns its model."""
    report = RunReport(str(rollouts), str(results))
    groups = _rewards_and_groups(rollouts, report)
    _add_totals(report, groups, _read_results(results, report, groups))
    tmp = out.with_name(out.name + ".part")
    with tmp.open("w", encoding="utf-8") as handle:
        for chunk in report_chunks(report, _fragments(rollouts, report, decode)):
            handle.write(chunk)
    tmp.replace(out)
    return report


def _rewards_and_groups(
    path: Path, report: RunReport
) -> dict[str, tuple[float | None, str | None, int]]:
    """id -> (reward, group_id, tokens) of every rollout, without keeping its ids."""
    seen: dict[str, tuple[float | None, str | None, int]] = {}
    bad = 0
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                raw = raw.get("rollout", raw) if isinstance(raw, dict) else raw
                reward = raw.get("reward")
                seen[str(raw["id"])] = (
                    float(reward) if isinstance(reward, int | float) else None,
                    None if raw.get("group_id") is None else str(raw["group_id"]),
                    len(raw.get("response_token_ids") or ()),
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                bad += 1
    if bad:
        report.notes.append(f"{bad} lines of the rollouts file are not rollouts (skipped).")
    return seen


@dataclass
class _Tally:
    credit_mass: dict[str, float] = field(default_factory=dict)  # Σ|credit| by rollout id
    latencies: list[int] = field(default_factory=list)
    labels: dict[str, LabelTotal] = field(default_factory=dict)
    codes: Counter[str] = field(default_factory=Counter)
    usage: UsageTotals = field(default_factory=UsageTotals)


def _read_results(
    path: Path, report: RunReport, rollouts: dict[str, tuple[float | None, str | None, int]]
) -> _Tally:
    tally = _Tally()
    where: dict[str, int] = {}
    bad = 0
    offset = 0
    with path.open("rb") as handle:
        for line in handle:
            at, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                result = Result.model_validate_json(line)
            except ValidationError:
                bad += 1
                continue
            row = _row(result, at, rollouts)
            if result.id in where:  # a later line (a --retry) replaces an earlier one
                row.index = where[result.id]
                report.rows[row.index] = row
            else:
                row.index = where[result.id] = len(report.rows)
                report.rows.append(row)
            _count(result, tally)
    if bad:
        report.notes.append(f"{bad} lines of the results file are not results (skipped).")
    return tally


def _row(
    result: Result, offset: int, rollouts: dict[str, tuple[float | None, str | None, int]]
) -> Row:
    credit = credit_of(result)
    judge = result.judge
    usage = UsageTotals()
    if judge is not None:
        add_usage(usage, judge)  # a failed attempt's tokens were paid for too
    return Row(
        index=0,
        id=result.id,
        status=result.status,
        error=(result.error or "").split(":", 1)[0],
        reward=rollouts.get(result.id, (None, None, 0))[0],
        score_sum=sum(s.score for s in result.spans),
        credit_sum=float(credit.sum()),
        rejections=len(result.rejected_spans),
        tokens=result.num_tokens,
        cost=usage.cost_usd,
        latency_ms=judge.latency_ms if judge else None,
        judge=judge.name if judge else "-",
        offset=offset,
        has_rollout=result.id in rollouts,
    )


def _count(result: Result, tally: _Tally) -> None:
    credit = credit_of(result)
    tally.credit_mass[result.id] = float(np.abs(credit).sum())
    if result.judge is not None:
        tally.latencies.append(result.judge.latency_ms)
        tally.codes.update(result.judge.rejected)
        add_usage(tally.usage, result.judge)
    for span in result.spans:
        total = tally.labels.get(span.label)
        if total is None:
            total = tally.labels[span.label] = LabelTotal(
                span.label, tone_of(span.label, span.score)
            )
        total.spans += 1
        total.tokens += span.end - span.start
        total.credit += float(credit[span.start : span.end].sum())
        total.confidence += span.confidence


def _add_totals(
    report: RunReport, rollouts: dict[str, tuple[float | None, str | None, int]], tally: _Tally
) -> None:
    rows = report.rows
    statuses = Counter(row.status for row in rows)
    report.fallbacks = Counter(row.error for row in rows if row.status != "ok").most_common()
    report.rejections = tally.codes.most_common()
    report.labels = sorted(tally.labels.values(), key=lambda t: -abs(t.credit))
    ids = list(rollouts)
    advantages = credit_mod.group_advantages(
        [rollouts[i][0] for i in ids], [rollouts[i][1] for i in ids]
    )
    outcome = sum(
        rollouts[i][2] * abs(adv.value)
        for i, adv in zip(ids, advantages, strict=True)
        if adv is not None and math.isfinite(adv.value) and i in tally.credit_mass
    )
    mass = sum(tally.credit_mass.values())
    share = mass / (outcome + mass) if outcome + mass > 0 else None
    missing = sum(1 for row in rows if not row.has_rollout)
    if missing:
        report.notes.append(f"{missing} results have no rollout in the rollouts file (no trace).")
    unjudged = len(set(rollouts) - {row.id for row in rows})
    if unjudged:
        report.notes.append(f"{unjudged} rollouts have no result yet.")
    usage = tally.usage
    report.totals = [
        ("rollouts judged", str(len(rows))),
        (
            "ok / fallback / failed",
            " / ".join(str(statuses[s]) for s in ("ok", "fallback", "failed")),
        ),
        ("tokens", f"{sum(row.tokens for row in rows):,}"),
        ("judge share of the advantage", "-" if share is None else f"{share:.1%}"),
        ("rollouts with rejections", str(sum(1 for row in rows if row.rejections))),
        ("judge disagrees with the verifier", str(sum(1 for row in rows if row.disagrees))),
        (
            "judge tokens (in / cache write / cache read / out)",
            f"{usage.input_tokens:,} / {usage.cache_write_tokens:,} / "
            f"{usage.cache_read_tokens:,} / {usage.output_tokens:,}",
        ),
        ("cost", "-" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"),
        ("judge latency p50 / p90 / p99 / max", _percentiles(tally.latencies)),
    ]


def _percentiles(values: list[int]) -> str:
    if not values:
        return "-"
    p = np.percentile(np.asarray(values, np.float64), [50, 90, 99, 100])
    return " / ".join(f"{v:.0f} ms" for v in p)


class _Results:
    """The results file read back one line at a time, by the offsets the rows kept."""

    def __init__(self, path: str) -> None:
        self.handle = Path(path).open("rb")  # noqa: SIM115 - closed by _fragments

    def read(self, offset: int) -> Result:
        self.handle.seek(offset)
        return Result.model_validate_json(self.handle.readline())


def _fragments(rollouts: Path, report: RunReport, decode: Decoder) -> Iterator[tuple[int, str]]:
    by_id = {row.id: row for row in report.rows}
    reader = _Results(report.results_path)
    done: set[int] = set()
    try:
        with rollouts.open(encoding="utf-8") as handle:
            for line in handle:
                row, source, note = _rollout_source(line, by_id, decode)
                if row is None or row.index in done:
                    continue
                done.add(row.index)
                yield row.index, _fragment(reader.read(row.offset), source, note)
        for row in report.rows:
            if row.index not in done:
                note = "This result's rollout is not in the rollouts file: no text to paint."
                yield row.index, _fragment(reader.read(row.offset), None, note)
    finally:
        reader.handle.close()


def _fragment(result: Result, source: TraceSource | None, note: str) -> str:
    try:
        return fragment_html(build_page(result, source, note=note or NO_TEXT))
    except Exception as exc:  # one odd line of a user's file must not lose the whole report
        note = f"This rollout could not be painted ({type(exc).__name__}: {exc})."
        return fragment_html(build_page(result, None, note=note))


def _rollout_source(
    line: str, by_id: dict[str, Row], decode: Decoder
) -> tuple[Row | None, TraceSource | None, str]:
    try:
        raw = json.loads(line)
        raw = raw.get("rollout", raw) if isinstance(raw, dict) else raw
        row = by_id.get(str(raw["id"])) if isinstance(raw, dict) else None
    except (ValueError, KeyError):
        return None, None, ""
    if row is None:
        return None, None, ""
    try:
        rollout = Rollout.model_validate(raw)
        trace = decode(rollout)
    except ValidationError as exc:
        return row, None, f"The rollout line is not a valid rollout: {exc.errors()[0]['msg']}"
    except Exception as exc:  # a tokenizer that cannot be loaded: the page says which
        return row, None, f"The rollout could not be decoded: {exc}"
    final = rollout.final_answer
    if final is None:
        boxed = last_boxed(trace.text)
        final = boxed.content if boxed else None
    source = TraceSource.of(
        trace,
        problem=rollout.problem,
        final_answer=final,
        reference_answer=rollout.reference_answer,
        reward=rollout.reward,
    )
    return row, source, ""
