"""The request body, bounded before the app sees it: size (413) and JSON depth (422).

The body is read here, counted as it streams in, and handed to the app whole:

* a declared ``Content-Length`` over JUDGE_MAX_BODY_BYTES is answered 413 before one
  byte of the body is read (uvicorn then discards whatever the client still sends);
* a chunked body (no length declared) is counted chunk by chunk and answered 413 as
  soon as the count passes the limit, so it never costs more than the limit in memory.
  (Raising from ``receive`` instead, as this once did, reached FastAPI's body parser,
  which turns any exception into 400 "error parsing the body".)
* a body nested deeper than MAX_JSON_DEPTH is answered 422 before it is parsed.

FastAPI reads the whole body before parsing it anyway, so holding it here costs no
more memory; the app gets it as one message, never a second copy.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judge_service.api.json_limits import MAX_JSON_DEPTH, json_depth_exceeds

# Above this size the depth scan (~5 ms per MiB) runs in a thread, off the event loop.
SCAN_IN_THREAD_BYTES = 1 << 20


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away mid-body
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._too_large(send)
                return
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        if len(body) > self.max_depth:  # shorter cannot nest deeper
            if len(body) >= SCAN_IN_THREAD_BYTES:
                too_deep = await asyncio.to_thread(json_depth_exceeds, body, self.max_depth)
            else:
                too_deep = json_depth_exceeds(body, self.max_depth)
            if too_deep:
                await _reject(
                    send,
                    422,
                    f"body: JSON nests arrays and objects deeper than {self.max_depth} levels",
                )
                return
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, send: Send) -> None:
        await _reject(
            send,
            413,
            f"body: request body exceeds {self.max_bytes} bytes (JUDGE_MAX_BODY_BYTES)",
        )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then the real channel (e.g. for http.disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _reject(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail, "field": "body"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
