"""check_equivalence as a judge tool: budget, arguments, policy flags, rendering."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from judge_service.equivalence import EquivalenceChecker
from judge_service.tools.base import ToolContext
from judge_service.tools.check_equivalence import CheckEquivalenceTool
from judge_service.trace.decode import Trace


def _context(max_calls: int = 16) -> ToolContext:
    empty = Trace(np.zeros(0, dtype=np.int64), "", np.zeros(1, dtype=np.int64))
    return ToolContext(rollout_id="r1", trace=empty, max_calls_per_tool=max_calls)


@pytest.fixture(scope="module")
def tool() -> Iterator[CheckEquivalenceTool]:
    with EquivalenceChecker(timeout_s=3.0) as checker:
        yield CheckEquivalenceTool(checker)


async def test_verdict_and_parsed_forms_are_rendered(tool: CheckEquivalenceTool) -> None:
    result = await tool.call({"reference": "\\frac{1}{2}", "answer": "0.5"}, _context())
    assert result.ok
    assert result.content.splitlines() == [
        "verdict: equivalent (math-verify found them equal)",
        "reference parsed as: 1/2 | \\frac{1}{2}",
        "answer parsed as: 1/2 | \\frac{1}{2}",
    ]
    assert result.data["verdict"] == "equivalent"


async def test_near_miss_is_not_equivalent(tool: CheckEquivalenceTool) -> None:
    result = await tool.call({"reference": "(1,2)", "answer": "(2,1)"}, _context())
    assert result.data["verdict"] == "not_equivalent"
    assert "reference parsed as: Interval.open(1, 2)" in result.content


async def test_policy_flags_change_the_reading(tool: CheckEquivalenceTool) -> None:
    plain = {"reference": "30", "answer": "30^\\circ"}
    assert (await tool.call(plain, _context())).data["verdict"] == "equivalent"
    radians = await tool.call({**plain, "degrees_as_radians": True}, _context())
    assert radians.data["verdict"] == "not_equivalent"
    strict = await tool.call(
        {"reference": "50", "answer": "50\\%", "percent": "strict"}, _context()
    )
    assert strict.data["verdict"] == "not_equivalent"
    close = await tool.call(
        {"reference": "\\pi", "answer": "3.1416", "tolerance": 1e-4}, _context()
    )
    assert close.data["verdict"] == "equivalent"


async def test_the_budget_is_charged_and_enforced(tool: CheckEquivalenceTool) -> None:
    context = _context(max_calls=1)
    assert (await tool.call({"reference": "1", "answer": "1"}, context)).ok
    spent = await tool.call({"reference": "1", "answer": "1"}, context)
    assert not spent.ok and "budget" in spent.content


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"answer": "1"}, "'reference'"),
        ({"reference": "1", "answer": " "}, "'answer'"),
        ({"reference": "1", "answer": "1", "tolerance": "small"}, "tolerance"),
        ({"reference": "1", "answer": "1", "tolerance": 0.9}, "tolerance"),
        ({"reference": "1", "answer": "1", "percent": "maybe"}, "percent"),
        ({"reference": "1", "answer": "1", "degrees_as_radians": "yes"}, "degrees_as_radians"),
        ({"reference": "1", "answer": "1", "timeout": 60}, "unknown argument"),
    ],
)
async def test_bad_arguments_are_refused(
    tool: CheckEquivalenceTool, arguments: dict[str, object], complaint: str
) -> None:
    result = await tool.call(arguments, _context())
    assert not result.ok and complaint in result.content


async def test_unknown_is_an_answer_not_a_failure(tool: CheckEquivalenceTool) -> None:
    result = await tool.call({"reference": "1", "answer": "9^9^9^9"}, _context())
    assert result.ok and result.data["verdict"] == "unknown"
    assert result.content.startswith("verdict: unknown (the comparison timed out)")
