"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from judge_service import metrics
from judge_service.errors import StoreUnavailable
from judge_service.jobs import pulse
from judge_service.jobs.inprocess import InProcessWorker
from judge_service.jobs.model import JobStore
from judge_service.pipeline import Engine
from judge_service.store import Store
from judge_service.trace import loading

router = APIRouter(tags=["health"])
T = TypeVar("T")


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


# Each check of /readyz gets this long: a hung Redis or a hub that never answers is
# "not ready" within about a second, never a probe that hangs with it.
CHECK_TIMEOUT_S = 0.8
WARM_UP_WAIT_S = 30.0


async def _bounded(awaitable: Awaitable[T]) -> T:
    async with asyncio.timeout(CHECK_TIMEOUT_S):
        return await awaitable


async def _warmed_up() -> None:
    """Wait for the server's start-up import of transformers (seconds, once; `app.py`),
    up to WARM_UP_WAIT_S: a probe that comes meanwhile answers once the server can judge,
    rather than "not ready" for a tokenizer load that has not started yet."""
    deadline = time.monotonic() + WARM_UP_WAIT_S
    while loading.warming() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


@router.get("/readyz", operation_id="readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready to judge: each check says what it found; 503 when a required one fails.
    With Redis down the API still judges synchronously (without the cache), but jobs
    cannot be accepted or read, so it is not ready. Every check has its own short
    timeout, so the probe itself answers within a few seconds whatever hangs."""
    engine: Engine = request.app.state.engine
    store: Store = request.app.state.store
    checks: dict[str, Any] = {}
    ready = True
    name = engine.settings.default_tokenizer
    if name:
        try:
            await _warmed_up()
            await _bounded(engine.tokenizers.aget(name))
            checks["default_tokenizer"] = {"ok": True, "name": name}
        except Exception as exc:  # report, never crash the probe
            error = "timed out" if isinstance(exc, TimeoutError) else str(exc)[:300]
            checks["default_tokenizer"] = {"ok": False, "name": name, "error": error}
            ready = False
    default_judge = engine.settings.default_judge
    try:  # built once and kept: a judge that cannot be built (a broken tool) is not ready
        engine.judge_for(default_judge)
        checks["judge"] = {"ok": True, "default": default_judge}
    except Exception as exc:  # report, never crash the probe
        checks["judge"] = {"ok": False, "default": default_judge, "error": str(exc)[:300]}
        ready = False
    # The sandbox serves run_python; without its OS layer it still runs, refusing sympy,
    # so it is reported but does not make the service unready. (Imported here, not with
    # this module: /healthz, beside it, is what a start waits for.)
    import sandbox

    try:
        status = await _bounded(asyncio.to_thread(sandbox.isolation_status))
        checks["sandbox"] = {"ok": bool(status.get("isolated")), **status}
    except TimeoutError:
        checks["sandbox"] = {"ok": False, "error": "timed out"}
    try:
        await _bounded(store.ping())
        checks["store"] = {"ok": True, "kind": store.kind}
    except (StoreUnavailable, TimeoutError) as exc:
        error = "timed out" if isinstance(exc, TimeoutError) else str(exc)
        checks["store"] = {"ok": False, "kind": store.kind, "error": error}
        ready = False
    metrics.STORE_UP.set(1 if checks["store"]["ok"] else 0)
    worker: InProcessWorker | None = request.app.state.worker
    jobs: JobStore = request.app.state.job_store
    workers: dict[str, Any] = {"in_process": worker is not None and worker.running}
    if jobs.shared and checks["store"]["ok"]:
        try:
            workers["separate"] = len(await _bounded(jobs.live_workers(15.0)))
        except (StoreUnavailable, TimeoutError):
            workers["separate"] = None
    checks["workers"] = workers
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


# The queue's gauges are read from Redis at a scrape (an API with no worker of its own has
# no other reason to read them) at most this often, so scrapers cannot load Redis.
QUEUE_SAMPLE_S = 1.0
_sampled_at = float("-inf")


@router.get("/metrics", operation_id="metrics", response_class=Response)
async def metrics_endpoint(request: Request) -> Response:
    """Prometheus metrics of this process (results, latency, judge tokens, cost, rejections)
    and of the job queue (depth, pending, oldest waiting rollout), read when scraped."""
    global _sampled_at
    jobs: JobStore = request.app.state.job_store
    if time.monotonic() - _sampled_at >= QUEUE_SAMPLE_S:
        _sampled_at = time.monotonic()
        try:
            pulse.observe(await _bounded(jobs.snapshot()))
        except (StoreUnavailable, TimeoutError):
            metrics.STORE_UP.set(0)  # the gauges keep their last values; store_up says why
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
