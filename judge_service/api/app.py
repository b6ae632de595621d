"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from judge_service import __version__
from judge_service.api.auth import (
    AUTH_RESPONSES,
    RequestLimiter,
    authenticate,
    install_auth_handlers,
)
from judge_service.api.errors import install_error_handlers
from judge_service.api.limits import BodySizeLimit
from judge_service.api.routes import audit, credit, health, jobs, judge, judgments, rubric
from judge_service.config import Settings, get_settings
from judge_service.heap import freeze_startup_heap
from judge_service.jobs import open_job_store
from judge_service.jobs.inprocess import start_inprocess_worker
from judge_service.jobs.service import JobService
from judge_service.pipeline import Engine
from judge_service.store import open_store
from judge_service.store.redis_store import RedisStore
from judge_service.trace import loading

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    store = open_store(settings)
    job_store = open_job_store(settings, store)
    engine = Engine(settings, store=store, build_fallback=False)  # built after start

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.api_keys:
            log.warning("JUDGE_API_KEYS is unset: the API is open to anyone who can reach it")
        if isinstance(store, RedisStore):  # N replicas together respect one provider quota
            from judge_service.judges.llm import ratelimit  # (the LLM SDKs load only then)

            ratelimit.set_shared_backend(store.buckets)
        app.state.worker = start_inprocess_worker(settings, engine, job_store)
        if engine.audit is not None:
            engine.audit.start(engine)  # the canary schedule
        # What /healthz does not need loads after start, in the warm-up thread: first the
        # hot path with sympy (~0.45 s, lazy_sympy.py), whose startup heap is then frozen,
        # then transformers (and torch under it: seconds). A request that needs either
        # meanwhile waits for its import, never fails. What the transformers import leaves
        # alive (~170k objects) is frozen too once it ends: left in the collector's way,
        # each full collection walked it (a 50-200 ms pause).
        loading.warm_up(first=freeze_startup_heap, then=freeze_startup_heap)
        try:
            yield
        finally:
            if app.state.worker is not None:
                await app.state.worker.stop()
            await engine.aclose()
            if isinstance(store, RedisStore):
                ratelimit.set_shared_backend(None)
            await store.close()

    app = FastAPI(
        title="judge-service",
        version=__version__,
        summary="Per-token credit for LLM reasoning rollouts from an evidence-checked span judge.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.store = store
    app.state.job_store = job_store
    app.state.jobs = JobService(job_store, engine, settings)
    app.state.request_limiter = RequestLimiter(store, settings)
    app.state.worker = None
    install_error_handlers(app)
    install_auth_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    routers = (judge.router, credit.router, jobs.router, judgments.router, rubric.router)
    for router in (*routers, audit.router):
        app.include_router(router, dependencies=[Depends(authenticate)], responses=AUTH_RESPONSES)
    app.include_router(health.router)
    return app
