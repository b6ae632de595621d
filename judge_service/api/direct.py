"""A route's endpoint called without FastAPI's request handler, for a small valid JSON body.

FastAPI's handler (``get_request_handler``) reads the body, parses it, then walks the
route's dependency tree in ``solve_dependencies``: a fresh ``Response`` for headers, a
cache key per dependency (its security scopes looked up), the query string parsed for
parameters there are none of, and the body validated against its field. On a small
rollout that handler cost ~90 µs of the app's ~940 µs of CPU (bench/bench_asgi_small.py
--direct-ab; BENCHMARKS.md "Issue 39: small rollouts (session 3)"), twice what all the
middleware, routing and dependencies around the endpoint now cost together.

`direct_call` gives a route whose dependencies are plain: each an ``async def`` (or an
object with one as ``__call__``, such as a security scheme) that takes nothing but the
``Request`` and other such dependencies, and one JSON body field. Then a request is:
the body parsed and validated (`_parser`: to the value FastAPI's ``json.loads`` and
validation give, or not at all); the dependencies awaited in FastAPI's order (depth
first, each once per request); the endpoint awaited with the values. It is tried only
where nothing can differ from FastAPI's answer:

* a body that does not parse or validate goes to FastAPI's handler, which parses it
  again and answers its 422 (or the dependencies' 401/429 first, as before): no
  dependency has run yet, so none runs twice;
* an app with ``dependency_overrides`` goes to FastAPI's handler, and so does a request
  that FastAPI's own telemetry follows (``scope["fastapi.telemetry"]``, set when it is
  configured), so that its spans and request data are recorded as they were;
* the endpoint must be declared to return a ``Response`` (returned as it is, as FastAPI
  does), so there is nothing to serialise.

Exceptions propagate as from FastAPI's handler: this runs inside the route's
``request_response`` wrapper, so the app's exception handlers answer them as before.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, TypeAdapter, ValidationError

Direct = Callable[[Request, bytes], Awaitable[Response | None]]

# Dependant attributes that make FastAPI do more than call the dependency with the
# request (or the connection, which is the request): parameters from the path, query,
# headers or cookies, a response, background tasks, security scopes, a websocket, a body.
_PARAMS = ("path_params", "query_params", "header_params", "cookie_params", "body_params")
_SPECIAL = (
    "websocket_param_name",
    "response_param_name",
    "background_tasks_param_name",
    "security_scopes_param_name",
)


def _is_async(call: object) -> bool:
    if inspect.iscoroutinefunction(call):
        return True
    # An instance with an ``async def __call__`` (a security scheme); its bound method.
    return callable(call) and inspect.iscoroutinefunction(call.__call__)


def _plain(dependant: Dependant) -> bool:
    """True if FastAPI would resolve `dependant` by awaiting its call with the request
    and its own sub-dependencies' values, and nothing else."""
    if any(getattr(dependant, name, None) for name in _PARAMS + _SPECIAL):
        return False
    if getattr(dependant, "own_oauth_scopes", None) or getattr(dependant, "concurrency", None):
        return False
    return _is_async(dependant.call) and all(_plain(sub) for sub in dependant.dependencies)


def _returns_response(call: object) -> bool:
    try:
        returned = typing.get_type_hints(call).get("return")
    except Exception:  # an annotation that does not resolve: not ours to judge
        return False
    return isinstance(returned, type) and issubclass(returned, Response)


async def _solve(
    dependant: Dependant, request: Request, cache: dict[object, Any], values: dict[str, Any]
) -> Any:
    """`dependant`'s sub-dependencies awaited depth first (each call once per request,
    as FastAPI's cache does), then its call with their values and `values`."""
    for sub in dependant.dependencies:
        if sub.use_cache and sub.call in cache:
            solved = cache[sub.call]
        else:
            solved = await _solve(sub, request, cache, {})
            cache.setdefault(sub.call, solved)
        if sub.name is not None:
            values[sub.name] = solved
    for name in (dependant.request_param_name, dependant.http_connection_param_name):
        if name is not None:  # a security scheme asks for the connection: the request
            values[name] = request
    assert dependant.call is not None
    return await dependant.call(**values)


def _parser(field: Any) -> Callable[[bytes], Any]:
    """The body field's value from the raw body, or None where FastAPI's handler would not
    answer 200 with the same value.

    A model field with nothing added to it is validated by pydantic straight from the
    bytes (``validate_json``: one pass, no dict of the document in between; 4.6 µs where
    ``json.loads`` and validation took 8.7 on the bench's small rollout). Where its JSON
    reader and ``json.loads`` differ, validation fails here and FastAPI's handler
    answers: a UTF-16 body, a byte-order mark, bytes that are not UTF-8, a trailing NUL
    (tests/test_direct_route.py holds both paths equal on the cases where they could
    differ). Any other field: ``json.loads`` and the field's own ``validate``, FastAPI's
    two steps."""
    model = field.field_info.annotation
    if isinstance(model, type) and issubclass(model, BaseModel) and not field.field_info.metadata:
        adapter: TypeAdapter[Any] = TypeAdapter(model)

        def from_json(body: bytes) -> Any:
            try:
                return adapter.validate_json(body)
            except ValidationError:
                return None

        return from_json

    def from_python(body: bytes) -> Any:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if data is None:  # FastAPI's "field required" (or the field's default)
            return None
        value, errors = field.validate(data, {}, loc=("body",))
        return None if errors else value

    return from_python


def direct_call(route: Any) -> Direct | None:
    """`route`'s endpoint as `direct(request, body)`: its Response, or None where FastAPI's
    handler must answer (see the module docstring). None for a route whose dependencies
    or body are not plain. `route` is the APIRoute, or the context FastAPI builds it in
    when its router is included in another (which holds the router's dependencies)."""
    dependant: Dependant | None = route.dependant
    field = route.body_field
    if dependant is None or field is None or len(dependant.body_params) != 1:
        return None
    if getattr(route, "_embed_body_fields", True):
        return None
    endpoint_only = ("request_param_name", "http_connection_param_name", *_PARAMS[:4], *_SPECIAL)
    if any(getattr(dependant, name, None) for name in endpoint_only):
        return None
    if not _is_async(dependant.call) or not _returns_response(dependant.call):
        return None
    if not all(_plain(sub) for sub in dependant.dependencies):
        return None
    body_name = dependant.body_params[0].name
    overrides = route.dependency_overrides_provider
    parse = _parser(field)
    # The endpoint with its dependencies but not its body, which is validated here first.
    endpoint = Dependant(dependencies=dependant.dependencies, call=dependant.call)

    async def direct(request: Request, body: bytes) -> Response | None:
        if overrides is not None and getattr(overrides, "dependency_overrides", None):
            return None
        if "fastapi.telemetry" in request.scope:
            return None
        value = parse(body)
        if value is None:  # FastAPI's handler answers (and names the error)
            return None
        response: Response = await _solve(endpoint, request, {}, {body_name: value})
        return response

    return direct
