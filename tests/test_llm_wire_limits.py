"""Third-party servers, kept honest over real HTTP: the output cap checked against reported usage,
a per-provider concurrency limit, lenient tool-call arguments, and bounded errors that name the
endpoint and the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from judge_service import metrics
from judge_service.errors import JudgeError, ProviderError
from judge_service.judges.base import JudgeLimits
from judge_service.judges.llm.llm_judge import LLMJudge, LLMJudgeOutcome, build_llm_judge
from judge_service.judges.llm.loop import LoopConfig
from judge_service.judges.llm.openai_provider import OpenAIProvider
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    Call,
    FakeProviderServer,
    Fault,
    Hang,
    Reply,
    openai_server,
    submit,
)
from tests.harness.scripted.conformance import LLAMA_CPP_PYTHON
from tests.harness.scripted.harness import (
    PROVIDERS,
    checker,
    judge_tools,
    llm_settings,
    make_request,
    run,
    tool_results,
    valid_spans,
)


@pytest.fixture(autouse=True)
def keys(provider_keys: None) -> Iterator[None]:
    yield


def _counted(judge: str) -> float:
    sample = "judge_provider_output_cap_ignored_total"
    return metrics.REGISTRY.get_sample_value(sample, {"judge": judge}) or 0.0


async def test_a_server_that_ignores_the_cap_field_is_caught_by_its_usage(
    bpe: LoadedTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="judge_service.judges.llm.provider")
    # llama-cpp-python reads only max_tokens: sent max_completion_tokens, it runs long.
    with openai_server(strict=LLAMA_CPP_PYTHON) as server:
        judge = build_llm_judge(
            "openai",
            "smollm2",
            llm_settings(
                {"openai": server.url + "/v1"},
                llm_openai_max_tokens_field="max_completion_tokens",
                llm_max_tokens_per_call=512,
            ),
        )
        before = _counted("openai:smollm2")
        outcomes = []
        for name in ("cap-a", "cap-b"):
            request = make_request(bpe, name)
            server.book.add(
                name, Reply(submit(valid_spans(request.trace)).calls, output_tokens=5000)
            )
            outcome = await judge.judge(request, checker(request))
            assert isinstance(outcome, LLMJudgeOutcome)
            outcomes.append(outcome)
        await judge.aclose()
    assert server.requests[0].body["max_completion_tokens"] == 512
    turn = next(e for e in outcomes[0].transcript if e["type"] == "assistant")
    assert turn["usage"]["output_tokens"] == 5000
    assert "JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD=max_tokens" in turn["notes"][0]
    assert _counted("openai:smollm2") == before + 2  # every such completion is counted
    warnings = [r for r in caplog.records if "capped output at 512" in r.getMessage()]
    assert len(warnings) == 1  # logged once per provider
    assert "JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD" in warnings[0].getMessage()


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_reply_past_the_cap_is_cut_by_the_server_and_not_flagged(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    long = Reply(text="Let me think. " * 300, output_tokens=3000)
    outcome, server, _ = await run(
        kind, servers, bpe, "cut", lambda trace: [long, submit(valid_spans(trace))]
    )
    first = server.requests_for(f"{kind}-cut")[0]
    cap = first.body["max_tokens"]  # the fake base URL is not OpenAI's: max_tokens
    turn = next(e for e in outcome.transcript if e["type"] == "assistant")
    assert turn["stop_reason"] == ("length" if kind == "openai" else "max_tokens")
    assert turn["usage"]["output_tokens"] == cap and "notes" not in turn
    assert len(turn["text"]) < len(long.text)


async def _session(
    settings: Any, bpe: LoadedTokenizer, server: FakeProviderServer, name: str, **limits: Any
) -> Any:
    request = make_request(bpe, name, limits=JudgeLimits(**limits) if limits else None)
    judge = build_llm_judge("openai", f"model-{name}", settings)
    try:
        return await judge.judge(request, checker(request))
    except JudgeError as exc:
        return exc
    finally:
        await judge.aclose()


@pytest.mark.parametrize("concurrency", [None, 1])
async def test_concurrency_caps_the_requests_in_flight_per_quota_key(
    concurrency: int | None, bpe: LoadedTokenizer
) -> None:
    limits = {"openai": {"concurrency": concurrency}} if concurrency else {}
    with openai_server(delay_s=0.15) as server:
        settings = llm_settings({"openai": server.url + "/v1"}, llm_rate_limits=limits)
        names = [f"slots-{concurrency}-{i}" for i in range(4)]
        for name in names:
            request = make_request(bpe, name)
            server.book.add(name, submit(valid_spans(request.trace)))
        # Four rollouts at once, each under its own model name: one provider-wide key.
        results = await asyncio.gather(*(_session(settings, bpe, server, n) for n in names))
    assert all(isinstance(r, LLMJudgeOutcome) and r.spans for r in results)
    if concurrency:
        assert server.max_in_flight == 1
    else:
        assert server.max_in_flight > 1  # without the cap the server sees them together


async def test_waiting_for_a_slot_past_the_deadline_is_a_provider_error(
    bpe: LoadedTokenizer,
) -> None:
    with openai_server() as server:
        settings = llm_settings(
            {"openai": server.url + "/v1"}, llm_rate_limits={"*": {"concurrency": 1}}
        )
        server.book.add("busy", Hang(1.5))
        server.book.add("queued", submit([]))
        busy = asyncio.create_task(_session(settings, bpe, server, "busy", deadline_s=3.0))
        while server.in_flight == 0:  # "busy" holds the one slot from here on
            await asyncio.sleep(0.01)
        queued = await _session(settings, bpe, server, "queued", deadline_s=0.3)
        assert isinstance(queued, ProviderError) and "deadline" in str(queued)
        assert server.requests_for("queued") == []  # it never reached the one-slot server
        await busy
        request = make_request(bpe, "after")
        server.book.add("after", submit(valid_spans(request.trace)))
        after = await _session(settings, bpe, server, "after", deadline_s=3.0)
        assert isinstance(after, LLMJudgeOutcome)  # the slot given up on was not leaked


LENIENT = {
    "fenced": lambda args: f"```json\n{json.dumps(args, indent=2)}\n```",
    "trailing-commas": lambda args: json.dumps(args)[:-2] + ",],}",
    "raw-newline": lambda args: json.dumps(args).replace("340 + 64", "340 +\n64", 1),
}


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("slip", sorted(LENIENT))
async def test_known_slips_in_tool_arguments_are_read(
    kind: str, slip: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def steps(trace: Any) -> list[Any]:
        spans = valid_spans(trace)
        spans[0]["evidence"] = "340 + 64 = 404"
        raw = LENIENT[slip]({"spans": spans})
        return [Reply((Call("submit_spans", raw=raw),))]

    outcome, _, _ = await run(kind, servers, bpe, f"slip-{slip}", steps)
    assert len(outcome.spans) == 2 and outcome.turns == 1
    assert "\n" in outcome.spans[0]["evidence"] or slip != "raw-newline"


GARBAGE = {
    "prose": ("I would submit the spans now.", "not valid JSON"),
    "cut-off": ('{"spans": [{"start": 1, "end": ', "not valid JSON"),  # never completed
    "array": ('[{"start": 1}]', "must be a JSON object"),
    "prose-around": ('Sure! {"spans": []}', "not valid JSON"),
}


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("case", sorted(GARBAGE))
async def test_garbage_arguments_are_still_refused_and_the_model_is_told(
    kind: str, case: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    raw, told = GARBAGE[case]
    script = f"garbage-{case}"
    outcome, server, _ = await run(
        kind,
        servers,
        bpe,
        script,
        lambda trace: [Reply((Call("submit_spans", raw=raw),)), submit(valid_spans(trace))],
    )
    result = tool_results(server, f"{kind}-{script}", 1)[0]
    assert "could not read the arguments of submit_spans" in result and told in result
    assert outcome.turns == 2 and len(outcome.spans) == 2


async def test_repaired_arguments_go_back_as_valid_json(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    slip = '{"start": 0, "end": 4,}'
    await run(
        "openai",
        servers,
        bpe,
        "echo",
        lambda trace: [Reply((Call("view_tokens", raw=slip),)), submit(valid_spans(trace))],
    )
    second = servers["openai"].requests_for("openai-echo")[1].body
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    # Servers such as Ollama parse earlier turns' arguments again and refuse invalid JSON.
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"start": 0, "end": 4}


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_server_error_names_host_and_model_and_is_bounded(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    dump = "validation failed: " + "x" * 3000
    with pytest.raises(ProviderError) as raised:
        await run(kind, servers, bpe, "dump", lambda _: [Fault(500, message=dump)], max_retries=0)
    text = str(raised.value)
    host = servers[kind].url.removeprefix("http://")
    model = "claude-test" if kind == "anthropic" else "gpt-test"
    assert text.startswith(f"HTTP 500 from {host} (model {model}): validation failed: xxx")
    assert len(text) < 400 and text.endswith("…")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_refused_connection_names_the_url_and_model(bpe: LoadedTokenizer) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    provider = OpenAIProvider("x", RateLimiter(), base_url=url, api_key="k", max_retries=0)
    judge = LLMJudge(provider, tools=judge_tools(), config=LoopConfig(max_tokens_per_call=64))
    request = make_request(bpe, "nowhere")
    with pytest.raises(ProviderError) as raised:
        await judge.judge(request, checker(request))
    await judge.aclose()
    assert str(raised.value) == f"cannot connect to {url} (model x): Connection refused"


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_timeout_names_host_and_model(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(ProviderError, match="timed out") as raised:
        await run(kind, servers, bpe, "slow", lambda _: [Hang(5)], max_retries=0, timeout_s=0.2)
    host = servers[kind].url.removeprefix("http://")
    assert f"no response from {host} (model " in str(raised.value)
