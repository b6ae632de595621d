"""The driver's calls through haproxy, each through `JudgeClient` and each bounded: jobs
(submitted with an idempotency key, polled to the end, results read) and batch loops.

The client retries 429 and 503 itself; an error it raises is retried here, at most
`DRIVER_TRIES` times, only where sending the same request again is safe (a job's
submission with the same key; a batch, which is a pure function of its body), and
every such retry is counted: it is a failure the caller had to handle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from judge_service_client.client import JudgeClient, RetryPolicy
from judge_service_client.client.errors import JudgeClientError, NotFoundError

from bench.multihost.provider import OPTIONS as LLM_OPTIONS
from bench.multihost.provider import Provider, check_llm_results
from bench.multihost.workload import (
    OPTIONS,
    Attempt,
    RecordingTransport,
    check_results,
    one_each,
    rollouts,
)

T = TypeVar("T")
DRIVER_TRIES = 4
# The client's retries of a 503: at most 6 sends, 20 s of waiting (haproxy says
# retry-after: 1, see haproxy.RETRYABLE).
RETRY = RetryPolicy(max_attempts=6, max_wait_s=20.0)


@dataclass
class Recorder:
    """Every attempt of every client, and the errors the driver retried, by call."""

    attempts: list[Attempt] = field(default_factory=list)
    driver_retries: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, url: str, timeout_s: float = 30.0) -> tuple[JudgeClient, RecordingTransport]:
        transport = RecordingTransport(self.attempts, self.lock)
        return JudgeClient(url, timeout=timeout_s, retry=RETRY, transport=transport), transport

    def by_call(self) -> dict[str, list[Attempt]]:
        with self.lock:
            found: dict[str, list[Attempt]] = {}
            for attempt in self.attempts:
                found.setdefault(attempt.call, []).append(attempt)
        return found

    def retried(self, call: str, error: str) -> None:
        with self.lock:
            self.driver_retries.setdefault(call, []).append(error)


def tried(recorder: Recorder, transport: RecordingTransport, call: str, fn: Callable[[], T]) -> T:
    transport.call = call
    for n in range(1, DRIVER_TRIES + 1):
        try:
            return fn()
        except JudgeClientError as exc:
            if isinstance(exc, NotFoundError) or n == DRIVER_TRIES:
                raise
            recorder.retried(call, f"{type(exc).__name__}: {exc}"[:300])
            time.sleep(0.5 * n)
    raise AssertionError("unreachable")


@dataclass
class Job:
    key: str  # the idempotency key: a re-sent submission must find the same job
    rollouts: list[dict[str, Any]]
    ids: set[str] = field(default_factory=set)  # every id the submissions answered
    view: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # The rules judge's (checked against the in-process judgment), or the scripted LLM
    # judge's (provider.OPTIONS: checked as the script says).
    options: dict[str, Any] = field(default_factory=lambda: OPTIONS)

    @property
    def llm(self) -> bool:
        return self.options is not OPTIONS

    @property
    def id(self) -> str:
        return min(self.ids)


def submit(recorder: Recorder, client: JudgeClient, transport: RecordingTransport,
           job: Job) -> None:  # fmt: skip
    created = tried(
        recorder,
        transport,
        f"submit:{job.key}",
        lambda: client.submit_job(job.rollouts, job.options, idempotency_key=job.key),
    )
    job.ids.add(created.id)
    if len(job.ids) > 1:
        job.problems.append(f"key {job.key} made {len(job.ids)} jobs: {sorted(job.ids)}")


def submit_all(recorder: Recorder, url: str, jobs: list[Job]) -> None:
    """Submit each job (for a thread: an error is the job's problem, never lost)."""
    client, transport = recorder.client(url)
    with client:
        for job in jobs:
            try:
                submit(recorder, client, transport, job)
            except Exception as exc:
                job.problems.append(f"{job.key}: submission failed: {type(exc).__name__}: {exc}")


def wait_all(recorder: Recorder, url: str, jobs: list[Job], timeout_s: float) -> None:
    """Poll every job until it is final (or `timeout_s` passes: its view says how far it got)."""
    client, transport = recorder.client(url)
    deadline = time.monotonic() + timeout_s
    with client:
        waiting = [job for job in jobs if job.ids]  # the others failed to submit: noted
        while waiting and time.monotonic() < deadline:
            for job in list(waiting):
                poll = partial(client.get_job, job.id)
                view = tried(recorder, transport, f"poll:{job.key}", poll)
                job.view = view.model_dump(mode="json")
                if view.status in ("done", "failed", "cancelled"):
                    waiting.remove(job)
            time.sleep(0.2)
        for job in waiting:
            job.problems.append(f"{job.key}: not finished after {timeout_s:.0f} s: {job.view}")


def verify(recorder: Recorder, url: str, job: Job, expected: list[dict[str, Any]]) -> None:
    """Exactly one result per rollout, in order, each equal to the in-process judgment."""
    if not job.ids and not job.problems:
        job.problems.append(f"{job.key}: never accepted")
    if job.problems:
        return
    client, transport = recorder.client(url)
    with client:
        got = tried(
            recorder,
            transport,
            f"results:{job.key}",
            lambda: [r.model_dump(mode="json", exclude_none=True)
                     for r in client.iter_results(job.id, page_size=1000, timeout=60)],
        )  # fmt: skip
    counts = job.view["counts"]
    if job.view["status"] != "done" or counts["done"] != len(job.rollouts):
        job.problems.append(f"{job.key}: {job.view['status']}, counts {counts}")
    if job.llm:
        job.problems += one_each(job.key, job.rollouts, got) or check_llm_results(job.key, got)
    else:
        job.problems += check_results(job.key, job.rollouts, got, expected)


def make_jobs(phase: str, count: int, cycles: int) -> list[Job]:
    return [Job(f"{phase}-{n}", rollouts(f"{phase}-{n}", cycles)) for n in range(count)]


def make_llm_jobs(llm: Provider, phase: str, count: int, size: int) -> list[Job]:
    """Jobs for the scripted LLM judge: `size` rollouts each, one script per rollout."""
    return [
        Job(f"{phase}-{n}", llm.rollouts(f"{phase}-{n}", size), options=LLM_OPTIONS)
        for n in range(count)
    ]


@dataclass
class BatchCall:
    call: str
    began: float
    ended: float
    ok: bool
    error: str | None = None


def batch_loop(recorder: Recorder, url: str, name: str, expected: list[dict[str, Any]],
               stop: threading.Event, max_calls: int, out: list[BatchCall]) -> None:  # fmt: skip
    """POST /v1/judge/batch (one copy of every example) until `stop` or `max_calls`."""
    client, transport = recorder.client(url)
    batch = rollouts(f"batch-{name}", 1)
    with client:
        for n in range(max_calls):
            if stop.is_set():
                break
            call, began = f"batch:{name}:{n}", time.monotonic()
            try:
                response = tried(recorder, transport, call,
                                 lambda: client.judge_batch(batch, OPTIONS))  # fmt: skip
                got = [r.model_dump(mode="json", exclude_none=True) for r in response.results]
                problems = check_results(call, batch, got, expected)
                error = "; ".join(problems) or None
            except JudgeClientError as exc:
                error = f"{type(exc).__name__}: {exc}"[:300]
            out.append(BatchCall(call, began, time.monotonic(), error is None, error))
