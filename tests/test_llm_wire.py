"""Wire compatibility: what the real SDKs put on the wire for each setting, and what the strict
scripted servers refuse (as llama.cpp, OpenAI and Anthropic do).

Judges are built from settings (`build_llm_judge`) and play scripts against the scripted
servers over loopback HTTP; every assertion reads the request bodies the server recorded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from judge_service.config import Settings
from judge_service.errors import InputError
from judge_service.judges.llm.llm_judge import LLMJudge, build_llm_judge
from judge_service.judges.llm.openai_provider import OpenAIProvider
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.judges.llm.servers import PROFILES, profile_for, profile_for_owner
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Reply, call, submit
from tests.harness.scripted.harness import (
    PROVIDERS,
    checker,
    llm_settings,
    make_request,
    valid_spans,
)


@pytest.fixture(autouse=True)
def keys(provider_keys: None) -> Iterator[None]:
    yield


def urls(servers: dict[str, FakeProviderServer]) -> dict[str, str]:
    return {"anthropic": servers["anthropic"].url, "openai": servers["openai"].url + "/v1"}


async def play(
    kind: str,
    servers: dict[str, FakeProviderServer],
    bpe: LoadedTokenizer,
    script: str,
    steps: list[Any] | None = None,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Run one rollout through a judge built from `settings`; the request bodies it sent."""
    name = f"{kind}-{script}"
    request = make_request(bpe, name)
    servers[kind].book.add(name, *(steps or [submit(valid_spans(request.trace))]))
    judge = build_llm_judge(kind, "m-wire", llm_settings(urls(servers), **settings))
    try:
        await judge.judge(request, checker(request))
    finally:
        await judge.aclose()
    return [r.body for r in servers[kind].requests_for(name)]


async def test_a_tool_call_turn_goes_back_with_empty_content_never_null(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    request = make_request(bpe, "x")
    steps = [call("view_tokens", start=0, end=5), submit(valid_spans(request.trace))]
    bodies = await play("openai", servers, bpe, "content", steps)
    assert len(bodies) == 2  # the server took the second turn (it refuses null with a 500)
    assistant = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == "" and assistant[0]["tool_calls"]
    # The same request with null is what llama-cpp-python answers 500 to; so does the fake.
    body = json.loads(json.dumps(bodies[1]))
    next(m for m in body["messages"] if m["role"] == "assistant")["content"] = None
    sent = httpx.post(servers["openai"].url + "/v1/chat/completions", json=body)
    assert sent.status_code == 500 and "NoneType" in sent.json()["error"]["message"]


async def test_anthropic_turns_carry_no_blank_text_blocks(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    request = make_request(bpe, "x")
    blank = Reply(call("view_tokens", start=0, end=5).calls, text=" \n\n")
    bodies = await play(
        "anthropic", servers, bpe, "blank", [blank, submit(valid_spans(request.trace))]
    )
    assert len(bodies) == 2
    assistant = bodies[1]["messages"][1]
    assert assistant["role"] == "assistant"
    assert [block["type"] for block in assistant["content"]] == ["tool_use"]
    # The API refuses a whitespace-only text block; so does the fake.
    body = json.loads(json.dumps(bodies[1]))
    body["messages"][1]["content"].insert(0, {"type": "text", "text": " \n\n"})
    sent = httpx.post(
        servers["anthropic"].url + "/v1/messages",
        json=body,
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert sent.status_code == 400 and "non-whitespace" in sent.json()["error"]["message"]


@pytest.mark.parametrize(
    ("kind", "setting", "wire"),
    [
        ("openai", "required", "required"),
        ("openai", "submit_spans", {"type": "function", "function": {"name": "submit_spans"}}),
        ("anthropic", "required", {"type": "any"}),
        ("anthropic", "submit_spans", {"type": "tool", "name": "submit_spans"}),
    ],
)
async def test_tool_choice_reaches_the_wire_in_each_api_s_form(
    kind: str,
    setting: str,
    wire: Any,
    servers: dict[str, FakeProviderServer],
    bpe: LoadedTokenizer,
) -> None:
    bodies = await play(kind, servers, bpe, f"choice-{setting}", llm_tool_choice=setting)
    assert [body["tool_choice"] for body in bodies] == [wire]
    auto = await play(kind, servers, bpe, f"choice-auto-{setting}")
    assert "tool_choice" not in auto[0]  # auto is each API's default with tools


def test_tool_choice_settings_are_keyed_like_rate_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_LLM_TOOL_CHOICE", "required")
    assert Settings().llm_tool_choice == {"*": "required"}
    keyed = '{"openai:special": "submit_spans", "openai": "required", "*": "auto"}'
    monkeypatch.setenv("JUDGE_LLM_TOOL_CHOICE", keyed)
    settings = Settings(llm_openai_base_url="http://127.0.0.1:1/v1")

    def choice(kind: str, model: str) -> str:
        provider = build_llm_judge(kind, model, settings).provider
        return str(provider.tool_choice)  # type: ignore[attr-defined]

    assert choice("openai", "special") == "submit_spans"
    assert choice("openai", "other") == "required"
    assert choice("anthropic", "claude-x") == "auto"
    monkeypatch.setenv("JUDGE_LLM_TOOL_CHOICE", "none")
    with pytest.raises(ValueError, match="auto, required or a tool name"):
        Settings()


def test_rate_limit_entries_name_only_known_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_LLM_RATE_LIMITS", '{"openai": {"concurrency": 1, "rpm": 60}}')
    assert Settings().llm_rate_limits == {"openai": {"concurrency": 1, "rpm": 60}}
    for entry, message in (
        ('{"openai": {"concurency": 1}}', "unknown \\['concurency'\\]"),
        ('{"openai": {"concurrency": 1.5}}', "whole number"),
        ('{"*": {"concurrency": 0}}', "positive"),
    ):
        monkeypatch.setenv("JUDGE_LLM_RATE_LIMITS", entry)
        with pytest.raises(ValueError, match=message):
            Settings()


def test_a_tool_choice_naming_no_tool_of_the_judge_is_a_settings_error() -> None:
    settings = Settings(llm_tool_choice={"openai": "teleport"}, llm_tools=["view_tokens"])
    with pytest.raises(InputError, match="teleport") as raised:
        build_llm_judge("openai", "m", settings)
    assert raised.value.field == "settings.llm_tool_choice"
    assert "submit_spans" in str(raised.value) and "view_tokens" in str(raised.value)
    # A tool that exists but is narrowed away by JUDGE_LLM_TOOLS is just as unknown.
    narrowed = Settings(llm_tool_choice="search_trace", llm_tools=["view_tokens"])
    with pytest.raises(InputError, match="search_trace"):
        build_llm_judge("anthropic", "m", narrowed)


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({}, "max_tokens"),  # any base URL but OpenAI's: max_tokens
        ({"llm_server": "vllm"}, "max_completion_tokens"),
        ({"llm_openai_max_tokens_field": "max_completion_tokens"}, "max_completion_tokens"),
        ({"llm_server": "vllm", "llm_openai_max_tokens_field": "max_tokens"}, "max_tokens"),
    ],
)
async def test_the_max_tokens_field_follows_the_server(
    settings: dict[str, Any],
    field: str,
    servers: dict[str, FakeProviderServer],
    bpe: LoadedTokenizer,
) -> None:
    name = "field-" + "-".join(f"{k}-{v}" for k, v in settings.items())
    bodies = await play("openai", servers, bpe, name, **settings)
    other = {"max_tokens", "max_completion_tokens"} - {field}
    assert bodies[0][field] == 4096 and not other & set(bodies[0])


def test_no_base_url_or_openai_s_own_means_max_completion_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fields = {
        url: OpenAIProvider("m", RateLimiter(), base_url=url).max_tokens_field
        for url in (None, "https://api.openai.com/v1", "http://localhost:8000/v1")
    }
    assert fields == {
        None: "max_completion_tokens",
        "https://api.openai.com/v1": "max_completion_tokens",
        "http://localhost:8000/v1": "max_tokens",
    }
    monkeypatch.setenv("OPENAI_BASE_URL", "http://ollama:11434/v1")
    assert OpenAIProvider("m", RateLimiter()).max_tokens_field == "max_tokens"


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_reasoning_effort_is_sent_only_where_set(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    bodies = await play(kind, servers, bpe, "effort", llm_reasoning_effort={kind: "low"})
    if kind == "openai":
        assert bodies[0]["reasoning_effort"] == "low"
    else:  # Anthropic: the effort parameter, without extended thinking
        assert bodies[0]["output_config"] == {"effort": "low"} and "thinking" not in bodies[0]
    other = "anthropic" if kind == "openai" else "openai"
    plain = await play(kind, servers, bpe, "effort-other", llm_reasoning_effort={other: "high"})
    assert not {"reasoning_effort", "output_config"} & set(plain[0])


async def test_the_strict_servers_refuse_fields_the_real_apis_do_not_know(
    servers: dict[str, FakeProviderServer],
) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=servers["openai"].url + "/v1", max_retries=0)
    messages: Any = [{"role": "user", "content": "SCRIPT:none"}]
    with pytest.raises(
        openai.BadRequestError, match="Unrecognized request argument supplied: top_k"
    ):
        await client.chat.completions.create(model="m", messages=messages, extra_body={"top_k": 5})
    await client.close()
    sent = httpx.post(
        servers["anthropic"].url + "/v1/messages",
        json={"model": "m", "max_tokens": 8, "messages": messages, "repeat_penalty": 1.1},
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert sent.status_code == 400
    assert sent.json()["error"]["message"] == "repeat_penalty: Extra inputs are not permitted"


def test_the_conformance_table_drives_the_auto_defaults(caplog: pytest.LogCaptureFixture) -> None:
    assert profile_for("auto", None).name == "openai"
    assert profile_for("auto", "https://api.openai.com/v1").name == "openai"
    assert profile_for("auto", "http://127.0.0.1:8080/v1").name == "generic"
    assert profile_for_owner("llamacpp") is PROFILES["llamacpp"]
    assert profile_for_owner("me") is PROFILES["llama-cpp-python"]
    assert PROFILES["llama-cpp-python"].tool_choices == {"named"}
    caplog.set_level(logging.WARNING, logger="judge_service.judges.llm.servers")
    base = {"llm_openai_base_url": "http://127.0.0.1:1/v1", "llm_server": "llama-cpp-python"}
    judge = build_llm_judge("openai", "smollm2", Settings(**base))
    assert isinstance(judge, LLMJudge)
    assert "every turn will come back as text" in caplog.text
    caplog.clear()
    build_llm_judge("openai", "smollm2", Settings(**base, llm_tool_choice="submit_spans"))
    assert caplog.text == ""
    build_llm_judge("openai", "smollm2", Settings(**base, llm_tool_choice="required"))
    assert "does not honour JUDGE_LLM_TOOL_CHOICE=required" in caplog.text


def test_request_bodies_hold_no_null_content(
    servers: dict[str, FakeProviderServer],
) -> None:
    # Every body the SDKs sent for any test of this module, both APIs (the raw controls
    # above aside): null content appears in none.
    for server in servers.values():
        sent = [r for r in server.requests if "x-stainless-lang" in map(str.lower, r.headers)]
        assert sent
        for recorded in sent:
            for message in recorded.body.get("messages", []):
                assert message.get("content", "") is not None, json.dumps(message)[:200]
