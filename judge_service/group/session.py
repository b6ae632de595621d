"""One LLM session reading a whole group, and its submission split back into rollouts.

The group is shown once (`view`: the problem once, each rollout a block with ⟦r.n⟧
markers, shared prefixes once) and the provider caches that prefix across the session's
turns, so a group of G costs one system prompt, one problem and the distinct tokens,
where G sessions would pay each of those G times.

Each submitted span names its rollout; `GroupCheck` sends it to that rollout's own
`Validator` (the single-rollout rules, contrasts checked against the shown siblings), and
copies a span inside a shared prefix to every rollout holding those tokens. The
rejections go back to the model once for repair, as in a single session.

The pipeline still judges each rollout on its own (cache, validation again, credit):
`MemberJudge` is the judge it runs for rollout r, answering with r's share of the one
session (`SharedSession`, started by the first rollout that is not served from the cache,
so a group judged before costs nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from judge_service.errors import JudgeError
from judge_service.group.contrast import ContrastCheck
from judge_service.group.tools import GroupSearchTool, GroupSubmitTool, GroupViewTokensTool
from judge_service.group.view import Shared
from judge_service.judges.base import (
    Judge,
    JudgeLimits,
    JudgeOutcome,
    JudgeRequest,
    SpanCheck,
    Usage,
)
from judge_service.judges.llm.llm_judge import LLMJudge, tool_spec
from judge_service.spans import MALFORMED, TOO_MANY_SPANS, Rejection, ValidationReport, as_int
from judge_service.tools.base import Tool
from judge_service.tools.trace_tools import SUBMIT_SPANS, SearchTraceTool, ViewTokensTool
from judge_service.validate import Validator

_KEYS = ("start", "end", "label", "confidence", "evidence", "evidence_end", "contrast")
Split = dict[int, list[dict[str, Any]]]


@dataclass
class GroupCheck:
    """The session's `SpanCheck`: each span to its rollout's validator, prefix copies
    added; every round's split kept for the pipeline's own rounds."""

    validators: Mapping[int, Validator]  # by group index, the shown rollouts
    shared: Shared
    rounds: list[Split] = field(default_factory=list)

    def split(self, raw_spans: Sequence[Any], round: int) -> tuple[Split, list[Rejection]]:
        out: Split = {r: [] for r in self.validators}
        seen: set[tuple[object, ...]] = set()
        refused: list[Rejection] = []
        cap = sum(v.limits.max_spans for v in self.validators.values())
        for index, raw in enumerate(raw_spans):
            if index >= cap:  # bounded before any work per span, as a single check is
                refused.append(Rejection(_shown(raw), TOO_MANY_SPANS, f"over {cap} spans", round))
                continue
            rollout = as_int(raw.get("rollout")) if isinstance(raw, Mapping) else None
            if rollout is None or rollout not in self.validators:
                reason = f"rollout must be one of the group's rollouts {sorted(self.validators)}"
                refused.append(Rejection(_shown(raw), MALFORMED, reason, round))
                continue
            span = {k: raw[k] for k in _KEYS if k in raw}  # only what validation reads
            end = as_int(span.get("end"))
            holders = [rollout, *(self.shared.copies(rollout, end) if end is not None else [])]
            # repr: a hostile start may be a list (unhashable); validation then refuses it.
            ident = tuple(repr(span.get(k))[:100] for k in ("start", "end", "label"))
            for r in holders:
                key = (r, *ident)
                if key not in seen:  # the same span on two holders of a prefix: once
                    seen.add(key)
                    out[r].append(span)
        return out, refused

    def __call__(self, raw_spans: Sequence[Any]) -> ValidationReport:
        round = len(self.rounds) + 1
        split, refused = self.split(raw_spans, round)
        self.rounds.append(split)
        report = ValidationReport(rejected=refused)
        for r, spans in split.items():
            own = self.validators[r].check(spans, round=round)
            report.accepted += own.accepted
            report.rejected += [
                Rejection({"rollout": r, **x.span}, x.code, f"rollout {r}: {x.reason}", x.round)
                for x in own.rejected
            ]
        return report


def _shown(raw: Any) -> dict[str, Any]:
    return dict(raw) if isinstance(raw, Mapping) else {"span": repr(raw)[:200]}


@dataclass(frozen=True)
class Reading:
    """The session's outcome and each round's spans by rollout."""

    outcome: JudgeOutcome
    rounds: list[Split]


def group_tools(judge: LLMJudge, labels: Sequence[str], count: int) -> dict[str, Tool]:
    """The judge's tools with view_tokens and search_trace taking a rollout, and the group's
    submit_spans (`count` rollouts' spans in one submission)."""
    tools: dict[str, Tool] = {}
    for name, tool in judge.tools.items():
        if isinstance(tool, ViewTokensTool):
            tools[name] = GroupViewTokensTool(tool)
        elif isinstance(tool, SearchTraceTool):
            tools[name] = GroupSearchTool(tool)
        else:
            tools[name] = tool
    limits = replace(judge.span_limits, max_spans=judge.span_limits.max_spans * count)
    tools[SUBMIT_SPANS] = GroupSubmitTool(labels, limits)
    return dict(sorted(tools.items()))


def group_version(judge: LLMJudge, tools: Mapping[str, Tool]) -> str:
    """The single session's prompt version, the group wording and tools added."""
    specs = tuple(tool_spec(t) for t in tools.values())
    base = judge.prompts.version_for(specs)
    return f"{base}.group-{judge.prompts.extra_digest[:8]}"


def group_limits(limits: JudgeLimits, count: int) -> JudgeLimits:
    """The session's budget: the tool calls and output of `count` sessions, within one
    rollout's turns and deadline (a training step waits for the group, not G in a row)."""
    return replace(
        limits,
        max_tool_calls=limits.max_tool_calls * count,
        max_output_tokens=limits.max_output_tokens * count,
    )


def share(usage: Usage, parts: int, index: int) -> Usage:
    """Rollout `index`'s part of a session's usage split `parts` ways (the parts sum to it)."""

    def part(total: int) -> int:
        return total // parts + (1 if index < total % parts else 0)

    return Usage(
        part(usage.input_tokens),
        part(usage.cache_write_tokens),
        part(usage.cache_read_tokens),
        part(usage.output_tokens),
    )


class SharedSession:
    """The group's one session, run once for every rollout that asks (the first starts it;
    a rollout whose request is cancelled does not cancel it for the others)."""

    def __init__(self, run: Callable[[], Awaitable[Reading]]) -> None:
        self._run = run
        self._task: asyncio.Task[Reading] | None = None

    async def reading(self) -> Reading:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return await asyncio.shield(self._task)


class MemberJudge(Judge):
    """The judge the pipeline runs for rollout `index` of a group read in one session."""

    def __init__(
        self,
        inner: LLMJudge,
        session: SharedSession,
        *,
        index: int,
        position: int,
        parts: int,
        version: str,
        group_key: str,
        contrast: ContrastCheck,
    ) -> None:
        self.inner = inner
        self.session = session
        self.index = index  # in the group
        self.position, self.parts = position, parts  # among the shown rollouts
        self.name = inner.name
        self.prompt_version = version
        self.group_key = group_key
        self._contrast = contrast

    def key_material(
        self, label_scores: Mapping[str, float], limits: JudgeLimits
    ) -> dict[str, object]:
        # What the session saw besides this rollout (siblings, hints) changes its spans.
        return {**self.inner.key_material(label_scores, limits), "group": self.group_key}

    def contrast_check(self) -> ContrastCheck | None:
        return self._contrast

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        try:
            reading = await self.session.reading()
        except JudgeError as exc:
            # The session's spend goes with one rollout's attempt; each falls back alone.
            partial = exc.partial if isinstance(exc.partial, JudgeOutcome) else None
            if partial is not None:
                raise exc.with_partial(self._part(partial)) from exc
            raise
        for split in reading.rounds:  # as the session checked them: the result keeps
            # each round's rejections; in a thread, as the loop checks a submission
            await asyncio.to_thread(check, split.get(self.index, []))
        final = reading.rounds[-1].get(self.index, []) if reading.rounds else []
        return replace(self._part(reading.outcome), spans=list(final))

    def _part(self, outcome: JudgeOutcome) -> JudgeOutcome:
        cost = outcome.cost_usd
        return JudgeOutcome(
            spans=[],
            turns=outcome.turns,
            tool_calls=dict(outcome.tool_calls),
            usage=share(outcome.usage, self.parts, self.position),
            transcript=list(outcome.transcript),
            cost_usd=None if cost is None else cost / self.parts,
        )
