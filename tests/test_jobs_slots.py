"""The in-process worker of ``serve`` judges with slots of its own: with every API slot
taken by a slow synchronous request (JUDGE_MAX_CONCURRENCY=1), a job's rollout is still
judged at once, not after the request (its clock would be running all that while)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, worker_settings
from tests.harness.scripted.script import Action, View
from tests.redis_support import wait_job, wait_until

pytestmark = pytest.mark.slow

HOLD_S = 6.0


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


def test_a_job_rollout_never_waits_behind_synchronous_requests(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    slow, quick = add_sessions(provider, bpe, bpe_dir, ["sync-slow", "job-quick"])
    first_turn = provider.book.scripts["sync-slow"].steps[0]

    def held(view: View) -> Action:  # the synchronous session holds its slot HOLD_S
        provider.stopping.wait(HOLD_S)
        assert not callable(first_turn) and not isinstance(first_turn, list)
        return first_turn

    provider.book.add("sync-slow", held, *provider.book.scripts["sync-slow"].steps[1:])
    settings = Settings(
        **worker_settings(provider, llm_request_timeout_s=30),
        default_tokenizer=str(bpe_dir),
        max_concurrency=1,  # one API slot, and the in-process worker's default concurrency
    )
    options = {"judge": MODEL, "deadline_s": 60, "fallback": "zero"}
    finished: dict[str, float] = {}
    with LiveServer(create_app(settings)) as live, httpx.Client(base_url=live.url) as client:

        def synchronous() -> None:
            response = client.post(
                "/v1/judge", json={"rollout": slow, "options": options}, timeout=60
            )
            assert response.status_code == 200, response.text
            finished["sync"] = time.monotonic()

        thread = threading.Thread(target=synchronous)
        thread.start()
        # The slow session's first turn has begun: the only API slot is taken.
        wait_until(lambda: provider.book.attempts.get(("sync-slow", 0)), 20, "the slow turn")
        created = client.post(
            "/v1/jobs", json={"rollouts": [quick], "options": options}, timeout=30
        )
        assert created.status_code == 202, created.text
        view = wait_job(client, created.json()["id"], timeout=60)
        finished["job"] = time.monotonic()
        thread.join(timeout=60)

    assert view["status"] == "done" and view["counts"]["done"] == 1
    # The job finished while the synchronous request still held the only API slot.
    assert finished["job"] < finished["sync"] - 1.0, finished
