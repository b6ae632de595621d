"""The client's round trip for a trainer-sized batch: `dense` vs `base64-f32` (issue 12).

Starts `judge-service serve` as a subprocess (rules judge, in-process store, a synthetic
byte-level tokenizer), judges `--rollouts` rollouts of `--tokens` tokens once to fill
the judgment cache (the cold time is printed), then per encoding sends the same batch
through `JudgeClient.judge_batch` (cache hits: what is measured is credit, encoding,
the wire and parsing, not the judge) and reports wall time, bytes on the wire each
way, the time to parse the response into the pydantic models, and the decode of all
results to one (B, T) float32 array with `to_padded`, beside a floor: what the
stdlib's base64 decode alone takes on the same strings (dense: one copy of the array),
which says how fast this machine moves memory at the time.

    .venv/bin/python bench/bench_client.py [--rollouts 512] [--tokens 8192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import binascii
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
import numpy as np

from judge_service.client import JudgeClient, to_padded
from judge_service.devtools.tokenizers import synthetic_trace
from judge_service.schemas import BatchResponse


class MeteredTransport(httpx.HTTPTransport):
    """Real HTTP, counting the bytes of each request body and response body."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.received = 0
        self.last_body = b""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += len(request.content)
        response = super().handle_request(request)
        self.last_body = response.read()
        self.received += len(self.last_body)
        return response


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "judge_service.cli.main", "serve", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start")


def _floor(batch: BatchResponse) -> float:
    """The least any decoder could do here: base64-f32, the stdlib's base64 decode of every
    credit string alone; dense, one copy of the (B, T) float32 array's bytes."""
    credits = [r.credit for r in batch.results]
    began = time.perf_counter()
    if all(isinstance(c, str) for c in credits):
        for credit in credits:
            binascii.a2b_base64(str(credit))
    else:
        np.ones((len(credits), max(r.num_tokens for r in batch.results)), np.float32).copy()
    return time.perf_counter() - began


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    directory, ids = synthetic_trace(args.tokens)
    rollouts: list[dict[str, Any]] = [
        {
            "id": f"r{i}",
            "group_id": f"g{i // 8}",
            "problem": f"Compute the expression (#{i}).",
            "reward": float(i % 2),
            "response_token_ids": ids,
        }
        for i in range(args.rollouts)
    ]
    env = {
        "JUDGE_DEFAULT_TOKENIZER": str(directory),
        "JUDGE_TOKENIZER_ROOTS": str(directory.parent),
        "HF_ENDPOINT": f"http://127.0.0.1:{_free_port()}",  # nothing listens: unreachable
        "JUDGE_MAX_BODY_BYTES": str(128 << 20),
    }
    process, url = _serve(env)
    shape = (args.rollouts, args.tokens)
    try:
        transport = MeteredTransport()
        with JudgeClient(url, timeout=3600, transport=transport) as client:
            began = time.perf_counter()
            cold = client.judge_batch(rollouts)
            cold_s = time.perf_counter() - began
            assert cold.stats.counts.get("ok", 0) == args.rollouts, cold.stats.counts
            print(f"cold (judging {args.rollouts} x {args.tokens}): {cold_s:.1f} s", flush=True)
            rows = []
            for encoding in ("dense", "base64-f32"):
                walls, parses, decodes, floors = [], [], [], []
                sent = received = 0
                for _ in range(args.repeats):
                    transport.sent = transport.received = 0
                    began = time.perf_counter()
                    batch = client.judge_batch(rollouts, {"credit_encoding": encoding})
                    walls.append(time.perf_counter() - began)
                    sent, received = transport.sent, transport.received
                    began = time.perf_counter()
                    BatchResponse.model_validate_json(transport.last_body)
                    parses.append(time.perf_counter() - began)
                    began = time.perf_counter()
                    array = to_padded(batch.results, max_len=args.tokens)
                    decodes.append(time.perf_counter() - began)
                    assert array.shape == shape and array.dtype == np.float32
                    floors.append(_floor(batch))
                    assert batch.stats.counts.get("ok", 0) == args.rollouts
                row = (
                    f"| `{encoding}` | {_ms(walls)} | {sent / 1e6:.1f} | {received / 1e6:.1f} "
                    f"| {_ms(parses)} | **{statistics.median(decodes) * 1000:.1f}** "
                    f"| {statistics.median(floors) * 1000:.1f} |"
                )
                rows.append(row)
                print(row, flush=True)
        print(
            f"\n{args.rollouts} rollouts x {args.tokens} tokens, median of {args.repeats}:\n"
            "| credit_encoding | judge_batch wall ms | request MB | response MB "
            "| response parse ms | to_padded ms | floor ms |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
