"""Every call of the API written once, for `JudgeClient` and `AsyncJudgeClient` both.

A call is a generator that yields what to do next (`Send` a request, `Sleep`, `Emit` a
result to the caller) and is sent back each request's response; request bodies, batch
splitting, retry decisions, job polling and cursors all live here. The two clients are
transports that carry those steps out, blocking or with ``await`` (httpx's own split: one
base class, two thin I/O classes), so they cannot drift apart. No I/O here."""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from judge_service_client.audit import DriftReport
from judge_service_client.client.errors import JobTimeoutError, TransportError
from judge_service_client.client.wire import (
    DEFAULT_MAX_BATCH,
    FINAL_JOB_STATES,
    OptionsLike,
    RetryPolicy,
    RolloutLike,
    as_wire,
    chunks,
    headers,
    merge,
    options_body,
    raise_for_status,
)
from judge_service_client.schemas import (
    BatchResponse,
    GroupResponse,
    JobCreated,
    JobResultsPage,
    JobView,
    Result,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Send:
    """Send one HTTP request; the transport replies with the response."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] | None = None

    def failed(self, exc: httpx.TransportError) -> TransportError:
        """What the client raises when the request never got an answer."""
        return TransportError(f"{self.method} {self.path}: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Emit:
    """Hand one result to the caller of an iterating call (`iter_results`)."""

    result: Result


Step = Send | Sleep | Emit
# The response of a Send is sent back into the generator; after Sleep and Emit, None.
Call = Generator[Step, Any, T]


class Steps(Generic[T]):
    """Walks a call: iterate for its steps, set `reply` to a Send's response before the
    next step; once the iteration ends, `value` is what the call returned."""

    value: T

    def __init__(self, call: Call[T]) -> None:
        self._call = call
        # A Send's response, or the transport error that stood in for one.
        self.reply: httpx.Response | httpx.TransportError | None = None

    def __iter__(self) -> Iterator[Step]:
        return self

    def __next__(self) -> Step:
        reply, self.reply = self.reply, None
        try:
            return self._call.send(reply)
        except StopIteration as stop:
            self.value = stop.value
            raise StopIteration from None


TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)


class BaseClient(Generic[TransportT]):
    """The configuration and the calls both clients share.

    `max_batch` is the server's JUDGE_MAX_ROLLOUTS_PER_BATCH (the API does not report
    it): `judge_batch` sends larger batches in parts of that size and joins the results
    in order. 429 and 503 are retried as `retry` says; other errors raise at once (see
    `judge_service_client.client.errors`). `transport` is httpx's (a sync one for `JudgeClient`,
    an async one for `AsyncJudgeClient`)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        retry: RetryPolicy | None = None,
        transport: TransportT | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.max_batch = max_batch
        self.retry = retry or RetryPolicy()
        options = {"base_url": base_url.rstrip("/"), "headers": headers(api_key)}
        self._open({**options, "timeout": timeout}, transport)

    def _open(self, options: dict[str, Any], transport: TransportT | None) -> None:
        """Make the httpx client (sync or async) from these options."""
        raise NotImplementedError

    def _request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Call[httpx.Response]:
        """One request, sent again after 429/503 or a dropped connection as `retry` says;
        an error raises."""
        send = Send(method, path, json, params)
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            reply: httpx.Response | httpx.TransportError = yield send
            if isinstance(reply, httpx.TransportError):
                wait = self.retry.dropped(reply, attempt, waited)
                if wait is None:
                    raise send.failed(reply) from reply
            else:
                wait = self.retry.delay(reply, attempt, waited)
                if wait is None:
                    raise_for_status(reply)
                    return reply
            yield Sleep(wait)
            waited += wait

    def _judge(
        self, rollout: RolloutLike, options: OptionsLike, group_rewards: Sequence[float] | None
    ) -> Call[Result]:
        body: dict[str, Any] = {"rollout": as_wire(rollout), **options_body(options)}
        if group_rewards is not None:
            body["group_rewards"] = list(group_rewards)
        response = yield from self._request("POST", "/v1/judge", json=body)
        return Result.model_validate_json(response.content)

    def _judge_batch(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike
    ) -> Call[BatchResponse]:
        began = time.perf_counter()
        parts = []
        for part in chunks(rollouts, self.max_batch):
            body = {"rollouts": [as_wire(r) for r in part], **options_body(options)}
            response = yield from self._request("POST", "/v1/judge/batch", json=body)
            parts.append(BatchResponse.model_validate_json(response.content))
        return merge(parts, round((time.perf_counter() - began) * 1000))

    def _judge_group(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike
    ) -> Call[GroupResponse]:
        body = {"rollouts": [as_wire(r) for r in rollouts], **options_body(options)}
        response = yield from self._request("POST", "/v1/judge/group", json=body)
        return GroupResponse.model_validate_json(response.content)

    def _submit_job(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike, idempotency_key: str | None
    ) -> Call[JobCreated]:
        body: dict[str, Any] = {"rollouts": [as_wire(r) for r in rollouts], **options_body(options)}
        # A 503 is retried, and the job may exist already (created, then not replicated in
        # time: JUDGE_REDIS_WAIT_REPLICAS); a key of its own makes the retry find that job
        # instead of queueing the rollouts twice.
        body["idempotency_key"] = idempotency_key or f"client-{uuid.uuid4().hex}"
        response = yield from self._request("POST", "/v1/jobs", json=body)
        return JobCreated.model_validate_json(response.content)

    def _job(self, method: str, job_id: str) -> Call[JobView]:
        response = yield from self._request(method, f"/v1/jobs/{job_id}")
        return JobView.model_validate_json(response.content)

    def _wait_job(self, job_id: str, timeout: float | None, poll_s: float) -> Call[JobView]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = yield from self._job("GET", job_id)
            if view.status in FINAL_JOB_STATES:
                return view
            if deadline is not None and time.monotonic() + poll_s > deadline:
                raise JobTimeoutError(f"job {job_id} is still {view.status} after {timeout} s")
            yield Sleep(poll_s)

    def _drift(self, points: int) -> Call[DriftReport]:
        response = yield from self._request("GET", "/v1/audit/drift", params={"points": points})
        return DriftReport.model_validate_json(response.content)

    def _pin_drift(self, judge: str, prompt_version: str | None) -> Call[DriftReport]:
        body = {"judge": judge, "prompt_version": prompt_version}
        response = yield from self._request("POST", "/v1/audit/drift/baseline", json=body)
        return DriftReport.model_validate_json(response.content)

    def _results_page(self, job_id: str, cursor: str | None, limit: int) -> Call[JobResultsPage]:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = yield from self._request("GET", f"/v1/jobs/{job_id}/results", params=params)
        return JobResultsPage.model_validate_json(response.content)

    def _iter_results(
        self, job_id: str, page_size: int, poll_s: float, timeout: float | None
    ) -> Call[None]:
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor: str | None = None
        while True:
            page = yield from self._results_page(job_id, cursor, page_size)
            for result in page.results:
                yield Emit(result)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
            if not page.results:
                if deadline is not None and time.monotonic() + poll_s > deadline:
                    raise JobTimeoutError(f"job {job_id}: results not ready after {timeout} s")
                yield Sleep(poll_s)
