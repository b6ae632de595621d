"""Servers for the client tests: a counting transport (how many requests the client sent)
and a scripted HTTP server that answers a script of faults, then proxies to a real one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class CountingTransport(httpx.HTTPTransport):
    """A real HTTP transport that records each request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path))
        return super().handle_request(request)


@dataclass
class Fault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"detail": "scripted fault"}'
    # Close the connection without an answer (a replica that went away): before the
    # request reaches the upstream, or after it did and answered ("relayed").
    drop: bool = False
    relayed: bool = False


@dataclass
class FaultServer:
    """Answers each request with the next scripted fault; once the script is spent, passes
    the request to `upstream` and relays its answer. Records (monotonic time, method, path)."""

    upstream: str
    script: list[Fault] = field(default_factory=list)
    seen: list[tuple[float, str, str]] = field(default_factory=list)
    dropped: list[bytes] = field(default_factory=list)  # upstream answers never delivered
    url: str = ""


@contextmanager
def fault_server(upstream: str, script: list[Fault]) -> Iterator[FaultServer]:
    state = FaultServer(upstream, list(script))
    lock = threading.Lock()
    relay = httpx.Client(base_url=upstream, timeout=30)

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            with lock:
                state.seen.append((time.monotonic(), self.command, self.path))
                fault = state.script.pop(0) if state.script else None
            if fault is not None and fault.drop:
                if fault.relayed:
                    kind = {"content-type": "application/json"}
                    answer = relay.request(self.command, self.path, content=body, headers=kind)
                    with lock:
                        state.dropped.append(answer.content)
                self.close_connection = True
                return
            if fault is not None:
                self.send_response(fault.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(fault.body)))
                for name, value in fault.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(fault.body)
                return
            forwarded = {
                k: v
                for k, v in self.headers.items()
                if k.lower() in ("content-type", "authorization")
            }
            answer = relay.request(self.command, self.path, content=body, headers=forwarded)
            self.send_response(answer.status_code)
            self.send_header("content-type", answer.headers.get("content-type", "application/json"))
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        relay.close()
