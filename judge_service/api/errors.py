"""Error responses: every 4xx names the offending field as a dotted path into the body."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from judge_service.errors import InputError, UnavailableError

# Bounds on what an error echoes: a field path or message may carry the caller's input
# (a 2 MB dict key, a tokenizer name), and a 4xx must stay small whatever was sent.
MAX_PART_CHARS = 64  # one step of a field path
MAX_DETAIL_CHARS = 1024


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, a lone surrogate in it spelled out (``\\ud800``):
    the response is UTF-8, which cannot carry one."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def dotted(loc: Sequence[Any]) -> str:
    parts = [clip(str(p), MAX_PART_CHARS) for p in loc if p != "body"]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(InputError)
    async def _input_error(_: Request, exc: InputError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status_code,
            content={
                "detail": clip(f"{exc.field}: {exc.message}", MAX_DETAIL_CHARS),
                "field": clip(exc.field, 4 * MAX_PART_CHARS),
            },
        )

    @app.exception_handler(UnavailableError)
    async def _unavailable(_: Request, exc: UnavailableError) -> JSONResponse:
        # The request was fine: the server cannot reach what it needs (the tokenizer
        # hub). The same body as a 4xx, and when to send it again.
        return JSONResponse(
            status_code=503,
            content={
                "detail": clip(f"{exc.field}: {exc.message}", MAX_DETAIL_CHARS),
                "field": clip(exc.field, 4 * MAX_PART_CHARS),
            },
            headers={"retry-after": str(max(1, math.ceil(exc.retry_after_s)))},
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_json_invalid(e) if e.get("type") == "json_invalid" else e for e in exc.errors()]
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = dotted(first.get("loc", ()))
        messages = [f"{dotted(e.get('loc', ())) or 'body'}: {e.get('msg')}" for e in errors[:20]]
        return JSONResponse(
            status_code=422,
            content={
                "detail": clip("; ".join(messages), MAX_DETAIL_CHARS),
                "field": clip(field, 4 * MAX_PART_CHARS) or "body",
            },
        )


def _json_invalid(error: dict[str, Any]) -> dict[str, Any]:
    """A body that is not JSON is the body's fault: its loc is ("body", <byte offset>),
    which would read as a field ``[123]``; the offset goes into the message instead."""
    loc = error.get("loc", ())
    offset = loc[1] if len(loc) > 1 else None
    reason = clip(str((error.get("ctx") or {}).get("error", "")), 200)
    where = f" at byte {offset}" if isinstance(offset, int) else ""
    return {**error, "loc": ("body",), "msg": f"JSON decode error{where}: {reason}"}
