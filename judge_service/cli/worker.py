"""``judge-service worker``: judge job rollouts from Redis until SIGTERM (then drain).

Run as many as you like, on as many machines as you like, against one Redis
(``JUDGE_REDIS_URL``); each takes rollouts as it has free slots. ``--healthcheck``
exits 0 when a worker on this host has a fresh heartbeat (the compose file's
healthcheck), 1 otherwise. ``--metrics-port`` serves this worker's own Prometheus
metrics (what it judged, its reclaims and retries, the queue's gauges): a scraper
reaches every worker, not only the API; and ``/healthz`` there, the same answer as
``--healthcheck`` from the worker itself, without a process per probe (the Helm chart's
probes).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

from judge_service.jobs.liveness import HEALTHY_WITHIN_S  # --healthcheck means /healthz's

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.jobs.worker import WorkerConfig


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker", help="judge queued job rollouts from Redis (JUDGE_REDIS_URL)"
    )
    parser.add_argument("--name", help="consumer name (default: <host>-<pid>); unique per worker")
    parser.add_argument(
        "--concurrency", type=int, help="rollouts in flight (default: JUDGE_WORKER_CONCURRENCY)"
    )
    parser.add_argument(
        "--metrics-port", type=int, help="serve this worker's /metrics on this port (0: any)"
    )
    parser.add_argument(
        "--metrics-host", default="0.0.0.0", help="address for --metrics-port (default: all)"
    )
    parser.add_argument("--log-level", default="info")
    parser.add_argument(
        "--healthcheck", action="store_true", help="exit 0 if a worker on this host is alive"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from judge_service.config import get_settings

    settings = get_settings()
    if not settings.redis_url:
        print(
            "judge-service worker: JUDGE_REDIS_URL is not set; workers share jobs through Redis "
            "(without it, `judge-service serve` judges jobs in-process)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.healthcheck:
        return asyncio.run(_healthcheck())
    # A random suffix: in a container the pid is always 1, so a restarted worker would take
    # its dead predecessor's name, look alive, and nobody would take over its rollouts.
    name = args.name or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
    if args.metrics_port is not None:
        _serve_metrics(args.metrics_host, args.metrics_port)
    from judge_service.heap import freeze_startup_heap

    freeze_startup_heap()  # short GC pauses: the heartbeat must not stall (see heap.py)
    return asyncio.run(_work(name, args.concurrency))


def _serve_metrics(host: str, port: int) -> None:
    """Prometheus text at http://host:port/metrics, and the worker's liveness at /healthz
    (`jobs.liveness`: the Kubernetes probe), from a thread (the judging loop never waits
    for a scrape), from the same registry the engine and the worker count into."""
    from judge_service.jobs.liveness import serve
    from judge_service.metrics import REGISTRY

    server = serve(host, port, REGISTRY)
    logging.getLogger(__name__).info(
        "metrics on http://%s:%d/metrics, liveness on /healthz", host, server.server_address[1]
    )


def worker_config(settings: Settings, name: str, concurrency: int | None) -> WorkerConfig:
    """The worker's configuration from its settings (and `--concurrency`)."""
    from judge_service.jobs.worker import WorkerConfig

    return WorkerConfig(
        name=name,
        concurrency=concurrency or settings.worker_concurrency or settings.max_concurrency,
        reclaim_idle_s=settings.jobs_reclaim_idle_s,
        max_deliveries=settings.jobs_max_deliveries,
        dead_after_s=settings.jobs_dead_after_s,
        reclaim_every_s=min(5.0, settings.jobs_reclaim_idle_s / 2),
        drain_s=settings.worker_drain_s,
    )


async def _work(name: str, concurrency: int | None) -> int:
    from judge_service.config import get_settings
    from judge_service.jobs import open_job_store
    from judge_service.jobs.worker import Worker
    from judge_service.judges.llm import ratelimit
    from judge_service.pipeline import Engine
    from judge_service.store import open_store
    from judge_service.store.redis_store import RedisStore

    settings = get_settings()
    store = open_store(settings)
    assert isinstance(store, RedisStore)
    ratelimit.set_shared_backend(store.buckets)
    config = worker_config(settings, name, concurrency)
    # The engine's own concurrency limit must never hold a claimed rollout back: its reclaim
    # clock is already running.
    engine_settings = settings.model_copy(
        update={"max_concurrency": max(settings.max_concurrency, config.concurrency)}
    )
    engine = Engine(engine_settings, store=store)
    worker = Worker(engine, open_job_store(settings, store), config)
    if engine.audit is not None:
        engine.audit.start(engine)  # the canary schedule, claimed through Redis
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    logging.getLogger(__name__).info(
        "worker %s: %d slots; a worker silent for %.0f s is dead and its rollouts taken over",
        name,
        config.concurrency,
        config.dead_after_s,
    )
    try:
        await worker.run(stop)
    finally:
        await engine.aclose()  # the drift audit's last chunk, the judges' clients
        await store.close()
    return 0


async def _healthcheck() -> int:
    from judge_service.config import get_settings
    from judge_service.errors import StoreUnavailable
    from judge_service.jobs import open_job_store
    from judge_service.store import open_store

    settings = get_settings()
    store = open_store(settings)
    try:
        alive = await open_job_store(settings, store).live_workers(HEALTHY_WITHIN_S)
    except StoreUnavailable:
        return 1
    finally:
        await store.close()
    host = socket.gethostname() + "-"
    return 0 if any(n.startswith(host) for n in alive) else 1
