"""uvicorn's httptools protocol with a bound on the request head, writing each response's
head and body in one go.

uvicorn's h11 protocol refuses a request line and headers past 16 KiB; its httptools
protocol has no such bound, and httptools buffers a header value until it ends, so one
request with a 200 MB header held 270 MB in the server and was then served. The API's
headers are a few hundred bytes (a bearer key, a content type), so a head past
`MAX_HEAD_BYTES` is refused with 431 before it is parsed, and the connection closed.

uvicorn writes a response's head when the app starts it and its body when the app sends
it: two writes, two TCP segments, and a client that wakes twice per response. Each
request-response cycle here writes through `_HeadWithBody`, which holds the head until
the body's first write (the same event-loop step for every response but a stream) and
hands the two to the transport together; a head that no body follows in that step (a
stream, a HEAD request) is written at the loop's next turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024

_REFUSAL = b"request line and headers exceed %d bytes" % MAX_HEAD_BYTES
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"  # an interim response: never held


class _HeadWithBody:
    """One request-response cycle's transport: the response head (its first write other
    than a 100 Continue) waits for the next write or the loop's next turn, whichever
    comes first; everything else passes straight through."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            self._transport.writelines((head, data))  # one writev, no copy of the body
            return
        if not self._started and data != _CONTINUE:
            self._started = True
            self._head = data
            asyncio.get_running_loop().call_soon(self._flush)
            return
        self._transport.write(data)

    def _flush(self) -> None:
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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
        if self.cycle is not None and self.cycle.transport is self.transport:
            self.cycle.transport = _HeadWithBody(self.transport)  # type: ignore[assignment]

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
