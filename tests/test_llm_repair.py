"""The loop, the instructor way: what the model is told and allowed after a rejection, after a
cut-off reply, and about its budget; and when a rejected submission is no judgment at all.

Real `anthropic` / `openai` SDK clients against the scripted servers over HTTP.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from judge_service.errors import BudgetError, ProviderError
from judge_service.judges.base import JudgeLimits
from judge_service.judges.llm.loop import LoopConfig
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    Call,
    FakeProviderServer,
    Fault,
    Reply,
    View,
    call,
    submit,
)
from tests.harness.scripted.harness import (
    CORRECTION,
    PROVIDERS,
    WRONG_STEP,
    checker,
    context_text,
    phrase_span,
    run,
    span,
    tool_results,
    valid_spans,
)

OCCURS = re.compile(r"the quote occurs at tokens \[(\d+), (\d+)\)")
CUT = {"anthropic": "max_tokens", "openai": "length"}


def misplaced(trace: Trace) -> dict[str, Any]:
    """The wrong step's span, moved onto the correction's line: its quote is elsewhere."""
    fixed = phrase_span(trace, CORRECTION)
    return {**span(trace, WRONG_STEP, "invalid"), "start": fixed[0], "end": fixed[1]}


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every plain user text of a recorded request after the context, in either wire format."""
    texts: list[str] = []
    for message in body["messages"][1:]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [b["text"] for b in content if b.get("type") == "text"]
    return texts


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_the_repair_phase_may_view_tokens_before_its_one_resubmission(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def view_where_it_occurs(view: View) -> Reply:
        a, b = OCCURS.search(view.tool_results[0]).groups()  # type: ignore[union-attr]
        return call("view_tokens", start=int(a), end=int(b))

    outcome, server, request = await run(
        kind,
        servers,
        bpe,
        "repair-view",
        lambda trace: [
            submit([misplaced(trace)]),
            view_where_it_occurs,
            submit(valid_spans(trace)),
        ],
    )
    name = f"{kind}-repair-view"
    reasons = tool_results(server, name, 1)[0]
    # What the service computed reaches the model: where the quote does occur.
    quote = span(request.trace, WRONG_STEP, "invalid")["evidence"]
    where = phrase_span(request.trace, quote.strip())  # the validator trims a quote
    assert f"the quote occurs at tokens [{where[0]}, {where[1]})" in reasons
    assert "[evidence_not_found]" in reasons and "view_tokens or search_trace" in reasons
    assert tool_results(server, name, 2)[0].startswith(f"tokens [{where[0]}, {where[1]}) of")
    report = checker(request)(outcome.spans)
    assert not report.rejected and len(report.accepted) == 2
    assert outcome.turns == 3 and outcome.transcript[-1]["reason"] == "submitted"
    assert outcome.tool_calls == {"submit_spans": 2, "view_tokens": 1}


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_the_repair_phase_refuses_other_tools_and_calls_past_its_allowance(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    views = tuple(Call("view_tokens", {"start": i, "end": i + 2}) for i in range(4))
    outcome, server, request = await run(
        kind,
        servers,
        bpe,
        "repair-allowance",
        lambda trace: [
            submit([misplaced(trace)]),
            Reply((Call("run_python", {"code": "print(17*4)"}), *views)),
            submit(valid_spans(trace)),
        ],
    )
    results = tool_results(server, f"{kind}-repair-allowance", 2)
    assert len(results) == 5
    refused = "While repairing you may call only view_tokens or search_trace, at most 3 times"
    assert refused in results[0]  # run_python: not a repair tool
    assert all(r.startswith("tokens [") for r in results[1:4])
    assert refused in results[4]  # the fourth view: past the allowance
    assert len(checker(request)(outcome.spans).accepted) == 2 and outcome.turns == 3


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_cut_off_reply_is_told_so_and_the_session_recovers(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def steps(trace: Trace) -> list[Any]:
        spans = valid_spans(trace)
        truncated = '{"spans": [{"start": 3, "end": 9, "label": "inv'
        return [
            Reply(text="Let me think about every step of this trace in detail...", cut_off=True),
            Reply((Call("submit_spans", raw=truncated),), cut_off=True),
            # Complete-looking arguments in a cut reply are still the unfinished call.
            Reply((Call("submit_spans", {"spans": spans[:1]}),), cut_off=True),
            submit(spans),
        ]

    outcome, server, request = await run(kind, servers, bpe, "cutoff", steps)
    name = f"{kind}-cutoff"
    told = "You were cut off: your reply reached the output limit (1024 tokens)"
    first_answer = [r for r in server.requests_for(name) if r.turn == 1][-1].body
    assert any(text.startswith(told) for text in user_texts(first_answer))
    assert not any("Answer with a tool call" in t for t in user_texts(first_answer))
    for turn in (2, 3):
        (result,) = tool_results(server, name, turn)
        assert result.startswith(told) and "Submit fewer spans with shorter evidence" in result
    report = checker(request)(outcome.spans)
    assert not report.rejected and len(report.accepted) == 2  # the cut ones never counted
    assert outcome.turns == 4 and outcome.transcript[-1]["reason"] == "submitted"
    stops = [e["stop_reason"] for e in outcome.transcript if e["type"] == "assistant"]
    assert stops[:3] == [CUT[kind]] * 3
    assert not any(e["type"] == "rejections" for e in outcome.transcript)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_the_budget_is_stated_in_the_context_which_stays_byte_stable(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    _outcome, server, _request = await run(
        kind,
        servers,
        bpe,
        "budget-line",
        lambda trace: [call("view_tokens", start=0, end=5), submit(valid_spans(trace))],
        limits=JudgeLimits(max_turns=5, max_tool_calls=7, deadline_s=9.5),
    )
    contexts = {context_text(r.body) for r in server.requests_for(f"{kind}-budget-line")}
    (context,) = contexts  # the same bytes on both turns
    assert "at most 5 turns, 7 tool calls besides submit_spans, and 9.5 seconds" in context


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_every_span_rejected_then_a_provider_failure_is_a_provider_error(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(ProviderError) as raised:
        await run(
            kind,
            servers,
            bpe,
            "rejected-500",
            lambda trace: [submit([misplaced(trace)]), [Fault(500)]],
            max_retries=0,
        )
    message = str(raised.value)
    assert "500" in message
    assert "during the repair: every one of the 1 submitted spans was rejected" in message
    partial = raised.value.partial
    assert partial.turns == 1 and partial.usage.output_tokens == 20
    assert [e["type"] for e in partial.transcript][-3:] == ["error", "stop", "error"]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_every_span_rejected_when_the_turns_run_out_is_a_budget_error(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(BudgetError, match="rejected, and the 1 turns were spent before a repair"):
        await run(
            kind,
            servers,
            bpe,
            "rejected-turns",
            lambda trace: [submit([misplaced(trace)])],
            limits=JudgeLimits(max_turns=1),
        )


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_partly_accepted_submission_survives_a_failed_repair(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    outcome, _server, request = await run(
        kind,
        servers,
        bpe,
        "partial-500",
        lambda trace: [
            submit([span(trace, WRONG_STEP, "invalid"), {**misplaced(trace), "label": "neutral"}]),
            [Fault(500)],
        ],
        max_retries=0,
    )
    assert [s.label for s in checker(request)(outcome.spans).accepted] == ["invalid"]
    assert outcome.transcript[-1]["reason"] == "provider_error"


def test_the_repair_allowance_is_named_in_the_loop_config() -> None:
    config = LoopConfig()
    assert (config.repair_max_turns, config.repair_max_tool_calls) == (3, 3)
    assert config.repair_tools == ("view_tokens", "search_trace")
