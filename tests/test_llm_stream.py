"""Streamed OpenAI-compatible requests (judges/llm/openai_stream.py), over real HTTP with the
real `openai` SDK: a streamed session ends exactly as a plain one, usage is read from the
usage chunk (or counted when a server sends none), a stream cut short is an error, and a
request the service gave up on stops at the server instead of holding its slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from judge_service.errors import JudgeError
from judge_service.judges.base import JudgeLimits
from judge_service.judges.llm.llm_judge import LLMJudgeOutcome, build_llm_judge
from judge_service.judges.llm.openai_stream import (
    CHARS_PER_TOKEN_BOUND,
    NO_USAGE_NOTE,
    OVERSIZE_NOTE,
)
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Reply, call, openai_server, submit
from tests.harness.scripted.conformance import LLAMA_CPP_PYTHON
from tests.harness.scripted.harness import checker, llm_settings, make_request, valid_spans


@pytest.fixture(autouse=True)
def keys(provider_keys: None) -> Iterator[None]:
    yield


async def _judge(
    server: FakeProviderServer, bpe: LoadedTokenizer, name: str, steps: Any, **settings: Any
) -> tuple[LLMJudgeOutcome | JudgeError, float]:
    # A roomy deadline: the first span check warms the equivalence worker (seconds, loaded).
    limits = settings.pop("limits", JudgeLimits(max_turns=8, max_tool_calls=16, deadline_s=60))
    request = make_request(bpe, name, limits=limits)
    server.book.add(name, *steps(request.trace))
    judge = build_llm_judge("openai", "m", llm_settings({"openai": server.url + "/v1"}, **settings))
    began = time.monotonic()
    try:
        outcome: LLMJudgeOutcome | JudgeError = await judge.judge(request, checker(request))
    except JudgeError as exc:
        outcome = exc
    finally:
        await judge.aclose()
    return outcome, time.monotonic() - began


def _session(trace: Any) -> list[Reply]:
    spans = valid_spans(trace)
    return [
        Reply((*call("view_tokens", start=0, end=12).calls,), text="Looking first. "),
        Reply(submit(spans).calls, text="Here they are.", output_tokens=57),
    ]


@pytest.mark.parametrize("stream", ["on", "off"])
async def test_a_streamed_session_ends_as_a_plain_one(stream: str, bpe: LoadedTokenizer) -> None:
    with openai_server() as server:
        outcome, _ = await _judge(server, bpe, f"s-{stream}", _session, llm_openai_stream=stream)
    assert isinstance(outcome, LLMJudgeOutcome)
    bodies = [r.body for r in server.requests]
    assert all(b.get("stream", False) is (stream == "on") for b in bodies)
    if stream == "on":
        assert all(b["stream_options"] == {"include_usage": True} for b in bodies)
    # The arguments came back in 7-character pieces; the spans are the ones submitted.
    sent = valid_spans(make_request(bpe, "any").trace)
    assert [(d["label"], d["start"], d["end"]) for d in outcome.spans] == [
        (d["label"], d["start"], d["end"]) for d in sent
    ]
    turns = [e for e in outcome.transcript if e["type"] == "assistant"]
    assert [t["text"] for t in turns] == ["Looking first. ", "Here they are."]
    assert turns[1]["usage"]["output_tokens"] == 57 and turns[1]["usage"]["input_tokens"] > 0
    assert "notes" not in turns[1]
    assert outcome.usage.output_tokens == 20 + 57


async def test_a_server_that_streams_no_usage_is_counted_by_chunks(bpe: LoadedTokenizer) -> None:
    # llama-cpp-python: streamed by default for its family, and its chunks carry no usage.
    with openai_server(strict=LLAMA_CPP_PYTHON) as server:
        outcome, _ = await _judge(server, bpe, "nousage", _session, llm_server="llama-cpp-python")
    assert isinstance(outcome, LLMJudgeOutcome) and outcome.spans
    assert all(r.body["stream"] is True for r in server.requests)
    turns = [e for e in outcome.transcript if e["type"] == "assistant"]
    for turn in turns:
        assert turn["usage"]["input_tokens"] == 0 and turn["usage"]["output_tokens"] > 0
        assert NO_USAGE_NOTE in turn["notes"]


async def test_a_stream_ended_without_a_finish_reason_is_a_provider_error(
    bpe: LoadedTokenizer,
) -> None:
    def steps(trace: Any) -> list[Reply]:
        cut = Reply(submit(valid_spans(trace)).calls, interrupted=True)
        return [cut, cut, cut]

    with openai_server() as server:
        outcome, _ = await _judge(server, bpe, "cut", steps, llm_openai_stream="on")
    assert isinstance(outcome, JudgeError) and outcome.boundary == "provider"
    assert "ended without a finish reason" in str(outcome)
    assert f"127.0.0.1:{server.url.rsplit(':', 1)[1]}" in str(outcome)


@pytest.mark.parametrize("stream", ["on", "off"])
async def test_a_request_given_up_on_stops_at_the_server_only_when_streamed(
    stream: str, bpe: LoadedTokenizer
) -> None:
    """A slow reply (400 chunks, 25 ms apart: 10 s) past a 1 s deadline. Streamed, the
    server sees the client gone at its next chunk and its slot is free; plain, it would
    still be generating (the fake holds a plain reply for as long as its chunks take)."""

    def steps(trace: Any) -> list[Reply]:
        slow = Reply(text="Let me think about this. " * 400, chunk_delay_s=0.025)
        return [slow]

    with openai_server(delay_s=0.0) as server:
        if stream == "off":
            server.delay_s = 10.0  # a plain reply is produced whole before it is sent
        outcome, elapsed = await _judge(
            server,
            bpe,
            f"slow-{stream}",
            steps,
            llm_openai_stream=stream,
            limits=JudgeLimits(deadline_s=1.0),
        )
        assert isinstance(outcome, JudgeError) and elapsed < 2.5
        freed = await _wait_until(lambda: server.in_flight == 0, seconds=2.0)
        if stream == "on":
            assert freed and server.abandoned_streams == 1
        else:
            assert not freed and server.in_flight == 1


async def _wait_until(condition: Any, seconds: float) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return bool(condition())


async def test_a_stream_past_its_size_bound_is_cut_and_read_as_cut_off(
    bpe: LoadedTokenizer,
) -> None:
    # A server that ignores the cap field (llama-cpp-python reads only max_tokens) streams
    # 20,000 characters; 64 tokens a turn bound the reply at 64 x 16 characters.
    def steps(trace: Any) -> list[Reply]:
        return [Reply(text="word " * 4000, output_tokens=5000), submit(valid_spans(trace))]

    with openai_server(strict=LLAMA_CPP_PYTHON) as server:
        outcome, _ = await _judge(
            server,
            bpe,
            "oversize",
            steps,
            llm_openai_stream="on",
            llm_openai_max_tokens_field="max_completion_tokens",
            llm_max_tokens_per_call=64,
        )
    assert isinstance(outcome, LLMJudgeOutcome) and outcome.spans
    first = next(e for e in outcome.transcript if e["type"] == "assistant")
    assert first["stop_reason"] == "length" and OVERSIZE_NOTE in first["notes"]
    assert 64 * CHARS_PER_TOKEN_BOUND < len(first["text"]) <= 64 * CHARS_PER_TOKEN_BOUND + 7
