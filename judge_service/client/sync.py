"""`JudgeClient`: the service's API from blocking code (a trainer's reward function)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from judge_service.client.errors import JobTimeoutError, TransportError
from judge_service.client.wire import (
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
from judge_service.schemas import BatchResponse, JobCreated, JobResultsPage, JobView, Result


class JudgeClient:
    """A client of one judge-service server.

    `max_batch` is the server's JUDGE_MAX_ROLLOUTS_PER_BATCH (the API does not report
    it): `judge_batch` sends larger batches in parts of that size and joins the results
    in order. 429 and 503 are retried as `retry` says; other errors raise at once (see
    `judge_service.client.errors`). Use as a context manager, or call `close()`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.max_batch = max_batch
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
            wait = self.retry.delay(response, attempt, waited)
            if wait is None:
                raise_for_status(response)
                return response
            time.sleep(wait)
            waited += wait

    def judge(
        self,
        rollout: RolloutLike,
        options: OptionsLike = None,
        *,
        group_rewards: Sequence[float] | None = None,
    ) -> Result:
        """Judge one rollout (POST /v1/judge)."""
        body: dict[str, Any] = {"rollout": as_wire(rollout), **options_body(options)}
        if group_rewards is not None:
            body["group_rewards"] = list(group_rewards)
        response = self._send("POST", "/v1/judge", json=body)
        return Result.model_validate_json(response.content)

    def judge_batch(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike = None
    ) -> BatchResponse:
        """Judge rollouts (POST /v1/judge/batch), in parts of at most `max_batch`; one
        result per rollout, in order. Group advantages are computed per part, so keep a
        group within one part (groups are usually contiguous and the limit large)."""
        began = time.perf_counter()
        parts = []
        for part in chunks(rollouts, self.max_batch):
            body = {"rollouts": [as_wire(r) for r in part], **options_body(options)}
            response = self._send("POST", "/v1/judge/batch", json=body)
            parts.append(BatchResponse.model_validate_json(response.content))
        return merge(parts, round((time.perf_counter() - began) * 1000))

    def submit_job(
        self,
        rollouts: Sequence[RolloutLike],
        options: OptionsLike = None,
        *,
        idempotency_key: str | None = None,
    ) -> JobCreated:
        """Queue rollouts for judging (POST /v1/jobs); returns at once with the job's id."""
        body: dict[str, Any] = {"rollouts": [as_wire(r) for r in rollouts], **options_body(options)}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        response = self._send("POST", "/v1/jobs", json=body)
        return JobCreated.model_validate_json(response.content)

    def get_job(self, job_id: str) -> JobView:
        return JobView.model_validate_json(self._send("GET", f"/v1/jobs/{job_id}").content)

    def cancel_job(self, job_id: str) -> JobView:
        return JobView.model_validate_json(self._send("DELETE", f"/v1/jobs/{job_id}").content)

    def wait_job(
        self, job_id: str, *, timeout: float | None = None, poll_s: float = 0.5
    ) -> JobView:
        """Poll until the job is done, failed or cancelled; JobTimeoutError after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.get_job(job_id)
            if view.status in FINAL_JOB_STATES:
                return view
            if deadline is not None and time.monotonic() + poll_s > deadline:
                raise JobTimeoutError(f"job {job_id} is still {view.status} after {timeout} s")
            time.sleep(poll_s)

    def results_page(
        self, job_id: str, cursor: str | None = None, limit: int = 100
    ) -> JobResultsPage:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = self._send("GET", f"/v1/jobs/{job_id}/results", params=params)
        return JobResultsPage.model_validate_json(response.content)

    def iter_results(
        self,
        job_id: str,
        *,
        page_size: int = 100,
        poll_s: float = 0.5,
        timeout: float | None = None,
    ) -> Iterator[Result]:
        """Every result of the job in input order, following ``next_cursor``; a page that
        stops at a rollout not judged yet is polled again after `poll_s`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor: str | None = None
        while True:
            page = self.results_page(job_id, cursor, page_size)
            yield from page.results
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
            if not page.results:
                if deadline is not None and time.monotonic() + poll_s > deadline:
                    raise JobTimeoutError(f"job {job_id}: results not ready after {timeout} s")
                time.sleep(poll_s)
