"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from judge_service import __version__
from judge_service.api.errors import install_error_handlers
from judge_service.api.limits import BodySizeLimit
from judge_service.api.routes import credit, health, judge
from judge_service.config import Settings, get_settings
from judge_service.pipeline import Engine

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.api_keys:
            log.warning("JUDGE_API_KEYS is unset: the API is open to anyone who can reach it")
        yield

    app = FastAPI(
        title="judge-service",
        version=__version__,
        summary="Per-token credit for LLM reasoning rollouts from an evidence-checked span judge.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = Engine(settings)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    for router in (judge.router, credit.router, health.router):
        app.include_router(router)
    return app
