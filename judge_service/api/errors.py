"""Error responses: every 4xx names the offending field as a dotted path into the body."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from judge_service.errors import InputError


def dotted(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(InputError)
    async def _input_error(_: Request, exc: InputError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status_code,
            content={"detail": f"{exc.field}: {exc.message}", "field": exc.field},
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = dotted(first.get("loc", ()))
        messages = [f"{dotted(e.get('loc', ())) or 'body'}: {e.get('msg')}" for e in errors[:20]]
        return JSONResponse(
            status_code=422,
            content={"detail": "; ".join(messages), "field": field or None},
        )
