"""The client's round trip for a trainer-sized batch: `dense` vs `base64-f32` (issue 12).

Starts `judge-service serve` as a subprocess (rules judge, in-process store, a synthetic
byte-level tokenizer), judges `--rollouts` rollouts of `--tokens` tokens once to fill
the judgment cache (the cold time is printed), then per encoding sends the same batch
through `JudgeClient.judge_batch` (cache hits: what is measured is credit, encoding,
the wire and parsing, not the judge) and reports wall time, bytes on the wire each
way, the time to parse the response into the pydantic models, and the decode of all
results to one (B, T) float32 array with `to_padded`. For base64-f32 the same results
are decoded twice more, side by side on the same data: by `to_padded` with the stdlib
decoder (the old path, and the fallback when pybase64 is missing), and by pybase64
alone with no array (a floor: the decode itself).

    .venv/bin/python bench/bench_client.py [--rollouts 512] [--tokens 8192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import httpx
import numpy as np
import numpy.typing as npt
from _serve import free_port, served

from judge_service.client import JudgeClient, arrays, to_padded
from judge_service.schemas import BatchResponse
from tests.harness.tokenizers import synthetic_trace


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


def _old_path(batch: BatchResponse, width: int) -> tuple[float, npt.NDArray[np.float32]]:
    """`to_padded` with the stdlib's base64 decoder: the path before pybase64, and what a
    client without pybase64 runs (`arrays.b64decode` is the module's decoder in use)."""
    fast = arrays.b64decode
    arrays.b64decode = arrays.B64_DECODERS["stdlib"]
    try:
        began = time.perf_counter()
        array = to_padded(batch.results, max_len=width)
        return time.perf_counter() - began, array
    finally:
        arrays.b64decode = fast


def _floor(batch: BatchResponse) -> float:
    """pybase64's decode of every credit string alone, into no array."""
    decode = arrays.B64_DECODERS["pybase64"]
    credits = [str(r.credit) for r in batch.results]
    began = time.perf_counter()
    for credit in credits:
        decode(credit)
    return time.perf_counter() - began


def _ms(seconds: list[float], digits: int = 0) -> str:
    return f"{statistics.median(seconds) * 1000:.{digits}f}" if seconds else "–"


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
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens: unreachable
        "JUDGE_MAX_BODY_BYTES": str(128 << 20),
    }
    shape = (args.rollouts, args.tokens)
    transport = MeteredTransport()
    with served(env) as url, JudgeClient(url, timeout=3600, transport=transport) as client:
        began = time.perf_counter()
        cold = client.judge_batch(rollouts)
        cold_s = time.perf_counter() - began
        assert cold.stats.counts.get("ok", 0) == args.rollouts, cold.stats.counts
        print(f"cold (judging {args.rollouts} x {args.tokens}): {cold_s:.1f} s", flush=True)
        rows = []
        for encoding in ("dense", "base64-f32"):
            walls, parses, decodes, olds, floors = [], [], [], [], []
            sent = received = 0
            for _ in range(args.repeats):
                transport.sent = transport.received = 0
                began = time.perf_counter()
                batch = client.judge_batch(rollouts, {"credit_encoding": encoding})
                walls.append(time.perf_counter() - began)
                sent, received = transport.sent, transport.received
                assert batch.stats.counts.get("ok", 0) == args.rollouts
                began = time.perf_counter()
                BatchResponse.model_validate_json(transport.last_body)
                parses.append(time.perf_counter() - began)
                began = time.perf_counter()
                array = to_padded(batch.results, max_len=args.tokens)
                decodes.append(time.perf_counter() - began)
                assert array.shape == shape and array.dtype == np.float32
                if encoding == "base64-f32":
                    took, old = _old_path(batch, args.tokens)
                    olds.append(took)
                    floors.append(_floor(batch))
                    assert np.array_equal(old, array)  # the same data, the same array
            row = (
                f"| `{encoding}` | {_ms(walls)} | {sent / 1e6:.1f} | {received / 1e6:.1f} "
                f"| {_ms(parses)} | **{_ms(decodes, 1)}** | {_ms(olds, 1)} | {_ms(floors, 1)} |"
            )
            rows.append(row)
            print(row, flush=True)
    print(
        f"\n{args.rollouts} rollouts x {args.tokens} tokens, median of {args.repeats}:\n"
        "| credit_encoding | judge_batch wall ms | request MB | response MB "
        "| response parse ms | to_padded ms | to_padded, stdlib base64 ms "
        "| pybase64 decode alone ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
