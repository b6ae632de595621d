"""judge-service as a Ray Serve application (judge_service.integrations.ray_serve): two
replicas of the same FastAPI app on a local Ray instance, one Redis prefix between them.
A batch of the bundled rollouts judged over Serve's HTTP proxy (JudgeClient) and through a
deployment handle from a Ray task gets the credit an in-process Engine gives; a replica
that never judged it answers from the cache the other one wrote; each replica runs its
app's lifespan once, and stops it when Serve deletes the app. Which replica answered is
the ``x-judge-replica`` header the module adds. The handle method is also run without a
cluster, against the app's key check and batch limit (fast, no Redis).

Serve's autoscaler runs on the app too: replicas rise under load and fall after it.

Without ray[serve] these tests skip, unless JUDGE_REQUIRE_RAY=1, when they fail.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest

from judge_service.client import (
    AuthenticationError,
    BatchResponse,
    InvalidRequestError,
    JudgeClient,
    RequestTooLargeError,
)
from judge_service.client.arrays import credit_array
from judge_service.config import Settings
from judge_service.jobs import open_job_store
from judge_service.pipeline import Engine
from judge_service.schemas import BatchRequestBody
from judge_service.store import open_store
from tests.conftest import EXAMPLES
from tests.redis_support import free_port, shared_redis

try:
    # Before `ray.serve`: it imports Serve without the warnings Ray's own models raise then.
    from judge_service.integrations.ray_serve import REPLICA_HEADER, JudgeService, build_app
except ImportError:
    if os.environ.get("JUDGE_REQUIRE_RAY") == "1":
        raise
    pytest.skip("ray[serve] is not installed (pip install 'ray[serve]')", allow_module_level=True)

import ray
from ray import serve

OPTIONS: dict[str, Any] = {"lambda": 0.25, "credit_encoding": "base64-f32"}
FIELDS = ("id", "group_id", "reward", "response_token_ids", "reference_answer")
TOKENIZER_SETTINGS: dict[str, Any] = {
    "default_tokenizer": str(EXAMPLES / "tokenizer"),
    "tokenizer_roots": [str(EXAMPLES)],
}


@pytest.fixture(scope="module")
def ray_serve_url() -> Iterator[str]:
    """A local Ray instance (2 CPUs, a small object store) with Serve's HTTP proxy on a
    free loopback port; both shut down after the module."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")  # no report attempts from a test cluster
        # The load the autoscaler sees, every half second rather than every 10 s (Serve's
        # default), so the autoscaling test is over in seconds.
        for source in ("REPLICA", "HANDLE"):
            env.setenv(f"RAY_SERVE_{source}_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "0.5")
        ray.init(
            address="local",  # a fresh instance, never a cluster that happens to be running
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=150 * 1024**2,
            log_to_driver=False,
            namespace=f"judge-test-{uuid.uuid4().hex[:8]}",
        )
        try:
            port = free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            yield f"http://127.0.0.1:{port}"
        finally:
            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()


@dataclass
class Deployed:
    name: str
    url: str  # the app's base URL on Serve's proxy
    redis_url: str
    prefix: str


@pytest.fixture
def judge_app(ray_serve_url: str) -> Iterator[Deployed]:
    """The app in two replicas (half a CPU each, so a Ray task still fits beside them),
    sharing a fresh Redis prefix given to them as the service reads it: JUDGE_REDIS_*."""
    with shared_redis() as (redis_url, prefix):
        name = f"judge-{uuid.uuid4().hex[:8]}"
        app = build_app(
            num_replicas=2,
            env={"JUDGE_REDIS_URL": redis_url, "JUDGE_REDIS_PREFIX": prefix},
            settings=TOKENIZER_SETTINGS,
            ray_actor_options={"num_cpus": 0.5},
        )
        serve.run(app, name=name, route_prefix=f"/{name}")
        try:
            yield Deployed(name, f"{ray_serve_url}/{name}", redis_url, prefix)
        finally:
            if name in serve.status().applications:
                serve.delete(name)


class ReplicaRecorder(httpx.HTTPTransport):
    """A real HTTP transport that records which replica answered each request."""

    def __init__(self) -> None:
        super().__init__()
        self.replicas: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.replicas.append(response.headers.get(REPLICA_HEADER))
        return response


@ray.remote(num_cpus=0.5)
def trainer_step(app_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a trainer's task does: a handle to the app by name, one batch, no HTTP."""
    handle = serve.get_app_handle(app_name)
    answer: dict[str, Any] = handle.judge_batch.remote(body).result()
    return answer


@ray.remote(num_cpus=0.5)
def trainer_step_with_a_bad_body(app_name: str) -> tuple[int, str | None]:
    """A rollout without token ids: the trainer catches the client's typed error."""
    handle = serve.get_app_handle(app_name)
    try:
        handle.judge_batch.remote({"rollouts": [{"id": "no-ids"}]}).result()
    except InvalidRequestError as exc:
        return exc.status_code, exc.field
    raise AssertionError("a body without response_token_ids was accepted")


def _in_process(body: dict[str, Any]) -> BatchResponse:
    """The same batch judged by an Engine in this process, parsed as the route parses it."""
    request = BatchRequestBody.model_validate(body)

    async def judge() -> BatchResponse:
        engine = Engine(Settings(**TOKENIZER_SETTINGS))
        try:
            return await engine.judge_batch(request.rollouts, request.options)
        finally:
            await engine.aclose()

    return asyncio.run(judge())


def _in_process_workers(deployed: Deployed) -> set[str]:
    """The job workers with a heartbeat under the app's prefix: each replica's app starts
    one in its lifespan, and retires it when the lifespan ends."""
    settings = Settings(redis_url=deployed.redis_url, redis_prefix=deployed.prefix)

    async def read() -> set[str]:
        store = open_store(settings)
        try:
            stats = await open_job_store(settings, store).snapshot()
        finally:
            await store.close()
        return set(stats.heartbeat_age_s)

    return asyncio.run(read())


def _assert_same_credit(got: BatchResponse | dict[str, Any], expected: BatchResponse) -> None:
    results = got.results if isinstance(got, BatchResponse) else got["results"]
    assert len(results) == len(expected.results)
    for result, want in zip(results, expected.results, strict=True):
        for field in ("credit", "advantage"):
            values = credit_array(result, field=field)
            assert len(values) == want.num_tokens
            np.testing.assert_array_equal(values, credit_array(want, field=field))


@pytest.mark.redis
@pytest.mark.slow
def test_two_replicas_share_one_store_over_http_and_a_handle(
    judge_app: Deployed, example_rollouts: list[dict[str, Any]]
) -> None:
    rollouts = [{k: row[k] for k in FIELDS} for row in example_rollouts]
    body = {"rollouts": rollouts, "options": OPTIONS}
    expected = _in_process(body)
    assert [r.status for r in expected.results] == ["ok"] * len(rollouts)
    assert all(
        r.num_tokens == len(row["response_token_ids"])
        for r, row in zip(expected.results, rollouts, strict=True)
    )

    # Each replica ran the app's lifespan once: one in-process job worker apiece.
    workers = _in_process_workers(judge_app)
    assert len(workers) == 2, workers

    # HTTP through Serve's proxy: the first answer judged the batch, on one replica; the
    # requests that follow, sent until Serve's router picks the other replica, are cache
    # hits, and the other replica's hits can only come from the shared Redis.
    recorder = ReplicaRecorder()
    with JudgeClient(judge_app.url, transport=recorder) as client:
        first = client.judge_batch(rollouts, OPTIONS)
        judged_by = recorder.replicas[0]
        assert judged_by
        assert [r.cache for r in first.results] == ["miss"] * len(rollouts)
        for _ in range(40):  # Serve picks at random between two idle replicas
            again = client.judge_batch(rollouts, OPTIONS)
            if recorder.replicas[-1] != judged_by:
                break
        else:
            pytest.fail(f"41 requests, all served by replica {judged_by}")
    assert recorder.replicas[-1]
    assert [r.status for r in first.results] == ["ok"] * len(rollouts)
    assert [r.cache for r in again.results] == ["hit"] * len(rollouts)
    _assert_same_credit(first, expected)
    _assert_same_credit(again, expected)

    # A deployment handle from inside a Ray task: the same answer, from the shared cache.
    answer = ray.get(trainer_step.remote(judge_app.name, body))
    assert [r["status"] for r in answer["results"]] == ["ok"] * len(rollouts)
    assert [r["cache"] for r in answer["results"]] == ["hit"] * len(rollouts)
    _assert_same_credit(answer, expected)
    # ... through the app's validation, not around it: a bad body is the HTTP 422.
    status, field = ray.get(trainer_step_with_a_bad_body.remote(judge_app.name))
    assert (status, field) == (422, "rollouts[0].response_token_ids")

    # Deleting the app runs each replica's lifespan shutdown: both workers retire.
    serve.delete(judge_app.name)
    deadline = time.monotonic() + 15
    while _in_process_workers(judge_app) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _in_process_workers(judge_app) == set()


async def test_the_handle_method_is_the_http_route_with_its_auth_and_limits(
    example_rollouts: list[dict[str, Any]],
) -> None:
    """A replica's `judge_batch` without a cluster: the app built as Serve builds it, its
    lifespan run as Serve runs it. The key, the batch limit and the body's validation are
    the HTTP route's; token ids may be a trainer's numpy arrays."""
    settings = {**TOKENIZER_SETTINGS, "api_keys": ["trainer-key"], "max_rollouts_per_batch": 4}
    service = JudgeService(settings)
    app = service.build("replica-a")
    rollouts = [{k: row[k] for k in FIELDS} for row in example_rollouts[:3]]
    rollouts[0]["response_token_ids"] = np.asarray(rollouts[0]["response_token_ids"])
    body = {"rollouts": rollouts, "options": OPTIONS}
    async with app.router.lifespan_context(app):
        answer = await service.judge_batch(body, api_key="trainer-key")
        with pytest.raises(AuthenticationError) as unknown:
            await service.judge_batch(body, api_key="another-key")
        with pytest.raises(RequestTooLargeError) as too_many:
            await service.judge_batch({"rollouts": rollouts * 2}, api_key="trainer-key")
    results = answer["results"]
    assert [r["status"] for r in results] == ["ok"] * 3
    assert [len(credit_array(r)) for r in results] == [
        len(r["response_token_ids"]) for r in rollouts
    ]
    assert unknown.value.status_code == 401
    assert too_many.value.status_code == 413 and too_many.value.field == "rollouts"
    # A replica's error reaches the trainer's process pickled: it arrives as itself.
    arrived = pickle.loads(pickle.dumps(too_many.value))
    assert type(arrived) is RequestTooLargeError and str(arrived) == str(too_many.value)
    assert (arrived.status_code, arrived.field) == (413, "rollouts")


def test_a_misspelt_setting_is_refused_before_anything_deploys() -> None:
    # Settings ignores names it does not know: the replicas would start without it.
    with pytest.raises(ValueError, match="redis_ulr"):
        build_app(settings={"redis_ulr": "redis://127.0.0.1:6379/0"})


def test_autoscaling_and_a_fixed_count_are_exclusive_and_checked() -> None:
    with pytest.raises(ValueError, match="num_replicas and autoscaling_config"):
        build_app(num_replicas=2, autoscaling_config={"max_replicas": 3})
    # Serve's model ignores a name it does not have: a misspelt bound would do nothing.
    with pytest.raises(ValueError, match=r"AutoscalingConfig: max_replica$"):
        build_app(autoscaling_config={"max_replica": 3})
    with pytest.raises(ValueError, match="must be greater than or equal to min_replicas"):
        build_app(autoscaling_config={"min_replicas": 3, "max_replicas": 2})


def _running(name: str) -> int:
    app = serve.status().applications.get(name)
    if app is None:
        return 0
    states = app.deployments["JudgeService"].replica_states  # ReplicaState (a str enum) -> n
    return sum(n for state, n in states.items() if str(state).endswith("RUNNING"))


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The `metrics_interval_s` field:DeprecationWarning")
def test_replicas_rise_under_load_and_fall_after(
    ray_serve_url: str, example_rollouts: list[dict[str, Any]]
) -> None:
    """Serve's autoscaler on the app: one replica idle, two while six clients keep it busy
    (one request in flight per replica, the target), one again once they stop. Bounded: 90 s
    for each change (about 10 s each here)."""
    rollouts = [{k: row[k] for k in FIELDS} for row in example_rollouts]
    body = {"rollouts": rollouts, "options": OPTIONS}
    autoscaling = {
        "min_replicas": 1,
        "max_replicas": 2,
        "target_ongoing_requests": 1,
        "upscale_delay_s": 1,
        "downscale_delay_s": 3,
        # Deprecated for the push interval variables set in ray_serve_url, but still what
        # look_back_period_s is checked against.
        "metrics_interval_s": 0.5,
        "look_back_period_s": 2,
    }
    with shared_redis() as (redis_url, prefix):
        name = f"judge-auto-{uuid.uuid4().hex[:8]}"
        app = build_app(
            autoscaling_config=autoscaling,
            env={"JUDGE_REDIS_URL": redis_url, "JUDGE_REDIS_PREFIX": prefix},
            settings=TOKENIZER_SETTINGS,
            ray_actor_options={"num_cpus": 0.5},
            max_ongoing_requests=1,
        )
        serve.run(app, name=name, route_prefix=f"/{name}")
        stop = threading.Event()
        timeline: list[tuple[float, int]] = []

        def load() -> None:
            with httpx.Client(base_url=f"{ray_serve_url}/{name}", timeout=60) as client:
                while not stop.is_set():
                    client.post("/v1/judge/batch", json=body).raise_for_status()

        def wait_for(count: int) -> None:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                timeline.append((time.monotonic() - started, _running(name)))
                if timeline[-1][1] == count:
                    return
                time.sleep(0.25)
            pytest.fail(f"not {count} replica(s) within 90 s: {timeline[-5:]}")

        started = time.monotonic()
        try:
            assert _running(name) == 1
            clients = [threading.Thread(target=load, daemon=True) for _ in range(6)]
            for client in clients:
                client.start()
            wait_for(2)
            up = timeline[-1][0]
            stop.set()
            for client in clients:
                client.join(timeout=60)
            wait_for(1)
            print(f"\nautoscaling: 2 replicas {up:.1f} s into the load, 1 again "
                  f"{timeline[-1][0] - up:.1f} s after it stopped")  # fmt: skip
        finally:
            stop.set()
            serve.delete(name)
