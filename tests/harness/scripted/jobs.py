"""Job helpers shared by the job tests and benches: scripted judge sessions, worker settings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_service.jobs.model import JobStore
from judge_service.jobs.worker import Worker
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, call, submit
from tests.harness.scripted.harness import TRACE_TEXT, encode, valid_spans
from tests.harness.scripted.script import Action, Step, View

MODEL = "anthropic:claude-test"


def add_sessions(
    server: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, keys: list[str]
) -> list[dict[str, Any]]:
    """A rollout per key (wire form), each with its own two-turn script: view, then submit."""
    ids = encode(bpe)
    spans = valid_spans(bpe.decode(ids))
    rollouts = []
    for key in keys:
        server.book.add(key, call("view_tokens", start=0, end=16), submit(spans))
        rollouts.append(
            {
                "id": key,
                "group_id": "g",
                "problem": f"Compute 17 × 24. SCRIPT:{key}",
                "response_token_ids": ids,
                "tokenizer": str(bpe_dir),
                "reward": 1.0,
                "final_answer": "408",
                "reference_answer": "408",
            }
        )
    return rollouts


def sessions(server: FakeProviderServer) -> dict[str, int]:
    """Judge sessions per script: requests for a session's first turn (SDK retries of a
    failed request would count twice; the scripts here never fail)."""
    counts: dict[str, int] = {}
    for request in list(server.requests):
        if request.script is not None and request.turn == 0:
            counts[request.script] = counts.get(request.script, 0) + 1
    return counts


RIGHT = "<think>\n17 × 24 = 408.\nSo the answer is 408.\n</think>\n\\boxed{408}"


def stored_payloads(bpe: LoadedTokenizer, ids: list[str]) -> list[str]:
    """Queue payloads (as `JobService` stores them) of correct rollouts for the rules judge,
    decoded with the server's default tokenizer."""
    token_ids = bpe.hf.encode(RIGHT, add_special_tokens=False)
    return [
        json.dumps(
            {
                "advantage": None,
                "rollout": {
                    "id": rollout_id,
                    "problem": "What is 17 × 24?",
                    "response_token_ids": token_ids,
                    "reference_answer": "408",
                },
            }
        )
        for rollout_id in ids
    ]


def worker_settings(server: FakeProviderServer, **extra: Any) -> dict[str, Any]:
    """Settings (as keyword arguments) for an engine judging with the scripted provider."""
    return {
        "llm_anthropic_base_url": server.url,
        "llm_tools": "view_tokens,search_trace",
        "llm_request_timeout_s": 5.0,
        "allowed_judges": "anthropic:*,rules",
        **extra,
    }


async def work_until_finished(
    worker: Worker, jobs: JobStore, job_id: str, timeout_s: float
) -> None:
    """Run `worker` until the job has every result, then stop it (drained)."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(timeout_s):
            while (record := await jobs.get(job_id)) is None or record.finished_at is None:
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task


def scripted_groups(
    server: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    names: list[str],
    size: int,
    before: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """`size` rollouts for each name (wire form), one group each (`group_id` the name),
    whose one session (the group's) is scripted: view rollout 0's first tokens, then
    submit valid spans on rollout 0, which its siblings share as a prefix. `before(name)`
    runs as the session's first turn is answered (a test holding sessions there)."""
    spans = valid_spans(bpe.decode(bpe.hf.encode(TRACE_TEXT, add_special_tokens=False)))
    rows = []
    for name in names:
        view = call("view_tokens", rollout=0, start=0, end=16)
        first: Step = view if before is None else _after(before, name, view)
        server.book.add(name, first, submit([{"rollout": 0, **s} for s in spans]))
        for m in range(size):
            text = TRACE_TEXT + f"\nChecked once more ({m})."
            rows.append({
                "id": f"{name}-{m}", "group_id": name, "problem": f"Compute 17 × 24. SCRIPT:{name}",
                "response_token_ids": bpe.hf.encode(text, add_special_tokens=False),
                "tokenizer": str(bpe_dir), "reward": 1.0, "reference_answer": "408",
            })  # fmt: skip
    return rows


def _after(before: Callable[[str], None], name: str, action: Action) -> Callable[[View], Action]:
    def step(view: View) -> Action:
        before(name)
        return action

    return step
