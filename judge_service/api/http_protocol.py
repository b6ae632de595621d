"""uvicorn's httptools protocol with a bound on the request head, and each response's
head written with its body.

uvicorn's h11 protocol refuses a request line and headers past 16 KiB; its httptools
protocol has no such bound, and httptools buffers a header value until it ends, so one
request with a 200 MB header held 270 MB in the server and was then served. The API's
headers are a few hundred bytes (a bearer key, a content type), so a head past
`MAX_HEAD_BYTES` is refused with 431 before it is parsed, and the connection closed.

uvicorn writes a response's status line and headers as soon as the app sends them, and
the body with the next message: two sends, two segments on a TCP_NODELAY socket, and two
wake-ups of the client. On small requests the first of them was ~12% of the server's time
(py-spy, BENCHMARKS.md "Issue 39"). `OneWriteCycle` holds the head until the body's first
write (or the end of that message, when there is none to write) and sends both at once.
"""

from __future__ import annotations

from typing import Any

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

MAX_HEAD_BYTES = 64 * 1024

_REFUSAL = b"request line and headers exceed %d bytes" % MAX_HEAD_BYTES


class BoundedHeadProtocol(HttpToolsProtocol):
    """Counts the bytes received from the start of each request until its headers end.

    The bytes are handed to the parser at most the head's remaining room at a time, so a
    body (or the next pipelined request) arriving in the same read as the head is never
    counted as head: a 200 KB JSON body sent with its headers in one write is served.
    Bytes after a request that ended inside one such piece are not counted for the next
    head, so a head is refused past at most twice `MAX_HEAD_BYTES`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        while data:
            if not self._in_head:
                super().data_received(data)
                return
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:  # the head has used its room and not ended
                self._refuse()
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()
        # The cycle was made just now; its ASGI task has not run yet (it starts on the
        # loop's next turn), so every message it sends goes through OneWriteCycle.send.
        if type(self.cycle) is RequestResponseCycle:
            self.cycle.__class__ = OneWriteCycle

    def on_message_complete(self) -> None:
        # The next bytes on a kept-alive connection start the next request's head.
        self._in_head, self._head_bytes = True, 0
        super().on_message_complete()

    def _refuse(self) -> None:
        self.logger.warning("Request head over %d bytes refused.", MAX_HEAD_BYTES)
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_REFUSAL), _REFUSAL)
        )
        self.transport.close()


class _Held:
    """The transport while a response's head is written: keeps the bytes."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


class _Prefixed:
    """The transport while the next message is written: its first write carries the held
    head; everything else is the transport's own."""

    def __init__(self, transport: Any, head: bytes) -> None:
        self.transport = transport
        self.head = head

    def write(self, data: bytes) -> None:
        head, self.head = self.head, b""
        self.transport.write(head + data)

    def flush(self) -> None:
        if self.head and not self.transport.is_closing():
            self.transport.write(self.head)
        self.head = b""

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class OneWriteCycle(RequestResponseCycle):
    """A request-response cycle whose response head leaves with the body's first bytes."""

    _head = b""

    async def send(self, message: ASGISendEvent) -> None:
        transport = self.transport
        if message["type"] == "http.response.start" and not self.response_started:
            held = _Held()
            self.transport = held  # type: ignore[assignment]
            try:
                await super().send(message)
            finally:
                self.transport = transport
            self._head = held.data
            return
        if not self._head:
            await super().send(message)
            return
        prefixed = _Prefixed(transport, self._head)
        self._head = b""
        self.transport = prefixed  # type: ignore[assignment]
        try:
            await super().send(message)
        finally:
            self.transport = transport
            prefixed.flush()  # a message that wrote nothing (HEAD, an empty chunk list)
