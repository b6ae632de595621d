"""run_python as a judge tool: budget, arguments, limits from config, rendering."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from judge_service.tools.base import ToolContext
from judge_service.tools.run_python import RunPythonTool, render
from judge_service.trace.decode import Trace
from sandbox import RunResult, Sandbox


def _context(max_calls: int = 16) -> ToolContext:
    empty = Trace(np.zeros(0, dtype=np.int64), "", np.zeros(1, dtype=np.int64))
    return ToolContext(rollout_id="r1", trace=empty, max_calls_per_tool=max_calls)


@pytest.fixture(scope="module")
def tool() -> Iterator[RunPythonTool]:
    with Sandbox(pool_size=1) as box:
        yield RunPythonTool(box, timeout_s=0.5, memory_mb=64)


async def test_a_run_returns_output_and_value(tool: RunPythonTool) -> None:
    result = await tool.call({"code": "print('checking')\n17 * 23"}, _context())
    assert result.ok
    assert result.content == "stdout:\nchecking\nvalue: 391"
    assert result.data["value"] == "391"


async def test_errors_are_readable_results(tool: RunPythonTool) -> None:
    result = await tool.call({"code": "print('a')\nimport os"}, _context())
    assert not result.ok
    assert result.content.startswith("error (forbidden): import of 'os' is not allowed")
    assert "stdout before the error:\na" in result.content


async def test_limits_come_from_the_tool_not_the_model(tool: RunPythonTool) -> None:
    started = time.monotonic()
    result = await tool.call({"code": "while True:\n    pass"}, _context())
    assert result.data["kind"] == "timeout" and time.monotonic() - started < 0.5 + 2
    memory = await tool.call({"code": "x = bytearray(300 * 2**20)"}, _context())
    assert memory.data["kind"] == "memory"
    asked = await tool.call({"code": "1", "timeout": 100}, _context())
    assert not asked.ok and "set by the server" in asked.content


async def test_the_budget_is_charged_and_enforced(tool: RunPythonTool) -> None:
    context = _context(max_calls=2)
    assert (await tool.call({"code": "1"}, context)).ok
    assert (await tool.call({"code": "2"}, context)).ok
    spent = await tool.call({"code": "3"}, context)
    assert not spent.ok and "budget" in spent.content and spent.data == {"error": "budget"}
    assert context.calls["run_python"] == 2


@pytest.mark.parametrize("arguments", [{}, {"code": ""}, {"code": 5}, {"code": ["1"]}])
async def test_bad_arguments_are_refused(tool: RunPythonTool, arguments: dict[str, object]) -> None:
    result = await tool.call(arguments, _context())
    assert not result.ok and "'code'" in result.content


def test_rendering_a_silent_success_and_a_cut_output() -> None:
    assert "ran without output" in render(RunResult(ok=True))
    cut = RunResult.failure("output_limit", "too much", stdout="xxx", stdout_truncated=True)
    assert (
        render(cut)
        == "error (output_limit): too much\nstdout before the error (cut at the output limit):\nxxx"
    )


def test_the_schema_offers_only_code() -> None:
    with Sandbox(pool_size=1) as box:
        schema = RunPythonTool(box).parameters
    assert schema["required"] == ["code"] and schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["code"]


def test_default_construction_uses_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge_service.config import get_settings

    monkeypatch.setenv("JUDGE_SANDBOX_TIMEOUT_S", "1.5")
    monkeypatch.setenv("JUDGE_SANDBOX_MEMORY_MB", "96")
    get_settings.cache_clear()
    try:
        tool = RunPythonTool()
        assert (tool.timeout_s, tool.memory_mb) == (1.5, 96)
        assert tool.sandbox is RunPythonTool().sandbox  # one pool for the process
    finally:
        get_settings.cache_clear()


def test_the_judges_tools_take_the_judges_settings_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A judge built with explicit settings (an embedding application, a worker with its own)
    gets tools with those limits, whatever JUDGE_* the process environment holds."""
    from judge_service.config import Settings, get_settings
    from judge_service.judges.llm.llm_judge import default_tools

    monkeypatch.setenv("JUDGE_SANDBOX_TIMEOUT_S", "9")
    monkeypatch.setenv("JUDGE_SANDBOX_MEMORY_MB", "999")
    get_settings.cache_clear()
    try:
        tools = default_tools(Settings(sandbox_timeout_s=1.5, sandbox_memory_mb=200))
    finally:
        get_settings.cache_clear()
    python = next(tool for tool in tools if tool.name == "run_python")
    assert (python.timeout_s, python.memory_mb) == (1.5, 200)  # type: ignore[attr-defined]
