"""JSON responses whose serialisation stays off the event loop when they are large.

A result of a 131k-token rollout is ~0.5 MB of JSON (per-token credit and
advantage, dense). FastAPI would validate and serialise it on the event loop,
stalling every other request (`/healthz` included) for tens of milliseconds or
more; `dump_json` (orjson, the same JSON as pydantic's `model_dump_json`) writes it, in
a worker thread when large.
"""

from __future__ import annotations

import asyncio

from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel

from judge_service.offload import OFFLOAD_TOKENS
from judge_service.wire_json import dump_json


async def json_response(model: BaseModel, num_tokens: int) -> Response:
    """`model` as the route's declared response (None fields left out)."""
    if num_tokens >= OFFLOAD_TOKENS:
        body = await asyncio.to_thread(dump_json, model)
    else:
        body = dump_json(model)
    return Response(content=body, media_type="application/json")


def html_page(page: str) -> HTMLResponse:
    """A viewer page, with the headers that lock it down (no script, no request, no frame)."""
    # The viewer (jinja2, its page model: ~25 ms to import) loads with the first page a
    # server renders, not at its start: /healthz does not wait for it.
    from judge_service.view.html import PAGE_CSP

    return HTMLResponse(
        page,
        headers={
            "Content-Security-Policy": PAGE_CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )
