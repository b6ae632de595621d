"""uvicorn's httptools protocol with a bound on the request head.

uvicorn's h11 protocol refuses a request line and headers past 16 KiB; its httptools
protocol has no such bound, and httptools buffers a header value until it ends, so one
request with a 200 MB header held 270 MB in the server and was then served. The API's
headers are a few hundred bytes (a bearer key, a content type), so a head past
`MAX_HEAD_BYTES` is refused with 431 before it is parsed, and the connection closed.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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
