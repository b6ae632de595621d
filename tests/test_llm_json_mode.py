"""JSON tool mode over real HTTP: tools described in the prompt, one JSON object per answer,
the same loop and validation; and auto mode switching to it after a server without tools.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from judge_service.errors import BudgetError
from judge_service.judges.base import Usage
from judge_service.judges.llm.conversation import AssistantTurn, Completion
from judge_service.judges.llm.json_mode import (
    INVALID_REPLY,
    AutoToolModeProvider,
    JsonModeProvider,
    from_reply,
    parse_reply,
    reset_tool_modes,
)
from judge_service.judges.llm.llm_judge import LLMJudge, LLMJudgeOutcome
from judge_service.judges.llm.loop import LoopConfig
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Reply, call, openai_server, submit
from tests.harness.scripted.anthropic_wire import _strip_cache_control
from tests.harness.scripted.harness import (
    PROVIDERS,
    checker,
    judge_tools,
    llm_settings,
    make_provider,
    make_request,
    valid_spans,
)

Steps = Callable[[Trace], list[Any]]


@pytest.fixture(autouse=True)
def fresh_modes() -> Iterator[None]:
    reset_tool_modes()
    yield
    reset_tool_modes()


@pytest.fixture(scope="module")
def toolless() -> Iterator[FakeProviderServer]:
    """An OpenAI-compatible server that ignores `tools` and answers with text only."""
    with openai_server(native_tools=False) as server:
        yield server


def make_judge(kind: str, server: FakeProviderServer, mode: str) -> LLMJudge:
    inner = make_provider(kind, server)
    provider = JsonModeProvider(inner) if mode == "json" else AutoToolModeProvider(inner)
    return LLMJudge(provider, tools=judge_tools(), config=LoopConfig(max_tokens_per_call=1024))


async def play(
    kind: str,
    server: FakeProviderServer,
    bpe: LoadedTokenizer,
    script: str,
    steps: Steps,
    mode: str = "json",
) -> LLMJudgeOutcome:
    request = make_request(bpe, script)
    server.book.add(script, *steps(request.trace))
    judge = make_judge(kind, server, mode)
    try:
        outcome = await judge.judge(request, checker(request))
    finally:
        await judge.aclose()
    assert isinstance(outcome, LLMJudgeOutcome)
    return outcome


def system_of(body: dict[str, Any]) -> str:
    if "system" in body:
        return str(body["system"][0]["text"])
    return str(body["messages"][0]["content"])


def texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every message after the system text, in either wire format."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            found.append((message["role"], content))
        else:
            found += [(message["role"], block["text"]) for block in content if "text" in block]
    return [pair for pair in found if pair[0] != "system"]


def tool_entries(outcome: LLMJudgeOutcome) -> list[dict[str, Any]]:
    return [e for e in outcome.transcript if e["type"] == "tool"]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_json_mode_session_runs_to_accepted_spans(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    server, script = servers[kind], f"{kind}-json-full"
    outcome = await play(
        kind,
        server,
        bpe,
        script,
        lambda trace: [call("view_tokens", start=0, end=12), submit(valid_spans(trace))],
    )
    tools = tool_entries(outcome)
    assert [t["name"] for t in tools] == ["view_tokens", "submit_spans"]
    assert tools[-1]["ok"] and tools[-1]["content"].startswith("Accepted 2 span(s)")
    assert len(outcome.spans) == 2 and outcome.turns == 2

    sent = server.requests_for(script)
    assert len(sent) == 2 and not any(r.body.get("tools") for r in sent)  # no native tools
    system = system_of(sent[0].body)
    assert system == system_of(sent[1].body)  # byte-stable across turns
    assert "## submit_spans" in system and "## view_tokens" in system
    assert '{"tool": "<tool name>", "arguments":' in system
    # The earlier call goes back as its JSON text, its result as a user message.
    second = texts(sent[1].body)
    assert ("assistant", '{"tool": "view_tokens", "arguments": {"start": 0, "end": 12}}') in second
    assert ("user", f"Result of view_tokens (call 1):\n{tools[0]['content']}") in second
    # The first request is a prefix of the second (prefix caching), markers aside.
    first = _strip_cache_control(sent[0].body["messages"])
    assert _strip_cache_control(sent[1].body["messages"])[: len(first)] == first


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_malformed_answer_is_told_to_the_model_and_the_session_recovers(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    server, script = servers[kind], f"{kind}-json-malformed"
    broken = 'Let me look. {"tool": "view_tokens", "arguments": {"start": 0,'
    outcome = await play(
        kind, server, bpe, script, lambda trace: [Reply(text=broken), submit(valid_spans(trace))]
    )
    first, second = tool_entries(outcome)
    assert first["name"] == INVALID_REPLY and not first["ok"]
    assert "not valid JSON" in first["content"]
    assert second["name"] == "submit_spans" and second["ok"] and len(outcome.spans) == 2
    sent = texts(server.requests_for(script)[1].body)
    assert ("assistant", broken) in sent  # what the model wrote, as it wrote it
    assert ("user", f"Result of {INVALID_REPLY} (call 1):\n{first['content']}") in sent


async def test_a_fenced_object_with_prose_around_it_is_read(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def steps(trace: Trace) -> list[Any]:
        body = {"tool": "submit_spans", "arguments": {"spans": valid_spans(trace)}}
        return [Reply(text=f"My review:\n```json\n{json.dumps(body)}\n```\nThat is all.")]

    outcome = await play("openai", servers["openai"], bpe, "json-fenced", steps)
    assert outcome.turns == 1 and len(outcome.spans) == 2


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ('{"tool": "view_tokens", "arguments": {"start": 1, "end": 2}}', "view_tokens", 2),
        ('{"name": "view_tokens", "parameters": {"start": 1, "end": 2}}', "view_tokens", 2),
        (
            '{"tool": "view_tokens", "arguments": "{\\"start\\": 1, \\"end\\": 2}"}',
            "view_tokens",
            2,
        ),
        (
            'Sure.\n{"tool": "search_trace", "arguments": {"pattern": "a\nb"}}\nDone.',
            "search_trace",
            1,
        ),
    ],
)
def test_answers_that_are_one_call(text: str, name: str, arguments: int) -> None:
    parsed = parse_reply(text, "c1")
    assert parsed.error is None and parsed.name == name and len(parsed.arguments) == arguments


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I think the error is in step 2.", "no JSON object"),
        ('{"tool": "a", "arguments": {}} {"tool": "b", "arguments": {}}', "2 tool calls"),
        ('{"spans": []}', "tool: Field required"),
        ('{"tool": "view_tokens", "arguments": [1, 2]}', "arguments: Input should be"),
        ('{"tool": "view_tokens", "arguments": {"start": 1', "not valid JSON"),
    ],
)
def test_answers_that_are_not_one_call_carry_an_error(text: str, problem: str) -> None:
    parsed = parse_reply(text, "c1")
    assert parsed.error is not None and problem in parsed.error
    assert parsed.arguments == {} and parsed.raw_arguments == text


def test_an_answer_cut_off_by_the_length_limit_is_no_call() -> None:
    cut = '{"tool": "submit_spans", "arguments": {"spans": [{"start": 3'
    completion = Completion(AssistantTurn(cut), Usage(output_tokens=16), "length")
    assert from_reply(completion, []).turn.tool_calls == ()  # the loop's cut-off handling
    whole = Completion(AssistantTurn(cut + "}]}}"), Usage(), "stop")
    assert from_reply(whole, []).turn.tool_calls[0].name == "submit_spans"


async def test_auto_switches_to_json_after_a_server_that_cannot_do_tools(
    toolless: FakeProviderServer, bpe: LoadedTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    def steps(trace: Trace) -> list[Any]:
        return [call("view_tokens", start=0, end=12), submit(valid_spans(trace))]

    with caplog.at_level(logging.WARNING, logger="judge_service.judges.llm.json_mode"):
        outcome = await play("openai", toolless, bpe, "auto-first", steps, mode="auto")
        # Two answers without a tool call, then the same turn again in JSON mode.
        sent = toolless.requests_for("auto-first")
        assert [bool(r.body.get("tools")) for r in sent] == [True, True, False]
        assert len(outcome.spans) == 2 and tool_entries(outcome)[-1]["ok"]
        assert outcome.usage.output_tokens == 3 * 20  # the wasted native answer is counted

        # The rest of the process: the next session (a new judge) starts in JSON mode.
        again = await play("openai", toolless, bpe, "auto-second", steps, mode="auto")
        assert [bool(r.body.get("tools")) for r in toolless.requests_for("auto-second")] == [
            False,
            False,
        ]
        assert len(again.spans) == 2
    warnings = [r for r in caplog.records if "cannot do tool calls" in r.getMessage()]
    assert len(warnings) == 1 and "openai:gpt-test" in warnings[0].getMessage()


async def test_auto_stays_native_on_a_server_that_has_made_tool_calls(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    server = servers["openai"]
    await play("openai", server, bpe, "native-works", lambda t: [submit(valid_spans(t))], "auto")
    with pytest.raises(BudgetError, match="without a tool call"):
        await play(
            "openai",
            server,
            bpe,
            "native-chatty",
            lambda _: [Reply(text="Hmm."), Reply(text="Still thinking.")],
            "auto",
        )
    assert all(r.body.get("tools") for r in server.requests_for("native-chatty"))


@pytest.mark.parametrize(
    ("mode", "family"), [("json", "generic"), ("json", "llama-cpp-python"), ("native", "generic")]
)
async def test_json_mode_asks_an_openai_compatible_server_for_one_json_object(
    mode: str, family: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    """Built from the settings, JSON mode sends `response_format: json_object` (the server
    then constrains the answer to JSON: a small model otherwise writes prose), with the
    call envelope as its schema where the family takes one; a native session never does."""
    from judge_service.judges.llm.llm_judge import build_llm_judge
    from judge_service.judges.llm.servers import JSON_MODE_ENVELOPE

    server, script = servers["openai"], f"openai-json-object-{mode}-{family}"
    request = make_request(bpe, script)
    server.book.add(script, submit(valid_spans(request.trace)))
    settings = llm_settings({"openai": server.url + "/v1"}, llm_tool_mode=mode, llm_server=family)
    judge = build_llm_judge("openai", "gpt-test", settings)
    try:
        outcome = await judge.judge(request, checker(request))
    finally:
        await judge.aclose()
    assert len(outcome.spans) == 2
    (sent,) = server.requests_for(script)
    if mode == "json":
        expected: dict[str, Any] = {"type": "json_object"}
        if family == "llama-cpp-python":
            expected["schema"] = JSON_MODE_ENVELOPE
        assert sent.body.get("response_format") == expected
        assert "tools" not in sent.body
    else:
        assert "response_format" not in sent.body and sent.body["tools"]
