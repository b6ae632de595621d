"""The pre-flight over real HTTP (a closed port, a server without the model, without tools,
with a wrong path), and `judge-service judge` with it and its per-request flags."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_service.cli.main import main
from judge_service.judges.llm.anthropic_provider import AnthropicProvider
from judge_service.judges.llm.json_mode import (
    AutoToolModeProvider,
    JsonModeProvider,
    reset_tool_modes,
)
from judge_service.judges.llm.llm_judge import LLMJudge
from judge_service.judges.llm.openai_provider import OpenAIProvider
from judge_service.judges.llm.preflight import preflight
from judge_service.judges.llm.provider import Provider
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.tools.trace_tools import SearchTraceTool, ViewTokensTool
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    FakeProviderServer,
    Fault,
    Hang,
    Reply,
    View,
    anthropic_server,
    call,
    openai_server,
    submit,
)
from tests.harness.scripted.harness import (
    PROVIDERS,
    encode,
    make_provider,
    make_request,
    valid_spans,
)
from tests.harness.scripted.server import Recorded

MODELS = {"anthropic": "claude-test", "openai": "gpt-test"}


@pytest.fixture(autouse=True)
def fresh_modes() -> Iterator[None]:
    reset_tool_modes()
    yield
    reset_tool_modes()


@pytest.fixture(scope="module")
def ready() -> Iterator[dict[str, FakeProviderServer]]:
    """Servers that list their model and answer the pre-flight's (unscripted) request."""
    with (
        anthropic_server(models=["claude-test"], unscripted=Reply(text="ok")) as anthropic,
        openai_server(models=["other-model", "gpt-test"], unscripted=Reply(text="ok")) as openai,
    ):
        yield {"anthropic": anthropic, "openai": openai}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def judge_on(provider: Provider) -> LLMJudge:
    return LLMJudge(provider, tools=[ViewTokensTool(), SearchTraceTool()])


def preflight_requests(server: FakeProviderServer) -> list[Recorded]:
    return [r for r in server.requests if r.script is None]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_closed_port_fails_with_the_url_and_model(kind: str) -> None:
    port = closed_port()
    provider = _at(kind, f"http://127.0.0.1:{port}")
    result = await preflight(judge_on(provider), timeout_s=5.0)
    assert not result.ok and result.tools_supported is None
    assert f"127.0.0.1:{port}" in result.message and MODELS[kind] in result.message
    assert "cannot connect" in result.message and "\n" not in result.message


def _at(kind: str, url: str) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider("claude-test", RateLimiter(), base_url=url, api_key="k")
    return OpenAIProvider("gpt-test", RateLimiter(), base_url=url + "/v1", api_key="k")


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_ready_server_passes_with_one_tiny_request_with_tools(
    kind: str, ready: dict[str, FakeProviderServer]
) -> None:
    server = ready[kind]
    before = len(preflight_requests(server))
    result = await preflight(judge_on(make_provider(kind, server)))
    assert result.ok, result.message
    assert MODELS[kind] in result.models and server.url in result.message
    (sent,) = preflight_requests(server)[before:]
    names = {t.get("name") or t["function"]["name"] for t in sent.body["tools"]}
    assert {"submit_spans", "view_tokens", "search_trace"} <= names
    assert sent.body.get("max_tokens", sent.body.get("max_completion_tokens")) == 16


async def test_a_server_without_the_model_lists_what_it_offers() -> None:
    with openai_server(models=[f"model-{i}" for i in range(30)]) as server:
        result = await preflight(judge_on(make_provider("openai", server)))
    assert not result.ok and len(result.models) == 30
    assert "does not offer gpt-test" in result.message and "model-0, model-1" in result.message
    assert "and 18 more" in result.message and server.url in result.message
    assert not server.requests  # no request to a model that is not there


async def test_a_wrong_path_says_so_and_the_sdk_does_not_retry() -> None:
    with openai_server(unscripted=Fault(500, message="x" * 3000)) as server:
        result = await preflight(judge_on(make_provider("openai", server)))
        assert not result.ok and "HTTP 500" in result.message and len(result.message) < 600
        # Once with tools, once without (to tell a tool problem apart): never retried.
        assert [bool(r.body.get("tools")) for r in server.requests] == [True, False]

        # The base URL without /v1: the models list and the request are both 404s.
        provider = make_provider("openai", server)
        provider.base_url = server.url  # type: ignore[attr-defined]
        missing = await preflight(judge_on(provider))
    assert not missing.ok and "base URL" in missing.message


def _refuses_tools(view: View) -> Reply | Fault:
    if view.body.get("tools"):
        return Fault(400, message="this server does not support tools")
    return Reply(text="ok")


@pytest.mark.parametrize("mode", ["native", "auto", "json"])
async def test_a_server_that_refuses_tools(mode: str) -> None:
    with openai_server(models=["gpt-test"], unscripted=_refuses_tools) as server:
        inner = make_provider("openai", server)
        wrapped = {"native": inner, "auto": AutoToolModeProvider(inner)}.get(mode)
        provider = wrapped or JsonModeProvider(inner)
        result = await preflight(judge_on(provider))
        sent = [bool(r.body.get("tools")) for r in server.requests]
    if mode == "native":
        assert not result.ok and result.tools_supported is False
        assert "JUDGE_LLM_TOOL_MODE=json" in result.message
    elif mode == "auto":
        assert result.ok and result.tools_supported is False and "JSON tool mode" in result.message
        assert isinstance(provider, AutoToolModeProvider) and provider.using_json
    else:
        assert result.ok and sent == [False]  # JSON mode never sends tools


def _forcing_required(server: FakeProviderServer, *, stream: bool) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-test",
        RateLimiter(),
        base_url=server.url + "/v1",
        api_key="test-key",
        max_retries=0,
        tool_choice="required",
        stream=stream,
    )


def _refuses_required(view: View) -> Reply | Fault:
    # llama-cpp-python under chatml-function-calling: tool_choice "required" fails an
    # assertion in its handler: a 500, or, streamed, a 200 whose stream just stops.
    if view.body.get("tool_choice") == "required":
        if view.body.get("stream"):
            return Reply(text="", interrupted=True)
        return Fault(500, message="Internal Server Error")
    return Reply(text="ok")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refused_forced_tool_choice_is_named_with_the_setting_to_change(
    stream: bool,
) -> None:
    with openai_server(models=["gpt-test"], unscripted=_refuses_required) as server:
        result = await preflight(judge_on(_forcing_required(server, stream=stream)))
        sent = [r.body.get("tool_choice") for r in server.requests]
    assert sent == ["required", None]  # then the same request without tools: answered
    assert not result.ok and result.tools_supported is False
    assert "tool_choice required" in result.message
    assert ("ended without a finish reason" if stream else "HTTP 500") in result.message
    assert "JUDGE_LLM_TOOL_CHOICE" in result.message


async def test_a_server_left_broken_by_the_forced_choice_still_gets_the_choice_named() -> None:
    # llama-cpp-python after failing `required` mid-stream: later requests fail too.
    def wedged(view: View) -> Reply | Fault:
        if view.body.get("tool_choice") == "required":
            return Reply(text="", interrupted=True)
        return Fault(500, message="Internal Server Error")

    with openai_server(models=["gpt-test"], unscripted=wedged) as server:
        result = await preflight(judge_on(_forcing_required(server, stream=True)))
    assert not result.ok
    assert "forced tool_choice required" in result.message
    assert "JUDGE_LLM_TOOL_CHOICE" in result.message


# --- the CLI -----------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, provider_keys: None) -> pytest.MonkeyPatch:
    monkeypatch.setenv("JUDGE_ALLOWED_JUDGES", "openai:*,rules")
    monkeypatch.setenv("JUDGE_LLM_MAX_RETRIES", "0")
    return monkeypatch


def _rollouts(path: Path, bpe: LoadedTokenizer, bpe_dir: Path, *scripts: str) -> Path:
    ids = encode(bpe)
    rows = [
        {
            "id": script,
            "problem": f"Compute 17 × 24. SCRIPT:{script}",
            "response_token_ids": ids,
            "tokenizer": str(bpe_dir),
            "reward": 1.0,
            "final_answer": "408",
            "reference_answer": "408",
        }
        for script in scripts
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _judge(src: Path, out: Path, *extra: str) -> int:
    return main(
        ["judge", str(src), "-o", str(out), "--no-progress", "--judge", "openai:gpt-test", *extra]
    )


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {row["id"]: row for row in rows}


def test_cli_exits_non_zero_when_the_provider_cannot_judge(
    cli_env: pytest.MonkeyPatch,
    tmp_path: Path,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    cli_env.setenv("JUDGE_LLM_OPENAI_BASE_URL", url)
    src, out = _rollouts(tmp_path / "in.jsonl", bpe, bpe_dir, "cli-down"), tmp_path / "out.jsonl"
    assert _judge(src, out) == 1
    error = capsys.readouterr().err.strip()
    assert url in error and "gpt-test" in error and "\n" not in error
    assert not out.exists()  # nothing judged, nothing to skip on the rerun
    # --skip-preflight judges anyway: every rollout falls back.
    assert _judge(src, out, "--skip-preflight") == 0
    assert _lines(out)["cli-down"]["status"] == "fallback"


def test_cli_judges_after_a_passing_preflight_with_its_flags(
    cli_env: pytest.MonkeyPatch,
    tmp_path: Path,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    ready: dict[str, FakeProviderServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ready["openai"]
    cli_env.setenv("JUDGE_LLM_OPENAI_BASE_URL", server.url + "/v1")
    trace = make_request(bpe, "-").trace
    steps = [call("view_tokens", start=0, end=12), submit(valid_spans(trace))]
    for name in ("cli-full", "cli-turns", "cli-plain"):
        server.book.add(name, *steps)
    server.book.add("cli-slow", Hang(3), *steps)

    full = _rollouts(tmp_path / "full.jsonl", bpe, bpe_dir, "cli-full")
    assert _judge(full, tmp_path / "full.out", "--include-transcript") == 0
    assert "ready" in capsys.readouterr().err
    line = _lines(tmp_path / "full.out")["cli-full"]
    assert line["status"] == "ok" and len(line["spans"]) == 2
    assert [e["type"] for e in line["transcript"]].count("assistant") == 2

    turns = _rollouts(tmp_path / "turns.jsonl", bpe, bpe_dir, "cli-turns")
    assert _judge(turns, tmp_path / "turns.out", "--max-turns", "1") == 0
    assert _lines(tmp_path / "turns.out")["cli-turns"]["status"] == "fallback"
    assert len(server.requests_for("cli-turns")) == 1  # one turn, then the cap

    plain = _rollouts(tmp_path / "plain.jsonl", bpe, bpe_dir, "cli-plain", "cli-slow")
    assert _judge(plain, tmp_path / "plain.out", "--deadline-s", "0.5") == 0
    lines = _lines(tmp_path / "plain.out")
    assert lines["cli-plain"]["status"] == "ok" and "transcript" not in lines["cli-plain"]
    assert lines["cli-slow"]["status"] == "fallback"  # the 3 s answer came after the deadline
    assert "deadline" in json.dumps(lines["cli-slow"])


def test_cli_flags_are_checked_as_the_request_options_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        _judge(src, tmp_path / "out.jsonl", "--max-turns", "0")
    assert exited.value.code == 2 and "options.max_turns" in capsys.readouterr().err


def test_cli_in_json_tool_mode(
    cli_env: pytest.MonkeyPatch,
    tmp_path: Path,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    ready: dict[str, FakeProviderServer],
) -> None:
    server = ready["openai"]
    cli_env.setenv("JUDGE_LLM_OPENAI_BASE_URL", server.url + "/v1")
    cli_env.setenv("JUDGE_LLM_TOOL_MODE", "json")
    trace = make_request(bpe, "-").trace
    server.book.add("cli-json", call("view_tokens", start=0, end=12), submit(valid_spans(trace)))
    before = len(server.requests)
    src = _rollouts(tmp_path / "in.jsonl", bpe, bpe_dir, "cli-json")
    assert _judge(src, tmp_path / "out.jsonl") == 0
    line = _lines(tmp_path / "out.jsonl")["cli-json"]
    assert line["status"] == "ok" and len(line["spans"]) == 2
    assert line["judge"]["name"] == "openai:gpt-test" and line["judge"]["turns"] == 2
    sent = server.requests[before:]  # the pre-flight's request, then the session's two
    assert [r.script for r in sent] == [None, "cli-json", "cli-json"]
    assert not any(r.body.get("tools") for r in sent)
