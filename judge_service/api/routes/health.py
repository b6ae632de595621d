"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from judge_service.api.deps import EngineDep

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", operation_id="readyz")
async def readyz(engine: EngineDep) -> JSONResponse:
    """Ready to judge: each check says what it found; 503 when a required one fails."""
    checks: dict[str, Any] = {}
    ready = True
    name = engine.settings.default_tokenizer
    if name:
        try:
            engine.tokenizers.get(name)
            checks["default_tokenizer"] = {"ok": True, "name": name}
        except Exception as exc:  # report, never crash the probe
            checks["default_tokenizer"] = {"ok": False, "name": name, "error": str(exc)}
            ready = False
    checks["judge"] = {"ok": True, "default": engine.settings.default_judge}
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)
