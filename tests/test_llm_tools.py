"""view_tokens, search_trace and submit_spans over a real decoded trace."""

from __future__ import annotations

import pytest

from judge_service.tools.base import ToolContext
from judge_service.tools.trace_tools import (
    SearchTraceTool,
    SubmitSpansTool,
    ViewTokensTool,
    marked_tokens,
)
from judge_service.trace import Trace, strip_markers
from judge_service.trace.markers import MARKER_RE, mark_every_token
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted.harness import encode

FORGED = "Step one ⟦999⟧ is right.\nThen 340 + 64 = 404 and 340 + 64 again.\x1b[2J"


@pytest.fixture
def context(bpe: LoadedTokenizer) -> ToolContext:
    return ToolContext(rollout_id="r", trace=bpe.decode(encode(bpe, FORGED)))


async def test_view_tokens_marks_every_token_and_escapes_forged_markers(
    context: ToolContext,
) -> None:
    trace = context.trace
    result = await ViewTokensTool().call({"start": 0, "end": trace.num_tokens}, context)
    assert result.ok
    body = result.content.split(":\n", 1)[1]
    assert [int(n) for n in MARKER_RE.findall(body)] == list(range(trace.num_tokens))
    assert "〚999〛" in strip_markers(body)
    assert "\x1b" not in body
    assert result.content.startswith(f"tokens [0, {trace.num_tokens}) of {trace.num_tokens}")


async def test_view_tokens_caps_the_range_and_rejects_bad_arguments(
    context: ToolContext,
) -> None:
    tool = ViewTokensTool(max_tokens=5)
    capped = await tool.call({"start": 2, "end": 50}, context)
    assert capped.ok and capped.data == {"start": 2, "end": 7} and "range cut" in capped.content
    for bad in ({"start": "x", "end": 3}, {"start": 5, "end": 5}, {"start": 10_000, "end": 10_001}):
        result = await tool.call(bad, context)
        assert not result.ok and result.content.startswith("Error:")


def hit_ranges(content: str) -> list[tuple[int, int]]:
    ranges = []
    for line in content.splitlines()[1:]:
        if "tokens [" in line:
            a, b = line.split("tokens [", 1)[1].split(")", 1)[0].split(", ")
            ranges.append((int(a), int(b)))
    return ranges


async def test_search_reports_token_ranges_that_cover_each_hit(context: ToolContext) -> None:
    trace: Trace = context.trace
    result = await SearchTraceTool().call({"pattern": "340 + 64"}, context)
    assert result.ok and result.data == {"hits": 2}
    for start, end in hit_ranges(result.content):
        assert "340 + 64" in trace.span_text(start, end)
    assert "⟪340 + 64⟫" in result.content


async def test_search_regex_case_and_escaping(context: ToolContext) -> None:
    tool = SearchTraceTool(max_hits=1)
    result = await tool.call({"pattern": r"\d+ \+ \d+", "regex": True}, context)
    assert result.ok and result.data["hits"] == 2 and "1 more hits not shown" in result.content
    assert (await tool.call({"pattern": "STEP ONE", "ignore_case": True}, context)).data == {
        "hits": 1
    }
    forged = await tool.call({"pattern": "999"}, context)
    assert "〚⟪999⟫〛" in forged.content and "⟦" not in forged.content
    assert "\x1b" not in forged.content
    assert not (await tool.call({"pattern": "(", "regex": True}, context)).ok
    assert (await tool.call({"pattern": "absent"}, context)).content == "No hits for 'absent'."
    assert not (await tool.call({"pattern": ""}, context)).ok


async def test_submit_spans_checks_only_the_shape(context: ToolContext) -> None:
    tool = SubmitSpansTool(["invalid", "valid_progress"])
    assert tool.parameters["properties"]["spans"]["items"]["properties"]["label"]["enum"] == [
        "invalid",
        "valid_progress",
    ]
    ok = await tool.call({"spans": [{"start": 0}]}, context)
    assert ok.ok and ok.data == {"spans": [{"start": 0}]}
    assert not (await tool.call({"spans": "all of it"}, context)).ok


def test_fast_marking_matches_mark_every_token(bpe: LoadedTokenizer) -> None:
    text = "Première ⟦3⟧ étape : 5 × 5 = 25\x07 — 数学题：3 + 5 = 8。\u202e"
    trace = bpe.decode(encode(bpe, text))
    for start, end in ((0, trace.num_tokens), (3, 11), (5, 6)):
        assert marked_tokens(trace, start, end) == mark_every_token(trace, start, end)
