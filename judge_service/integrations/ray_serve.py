"""judge-service as a Ray Serve application: the same FastAPI app as ``judge-service serve``,
in N replicas on a team's Ray cluster, next to the trainer (verl, OpenRLHF, SkyRL).

Needs the ``serve`` extra (``ray[serve]``). Unlike the rest of `judge_service.integrations`
(re-exports of the client distribution's trainer integrations) this module is server-side:
it imports the app, so it lives in this package only.

Deploy it from the driver (or ``serve run`` with a module that calls `build_app`)::

    from ray import serve
    from judge_service.integrations.ray_serve import build_app

    serve.run(
        build_app(
            num_replicas=4,  # or autoscaling_config={"min_replicas": 1, "max_replicas": 8}
            env={"JUDGE_REDIS_URL": "redis://redis:6379/0", "JUDGE_REDIS_PREFIX": "judge"},
            settings={"default_tokenizer": "Qwen/Qwen3-8B"},
            ray_actor_options={"num_cpus": 2},
        ),
        name="judge",
        route_prefix="/judge",
    )

Each replica builds its own app (`create_app`): its own Engine, store connection and
tokenizer cache, started by the app's lifespan once per replica and shut down (in-process
jobs worker stopped, engine and store closed) when Serve stops the replica. Give every
replica one Redis (``JUDGE_REDIS_URL``, the same ``JUDGE_REDIS_PREFIX``): without it each
replica has a judgment cache, job queue and rate limits of its own.

HTTP clients (`judge_service.client.JudgeClient`) use Serve's proxy,
``http://<node>:8000/judge``. A trainer's Ray task or actor can skip the proxy and call a
replica through a `DeploymentHandle`; the body and the answer are those of
``POST /v1/judge/batch`` (the answer as parsed JSON)::

    import ray
    from ray import serve

    @ray.remote
    def trainer_step(rollouts: list[dict]) -> dict:
        handle = serve.get_app_handle("judge")
        body = {"rollouts": rollouts, "options": {"credit_encoding": "base64-f32"}}
        return handle.judge_batch.remote(body).result()

In an async actor, ``await handle.judge_batch.remote(body)`` rather than ``.result()``,
which would block the actor's event loop. With ``JUDGE_API_KEYS`` set, pass
``api_key=...`` as for HTTP. An error answer raises the client's typed error
(`judge_service.client.errors`, e.g. ``InvalidRequestError`` for a 422), wrapped by Ray
in a ``RayTaskError`` that is also an instance of it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import httpx
import orjson
from fastapi import FastAPI
from judge_service_client.client.wire import raise_for_status
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judge_service.api.app import create_app
from judge_service.config import Settings

with warnings.catch_warnings():  # Ray's own pydantic models warn as Serve loads: not ours
    warnings.filterwarnings(
        "ignore", "Using extra keyword arguments on `Field`", DeprecationWarning
    )
    from ray import serve
    from ray.serve.config import AutoscalingConfig
    from ray.serve.deployment import Application

# Each answer names the replica that served it (Serve's replica id), so a trainer can see
# the load spread and an operator can find the replica's log.
REPLICA_HEADER = "x-judge-replica"

# The handle path sends its request to the replica's own app, in process: no socket, but
# every layer an HTTP request meets (body limits, auth, rate limit, validation, the route).
_LOCAL_URL = "http://replica"
# Token ids may come straight from a trainer's tensors (``.numpy()``).
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


class ReplicaHeader:
    """ASGI middleware: adds ``x-judge-replica: <id>`` to every HTTP answer."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.value = replica.encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (REPLICA_HEADER.encode(), self.value)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, tagged)


class JudgeService:
    """One replica: the judge-service app for Serve's HTTP proxy, and `judge_batch` for
    deployment handles. `JudgeDeployment` is this class as a Serve deployment."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self._overrides = dict(settings or {})
        self._local: httpx.AsyncClient | None = None

    def __serve_build_asgi_app__(self) -> FastAPI:
        return self.build(serve.get_replica_context().replica_id.unique_id)

    def build(self, replica: str) -> FastAPI:
        """The app for the replica named `replica`; `judge_batch` calls it from now on."""
        # Keyword overrides on top of the replica's environment (JUDGE_*), as Settings reads.
        app = create_app(Settings(**self._overrides))
        app.add_middleware(ReplicaHeader, replica=replica)
        # httpx's ASGI transport never runs the lifespan (Serve runs it for this app), and
        # holds no connection: nothing to close when the replica stops.
        transport = httpx.ASGITransport(app=app)
        self._local = httpx.AsyncClient(transport=transport, base_url=_LOCAL_URL, timeout=None)
        return app

    async def judge_batch(
        self, body: Mapping[str, Any], api_key: str | None = None
    ) -> dict[str, Any]:
        """``POST /v1/judge/batch`` on this replica: `body` as for HTTP (numpy arrays and
        integers allowed); returns the answer's JSON."""
        if self._local is None:
            raise RuntimeError("the replica's app is not built yet")
        content = orjson.dumps(body, option=_NUMPY)
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        response = await self._local.post("/v1/judge/batch", content=content, headers=headers)
        raise_for_status(response)
        answer: dict[str, Any] = orjson.loads(response.content)
        return answer


# `serve.ingress()` without an app defers it to `__serve_build_asgi_app__`, called in each
# replica after __init__ and before Serve runs the app's lifespan: the app (engine, store
# client, tokenizer cache) is built where it runs, never pickled from the driver. Applied
# as calls, not as class decorators, which mypy would take as leaving the class as it is.
JudgeDeployment = serve.deployment(name="JudgeService")(serve.ingress()(JudgeService))


def build_app(
    *,
    num_replicas: int | None = None,
    autoscaling_config: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    ray_actor_options: Mapping[str, Any] | None = None,
    max_ongoing_requests: int | None = None,
) -> Application:
    """The Serve application to pass to ``serve.run`` (or to return from a ``serve run``
    import path).

    `num_replicas` fixes the count (2 when neither it nor `autoscaling_config` is given);
    `autoscaling_config` is Serve's instead (``min_replicas``, ``max_replicas``,
    ``target_ongoing_requests``, ``upscale_delay_s``, ``downscale_delay_s``, ...): Serve
    then adds a replica while the requests in flight and queued per replica exceed the
    target, and removes one once they fall below it for the downscale delay. It is checked
    here, before anything deploys. `settings` are Settings' keyword arguments
    (``redis_url``, ``default_tokenizer``, ...), applied in each replica over its
    environment; `env` is added to every replica's environment (``JUDGE_*`` as for
    ``judge-service serve``, a provider's API key) through Ray's ``runtime_env``.
    `ray_actor_options` are Serve's per replica (``num_cpus``, ``memory``, ...; Serve's
    default is one CPU each). `max_ongoing_requests` is Serve's cap of requests in flight
    per replica (its default, 5, when None); the app's own limits (JUDGE_MAX_CONCURRENCY
    and the rest) apply inside it."""
    overrides = dict(settings or {})
    unknown = sorted(set(overrides) - set(Settings.model_fields))
    if unknown:  # Settings ignores extra names: a misspelt one would silently do nothing
        raise ValueError(f"not Settings fields: {', '.join(unknown)}")
    actor_options: dict[str, Any] = dict(ray_actor_options or {})
    if env:
        runtime_env = dict(actor_options.get("runtime_env") or {})
        runtime_env["env_vars"] = {**(runtime_env.get("env_vars") or {}), **env}
        actor_options["runtime_env"] = runtime_env
    options: dict[str, Any] = {}
    if autoscaling_config is not None:
        if num_replicas is not None:
            raise ValueError("num_replicas and autoscaling_config: give one (Serve takes one)")
        # Serve's own model refuses an inconsistent config but ignores an unknown name.
        misspelt = sorted(set(autoscaling_config) - set(AutoscalingConfig.model_fields))
        if misspelt:
            raise ValueError(f"not fields of Serve's AutoscalingConfig: {', '.join(misspelt)}")
        options["autoscaling_config"] = AutoscalingConfig(**dict(autoscaling_config))
    else:
        options["num_replicas"] = 2 if num_replicas is None else num_replicas
    if actor_options:
        options["ray_actor_options"] = actor_options
    if max_ongoing_requests is not None:
        options["max_ongoing_requests"] = max_ongoing_requests
    return JudgeDeployment.options(**options).bind(overrides)


__all__ = ["REPLICA_HEADER", "JudgeDeployment", "JudgeService", "ReplicaHeader", "build_app"]
