"""Provider faults for both wire formats: 429, 500, context length, hangs. Each ends as the
contract says: retried by the SDK where it should be, a ProviderError (the rollout's fallback)
where it cannot succeed in time, never a retry of a context-length error.
"""

from __future__ import annotations

import time

import pytest

from judge_service.errors import ProviderError
from judge_service.judges.base import JudgeLimits
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import (
    FakeProviderServer,
    Fault,
    Hang,
    Reply,
    submit,
)
from tests.harness.scripted.harness import PROVIDERS, run, valid_spans


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_429_with_retry_after_is_retried_by_the_sdk_once(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    began = time.perf_counter()
    outcome, server, _ = await run(
        kind,
        servers,
        bpe,
        "ratelimited",
        lambda trace: [[Fault(429, {"retry-after": "0.2"}), submit(valid_spans(trace))]],
    )
    attempts = [r.status for r in server.requests_for(f"{kind}-ratelimited")]
    assert attempts == [429, 200]
    assert time.perf_counter() - began >= 0.2  # the SDK waited as told
    assert len(outcome.spans) == 2


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_429_waiting_past_the_deadline_fails_fast(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    began = time.perf_counter()
    with pytest.raises(ProviderError, match="rate limited") as raised:
        await run(
            kind,
            servers,
            bpe,
            "ratelimited-long",
            lambda _: [Fault(429, {"retry-after": "30"})],
            limits=JudgeLimits(deadline_s=3.0),
        )
    assert time.perf_counter() - began < 1.5
    assert [r.status for r in servers[kind].requests_for(f"{kind}-ratelimited-long")] == [429]
    assert raised.value.partial.turns == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_500_then_success(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    outcome, server, _ = await run(
        kind,
        servers,
        bpe,
        "flaky",
        lambda trace: [[Fault(500, {"retry-after-ms": "20"}), submit(valid_spans(trace))]],
    )
    assert [r.status for r in server.requests_for(f"{kind}-flaky")] == [500, 200]
    assert len(outcome.spans) == 2


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_persistent_500_is_a_provider_error_after_the_sdk_retries(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    with pytest.raises(ProviderError, match="HTTP 500"):
        await run(
            kind,
            servers,
            bpe,
            "down",
            lambda _: [Fault(500, {"retry-after-ms": "10"})],
            max_retries=2,
        )
    assert [r.status for r in servers[kind].requests_for(f"{kind}-down")] == [500] * 3


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_context_length_error_is_never_retried(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    too_long = Fault(
        400,
        message="prompt is too long: 250000 tokens > 200000 maximum",
        code="context_length_exceeded",
    )
    with pytest.raises(ProviderError, match="context length"):
        await run(kind, servers, bpe, "toolong", lambda _: [too_long])
    assert len(servers[kind].requests_for(f"{kind}-toolong")) == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_hung_response_ends_at_the_deadline(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    began = time.perf_counter()
    with pytest.raises(ProviderError, match=r"within the 0\.5 s deadline"):
        await run(
            kind, servers, bpe, "hang", lambda _: [Hang(30)], limits=JudgeLimits(deadline_s=0.5)
        )
    assert time.perf_counter() - began < 1.5


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_hang_after_a_submission_keeps_the_submitted_spans(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer
) -> None:
    def first(trace: Trace) -> Reply:
        return submit([valid_spans(trace)[0], {**valid_spans(trace)[1], "evidence": "nope nope"}])

    outcome, _, _ = await run(
        kind,
        servers,
        bpe,
        "hang-repair",
        lambda trace: [first(trace), Hang(30)],
        limits=JudgeLimits(deadline_s=0.5),
    )
    assert len(outcome.spans) == 2  # the first submission; validation drops the bad one later
    assert outcome.transcript[-1] == {"type": "stop", "turn": 1, "reason": "deadline"}
