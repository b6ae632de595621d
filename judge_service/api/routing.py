"""A route class that parses and validates a large JSON body off the event loop.

FastAPI parses a JSON body with ``json.loads`` and validates it with pydantic inside
the request handler, on the event loop: a 56 MiB batch held the loop (and /healthz,
and every other request) for 1.2-2 s. `OffLoopBodyRoute` does both steps in a worker
thread for bodies of at least `OFFLOAD_BODY_BYTES`, in pieces that let the loop run
between them (`api/body.py`), ends with FastAPI's own body field (the same validation
and error locations), and hands FastAPI the validated model. Pydantic returns a model
instance of the expected class as it is (``revalidate_instances`` is ``never`` on our
models), so FastAPI's own pass over it costs nothing. Small bodies stay on the loop:
below a megabyte the thread hop costs more than the work (parsing and validating a
megabyte is ~15 ms, the bound on what one request holds the loop for here). A small
valid body goes to the endpoint without FastAPI's request handler (`api/direct.py`);
anything else to that handler, as before.

Only the handler changes: the route's schema, and so ``openapi.yaml``, is untouched.
"""

from __future__ import annotations

import asyncio
import email.message
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi import routing as fastapi_routing
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from judge_service.api import body as body_mod
from judge_service.api.direct import direct_call

# Bodies this large or larger are parsed and validated in a thread (~15 ms per MiB).
OFFLOAD_BODY_BYTES = 1 << 20


class _Parsed(Request):
    """A request whose ``json()`` is the body already parsed and validated elsewhere."""

    def __init__(self, request: Request, value: object) -> None:
        super().__init__(request.scope, request.receive)
        self._body = request._body  # read once; FastAPI reads it again from here
        self._value = value

    async def json(self) -> Any:
        return self._value


def _is_json(request: Request, *, missing: bool = True) -> bool:
    # FastAPI's rule: application/json or application/*+json. No content type at all is
    # JSON where `missing` says so: the large-body path has always read it as JSON, while
    # FastAPI's handler does only with strict_content_type off (not its default).
    content_type = request.headers.get("content-type")
    if not content_type:
        return missing
    if content_type == "application/json":  # what clients send: no header parse
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


# Where FastAPI keeps the route being built for an included router (its dependencies,
# authentication among them, are that context's, not the route's own). A FastAPI without
# it gets no direct call: its handler answers every request, as before.
_ROUTE_CONTEXT = getattr(fastapi_routing, "_effective_route_context_var", None)


class OffLoopBodyRoute(APIRoute):
    def _as_built(self) -> Any:
        """What `APIRoute.get_route_handler` reads the route's dependant and body from:
        the context of the router's inclusion while one is built, else the route."""
        context = _ROUTE_CONTEXT.get() if _ROUTE_CONTEXT is not None else None
        return context if getattr(context, "original_route", None) is self else self

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        field = self.body_field
        if field is None:
            return handler
        direct = direct_call(self._as_built()) if _ROUTE_CONTEXT is not None else None

        def parse(body: bytes) -> object:
            data = body_mod.validate_lists_by_item(
                field.field_info.annotation, body_mod.parse(body)
            )
            value, errors = field.validate(data, {}, loc=("body",))
            if errors:
                raise RequestValidationError(errors)
            return value

        async def route_handler(request: Request) -> Response:
            body = await request.body()
            if len(body) < OFFLOAD_BODY_BYTES:
                # A small valid body: the endpoint without FastAPI's handler (api/direct.py).
                if direct is not None and _is_json(request, missing=False):
                    response = await direct(request, body)
                    if response is not None:
                        return response
                return await handler(request)
            if not _is_json(request):
                return await handler(request)
            value = await asyncio.to_thread(parse, body)
            return await handler(_Parsed(request, value))

        return route_handler
