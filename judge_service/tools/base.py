"""The tool interface of the judge's loop.

A tool has a name, a description and a JSON-schema for its arguments (what the
provider shows the model), and an async call that returns a `ToolResult` whose
`content` is plain text an LLM can read. A tool never raises into the loop for
bad arguments or a failed run: it returns ``ok=False`` with the reason, which
goes back to the model as the tool's result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from judge_service.trace.decode import Trace


@dataclass
class ToolContext:
    """What a tool may see of the rollout being judged, and its per-rollout budget."""

    rollout_id: str
    trace: Trace
    calls: dict[str, int] = field(default_factory=dict)
    max_calls_per_tool: int = 16

    def charge(self, tool: str) -> bool:
        """Count one call of `tool`; False when its per-rollout budget is spent."""
        used = self.calls.get(tool, 0)
        if used >= self.max_calls_per_tool:
            return False
        self.calls[tool] = used + 1
        return True


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    content: str
    data: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object

    @abstractmethod
    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Run the tool; report failures as ``ToolResult(ok=False, ...)``."""
