"""What the driver sends and how it checks the answers: copies of the bundled examples,
their results judged in this process (the reference), and a transport that records
every HTTP attempt the client makes (the client's own retries are otherwise invisible)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

from bench.multihost.procs import ROOT

OPTIONS: dict[str, Any] = {"judge": "rules", "use_cache": False}  # every rollout judged anew
FIELDS = ("id", "group_id", "reward", "response_token_ids", "reference_answer")
# Differ between two judgings of the same rollout without the result differing.
VOLATILE = frozenset({"id", "latency_ms", "queue_ms", "attempt", "cache"})


def examples() -> list[dict[str, Any]]:
    lines = (ROOT / "examples" / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: row[k] for k in FIELDS} for row in map(json.loads, lines) if row]


def rollouts(tag: str, cycles: int) -> list[dict[str, Any]]:
    """`cycles` copies of every example, ids unique to `tag`. A cycle is one copy of every
    group, so each group has the same members in any number of cycles: position i has
    the same expected result in every job, whatever its size."""
    out = []
    base = examples()
    for cycle in range(cycles):
        for i, row in enumerate(base):
            out.append(
                {
                    **row,
                    "id": f"{tag}-{cycle:04d}-{i:02d}",
                    "group_id": f"{row['group_id']}-{cycle}",
                }
            )
    return out


def normalized(result: dict[str, Any]) -> dict[str, Any]:
    """A result without the fields that differ between two judgings of the same rollout."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    cleaned: dict[str, Any] = clean(result)
    return cleaned


def reference(cycles: int) -> list[dict[str, Any]]:
    """The normalized results of `rollouts(_, cycles)` judged in this process, by the
    same engine the workers run: what every job's results must equal."""
    from judge_service.config import Settings
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options, Rollout

    settings = Settings(default_tokenizer="examples/tokenizer", tokenizer_roots=["examples"])
    batch = [Rollout.model_validate(r) for r in rollouts("reference", cycles)]

    async def judge() -> list[dict[str, Any]]:
        engine = Engine(settings)
        try:
            response = await engine.judge_batch(batch, Options.model_validate(OPTIONS))
        finally:
            await engine.aclose()
        return [normalized(r.model_dump(mode="json", exclude_none=True)) for r in response.results]

    cwd = os.getcwd()
    os.chdir(ROOT)  # the tokenizer's path is relative to the checkout, as for the servers
    try:
        return asyncio.run(judge())
    finally:
        os.chdir(cwd)


def one_each(job: str, sent: list[dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    """Problems with a job's results: a rollout without exactly one result, or results
    out of input order."""
    problems = []
    ids = [r["id"] for r in got]
    counts = Counter(ids)
    if extra := [i for i, n in counts.items() if n > 1]:
        problems.append(f"{job}: {len(extra)} rollouts with more than one result: {extra[:3]}")
    if missing := sorted({r["id"] for r in sent} - set(counts)):
        problems.append(f"{job}: {len(missing)} rollouts without a result: {missing[:3]}")
    if not problems and ids != [r["id"] for r in sent]:
        problems.append(f"{job}: results out of input order")
    return problems


def check_results(
    job: str, sent: list[dict[str, Any]], got: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> list[str]:
    """`one_each`, then every result equal to the reference."""
    problems = one_each(job, sent, got)
    if not problems:
        for i, result in enumerate(got):
            if normalized(result) != expected[i % len(expected)]:
                problems.append(f"{job}: {result['id']} differs from the in-process judgment")
                break
    return problems


@dataclass(frozen=True)
class Attempt:
    call: str  # the driver's name of the call this attempt belongs to
    path: str
    began: float  # monotonic
    ended: float
    status: int | None  # None: no HTTP answer
    served_by: str | None  # haproxy's x-served-by
    error: str | None


class RecordingTransport(httpx.HTTPTransport):
    """httpx's transport, noting every attempt under the call named in `call`."""

    def __init__(self, attempts: list[Attempt], lock: threading.Lock) -> None:
        super().__init__()
        self.attempts, self.lock = attempts, lock
        self.call = ""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["x-call"] = self.call  # haproxy logs it: its own retries, by call
        began = time.monotonic()
        try:
            response = super().handle_request(request)
            response.read()
        except httpx.TransportError as exc:
            self._note(request, began, None, None, f"{type(exc).__name__}: {exc}")
            raise
        self._note(request, began, response.status_code, response.headers.get("x-served-by"),
                   response.headers.get("x-haproxy-error"))  # fmt: skip
        return response

    def _note(self, request: httpx.Request, began: float, status: int | None,
              served_by: str | None, error: str | None) -> None:  # fmt: skip
        attempt = Attempt(self.call, request.url.path, began, time.monotonic(), status,
                          served_by, error)  # fmt: skip
        with self.lock:
            self.attempts.append(attempt)
