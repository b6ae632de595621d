"""The group session's tools: the single-trace tools with a rollout index.

`view_tokens` and `search_trace` keep their names (the loop's repair phase allows them)
and gain ``rollout``; `search_trace` without one searches every shown rollout.
`submit_spans` takes each span's ``rollout`` and an optional ``contrast``. Every output is
the single-trace tool's on that rollout, its ⟦n⟧ markers rewritten ⟦r.n⟧; so the same
escaping applies (no forged marker, fence or control character reaches the model).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_service.spans import SpanLimits
from judge_service.tools.base import Tool, ToolContext, ToolResult
from judge_service.tools.trace_tools import SearchTraceTool, SubmitSpansTool, ViewTokensTool
from judge_service.trace.decode import Trace

_MARKER = re.compile(r"⟦(\d+)⟧")
_RANGE = re.compile(r"tokens \[")
# Hits per rollout when a search covers the whole group (one rollout: the tool's own cap).
GROUP_HITS = 5


@dataclass
class GroupContext(ToolContext):
    """The shown rollouts by group index; `trace` is the first one's (the base's field)."""

    traces: Mapping[int, Trace] = field(default_factory=dict)


def _rollout(arguments: Mapping[str, Any], context: ToolContext) -> tuple[int, Trace] | str:
    traces = context.traces if isinstance(context, GroupContext) else {}
    value = arguments.get("rollout")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value not in traces:
        return f"Error: rollout must be one of the group's rollouts {sorted(traces)}."
    return value, traces[value]


def _marked(rollout: int, text: str) -> str:
    text = _MARKER.sub(lambda m: f"⟦{rollout}.{m.group(1)}⟧", text)
    return _RANGE.sub(f"rollout {rollout} tokens [", text)


def _one(context: ToolContext, trace: Trace) -> ToolContext:
    return ToolContext(context.rollout_id, trace, context.calls, context.max_calls_per_tool)


class GroupViewTokensTool(Tool):
    name = "view_tokens"

    def __init__(self, inner: ViewTokensTool) -> None:
        self.inner = inner
        self.description = (
            "Show the exact text of tokens [start, end) of one rollout (end exclusive) with a "
            f"⟦r.n⟧ marker before every token. At most {inner.max_tokens} tokens per call."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "rollout": {"type": "integer", "minimum": 0, "description": "the rollout r"},
                **inner.parameters["properties"],
            },
            "required": ["rollout", "start", "end"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        found = _rollout(arguments, context)
        if isinstance(found, str):
            return ToolResult(False, found)
        rollout, trace = found
        result = await self.inner.call(
            {k: v for k, v in arguments.items() if k != "rollout"}, _one(context, trace)
        )
        return ToolResult(result.ok, _marked(rollout, result.content), result.data)


class GroupSearchTool(Tool):
    name = "search_trace"

    def __init__(self, inner: SearchTraceTool) -> None:
        self.inner = inner
        self.each = SearchTraceTool(GROUP_HITS, inner.context_chars, inner.regex_timeout_s)
        self.description = (
            "Find a literal string (or, with regex=true, a regular expression) in one rollout, "
            "or without `rollout` in every rollout of the group. Hits come as token ranges "
            f"with their text (the hit between ⟪ ⟫); up to {inner.max_hits} in one rollout, "
            f"{GROUP_HITS} per rollout across the group."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "rollout": {"type": "integer", "minimum": 0, "description": "omit: all"},
                **inner.parameters["properties"],
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        rest = {k: v for k, v in arguments.items() if k != "rollout"}
        if arguments.get("rollout") is not None:
            found = _rollout(arguments, context)
            if isinstance(found, str):
                return ToolResult(False, found)
            rollout, trace = found
            result = await self.inner.call(rest, _one(context, trace))
            return ToolResult(result.ok, _marked(rollout, result.content), result.data)
        traces = context.traces if isinstance(context, GroupContext) else {}
        parts: list[str] = []
        hits = 0
        for rollout, trace in sorted(traces.items()):
            result = await self.each.call(rest, _one(context, trace))
            if not result.ok:  # a bad pattern is bad for every rollout: say it once
                return result
            hits += int(result.data.get("hits", 0))
            parts.append(f"Rollout {rollout}: {_marked(rollout, result.content)}")
        return ToolResult(True, "\n".join(parts), {"hits": hits})


class GroupSubmitTool(SubmitSpansTool):
    """submit_spans with each span's rollout and an optional contrast."""

    def __init__(self, labels: Sequence[str], limits: SpanLimits | None = None) -> None:
        super().__init__(labels, limits)
        self.description = (
            "Submit your labelled spans for the whole group; this ends the review. Each span "
            "names its rollout and is checked against that rollout alone, by the rules of the "
            "single-rollout review: "
            + self.description.split("; this ends the review. ", 1)[1]
            + " A span may add a contrast: a sibling's tokens {rollout, start, end, quote} "
            "that make the same step differently (quote at least 8 characters of them). The "
            "span's own evidence must still quote its own rollout. To overrule a divergence "
            "hint with a non-negative label, the span must cite a correct sibling making the "
            "same step as contrast."
        )
        items = self.parameters["properties"]["spans"]["items"]
        items["properties"] = {
            "rollout": {"type": "integer", "minimum": 0},
            **items["properties"],
            "contrast": {
                "type": "object",
                "properties": {
                    "rollout": {"type": "integer", "minimum": 0},
                    "start": {"type": "integer", "minimum": 0},
                    "end": {"type": "integer", "minimum": 1},
                    "quote": {"type": "string", "minLength": 1},
                },
                "required": ["rollout", "start", "end", "quote"],
                "additionalProperties": False,
            },
        }
        items["required"] = ["rollout", *items["required"]]
