"""The judge's tools over the trace itself: view_tokens, search_trace, submit_spans.

The trace is untrusted, so everything these tools show of it goes through
`escape_view_text` (no forged ⟦n⟧ markers, no raw control characters), and
positions are always computed by the service from char offsets, never taken
from the text. Bad arguments come back as ``ok=False`` results with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import regex  # type: ignore[import-untyped]  # the stdlib `re` has no timeout

from judge_service.spans import SpanLimits, as_int
from judge_service.tools.base import Tool, ToolContext, ToolResult
from judge_service.trace.decode import Trace
from judge_service.trace.markers import escape_view_text, mark_every_token

SUBMIT_SPANS = "submit_spans"


def _int_arg(arguments: dict[str, Any], name: str) -> int | None:
    """`spans.as_int`, and digits sent as a string (models do)."""
    value = arguments.get(name)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return as_int(value)


def marked_tokens(trace: Trace, start: int, end: int) -> str:
    """`mark_every_token`, escaping the range once instead of token by token (hot path)."""
    low, high = trace.char_range(start, end)
    raw = trace.text[low:high]
    escaped = escape_view_text(raw)
    if len(escaped) != len(raw):  # an escape that is not one char for one: no shortcut
        return mark_every_token(trace, start, end)
    cuts = (trace.offsets[start : end + 1] - low).tolist()
    return "".join(f"⟦{start + i}⟧{escaped[cuts[i] : cuts[i + 1]]}" for i in range(end - start))


class ViewTokensTool(Tool):
    """Tokens [start, end) with a marker before every token, capped at `max_tokens`."""

    name = "view_tokens"

    def __init__(self, max_tokens: int = 400, max_chars: int = 12_000) -> None:
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.description = (
            "Show the exact text of tokens [start, end) (end exclusive) with a ⟦n⟧ marker "
            f"before every token, to find exact span boundaries. At most {max_tokens} tokens "
            "per call; longer ranges are cut."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "start": {"type": "integer", "minimum": 0, "description": "first token index"},
                "end": {"type": "integer", "minimum": 1, "description": "one past the last"},
            },
            "required": ["start", "end"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        trace = context.trace
        total = trace.num_tokens
        start, end = _int_arg(arguments, "start"), _int_arg(arguments, "end")
        if start is None or end is None:
            return ToolResult(False, "Error: start and end must be integers (token indices).")
        if not 0 <= start < total or end <= start:
            return ToolResult(
                False, f"Error: need 0 <= start < end and start < {total}; got [{start}, {end})."
            )
        stop = min(end, total, start + self.max_tokens)
        text = marked_tokens(trace, start, stop)
        notes = []
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
            notes.append(f"output cut at {self.max_chars} characters")
        if stop < end:
            notes.append(f"range cut to [{start}, {stop}); the trace has {total} tokens")
        header = f"tokens [{start}, {stop}) of {total}" + (
            f" ({'; '.join(notes)})" if notes else ""
        )
        return ToolResult(True, f"{header}:\n{text}", {"start": start, "end": stop})


class SearchTraceTool(Tool):
    """Occurrences of a literal string or regex, reported as token ranges with context."""

    name = "search_trace"

    def __init__(
        self, max_hits: int = 20, context_chars: int = 60, regex_timeout_s: float = 1.0
    ) -> None:
        self.max_hits = max_hits
        self.context_chars = context_chars
        self.regex_timeout_s = regex_timeout_s
        self.description = (
            "Find a literal string (or, with regex=true, a regular expression) in the trace. "
            f"Returns up to {max_hits} hits, each as its token range [start, end) with the "
            "surrounding text (the hit between ⟪ ⟫)."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "maxLength": 200},
                "regex": {"type": "boolean", "default": False},
                "ignore_case": {"type": "boolean", "default": False},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern or len(pattern) > 200:
            return ToolResult(False, "Error: pattern must be a string of 1 to 200 characters.")
        use_regex = arguments.get("regex", False) is True
        flags = regex.IGNORECASE if arguments.get("ignore_case", False) is True else 0
        try:
            compiled = regex.compile(pattern if use_regex else regex.escape(pattern), flags)
        except regex.error as exc:
            return ToolResult(False, f"Error: invalid regular expression: {exc}")
        try:
            if use_regex:  # off the event loop, with a timeout: a pathological regex must not
                spans = await asyncio.to_thread(self._find, compiled, context.trace.text)
            else:  # stall other rollouts; a literal search is linear, so it runs inline
                spans = self._find(compiled, context.trace.text)
        except TimeoutError:
            return ToolResult(False, f"Error: the search took over {self.regex_timeout_s:g} s.")
        return ToolResult(True, self._format(pattern, spans, context.trace), {"hits": len(spans)})

    def _find(self, compiled: Any, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for match in compiled.finditer(text, concurrent=True, timeout=self.regex_timeout_s):
            if match.end() > match.start():  # zero-width matches name no tokens
                found.append((match.start(), match.end()))
            if len(found) > 10_000:
                break
        return found

    def _format(self, pattern: str, spans: Sequence[tuple[int, int]], trace: Trace) -> str:
        if not spans:
            return f"No hits for {pattern!r}."
        lines = [f"{len(spans)} hit(s) for {pattern!r}:"]
        text, width = trace.text, self.context_chars
        for number, (begin, finish) in enumerate(spans[: self.max_hits], start=1):
            first, last = trace.tokens_for_chars(begin, finish)
            before = escape_view_text(text[max(0, begin - width) : begin])
            hit = escape_view_text(text[begin:finish])
            after = escape_view_text(text[finish : finish + width])
            lines.append(f"{number}. tokens [{first}, {last}): …{before}⟪{hit}⟫{after}…")
        if len(spans) > self.max_hits:
            lines.append(f"({len(spans) - self.max_hits} more hits not shown; narrow the pattern)")
        return "\n".join(lines)


class SubmitSpansTool(Tool):
    """The final answer of the review; the loop validates it and ends (or asks for one repair)."""

    name = SUBMIT_SPANS

    def __init__(self, labels: Sequence[str], limits: SpanLimits | None = None) -> None:
        limits = limits or SpanLimits()
        max_spans, share = limits.max_spans, limits.max_region_share
        self.description = (
            "Submit your labelled spans; this ends the review. Each span: start and end "
            "(token indices from the ⟦n⟧ markers, end exclusive), label, confidence in [0, 1], "
            "and evidence: a verbatim quote of at least 8 characters (the whole span if it is "
            "shorter) from the span's first line (or the line after it). A span longer than two "
            "lines also needs evidence_end, a quote from its last line (or the line before it). "
            "Mark steps, not regions: "
            f"at most {limits.max_point_tokens} tokens per span, and at most half the trace "
            "unless it is one line (unproductive_repetition and neutral together: at most "
            f"{share:g} of the trace). No positive label on a line holding a false computation "
            "or one built on it, or on a wrong final answer. verified_correction and unsupported "
            "only after an invalid span, one correction per invalid. At most "
            f"{limits.max_per_line} spans start on one "
            f"line, at most {max_spans} in all. Spans must not overlap. "
            "Submit an empty list if nothing qualifies."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "spans": {
                    "type": "array",
                    "maxItems": max_spans,
                    "items": {
                        "type": "object",
                        "properties": {
                            "start": {"type": "integer", "minimum": 0},
                            "end": {"type": "integer", "minimum": 1},
                            "label": {"type": "string", "enum": list(labels)},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                            # 1, not 8: a span whose text is shorter than 8 characters is
                            # quoted whole (validate.py), and a constrained decoder must
                            # still be able to write that quote.
                            "evidence": {"type": "string", "minLength": 1},
                            "evidence_end": {"type": "string", "minLength": 1},
                        },
                        "required": ["start", "end", "label", "confidence", "evidence"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["spans"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        spans = arguments.get("spans")
        if not isinstance(spans, list):
            return ToolResult(False, 'Error: submit_spans needs {"spans": [...]}, a list.')
        return ToolResult(True, f"{len(spans)} span(s) received.", {"spans": spans})
