"""The server's HTTP protocol writes a response's head with its body: one transport call
for a whole response, a head that no body follows written at the loop's next turn, and
interim responses (100 Continue) never held. Against the real server (`judge-service
serve`, uvloop and httptools) and, for the write pattern, a transport that records calls."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

from judge_service.api.http_protocol import _HeadWithBody
from tests.redis_support import free_port, spawn, stop, wait_http

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Recorder(asyncio.Transport):
    """A transport that keeps what it is handed, call by call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, list_of_data: Any) -> None:
        self.calls.append(("writelines", b"".join(list_of_data)))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 7


def test_a_head_waits_for_its_body_and_goes_out_with_it() -> None:
    async def scenario() -> list[tuple[str, bytes]]:
        recorder = Recorder()
        cycle = _HeadWithBody(recorder)
        cycle.write(HEAD)
        assert recorder.calls == []  # held
        cycle.write(b"ok")
        cycle.write(b"more")  # after the head, straight through
        await asyncio.sleep(0)  # the next turn has nothing left to flush
        assert cycle.get_write_buffer_size() == 7  # the rest is the transport's
        return recorder.calls

    assert asyncio.run(scenario()) == [("writelines", HEAD + b"ok"), ("write", b"more")]


def test_a_head_without_a_body_is_written_at_the_next_turn_or_on_close() -> None:
    async def scenario() -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]], bool]:
        alone, closing = Recorder(), Recorder()
        held = _HeadWithBody(alone)
        held.write(HEAD)  # a stream's head, or a HEAD request's
        await asyncio.sleep(0)
        shut = _HeadWithBody(closing)
        shut.write(HEAD)
        shut.close()
        return alone.calls, closing.calls, closing.closed

    alone, closing, closed = asyncio.run(scenario())
    assert alone == [("write", HEAD)]
    assert closing == [("write", HEAD)] and closed


def test_an_interim_continue_is_never_held() -> None:
    async def scenario() -> list[tuple[str, bytes]]:
        recorder = Recorder()
        cycle = _HeadWithBody(recorder)
        cycle.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        assert recorder.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]
        cycle.write(HEAD)
        cycle.write(b"ok")
        return recorder.calls[1:]

    assert asyncio.run(scenario()) == [("writelines", HEAD + b"ok")]


def _response(sock: socket.socket, body: bool = True) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before the head"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]) if body else 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the body"
        rest += chunk
    return head + b"\r\n\r\n" + rest


def test_the_server_answers_get_head_and_expect_continue(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "JUDGE_INPROCESS_WORKER": "off"}
    process = spawn(["serve", "--port", str(port)], env, tmp_path / "serve.log")
    try:
        wait_http(f"http://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = _response(sock)
            assert reply.startswith(b"HTTP/1.1 200 ") and json.loads(reply.split(b"\r\n\r\n")[1])
            # A HEAD request's response has no body to carry its head.
            sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _response(sock, body=False).startswith(b"HTTP/1.1 ")
            # The client waits for the interim response before it sends the body.
            body = json.dumps({"rollout": {"id": "c"}}).encode()
            sock.sendall(
                b"POST /v1/judge HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                b"expect: 100-continue\r\ncontent-length: %d\r\n\r\n" % len(body)
            )
            assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            sock.sendall(body)
            reply = _response(sock)
            assert reply.startswith(b"HTTP/1.1 422 ") and b"response_token_ids" in reply
    finally:
        stop(process)
