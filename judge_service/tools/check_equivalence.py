"""check_equivalence: is an answer the reference answer, mathematically?

The judge asks this before it calls a final answer right or wrong. The
verdict comes with the forms both sides were parsed into, so the judge can
see what was compared (and that ``(1,2)`` became an open interval).
"""

from __future__ import annotations

import threading
from typing import Any

from judge_service.config import Settings, get_settings
from judge_service.equivalence import EquivalenceChecker, EquivalencePolicy, EquivalenceResult
from judge_service.tools.base import Tool, ToolContext, ToolResult

_shared: dict[tuple[Any, ...], EquivalenceChecker] = {}
_shared_lock = threading.Lock()

_POLICY_ARGS = ("degrees_as_radians", "percent", "tolerance")


def shared_checker(settings: Settings) -> EquivalenceChecker:
    """One checker pool per configuration for the whole process."""
    key = (
        settings.equivalence_pool_size,
        settings.equivalence_timeout_s,
        settings.sandbox_isolation,
    )
    with _shared_lock:
        if key not in _shared:
            _shared[key] = EquivalenceChecker(
                pool_size=settings.equivalence_pool_size,
                timeout_s=settings.equivalence_timeout_s,
                isolate=settings.sandbox_isolation != "off",
            )
        return _shared[key]


def render(result: EquivalenceResult) -> str:
    lines = [f"verdict: {result.verdict} ({result.reason})"]
    if result.gold_parsed:
        lines.append("reference parsed as: " + " | ".join(result.gold_parsed))
    if result.pred_parsed:
        lines.append("answer parsed as: " + " | ".join(result.pred_parsed))
    return "\n".join(lines)


def _policy(arguments: dict[str, Any]) -> EquivalencePolicy | str:
    """The policy from the arguments, or the reason they are wrong."""
    degrees = arguments.get("degrees_as_radians", False)
    if not isinstance(degrees, bool):
        return "'degrees_as_radians' must be true or false"
    tolerance = arguments.get("tolerance")
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, int | float)
    ):
        return "'tolerance' must be a number"
    try:
        return EquivalencePolicy.from_dict(
            {
                "degrees_as_radians": degrees,
                "percent": arguments.get("percent", "lenient"),
                "tolerance": tolerance,
            }
        )
    except ValueError as exc:
        return str(exc)


class CheckEquivalenceTool(Tool):
    name = "check_equivalence"
    description = (
        "Check whether an answer is mathematically equivalent to the reference answer (LaTeX or "
        "plain: fractions, decimals, percent, sets, intervals, tuples, matrices, equations, "
        "units). Returns equivalent, not_equivalent or unknown, with how each side was parsed. "
        "The comparison is asymmetric: put the reference (expected) answer in 'reference'."
    )

    def __init__(
        self, checker: EquivalenceChecker | None = None, *, settings: Settings | None = None
    ) -> None:
        """`settings`: the judge's (its limits, its shared checker); unset, the process's
        environment, for a tool built on its own."""
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "the expected answer"},
                "answer": {"type": "string", "description": "the answer to check"},
                "degrees_as_radians": {
                    "type": "boolean",
                    "description": "read a degree sign as pi/180 only (30° = pi/6, not 30);"
                    " default: 30° matches both 30 and pi/6",
                },
                "percent": {
                    "type": "string",
                    "enum": ["lenient", "strict"],
                    "description": "lenient (default): 50% matches 50 and 0.5; strict: only 0.5",
                },
                "tolerance": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 0.5,
                    "description": "relative tolerance for numbers (default: exact)",
                },
            },
            "required": ["reference", "answer"],
            "additionalProperties": False,
        }
        settings = settings or get_settings()
        self.checker = checker if checker is not None else shared_checker(settings)

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        if not context.charge(self.name):
            used = context.calls.get(self.name, 0)
            message = (
                f"Error: the check_equivalence budget for this rollout is spent ({used} calls)."
            )
            return ToolResult(False, message, {"error": "budget"})
        if not isinstance(arguments, dict):
            return ToolResult(False, "Error: the arguments must be an object.")
        extra = sorted(set(arguments) - {"reference", "answer", *_POLICY_ARGS})
        if extra:
            return ToolResult(False, f"Error: unknown argument(s) {', '.join(extra)}.")
        reference, answer = arguments.get("reference"), arguments.get("answer")
        for name, value in (("reference", reference), ("answer", answer)):
            if not isinstance(value, str) or not value.strip():
                return ToolResult(False, f"Error: '{name}' must be a non-empty string.")
        policy = _policy(arguments)
        if isinstance(policy, str):
            return ToolResult(False, f"Error: {policy}.")
        assert isinstance(reference, str) and isinstance(answer, str)
        try:
            result = await self.checker.check_async(reference, answer, policy)
        except Exception as exc:  # the checker reports failures as verdicts; this is a bug
            result = EquivalenceResult("unknown", f"the checker failed: {exc}")
        # "unknown" is an answer too (a timeout, an unparseable side): the tool worked.
        return ToolResult(True, render(result), result.to_dict())
