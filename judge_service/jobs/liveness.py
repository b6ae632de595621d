"""A worker's liveness, answered by the worker itself: ``GET /healthz`` on its metrics port.

The pulse (`jobs.pulse`) marks every heartbeat it writes to Redis; the probe asks the
worker's metrics server, which answers from that mark in a thread, without touching Redis
or the event loop. So a probe costs a request to a thread, not a Python process that
imports the service and opens Redis (``judge-service worker --healthcheck``, which the
compose file still uses). It means the same: alive while a heartbeat reached Redis within
`HEALTHY_WITHIN_S`; a stuck event loop or a Redis outage turns it 503 alike, and the
probe's failure threshold decides how long an outage may last before a restart.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

HEALTHY_WITHIN_S = 30.0
PATH = "/healthz"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class Liveness:
    """When this process's worker last wrote its heartbeat (monotonic seconds)."""

    def __init__(self) -> None:
        self._at: float | None = None

    def beat(self) -> None:
        self._at = time.monotonic()

    def age_s(self) -> float | None:
        return None if self._at is None else time.monotonic() - self._at


# The process's worker (`judge-service worker` runs one); Pulse marks it.
LIVENESS = Liveness()


def health_app(liveness: Liveness, metrics: WsgiApp, within_s: float = HEALTHY_WITHIN_S) -> WsgiApp:
    """/healthz from `liveness`; every other path is `metrics` (Prometheus' app)."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH:
            return metrics(environ, start_response)
        age = liveness.age_s()
        alive = age is not None and age <= within_s
        body = json.dumps({"alive": alive, "heartbeat_age_s": age}).encode()
        status = "200 OK" if alive else "503 Service Unavailable"
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response(status, headers)
        return [body]

    return app


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a hung scraper never holds the worker's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # a probe every few seconds
        pass


def serve(
    host: str, port: int, registry: CollectorRegistry, liveness: Liveness = LIVENESS
) -> WSGIServer:
    """/metrics (any path) and /healthz on host:port, from a daemon thread."""
    app = health_app(liveness, make_wsgi_app(registry))
    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
