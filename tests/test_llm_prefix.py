"""Prefix stability: the cached part of every request is byte-identical from turn to turn.

The scripted Anthropic server records the raw bytes of every request; the
stable prefix (tools, system, the rollout context with the marked trace) of
each turn must appear byte for byte in every later turn, earlier turns must
be repeated unchanged (only the rolling breakpoint moves), there are at most
four breakpoints, and the server's cache simulation then reads the prefix
back. OpenAI gets the same stable leading messages and one prompt_cache_key.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from judge_service.judges.base import JudgeLimits
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    FakeProviderServer,
    anthropic_server,
    call,
    openai_server,
    submit,
)
from tests.harness.scripted.harness import (
    CORRECTION,
    TRACE_TEXT,
    WRONG_STEP,
    checker,
    make_judge,
    make_request,
    span,
)

LONG_TRACE = TRACE_TEXT.replace(
    "</think>", "Let me re-check: 17 × 24 = 408. Yes.\n" * 60 + "</think>"
)


def compact(value: Any) -> bytes:
    """JSON as the SDKs put it on the wire: no spaces, unicode as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def breakpoints(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')


@pytest.fixture(scope="module")
def anthropic() -> Iterator[FakeProviderServer]:
    with anthropic_server() as server:
        yield server


@pytest.fixture(scope="module")
def openai() -> Iterator[FakeProviderServer]:
    with openai_server() as server:
        yield server


def session_steps(trace: Any) -> list[Any]:
    return [
        call("view_tokens", start=0, end=40),
        call("search_trace", pattern="17 × 4"),
        call("view_tokens", start=40, end=80),
        submit(
            [span(trace, WRONG_STEP, "invalid"), span(trace, CORRECTION, "verified_correction")]
        ),
    ]


async def play(server: FakeProviderServer, kind: str, name: str, bpe: LoadedTokenizer) -> None:
    request = make_request(bpe, name, text=LONG_TRACE, limits=JudgeLimits(max_turns=8))
    server.book.add(name, *session_steps(request.trace))
    judge = make_judge(kind, server)
    outcome = await judge.judge(request, checker(request))
    await judge.aclose()
    assert outcome.turns == 4


async def test_anthropic_cached_prefix_is_byte_identical_turn_to_turn(
    anthropic: FakeProviderServer, bpe: LoadedTokenizer
) -> None:
    await play(anthropic, "anthropic", "prefix-a", bpe)
    sent = anthropic.requests_for("prefix-a")
    assert [r.turn for r in sent] == [0, 1, 2, 3]
    first = sent[0].body
    stable = [compact(first["tools"]), compact(first["system"]), compact(first["messages"][0])]
    for request in sent:
        for segment in stable:
            assert segment in request.raw  # byte for byte on the wire
        assert breakpoints(request.body) == min(4, 2 + request.turn)
        assert "cache_control" in request.body["system"][-1]
        assert "cache_control" in request.body["messages"][0]["content"][-1]
        assert "cache_control" in request.body["messages"][-1]["content"][-1]
    for earlier, later in itertools.pairwise(sent):
        # Everything the earlier turn sent comes back unchanged; only the rolling
        # breakpoint moved off its last block.
        before = without_cache_control(earlier.body["messages"])
        after = without_cache_control(later.body["messages"][: len(before)])
        assert compact(after) == compact(before)
        # The block written at the earlier turn's last breakpoint is marked again to be read.
        assert "cache_control" in later.body["messages"][len(before) - 1]["content"][-1]
        assert [t["name"] for t in later.body["tools"]] == sorted(t["name"] for t in first["tools"])


async def test_anthropic_prefix_is_read_from_the_cache_after_the_first_turn(
    anthropic: FakeProviderServer, bpe: LoadedTokenizer
) -> None:
    await play(anthropic, "anthropic", "prefix-b", bpe)
    await play(anthropic, "anthropic", "prefix-c", bpe)
    usages = [r.response["usage"] for r in anthropic.requests_for("prefix-c")]
    # Turn 0 of a second rollout reads tools + system, which every rollout shares
    # (breakpoint 1), and writes its own context with the trace (breakpoint 2).
    first = anthropic.requests_for("prefix-c")[0].body
    shared = sum(len(compact(t)) for t in first["tools"]) + len(compact(first["system"]))
    assert usages[0]["cache_read_input_tokens"] > shared // 8 > 0
    assert usages[0]["cache_creation_input_tokens"] > 0 and usages[0]["input_tokens"] == 0
    for usage in usages[1:]:
        # Each later turn reads everything before it and writes only the new turn.
        new = usage["input_tokens"] + usage["cache_creation_input_tokens"]
        assert usage["cache_read_input_tokens"] > 4 * new


async def test_openai_leading_messages_and_cache_key_are_stable(
    openai: FakeProviderServer, bpe: LoadedTokenizer
) -> None:
    await play(openai, "openai", "prefix-o", bpe)
    await play(openai, "openai", "prefix-p", bpe)
    sent = openai.requests_for("prefix-o")
    first = sent[0].body
    head = compact([first["tools"], first["messages"][:2]])
    keys = {r.body["prompt_cache_key"] for r in sent}
    assert len(keys) == 1
    for request in sent:
        assert compact([request.body["tools"], request.body["messages"][:2]]) == head
        assert compact(first["messages"][1]) in request.raw
    other = openai.requests_for("prefix-p")[0].body["prompt_cache_key"]
    assert other not in keys  # another rollout, another cache key
