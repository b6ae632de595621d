"""A small HTTP/1.1 load generator for throughput benches: keep-alive connections over
asyncio streams, one request in flight per connection, each response read whole and its
JSON parsed. httpx's AsyncClient costs ~1.5 ms of CPU a request, so on this 2-core machine
it, not the server, set the pace at ~550 requests a second (bench_e2e.py printed the
client's CPU time beside the wall time); this one costs a tenth of that.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from urllib.parse import urlsplit


class _Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        for attempt in range(2):  # once more on a keep-alive connection the server closed
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            assert self.reader is not None
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            try:
                self.writer.write(head.encode() + body)
                raw = await self.reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
                continue
            lines = raw.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
            if "content-length" not in headers:
                raise RuntimeError(f"no content-length in the response: {headers}")
            data = await self.reader.readexactly(int(headers["content-length"]))
            if headers.get("connection") == "close":
                self.close()
            return status, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def post_many(
    url: str, path: str, body_of: Callable[[int], bytes], total: int, concurrency: int
) -> tuple[list[float], float, float]:
    """POST `total` bodies (`body_of(n)`) from `concurrency` connections: the latencies in
    ms, the wall time and this process's CPU time, in seconds (after a warm-up round)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    connections = [_Connection(host, port) for _ in range(concurrency)]
    latencies: list[float] = []
    counter = iter(range(total))

    async def one(connection: _Connection, n: int) -> None:
        body = body_of(n)
        began = time.perf_counter()
        status, data = await connection.post(path, body)
        if status != 200:  # before parsing: a plain-text 500 names itself, not a JSON error
            raise RuntimeError(f"{status}: {data[:300]!r}")
        json.loads(data)
        latencies.append((time.perf_counter() - began) * 1000)

    async def worker(connection: _Connection) -> None:
        for n in counter:
            await one(connection, n)

    for k, connection in enumerate(connections):  # warm up: connections, tokenizer, judge
        await one(connection, -1 - k)
    latencies.clear()
    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(c) for c in connections))
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    for connection in connections:
        connection.close()
    return latencies, elapsed, cpu
