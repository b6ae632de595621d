"""A group's judgments come from one LLM session, however its cache was left. A process
that stopped (or was paused past its lease) part way through saving a group's judgments
leaves some members cached from its session and not the others; a job's group judged
again by a worker process, and a retried ``/v1/judge/group``, must then judge the whole
group afresh in one session rather than serve the cached members beside a new session's
(`group.cached`); a whole set from one session is served as it is. Real Redis, a real
worker process, real HTTP, the real Anthropic SDK against a scripted server whose every
session submits its own confidence, so each result says which session judged it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server, call, submit
from tests.harness.scripted.harness import TRACE_TEXT, valid_spans
from tests.harness.scripted.jobs import MODEL, sessions, worker_settings
from tests.harness.scripted.script import Action, View
from tests.redis_support import service_env, shared_redis, wait_job, worker_processes
from tests.test_jobs_groupwise import pages

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SIZE = 4
# Session k (from 1) submits its spans with confidence CONFIDENCE[k - 1].
CONFIDENCE = (0.9, 0.8, 0.7, 0.6)
JUDGING = {"judge": MODEL, "fallback": "none", "deadline_s": 30}


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


def group(provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path) -> list[Any]:
    """A group of SIZE rollouts whose one session views rollout 0, then submits spans on
    it (shared by every sibling as a prefix) with the session's own confidence."""
    spans = valid_spans(bpe.decode(bpe.hf.encode(TRACE_TEXT, add_special_tokens=False)))
    submitted: list[int] = []

    def answer(view: View) -> Action:
        submitted.append(1)
        confidence = CONFIDENCE[len(submitted) - 1]
        return submit([{"rollout": 0, **s, "confidence": confidence} for s in spans])

    provider.book.add("one", call("view_tokens", rollout=0, start=0, end=16), answer)
    return [
        {
            "id": f"one-{m}", "group_id": "one", "problem": "Compute 17 × 24. SCRIPT:one",
            "response_token_ids": bpe.hf.encode(
                TRACE_TEXT + f"\nChecked once more ({m}).", add_special_tokens=False
            ),
            "tokenizer": str(bpe_dir), "reward": 1.0, "reference_answer": "408",
        }
        for m in range(SIZE)
    ]  # fmt: skip


def judged_by(results: list[dict[str, Any]]) -> list[tuple[float, str | None]]:
    """Each result's session (its spans' confidence) and cache state."""
    out = []
    for result in results:
        assert result["status"] == "ok" and result["spans"], result
        (confidence,) = {s["confidence"] for s in result["spans"]}
        out.append((confidence, result.get("cache")))
    return out


def forget(url: str, prefix: str, ids: set[str]) -> None:
    """Drop the cached judgments of the rollouts `ids`: what a process that stopped part way
    through saving its group's judgments (one save per member) leaves behind."""
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # loosely typed stubs
    try:
        dropped = 0
        for key in client.scan_iter(match=f"{prefix}:judgment:*"):
            if json.loads(client.get(key)).get("rollout_id") in ids:
                dropped += client.delete(key)
        assert dropped == len(ids)
    finally:
        client.close()


def test_a_group_is_judged_from_one_session_whatever_its_cache_holds(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    rows = group(provider, bpe, bpe_dir)
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider, redis_url=url, redis_prefix=prefix, default_tokenizer=str(bpe_dir)
        )
        api = Settings(**serving, inprocess_worker="off")
        with (
            LiveServer(create_app(api)) as live,
            httpx.Client(base_url=live.url, timeout=60) as client,
        ):

            def judge_group() -> list[tuple[float, str | None]]:
                body = {"rollouts": rows, "options": JUDGING}
                answer = client.post("/v1/judge/group", json=body)
                assert answer.status_code == 200, answer.text
                return judged_by(answer.json()["results"])

            first = judge_group()  # session 1, every member cached
            forget(url, prefix, {"one-2", "one-3"})  # a stop after two saves
            body = {"rollouts": rows, "options": {**JUDGING, "groupwise": True}}
            created = client.post("/v1/jobs", json=body)
            assert created.status_code == 202, created.text
            job_id = created.json()["id"]
            env = service_env(**serving)
            with worker_processes(["one-w"], env, tmp_path, url, prefix):
                view = wait_job(client, job_id, timeout=90)
            results, groups = pages(client, job_id, limit=10)
            by_job = judged_by(results)
            forget(url, prefix, {"one-0"})  # the job's set, less one member
            retried = judge_group()
            again = judge_group()  # a whole set from one session: served
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    assert first == [(0.9, "miss")] * SIZE
    assert view["status"] == "done", logs
    assert set(groups) == {"one"}
    # Before: one-0 and one-1 served from session 1's cache beside session 2's one-2, one-3.
    assert by_job == [(0.8, "miss")] * SIZE, by_job
    assert retried == [(0.7, "miss")] * SIZE, retried
    assert again == [(0.7, "hit")] * SIZE, again
    assert sessions(provider) == {"one": 3}
