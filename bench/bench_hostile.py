"""/healthz latency while the worst hostile request of each kind is in flight (issue 10).

Starts `judge-service serve` as a subprocess (rules judge, in-process store,
tokenizer hub unreachable), then for each hostile request: a probe thread
GETs /healthz every 10 ms while the request runs (repeated `--repeats` times),
and the table shows the request's status and time and the probe's p50 / p99 /
max latency. Target: p99 under 100 ms for every kind.

    .venv/bin/python bench/bench_hostile.py [--repeats 3] [--only TEXT] [--source DIR]

``--source DIR`` serves the judge_service package of another checkout (e.g. a
``git worktree`` of an older commit), for a before/after table from one session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import httpx
from _serve import free_port, served, wait_ready

from tests.harness.tokenizers import build_byte_level_bpe, synthetic_trace

Request = Callable[[httpx.Client], httpx.Response]


def _chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    yield b'{"rollout": {"id": "x", "problem": "'
    while sent < total:
        yield b"a" * size
        sent += size
    yield b'"}}'


def cases(tokenizer: str, long_ids: list[int], short_ids: list[int]) -> dict[str, Request]:
    rollout = {"id": "r", "response_token_ids": short_ids, "tokenizer": tokenizer}
    one_token_spans = [
        {"start": i, "end": i + 1, "label": "neutral", "confidence": 0.9} for i in range(30_000)
    ]
    labels = {f"label_{i}": 0.1 for i in range(4_000)}
    unknown = [
        {"start": i, "end": i + 1, "label": f"nope_{i}", "confidence": 0.9} for i in range(4_000)
    ]
    deep = b'{"rollout": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    # ~58 MiB: 290 rollouts of 30,000 ids, the last one invalid, so the whole body is
    # parsed and validated before the 422 (nothing is judged).
    ids = json.dumps(list(range(1000, 31_000)))
    one = f'{{"id": "r", "tokenizer": "{tokenizer}", "response_token_ids": {ids}}}'
    bad = f'{{"id": "r", "tokenizer": "{tokenizer}", "response_token_ids": ["a"]}}'
    big_batch = ('{"rollouts": [' + ", ".join([one] * 290 + [bad]) + "]}").encode()

    def post(path: str, body: object, **kwargs: object) -> Request:
        return lambda c: c.post(path, json=body, **kwargs)  # type: ignore[arg-type]

    return {
        "/v1/credit, 30,000 one-token spans": post(
            "/v1/credit", {"num_tokens": 40_000, "spans": one_token_spans}
        ),
        "/v1/credit, 4,000 labels x 4,000 unknown-label spans": post(
            "/v1/credit",
            {"num_tokens": 5_000, "spans": unknown, "options": {"label_scores": labels}},
        ),
        "a hub tokenizer that cannot be downloaded": post(
            "/v1/judge", {"rollout": {**rollout, "tokenizer": "someone/not-reachable"}}
        ),
        "a 2 MB tokenizer name": post(
            "/v1/judge", {"rollout": {**rollout, "tokenizer": "t" * (2 << 20)}}
        ),
        "options.judge = openai:<random>": post(
            "/v1/judge", {"rollout": rollout, "options": {"judge": "openai:rotating-1"}}
        ),
        "a token id >= 2^63": post(
            "/v1/judge", {"rollout": {**rollout, "response_token_ids": [2**63, 1]}}
        ),
        "reward NaN in a group": lambda c: c.post(
            "/v1/judge",
            content=json.dumps(
                {"rollout": {**rollout, "reward": float("nan")}, "group_rewards": [0.0, 1.0]}
            ),
            headers={"content-type": "application/json"},
        ),
        "a chunked body over the limit": lambda c: c.post(
            "/v1/judge",
            content=_chunks(80 << 20),
            headers={"content-type": "application/json"},
        ),
        "a 58 MiB batch, its last rollout invalid": lambda c: c.post(
            "/v1/judge/batch", content=big_batch, headers={"content-type": "application/json"}
        ),
        "100,000-deep JSON nesting": lambda c: c.post(
            "/v1/judge", content=deep, headers={"content-type": "application/json"}
        ),
        "a 131,072-token rollout, rules judge": post(
            "/v1/judge",
            {
                "rollout": {**rollout, "response_token_ids": long_ids},
                "options": {"use_cache": False},
            },
        ),
    }


def measure(url: str, request: Request, repeats: int) -> tuple[list[int], list[float], list[float]]:
    statuses: list[int] = []
    took: list[float] = []
    latencies: list[float] = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for _ in range(repeats):
            stop = threading.Event()

            def probe(stop: threading.Event = stop) -> None:
                with httpx.Client(base_url=url, timeout=30) as prober:
                    while not stop.is_set():
                        began = time.perf_counter()
                        prober.get("/healthz")
                        latencies.append(time.perf_counter() - began)
                        time.sleep(0.01)

            thread = threading.Thread(target=probe)
            thread.start()
            time.sleep(0.05)
            began = time.perf_counter()
            try:
                statuses.append(request(client).status_code)
            except httpx.HTTPError as exc:
                statuses.append(-1)
                print(f"  ({type(exc).__name__}: {exc})", file=sys.stderr)
            took.append(time.perf_counter() - began)
            time.sleep(0.05)
            stop.set()
            thread.join()
    return statuses, took, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--source", default=None, help="serve judge_service from this checkout")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    short_dir = build_byte_level_bpe(work / "bpe")
    long_dir, long_ids = synthetic_trace(131_072)
    from transformers import AutoTokenizer

    short_ids = AutoTokenizer.from_pretrained(str(short_dir)).encode("17 × 24 = 408.")
    env = {
        "JUDGE_DEFAULT_TOKENIZER": str(long_dir),
        "JUDGE_ALLOWED_TOKENIZERS": f"{long_dir},{short_dir},someone/*",
        "JUDGE_TOKENIZER_ROOTS": f"{work},{long_dir.parent}",
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens: unreachable
        "JUDGE_MAX_BODY_BYTES": str(64 << 20),
    }
    with served(env, args.source) as url:
        wait_ready(url)  # the probes measure a started server, not its start-up import
        rows = []
        for name, request in cases(str(short_dir), long_ids, short_ids).items():
            if args.only not in name:
                continue
            statuses, took, lat = measure(url, request, args.repeats)
            lat_ms = sorted(x * 1000 for x in lat)
            p99 = lat_ms[min(len(lat_ms) - 1, int(0.99 * len(lat_ms)))]
            rows.append(
                f"| {name} | {', '.join(map(str, sorted(set(statuses))))} "
                f"| {statistics.median(took) * 1000:.0f} | {statistics.median(lat_ms):.1f} "
                f"| **{p99:.1f}** | {lat_ms[-1]:.1f} | {len(lat_ms)} |"
            )
            print(rows[-1], flush=True)
        print(
            "\n| request in flight | status | request ms (median) | /healthz p50 ms "
            "| /healthz p99 ms | max ms | probes |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        print("\n".join(rows))


if __name__ == "__main__":
    main()
