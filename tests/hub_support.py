"""Stand-ins for the Hugging Face hub on loopback: one that serves tokenizer directories
(as the hub's ``/{repo}/resolve/{revision}/{file}`` endpoint does, with the headers the
hub client checks), one that accepts connections and never answers, one that refuses."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import socket
import threading
import time
from pathlib import Path
from typing import Any

COMMIT = "a" * 40


class FakeHub:
    """Serves `repos` (repo id -> directory); anything else is the hub's 404 for a missing
    repo. `delay_s` slows every answer, as a hub that is up but slow."""

    def __init__(self, repos: dict[str, Path] | None = None, delay_s: float = 0.0) -> None:
        self.repos = dict(repos or {})
        self.delay_s = delay_s
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, *, body: bool) -> None:
        self.requests.append((handler.command, handler.path))
        time.sleep(self.delay_s)
        parts = handler.path.split("?")[0].strip("/").split("/")
        if "resolve" not in parts:
            return self._status(handler, 404, {})
        at = parts.index("resolve")
        repo, filename = "/".join(parts[:at]), "/".join(parts[at + 2 :])
        if repo not in self.repos:
            return self._status(handler, 404, {"X-Error-Code": "RepoNotFound"})
        path = self.repos[repo] / filename
        if not path.is_file():
            headers = {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}
            return self._status(handler, 404, headers)
        data = path.read_bytes()
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    @staticmethod
    def _status(
        handler: http.server.BaseHTTPRequestHandler, status: int, headers: dict[str, str]
    ) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Blackhole:
    """A hub that accepts every connection and never answers (a firewall that drops
    packets after the handshake, a hung proxy). `connections` counts the attempts."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self._held.append(conn)

    def __enter__(self) -> Blackhole:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        self._sock.close()
        with self._lock:
            for conn in self._held:
                conn.close()


def refused_url() -> str:
    """A loopback URL nothing listens on: every connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
