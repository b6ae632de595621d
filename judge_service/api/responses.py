"""JSON responses whose serialisation stays off the event loop when they are large.

A result of a 131k-token rollout is ~0.5 MB of JSON (per-token credit and
advantage, dense). FastAPI would validate and serialise it on the event loop,
stalling every other request (`/healthz` included) for tens of milliseconds or
more; pydantic's own `model_dump_json` in a worker thread writes the same bytes.
"""

from __future__ import annotations

import asyncio

from fastapi.responses import Response
from pydantic import BaseModel

from judge_service.pipeline import OFFLOAD_TOKENS


async def json_response(model: BaseModel, num_tokens: int) -> Response:
    """`model` as the route's declared response (None fields left out)."""
    if num_tokens >= OFFLOAD_TOKENS:
        body = await asyncio.to_thread(model.model_dump_json, exclude_none=True)
    else:
        body = model.model_dump_json(exclude_none=True)
    return Response(content=body, media_type="application/json")
