"""Dependencies as `Annotated` aliases, so routes declare what they need by type.

They are ``async def`` although none awaits: FastAPI runs a plain ``def`` dependency
in its thread pool, a thread hop per dependency per request (about a tenth of a
small request's time at concurrency 32, bench/bench_e2e.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from judge_service.api.auth import TenantDep, authenticate, bearer
from judge_service.config import Settings
from judge_service.jobs.service import JobService
from judge_service.pipeline import Engine
from judge_service.store import Store


async def get_engine(request: Request) -> Engine:
    """The app's engine acting for the authenticated caller (its cached judgments).

    The tenant is the one `authenticate` found: every router that serves the engine has
    it as a router dependency, which FastAPI resolves before the route's own. Declaring
    it again here (as `TenantDep`) made FastAPI walk authenticate and its bearer scheme
    twice per request, cached or not (~4% of a small rollout's time)."""
    tenant = getattr(request.state, "tenant", None)
    if tenant is None:  # a route without that router dependency: authenticate here
        tenant = await authenticate(request, await bearer(request))
    engine: Engine = request.app.state.engine
    return engine.for_tenant(tenant)


async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_jobs(request: Request) -> JobService:
    jobs: JobService = request.app.state.jobs
    return jobs


async def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
JobsDep = Annotated[JobService, Depends(get_jobs)]
StoreDep = Annotated[Store, Depends(get_store)]
__all__ = ["EngineDep", "JobsDep", "SettingsDep", "StoreDep", "TenantDep"]
