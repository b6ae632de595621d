"""A loopback HTTP server (a thread running `http.server`) playing scripts in one wire format."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from tests.harness.scripted.anthropic_wire import AnthropicWire
from tests.harness.scripted.conformance import STRICT, Strictness
from tests.harness.scripted.openai_wire import OpenAIWire
from tests.harness.scripted.script import (
    Fault,
    Hang,
    Reply,
    Script,
    ScriptBook,
    Step,
    View,
)


class Wire(Protocol):
    path: str

    def script_key(self, body: dict[str, Any]) -> str | None: ...
    def view(self, body: dict[str, Any], attempt: int) -> View: ...
    def reply(self, reply: Reply, key: str, turn: int, body: dict[str, Any]) -> dict[str, Any]: ...
    def fault(self, fault: Fault) -> dict[str, Any]: ...
    def refusal(self, body: dict[str, Any]) -> Fault | None: ...
    def stream(self, payload: dict[str, Any], body: dict[str, Any], reply: Reply) -> list[str]: ...


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived: the raw bytes and their parse, the script and turn it hit."""

    raw: bytes
    body: dict[str, Any]
    headers: dict[str, str]
    script: str | None
    turn: int
    attempt: int
    status: int
    response: dict[str, Any]


class FakeProviderServer:
    def __init__(
        self,
        wire: Wire,
        *,
        delay_s: float = 0.0,
        models: Sequence[str] | None = None,
        unscripted: Step | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.wire = wire
        self.book = ScriptBook()
        self.delay_s = delay_s  # added to every answer (the bench's 200 ms provider)
        # GET /v1/models lists these ids (one page, fields of both APIs); None: a 404.
        self.models = models
        # What a request with no SCRIPT tag gets (the pre-flight's); None: a 404.
        self.unscripted = unscripted
        self.requests: list[Recorded] = []
        self.in_flight = 0  # requests being answered now, and the most at once
        self.max_in_flight = 0
        # Streams whose client went away mid-reply: the server stopped writing (generating).
        self.abandoned_streams = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        # `host`: another address of this machine, for servers in other network namespaces
        # (bench/multihost reaches it over the bridge).
        self._httpd = ThreadingHTTPServer((host, 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # releases hung handlers
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests_for(self, script: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.script == script]

    def _answer(
        self, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes | list[str], float]:
        """(status, headers, body; or the SSE events of a streamed reply, and their pace)."""
        body = json.loads(raw)
        streamed: Reply | None = None
        key = self.wire.script_key(body)
        refused = self.wire.refusal(body)  # what a real server refuses (conformance.py)
        if refused is not None:
            extra: dict[str, str] = {}
            status, payload = refused.status, self.wire.fault(refused)
            turn, attempt = self.wire.view(body, 0).turn, -1
        elif key is None and self.unscripted is not None:
            status, extra, payload, streamed = self._unscripted(body, self.unscripted)
            turn = attempt = -1
        elif key is None or key not in self.book.scripts:
            status, extra, payload = (
                404,
                {},
                self.wire.fault(Fault(404, message=f"no script {key}")),
            )
            turn = attempt = -1
        else:
            turn = self.wire.view(body, 0).turn
            attempt = self.book.next_attempt(key, turn)
            view = self.wire.view(body, attempt)
            action = self.book.scripts[key].action(view)
            if isinstance(action, Hang):
                self.stopping.wait(action.seconds)
                action = Reply(text="(answered after hanging)")
            if isinstance(action, Fault):
                status, extra, payload = action.status, action.headers, self.wire.fault(action)
            else:
                status, extra, payload = 200, {}, self.wire.reply(action, key, turn, body)
                streamed = action if body.get("stream") else None
        with self._lock:
            self.requests.append(Recorded(raw, body, headers, key, turn, attempt, status, payload))
        if self.delay_s:
            time.sleep(self.delay_s)
        if streamed is not None:
            return status, extra, self.wire.stream(payload, body, streamed), streamed.chunk_delay_s
        return status, extra, json.dumps(payload).encode(), 0.0

    def _unscripted(
        self, body: dict[str, Any], step: Step
    ) -> tuple[int, dict[str, str], Any, Reply | None]:
        action = Script([step]).action(self.wire.view(body, 0))
        if isinstance(action, Hang):
            self.stopping.wait(action.seconds)
            action = Reply(text="(answered after hanging)")
        if isinstance(action, Fault):
            return action.status, action.headers, self.wire.fault(action), None
        payload = self.wire.reply(action, "unscripted", 0, body)
        return 200, {}, payload, (action if body.get("stream") else None)

    def _models_page(self) -> tuple[int, bytes]:
        if self.models is None:
            return 404, json.dumps(self.wire.fault(Fault(404, message="no models list"))).encode()
        data = [
            {
                "id": model,
                "object": "model",
                "created": 1_700_000_000,
                "owned_by": "fake",
                "type": "model",
                "display_name": model,
                "created_at": "2024-01-01T00:00:00Z",
            }
            for model in self.models
        ]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        page = {"object": "list", "data": data, "has_more": False}
        return 200, json.dumps({**page, "first_id": first, "last_id": last}).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' pools expect
            # Headers and body go out in separate sends: without TCP_NODELAY, Nagle's
            # algorithm and delayed ACKs add ~40 ms to every call on top of the script's.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/v1/models":
                    status, data = server._models_page()
                else:
                    status, data = 404, b'{"error": "no such path"}'
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    data: bytes | list[str]
                    extra: dict[str, str]
                    if self.path != server.wire.path:
                        status, extra, data, pace = 404, {}, b'{"error": "no such path"}', 0.0
                    else:
                        status, extra, data, pace = server._answer(raw, dict(self.headers.items()))
                    if isinstance(data, list):
                        self._stream(data, pace)
                        return
                finally:
                    with server._lock:
                        server.in_flight -= 1
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a hang past its deadline)

            def _stream(self, events: list[str], pace: float) -> None:
                # As a generating server does: one event at a time, and a client that has
                # gone ends the reply (the write fails) instead of the rest being produced.
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for event in events:
                        if pace and server.stopping.wait(pace):
                            return
                        self.wfile.write(f"data: {event}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    with server._lock:
                        server.abandoned_streams += 1

        return Handler


def anthropic_server(
    delay_s: float = 0.0, *, strict: Strictness = STRICT, **options: Any
) -> FakeProviderServer:
    return FakeProviderServer(AnthropicWire(strict=strict), delay_s=delay_s, **options)


def openai_server(
    delay_s: float = 0.0,
    *,
    native_tools: bool = True,
    strict: Strictness = STRICT,
    **options: Any,
) -> FakeProviderServer:
    """`native_tools=False`: a server that ignores tools and answers with text only.
    `strict`: what it refuses and which cap field it reads (conformance.LLAMA_CPP_PYTHON)."""
    wire = OpenAIWire(native_tools=native_tools, strict=strict)
    return FakeProviderServer(wire, delay_s=delay_s, **options)
