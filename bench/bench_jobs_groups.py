"""Benchmark of groupwise jobs: groups through 1 and 2 worker processes (claiming by slots).

A groupwise job's entry is a whole group, and each member's session holds one of the
worker's judging slots while the group is judged, so a worker claims groups by the slots
they hold (`jobs.claims`). With a latency-bound judge (a scripted Anthropic server in this
process answering every call after --delay seconds; one session per group, two calls) and
groups as large as a worker's slots, one worker judges one group at a time and a second
worker should double the throughput. Target: at least 1.8x from 1 to 2 workers. Before
claiming by slots, one worker claimed every group it could count as entries (8 of them
with 8 slots) and judged them one after another while the other had none.

Workers are real ``judge-service worker`` processes with default settings (8 slots) on
the Redis at --redis; each worker count gets its own key prefix. The job is submitted
through `JobService`, as ``POST /v1/jobs`` does.

    .venv/bin/python bench/bench_jobs_groups.py [--groups 16 --size 8 --delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_jobs import (  # noqa: E402
    drop,
    run_job,
    start_workers,
    stop_workers,
    wait_for_workers,
)

from judge_service.config import Settings  # noqa: E402
from judge_service.trace.tokenizer import TokenizerCache  # noqa: E402
from tests.harness.scripted import anthropic_server  # noqa: E402
from tests.harness.scripted.jobs import MODEL, scripted_groups, worker_settings  # noqa: E402
from tests.harness.tokenizers import build_byte_level_bpe  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--size", type=int, default=8, help="rollouts per group")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per provider call")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument(
        "--redis", default=os.environ.get("JUDGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
    work = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    tokenizer_dir = build_byte_level_bpe(work / "bpe")
    bpe = TokenizerCache().get(str(tokenizer_dir))
    server = anthropic_server(delay_s=args.delay)
    server.start()
    options = {"judge": MODEL, "deadline_s": 120, "groupwise": True}
    rows: list[tuple[int, float, int]] = []
    total = args.groups * args.size
    try:
        for count in [int(n) for n in args.workers.split(",")]:
            prefix = f"bench-{uuid.uuid4().hex[:8]}"
            names = [f"{prefix}-g{g}" for g in range(args.groups)]
            rollouts = scripted_groups(server, bpe, tokenizer_dir, names, args.size)
            serving = worker_settings(
                server, redis_url=args.redis, redis_prefix=prefix, tokenizer_roots=str(work)
            )
            env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
            env.update({f"JUDGE_{k.upper()}": str(v) for k, v in serving.items()})
            env["PYTHONPATH"] = str(ROOT)
            workers = start_workers(count, env, work, prefix)
            try:
                wait_for_workers(args.redis, prefix, [f"{prefix}-w{i}" for i in range(count)])
                settings = Settings(**serving)
                warm_names = [f"{prefix}-warm-{i}" for i in range(2 * count)]
                warm = scripted_groups(server, bpe, tokenizer_dir, warm_names, args.size)
                asyncio.run(run_job(settings, warm, options))  # untimed: loads, builds
                calls_before = len(server.requests)
                elapsed, results = asyncio.run(run_job(settings, rollouts, options))
                calls = len(server.requests) - calls_before
                bad = [r for r in results if r.get("status") != "ok"]
                assert not bad and len(results) == total, bad[:3]
                rows.append((count, elapsed, calls))
                print(f"{count} worker(s): {elapsed:.1f} s, {calls} provider calls", flush=True)
            finally:
                stop_workers(workers)
                drop(args.redis, prefix)
    finally:
        server.stop()
    base = rows[0][1]
    print(
        f"\n{args.groups} groups of {args.size} ({total} rollouts), one session per group "
        f"(2 calls, {args.delay * 1000:.0f} ms each), default settings (8 slots a worker), "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| workers | wall s | groups/s | vs 1 worker | provider calls |")
    print("|---|---:|---:|---:|---:|")
    for count, elapsed, calls in rows:
        rate = args.groups / elapsed
        print(f"| {count} | {elapsed:.1f} | {rate:.2f} | {base / elapsed:.2f}x | {calls} |")


if __name__ == "__main__":
    main()
