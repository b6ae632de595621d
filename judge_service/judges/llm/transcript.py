"""The audit trail of one judge session: what the model said, did, was told and why it ended.

Entries are plain JSON-able dicts in order, each with a ``type``: ``prompt``
(version, model, a digest of the rollout context rather than the trace
itself, which the rollout already holds), ``assistant`` (text, tool calls,
usage), ``tool`` (one call's result), ``rejections`` (what validation
refused and why), ``message`` (what the service told the model), ``error``
and ``stop``. Stored with the result; returned with ``include_transcript``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from judge_service.judges.llm.conversation import Completion, Prompt, ToolCall, ToolOutput
from judge_service.validate import ValidationReport


class Transcript:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def prompt(self, prompt: Prompt, *, judge: str, prompt_version: str) -> None:
        digest = hashlib.sha256(prompt.context.encode("utf-8", "surrogatepass")).hexdigest()
        self.entries.append(
            {
                "type": "prompt",
                "judge": judge,
                "prompt_version": prompt_version,
                "tools": [tool.name for tool in prompt.tools],
                "context_sha256": digest,
                "context_chars": len(prompt.context),
            }
        )

    def assistant(self, turn: int, completion: Completion) -> None:
        entry: dict[str, Any] = {
            "type": "assistant",
            "turn": turn,
            "text": completion.turn.text,
            "tool_calls": [_call(c) for c in completion.turn.tool_calls],
            "stop_reason": completion.stop_reason,
            "usage": {
                "input_tokens": completion.usage.input_tokens,
                "cache_write_tokens": completion.usage.cache_write_tokens,
                "cache_read_tokens": completion.usage.cache_read_tokens,
                "output_tokens": completion.usage.output_tokens,
            },
        }
        if completion.notes:  # e.g. the server generated past the output cap it was sent
            entry["notes"] = list(completion.notes)
        self.entries.append(entry)

    def tool(self, turn: int, call: ToolCall, output: ToolOutput, elapsed_ms: int) -> None:
        self.entries.append(
            {
                "type": "tool",
                "turn": turn,
                "id": call.id,
                "name": call.name,
                "ok": not output.is_error,
                "content": output.content,
                "elapsed_ms": elapsed_ms,
            }
        )

    def rejections(self, turn: int, report: ValidationReport) -> None:
        self.entries.append(
            {
                "type": "rejections",
                "turn": turn,
                "accepted": len(report.accepted),
                "rejected": [
                    {"span": dict(r.span), "code": r.code, "reason": r.reason}
                    for r in report.rejected
                ],
            }
        )

    def message(self, turn: int, text: str) -> None:
        self.entries.append({"type": "message", "turn": turn, "text": text})

    def error(self, turn: int, boundary: str, message: str) -> None:
        self.entries.append(
            {"type": "error", "turn": turn, "boundary": boundary, "message": message}
        )

    def stop(self, turn: int, reason: str) -> None:
        self.entries.append({"type": "stop", "turn": turn, "reason": reason})


def _call(call: ToolCall) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.error is not None:
        entry["raw_arguments"] = call.raw_arguments
        entry["error"] = call.error
    return entry
