"""The command line: judge a file (in order, resumable), render, openapi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.cli.main import main
from tests.redis_support import free_port, spawn, stop, wait_http

ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_judge_examples_in_order(tmp_path: Path, example_rollouts: list[dict[str, Any]]) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, example_rollouts)
    assert main(["judge", str(src), "-o", str(out), "--no-progress", "--concurrency", "3"]) == 0
    results = _results(out)
    assert [r["id"] for r in results] == [r["id"] for r in example_rollouts]
    assert all(r["status"] == "ok" for r in results)
    by_id = {r["id"]: r for r in results}
    labels = {s["label"] for s in by_id["mul-error-corrected"]["spans"]}
    assert {"invalid", "verified_correction"} <= labels
    assert "advantage" in by_id["mul-correct"]  # grouped with rewards


def test_judge_resumes_and_reports_bad_lines(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = example_rollouts[:4]
    src.write_text(
        json.dumps(rows[0])
        + "\n"
        + "{not json\n"
        + json.dumps({**rows[1], "response_token_ids": [10**8]})
        + "\n"
        + json.dumps(rows[2])
        + "\n",
        encoding="utf-8",
    )
    _write(out, [{"id": rows[0]["id"], "status": "ok", "marker": "kept"}])
    assert main(["judge", str(src), "-o", str(out), "--no-progress"]) == 0
    results = _results(out)
    assert results[0] == {"id": rows[0]["id"], "status": "ok", "marker": "kept"}  # skipped
    assert [r["status"] for r in results[1:]] == ["failed", "failed", "ok"]
    assert "not JSON" in results[1]["error"]
    assert "response_token_ids[0]" in results[2]["error"]
    # a second run judges nothing new
    assert main(["judge", str(src), "-o", str(out), "--no-progress"]) == 0
    assert len(_results(out)) == 4


def test_render_shows_markers_and_escapes(
    tmp_path: Path, example_rollouts: list[dict[str, Any]], capsys: Any
) -> None:
    src = tmp_path / "in.jsonl"
    _write(src, example_rollouts)
    assert main(["render", str(src), "--id", "prompt-injection"]) == 0
    shown = capsys.readouterr().out
    assert "⟦0⟧" in shown and "〚100000〛" in shown and "⟦100000⟧" not in shown
    assert main(["render", str(src), "--id", "nope"]) == 1


@pytest.mark.slow
def test_console_script_openapi_matches_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "judge_service", "openapi"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout == (ROOT / "openapi.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("access_log", [False, True])
@pytest.mark.slow
def test_serve_logs_requests_only_when_asked(tmp_path: Path, access_log: bool) -> None:
    """No line per request by default (its formatting was ~8% of a small request's time);
    ``--access-log`` brings uvicorn's back."""
    port = free_port()
    log = tmp_path / "serve.log"
    args = ["serve", "--port", str(port), "--log-level", "info"]
    env = {**os.environ, "JUDGE_INPROCESS_WORKER": "off"}
    process = spawn([*args, *(["--access-log"] if access_log else [])], env, log)
    try:
        wait_http(f"http://127.0.0.1:{port}")
        assert httpx.get(f"http://127.0.0.1:{port}/healthz?probe=1").status_code == 200
    finally:
        stop(process)
    text = log.read_text()
    assert "Application startup complete" in text
    assert ("GET /healthz?probe=1" in text) is access_log


@pytest.mark.slow
def test_serve_refuses_an_oversized_request_head_and_keeps_serving(tmp_path: Path) -> None:
    """httptools buffers a header until it ends: a head past 64 KiB is a 431 before it is
    parsed, whatever follows, and requests of normal size on a kept-alive connection each
    start a fresh count."""
    import socket

    port = free_port()
    env = {**os.environ, "JUDGE_INPROCESS_WORKER": "off"}
    process = spawn(["serve", "--port", str(port)], env, tmp_path / "serve.log")
    try:
        wait_http(f"http://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000)
            head = sock.recv(200)
        assert head.startswith(b"HTTP/1.1 431 ")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            padding = {"X-Pad": "p" * 40_000}  # each head ~40 KB: only the sum is over 64
            for _ in range(3):
                assert client.get("/healthz", headers=padding).status_code == 200
        # A body, however large, is not head, even when it arrives in the head's read; nor
        # are the pipelined requests after it.
        body = json.dumps({"rollout": {"id": "x" * 300_000}}).encode()
        request = (
            b"POST /v1/judge HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        ping = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request + ping * 3)
            replies = _read_responses(sock, 4)
        assert [r.split(b" ", 2)[1] for r in replies] == [b"422", b"200", b"200", b"200"]
        assert b"rollout" in replies[0]  # the app read the body and named what is wrong
    finally:
        stop(process)


# struct tcp_info's tcpi_data_segs_in (Linux 4.6+): segments with data this socket received.
_DATA_SEGS_IN = 152


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's TCP_INFO")
def test_serve_writes_a_small_response_in_one_segment(tmp_path: Path) -> None:
    """The head and the body of a response leave in one send (uvicorn wrote the head as
    soon as the app sent it: two segments, two wake-ups of the client per response); a
    response without a body (HEAD) still gets its head."""
    import socket
    import struct

    def data_segments(sock: socket.socket) -> int:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
        count: int = struct.unpack_from("I", info, _DATA_SEGS_IN)[0]
        return count

    port = free_port()
    env = {**os.environ, "JUDGE_INPROCESS_WORKER": "off"}
    process = spawn(["serve", "--port", str(port)], env, tmp_path / "serve.log")
    try:
        wait_http(f"http://127.0.0.1:{port}")
        ping = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        bad = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\r\n{}"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for request, status in ((ping, b"200"), (bad, b"422"), (ping, b"200")):
                before = data_segments(sock)
                sock.sendall(request)
                (reply,) = _read_responses(sock, 1)
                assert reply.split(b" ", 2)[1] == status
                assert data_segments(sock) - before == 1, reply[:200]
            sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                assert chunk, "connection closed before the HEAD response's head"
                head += chunk
            assert head.startswith(b"HTTP/1.1 ")
            sock.sendall(ping)
            assert _read_responses(sock, 1)[0].split(b" ", 2)[1] == b"200"
    finally:
        stop(process)


def _read_responses(sock: Any, count: int) -> list[bytes]:
    """`count` HTTP/1.1 responses (each with a content-length) read off `sock`."""
    buffer, out = b"", []
    while len(out) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(out)} responses"
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(buffer) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside a body"
            buffer += chunk
        out.append(head + b"\r\n\r\n" + buffer[:length])
        buffer = buffer[length:]
    return out


def test_the_worker_takes_its_drain_and_failover_from_its_settings() -> None:
    from judge_service.cli.worker import worker_config
    from judge_service.config import Settings

    settings = Settings(worker_drain_s=45, jobs_dead_after_s=7, worker_concurrency=3)
    config = worker_config(settings, "w1", None)
    assert (config.name, config.drain_s, config.dead_after_s, config.concurrency) == (
        "w1",
        45,
        7,
        3,
    )
    assert worker_config(settings, "w1", 5).concurrency == 5  # --concurrency wins
