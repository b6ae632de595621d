"""Tools a judge may call while it reads a trace (view, search, Python, equivalence)."""

from judge_service.tools.base import Tool, ToolContext, ToolResult

__all__ = ["Tool", "ToolContext", "ToolResult"]
