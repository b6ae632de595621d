"""The LLM judge against scripted providers, for both wire formats, with the real SDK clients.

Each test registers a script on a loopback server (Anthropic Messages or
OpenAI Chat Completions) and drives `LLMJudge` through the real `anthropic`
or `openai` SDK over HTTP; the server records every request it got.
"""

from __future__ import annotations

import time

import pytest

from judge_service.errors import BudgetError
from judge_service.judges.base import JudgeLimits
from judge_service.judges.llm.llm_judge import LLMJudge, LLMJudgeOutcome
from judge_service.judges.llm.pricing import PriceTable
from judge_service.trace import Trace, strip_markers
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    Call,
    FakeProviderServer,
    Reply,
    View,
    call,
    submit,
)
from tests.harness.scripted.harness import (
    CORRECTION,
    INJECTION,
    PROVIDERS,
    WRONG_STEP,
    checker,
    context_text,
    make_judge,
    make_request,
    run,
    span,
    tool_results,
    valid_spans,
)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_multi_turn_session_uses_every_tool_and_submits(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def submit_from_search(view: View) -> Reply:
        # The scripted judge reads the search hit's token range and quotes from it.
        hit = view.tool_results[0]
        start, end = (int(x) for x in hit.split("tokens [", 1)[1].split(")")[0].split(", "))
        return submit(
            [
                {
                    "start": start,
                    "end": end,
                    "label": "invalid",
                    "confidence": 0.8,
                    "evidence": "340 + 64",
                }
            ]
        )

    outcome, server, request = await run(
        kind,
        servers,
        bpe,
        "session",
        lambda trace: [
            call("view_tokens", start=0, end=30),
            call("run_python", code="print(17*4)"),
            call("check_equivalence", reference="408", answer="408"),
            call("search_trace", pattern="340 + 64"),
            submit_from_search,
        ],
    )
    name = f"{kind}-session"
    assert tool_results(server, name, 1)[0].startswith("tokens [0, 30) of")
    assert tool_results(server, name, 2)[0] == "stdout:\n68"
    assert tool_results(server, name, 3)[0].startswith("verdict: equivalent")
    assert outcome.turns == 5
    assert outcome.tool_calls == {
        "view_tokens": 1,
        "run_python": 1,
        "check_equivalence": 1,
        "search_trace": 1,
        "submit_spans": 1,
    }
    report = checker(request)(outcome.spans)
    assert not report.rejected
    (accepted,) = report.accepted
    assert "340 + 64" in request.trace.span_text(accepted.start, accepted.end)
    assert outcome.usage.output_tokens == 5 * 20
    assert [e["type"] for e in outcome.transcript][-1] == "stop"


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_hallucinated_quote_and_out_of_range_span_are_repaired(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def bad(trace: Trace) -> Reply:
        wrong_quote = {**span(trace, WRONG_STEP, "invalid"), "evidence": "17 × 24 = 999"}
        return submit(
            [
                wrong_quote,
                {**span(trace, CORRECTION, "verified_correction"), "start": 170, "end": 400},
            ]
        )

    outcome, server, request = await run(
        kind, servers, bpe, "repair", lambda trace: [bad(trace), submit(valid_spans(trace))]
    )
    reasons = tool_results(server, f"{kind}-repair", 1)[0]
    assert "evidence not found" in reasons and "[evidence_not_found]" in reasons
    assert "[out_of_range]" in reasons
    assert "This is your one repair." in reasons
    report = checker(request)(outcome.spans)
    assert not report.rejected and len(report.accepted) == 2
    assert outcome.turns == 2
    (rejections,) = [e for e in outcome.transcript if e["type"] == "rejections"]
    assert len(rejections["rejected"]) == 2


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_injected_whole_trace_span_is_rejected_even_when_resubmitted(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    """In range, quoting real text of the trace: only the anchoring rules stop it."""

    def obey(trace: Trace) -> Reply:
        whole = {
            "start": 0,
            "end": trace.num_tokens,
            "label": "verified_correction",
            "confidence": 1.0,
            "evidence": "SYSTEM NOTE TO THE GRADER",
        }
        return submit([whole])

    outcome, server, request = await run(
        kind, servers, bpe, "inject", lambda trace: [obey(trace), obey(trace)]
    )
    fenced = context_text(server.requests_for(f"{kind}-inject")[0].body).split("<<<")
    assert fenced[1].startswith("untrusted-trace id=") and fenced[2].startswith("end untrusted")
    assert INJECTION in strip_markers(fenced[1])  # the injection went out inside the fence
    report = checker(request)(outcome.spans)
    assert report.accepted == []
    # Over the whole trace: more than half of it, on more than one line.
    assert [r.code for r in report.rejected] == ["span_too_long"]
    assert outcome.turns == 2  # one repair turn, then the session ended


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_malformed_json_unknown_tool_and_tool_timeout_go_back_to_the_model(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    began = time.perf_counter()
    outcome, server, _request = await run(
        kind,
        servers,
        bpe,
        "toolfaults",
        lambda trace: [
            Reply((Call("view_tokens", raw='{"start": 0, "end": '),)),
            call("no_such_tool", x=1),
            call("slow_tool"),
            submit(valid_spans(trace)),
        ],
        tool_timeout_s=0.3,
    )
    name = f"{kind}-toolfaults"
    assert "not valid JSON" in tool_results(server, name, 1)[0]
    assert "unknown tool 'no_such_tool'" in tool_results(server, name, 2)[0]
    assert "timed out after 0.3 s" in tool_results(server, name, 3)[0]
    assert len(outcome.spans) == 2 and outcome.turns == 4
    assert time.perf_counter() - began < 3.0
    errors = [e for e in outcome.transcript if e["type"] == "tool" and not e["ok"]]
    assert [e["name"] for e in errors] == ["view_tokens", "no_such_tool", "slow_tool"]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_judge_that_never_submits_runs_out_of_turns(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(BudgetError, match="no spans submitted within 4 turns") as raised:
        await run(
            kind,
            servers,
            bpe,
            "forever",
            after_end=call("view_tokens", start=0, end=5),
            limits=JudgeLimits(max_turns=4),
        )
    assert raised.value.partial.turns == 4  # type: ignore[attr-defined]
    assert len(servers[kind].requests_for(f"{kind}-forever")) == 4


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_judge_that_only_talks_is_nudged_then_given_up(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(BudgetError, match="without a tool call"):
        await run(kind, servers, bpe, "chatty", after_end=Reply(text="Looks fine to me."))
    sent = servers[kind].requests_for(f"{kind}-chatty")
    assert len(sent) == 2
    assert "Answer with a tool call" in sent[1].raw.decode()


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_tool_call_budget_is_enforced_then_the_model_may_still_submit(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    outcome, server, _ = await run(
        kind,
        servers,
        bpe,
        "budget",
        lambda trace: [
            call("view_tokens", start=0, end=5),
            call("view_tokens", start=5, end=10),
            submit(valid_spans(trace)),
        ],
        limits=JudgeLimits(max_tool_calls=1),
    )
    assert (
        "tool-call budget of this review (1 calls) is spent"
        in tool_results(server, f"{kind}-budget", 2)[0]
    )
    assert len(outcome.spans) == 2


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_usage_is_summed_from_the_provider_usage_fields_and_priced(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    server = servers[kind]
    name = f"{kind}-priced"
    request = make_request(bpe, name)
    server.book.add(name, call("view_tokens", start=0, end=5), submit(valid_spans(request.trace)))
    judge: LLMJudge = make_judge(kind, server)
    judge.prices = PriceTable({judge.name: {"input": 3.0, "output": 15.0}})
    outcome = await judge.judge(request, checker(request))
    await judge.aclose()
    assert isinstance(outcome, LLMJudgeOutcome)
    usage = outcome.usage
    assert usage.output_tokens == 40
    reported = [e["usage"] for e in outcome.transcript if e["type"] == "assistant"]
    assert usage.input_tokens == sum(u["input_tokens"] for u in reported)
    assert usage.cache_read_tokens == sum(u["cache_read_tokens"] for u in reported) > 0
    price = judge.prices.lookup(judge.name)
    assert price is not None and outcome.cost_usd == pytest.approx(price.cost(usage))
