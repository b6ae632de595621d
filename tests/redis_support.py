"""Redis, workers and API processes for the store and job tests.

Tests use the Redis named by ``JUDGE_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/0``), each under a unique key prefix that is deleted
afterwards, or a private ``redis-server`` of their own (stop/start tests; the
shared one is never stopped). Without Redis they fail, never skip, and say in
one line how to get it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
HINT = (
    "needs Redis at {url}: start one with `redis-server --daemonize yes --save '' "
    "--appendonly no` (apt-get install redis-server), or set JUDGE_TEST_REDIS_URL"
)


def redis_url() -> str:
    return os.environ.get("JUDGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def require_redis() -> str:
    url = redis_url()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.fail(HINT.format(url=url) + f" ({exc})", pytrace=False)
    return url


def unique_prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def drop_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


@contextmanager
def shared_redis() -> Iterator[tuple[str, str]]:
    """(url, unique prefix) on the configured Redis; the prefix's keys are deleted after."""
    url = require_redis()
    prefix = unique_prefix()
    try:
        yield url, prefix
    finally:
        drop_prefix(url, prefix)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    """A redis-server of the test's own (append-only file, fsync always), stoppable."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(
                "needs the redis-server binary on PATH (apt-get install redis-server)",
                pytrace=False,
            )
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateRedis:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--logfile",
                str(self.directory / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, 10, "the private redis-server to answer")
        return self

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.2).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        """SIGTERM: Redis flushes its append-only file and exits; the data survives."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def service_env(**settings: Any) -> dict[str, str]:
    """The environment of a worker or API subprocess: ``JUDGE_<NAME>`` for each setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("ANTHROPIC_API_KEY", "test-key")
    env.setdefault("OPENAI_API_KEY", "test-key")
    for name, value in settings.items():
        env[f"JUDGE_{name.upper()}"] = str(value)
    return env


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`python -m judge_service ARGS`, its output to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "judge_service", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_http(url: str, timeout: float = 30) -> None:
    def up() -> bool:
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout, f"{url} to answer", every=0.1)


def live_workers(url: str, prefix: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        names: list[str] = client.zrangebyscore(f"{prefix}:workers", time.time() - 15, "+inf")
        return names
    finally:
        client.close()


def pending_of(url: str, prefix: str, consumer: str) -> int:
    """Entries pending for `consumer`, or for a name it begins (a process's name plus the
    random suffix a worker adds to hostname-pid)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        summary = client.xpending(f"{prefix}:queue", "judges")
        return sum(
            int(c["pending"])
            for c in summary["consumers"] or []
            if c["name"] == consumer or c["name"].startswith(consumer + "-")
        )
    finally:
        client.close()


def all_results(client: httpx.Client, job_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """Every result of a finished job, page by page."""
    results: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get(f"/v1/jobs/{job_id}/results", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        results += body["results"]
        cursor = body["next_cursor"]
        if cursor is None:
            return results
        assert body["results"], "a finished job's page must not be empty"


def wait_job(client: httpx.Client, job_id: str, timeout: float) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        response = client.get(f"/v1/jobs/{job_id}")
        if response.status_code != 200:
            return None
        view: dict[str, Any] = response.json()
        return (
            view
            if view["status"] in ("done", "failed", "cancelled")
            and (view["counts"]["running"] == 0 and view["counts"]["queued"] == 0)
            else None
        )

    result: dict[str, Any] = wait_until(finished, timeout, f"job {job_id} to finish", every=0.1)
    return result


def start_job_and_wait_busy(
    client: httpx.Client,
    body: dict[str, Any],
    url: str,
    prefix: str,
    victim: str,
    done_at_least: int,
) -> str:
    """Submit a job; return its id once `done_at_least` rollouts are done and the worker
    named `victim` holds some in flight (the moment a kill test strikes)."""
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    job_id: str = created.json()["id"]

    def victim_busy() -> bool:
        done = client.get(f"/v1/jobs/{job_id}").json()["counts"]["done"]
        return done >= done_at_least and pending_of(url, prefix, victim) > 0

    wait_until(victim_busy, 60, "the job to be under way")
    return job_id


@asynccontextmanager
async def redis_job_store() -> AsyncIterator[Any]:
    """A `RedisJobStore` under a fresh prefix, dropped afterwards."""
    from judge_service.jobs.queue import RedisJobStore
    from judge_service.store.redis_store import RedisStore

    url, prefix = require_redis(), unique_prefix()
    store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    queue = RedisJobStore(store.conn, ttl_s=600)
    await queue.ensure_queue()
    try:
        yield queue
    finally:
        await store.close()
        drop_prefix(url, prefix)


@contextmanager
def worker_processes(
    names: list[str], env: dict[str, str], logs: Path, url: str, prefix: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`judge-service worker` processes by name, each logging to logs/<name>.log; yields
    them once every one has a heartbeat, and stops them (SIGTERM) afterwards."""
    workers = [
        spawn(["worker", "--name", n, "--log-level", "warning"], env, logs / f"{n}.log")
        for n in names
    ]
    try:
        wait_until(
            lambda: set(live_workers(url, prefix)) >= set(names), 60, f"{len(names)} workers"
        )
        yield workers
    finally:
        for worker in workers:
            stop(worker)
