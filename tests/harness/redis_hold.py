"""A TCP proxy in front of Redis for one process, which can cut that process off at a
chosen command: from the first chunk it sends holding `pattern` (a script's SHA), nothing
passes either way until `release()`. To Redis the process is then paused at exactly that
point (its heartbeats stop, the command waits unsent), which no signal sent from outside
could time. Threads, plain sockets: the test's own event loop stays free."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class HoldingProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._gate = threading.Event()  # set: traffic flows
        self._gate.set()
        self._pattern: bytes | None = None
        self._lock = threading.Lock()
        self._held_on: socket.socket | None = None  # the upstream side of the held command
        self.held = threading.Event()  # the hold began
        self.answered = threading.Event()  # after release, Redis answered the held command
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def hold_at(self, pattern: bytes) -> None:
        self._pattern = pattern

    def release(self) -> None:
        self._gate.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outbound: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if outbound and self._pattern is not None:
                    with self._lock:
                        if self._pattern is not None and self._pattern in data:
                            self._pattern = None
                            self._held_on = sink
                            self._gate.clear()
                            self.held.set()
                if not outbound and source is self._held_on and self._gate.is_set():
                    self.answered.set()
                self._gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # Pass the end on, and still read the other way (a reply on its way).
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._gate.set()
        self._listener.close()
        for sock in self._sockets:
            sock.close()

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
