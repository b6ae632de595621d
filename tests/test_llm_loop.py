"""The tool loop's stop conditions and repair rule, with an in-process scripted provider."""

from __future__ import annotations

import pytest

from judge_service.errors import BudgetError
from judge_service.judges.base import JudgeLimits
from judge_service.judges.llm.llm_judge import LLMJudge
from judge_service.judges.llm.loop import STOP_CONDITIONS, LoopConfig
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted.harness import (
    CORRECTION,
    WRONG_STEP,
    checker,
    judge_tools,
    make_request,
    span,
)
from tests.harness.scripted.inprocess import ScriptedProvider
from tests.harness.scripted.script import Reply, ScriptBook, call, submit


def judge_for(book: ScriptBook, **config: float) -> LLMJudge:
    return LLMJudge(
        ScriptedProvider(book),
        tools=judge_tools(),
        config=LoopConfig(max_tokens_per_call=100, tool_timeout_s=0.2, **config),  # type: ignore[arg-type]
    )


def test_stop_conditions_are_named_and_ordered() -> None:
    assert [name for name, _ in STOP_CONDITIONS] == [
        "submitted",
        "repair_used",
        "deadline",
        "max_turns",
        "max_tool_calls",
        "token_budget",
        "no_tool_calls",
    ]


async def test_an_empty_submission_is_a_valid_answer(bpe: LoadedTokenizer) -> None:
    book = ScriptBook()
    book.add("empty", submit([]))
    request = make_request(bpe, "empty")
    outcome = await judge_for(book).judge(request, checker(request))
    assert outcome.spans == [] and outcome.turns == 1
    assert outcome.transcript[-1]["reason"] == "submitted"


async def test_a_repair_phase_spent_without_a_submission_keeps_the_first_one(
    bpe: LoadedTokenizer,
) -> None:
    request = make_request(bpe, "norepair")
    good = span(request.trace, WRONG_STEP, "invalid")
    book = ScriptBook()
    book.add(
        "norepair",
        submit([good, {**good, "start": 0, "end": 9999}]),
        call("view_tokens", start=0, end=4),
        call("search_trace", pattern="17"),
        call("view_tokens", start=4, end=8),
        submit([good]),  # one turn too late: the repair phase has 3 turns
    )
    outcome = await judge_for(book).judge(request, checker(request))
    assert outcome.turns == 4  # the first submission, then the repair phase's three turns
    assert len(outcome.spans) == 2 and outcome.transcript[-1]["reason"] == "repair_used"
    assert [s.start for s in checker(request)(outcome.spans).accepted] == [good["start"]]


async def test_output_token_budget_ends_the_session(bpe: LoadedTokenizer) -> None:
    book = ScriptBook()
    book.add(
        "tokens",
        after_end=Reply(calls=call("view_tokens", start=0, end=3).calls, output_tokens=400),
    )
    request = make_request(bpe, "tokens", limits=JudgeLimits(max_output_tokens=1000))
    with pytest.raises(BudgetError, match="token budget"):
        await judge_for(book).judge(request, checker(request))


async def test_ignoring_the_tool_call_budget_ends_the_session(bpe: LoadedTokenizer) -> None:
    book = ScriptBook()
    book.add("greedy", after_end=call("search_trace", pattern="17"))
    request = make_request(bpe, "greedy", limits=JudgeLimits(max_tool_calls=2, max_turns=10))
    with pytest.raises(BudgetError, match="tool-call budget") as raised:
        await judge_for(book).judge(request, checker(request))
    partial = raised.value.partial  # type: ignore[attr-defined]
    assert partial.turns == 4 and partial.tool_calls == {"search_trace": 4}


async def test_deadline_while_a_tool_runs_is_a_budget_error(bpe: LoadedTokenizer) -> None:
    book = ScriptBook()
    book.add("slow", call("slow_tool"))
    request = make_request(bpe, "slow", limits=JudgeLimits(deadline_s=0.1))
    judge = LLMJudge(
        ScriptedProvider(book), tools=judge_tools(), config=LoopConfig(tool_timeout_s=5.0)
    )
    with pytest.raises(BudgetError, match="while waiting on the slow_tool tool"):
        await judge.judge(request, checker(request))


async def test_submission_then_more_tools_in_the_same_turn(bpe: LoadedTokenizer) -> None:
    request = make_request(bpe, "both")
    spans = [
        span(request.trace, WRONG_STEP, "invalid"),
        span(request.trace, CORRECTION, "verified_correction"),
    ]
    book = ScriptBook()
    book.add("both", Reply(call("view_tokens", start=0, end=2).calls + submit(spans).calls))
    outcome = await judge_for(book).judge(request, checker(request))
    assert outcome.turns == 1 and len(outcome.spans) == 2
    assert outcome.tool_calls == {"view_tokens": 1, "submit_spans": 1}


async def test_input_token_budget_ends_the_session(bpe: LoadedTokenizer) -> None:
    book = ScriptBook()
    book.add("reading", after_end=call("view_tokens", start=0, end=3))
    request = make_request(bpe, "reading")
    judge = LLMJudge(
        ScriptedProvider(book), tools=judge_tools(), config=LoopConfig(max_input_tokens=1)
    )
    with pytest.raises(BudgetError, match="token budget") as raised:
        await judge.judge(request, checker(request))
    assert raised.value.partial.turns == 1  # type: ignore[attr-defined]
