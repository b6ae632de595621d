"""run_python: the judge checks arithmetic and algebra in the sandbox.

The code comes from the judge model, which has just read a trace the policy
wrote, so it is untrusted: it runs in `sandbox` (RestrictedPython, then a
confined child). Limits come from the service's settings; the model's
arguments carry only the code.
"""

from __future__ import annotations

import threading
from typing import Any

from judge_service.config import Settings, get_settings
from judge_service.tools.base import Tool, ToolContext, ToolResult
from sandbox import ALLOWED_MODULES, RunResult, Sandbox, set_default_sandbox

_shared: dict[tuple[Any, ...], Sandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(settings: Settings) -> Sandbox:
    """One sandbox pool per configuration for the whole process (judges share it).

    It also becomes `sandbox`'s default, so `sandbox.isolation_status()`
    (/readyz) reports the pool the judge uses.
    """
    key = (
        settings.sandbox_pool_size,
        settings.sandbox_timeout_s,
        settings.sandbox_memory_mb,
        settings.sandbox_max_output_chars,
        settings.sandbox_isolation,
    )
    with _shared_lock:
        if key not in _shared:
            box = Sandbox(
                pool_size=settings.sandbox_pool_size,
                timeout_s=settings.sandbox_timeout_s,
                memory_mb=settings.sandbox_memory_mb,
                max_output_chars=settings.sandbox_max_output_chars,
                isolation=settings.sandbox_isolation,
            )
            _shared[key] = box
            set_default_sandbox(box)
        return _shared[key]


def render(result: RunResult) -> str:
    """A compact, LLM-readable account of one run."""
    lines: list[str] = []
    if result.ok:
        if result.stdout:
            lines += ["stdout:", result.stdout.rstrip("\n")]
        if result.value is not None:
            lines.append(f"value: {result.value}")
        if not lines:
            lines.append("(ran without output; end with an expression or print to see a value)")
        return "\n".join(lines)
    lines.append(f"error ({result.kind}): {result.message}")
    if result.stdout:
        cut = " (cut at the output limit)" if result.stdout_truncated else ""
        lines += [f"stdout before the error{cut}:", result.stdout.rstrip("\n")]
    return "\n".join(lines)


class RunPythonTool(Tool):
    name = "run_python"
    description = (
        "Run a short Python 3 program to check arithmetic or algebra. Printed output and the "
        "value of the last expression come back. Importable modules: "
        + ", ".join(ALLOWED_MODULES)
        + ", and sympy where the server's sandbox isolation allows it (otherwise importing it "
        "fails with a 'forbidden' error). No files, network, os or subprocess; names starting "
        "with '_' are not allowed; time and memory are limited."
    )

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        settings: Settings | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
    ) -> None:
        """`settings`: the judge's (its limits and its shared sandbox); unset, the process's
        environment, for a tool built on its own."""
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "the program; end with an expression to see its value",
                }
            },
            "required": ["code"],
            "additionalProperties": False,
        }
        settings = settings or get_settings()
        self.sandbox = sandbox if sandbox is not None else shared_sandbox(settings)
        self.timeout_s = settings.sandbox_timeout_s if timeout_s is None else timeout_s
        self.memory_mb = settings.sandbox_memory_mb if memory_mb is None else memory_mb

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        if not context.charge(self.name):
            used = context.calls.get(self.name, 0)
            message = f"Error: the run_python budget for this rollout is spent ({used} calls)."
            return ToolResult(False, message, {"error": "budget"})
        if not isinstance(arguments, dict):
            return ToolResult(False, "Error: the arguments must be an object with 'code'.")
        extra = sorted(set(arguments) - {"code"})
        if extra:
            message = (
                f"Error: unknown argument(s) {', '.join(extra)}; only 'code' is accepted "
                "(time and memory limits are set by the server)."
            )
            return ToolResult(False, message, {"error": "arguments"})
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolResult(False, "Error: 'code' must be a non-empty string.")
        try:
            result = await self.sandbox.run_async(
                code, timeout_s=self.timeout_s, memory_mb=self.memory_mb
            )
        except Exception as exc:  # the sandbox reports failures as results; this is a bug
            result = RunResult.failure("internal", f"the sandbox failed: {exc}")
        return ToolResult(result.ok, render(result), result.to_dict())
