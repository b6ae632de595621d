"""Server start (issue 39): from spawning ``judge-service serve`` to /healthz answering 200,
and to the first judged rollout (the rules judge, a local tokenizer directory, sent as
soon as /healthz answers), for this checkout and, with ``--before DIR``, another one
(``git worktree add /tmp/old <commit>``), alternating, in one run.

    .venv/bin/python bench/bench_start.py [--rounds 5] [--before DIR] [--source DIR]

Each figure is the median of ``--rounds`` starts (every start prints its own). The first
rollout's figure includes what the server still loads when /healthz answers (transformers
and torch, the tokenizer itself): it is what a trainer that starts judging as soon as the
server is up waits. The machine is shared: run ``uptime`` beside the figures.

Target: /healthz within 2 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import httpx
from _serve import free_port, missing_dependencies, source_env

from tests.harness.tokenizers import build_byte_level_bpe, math_corpus

SMALL_TEXT = "<think>\n17 × 24 = 340 + 68 = 408.\n</think>\nSo the answer is \\boxed{408}."
POLL_S = 0.01


def start_once(
    env: dict[str, str], source: str | None, body: dict[str, object]
) -> tuple[float, float]:
    """(seconds to /healthz 200, seconds to the first judged rollout), from the spawn."""
    port = free_port()
    # As bench/_serve.py: an older checkout runs without what it did not declare.
    without = missing_dependencies(source, ("uvloop", "httptools")) if source else []
    env = source_env(env, source, without)
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()  # noqa: SIM115 (the server's stderr, read on a failure)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "judge_service.cli.main", "serve", "--port", str(port)],
        env={**os.environ, **env},
        cwd=source,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            while True:
                try:
                    if client.get("/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() - started > 60:
                    raise RuntimeError("the server did not start")
                time.sleep(POLL_S)
            healthy = time.monotonic() - started
            response = client.post("/v1/judge", json=body)
            if response.status_code != 200:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}\n{tail}")
            judged = time.monotonic() - started
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return healthy, judged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--source", default=None, help="serve judge_service from this checkout")
    parser.add_argument("--before", default=None, help="also serve this checkout, compared")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    work = Path(tempfile.mkdtemp(prefix="bench-start-"))
    directory = build_byte_level_bpe(work / "bpe", vocab_size=2000, corpus=math_corpus(20))
    ids = Tokenizer.from_file(str(directory / "tokenizer.json")).encode(SMALL_TEXT).ids
    env = {
        "JUDGE_DEFAULT_TOKENIZER": str(directory),
        "JUDGE_TOKENIZER_ROOTS": str(work),
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens: unreachable
    }
    servers = {"before": args.before} if args.before else {}
    servers["after" if args.before else "this checkout"] = args.source
    figures: dict[str, list[tuple[float, float]]] = {label: [] for label in servers}
    for round_ in range(args.rounds):
        for label, source in servers.items():
            body = {
                "rollout": {
                    "id": f"start-{label}-{round_}",
                    "problem": "What is 17 × 24?",
                    "reference_answer": "408",
                    "tokenizer": str(directory),
                    "response_token_ids": ids,
                },
                "options": {"use_cache": False},
            }
            figures[label].append(start_once(env, source, body))
            healthy, judged = figures[label][-1]
            print(f"  {label}: /healthz {healthy:.2f} s, first rollout {judged:.2f} s", flush=True)
    print(f"\nmedian of {args.rounds} starts each, alternating; {os.getloadavg()[0]:.2f} load\n")
    print("| server | to /healthz s | to first judged rollout s |\n|---|---:|---:|")
    for label, runs in figures.items():
        health = statistics.median(r[0] for r in runs)
        first = statistics.median(r[1] for r in runs)
        print(f"| {label} ({servers[label] or 'this checkout'}) | **{health:.2f}** | {first:.2f} |")


if __name__ == "__main__":
    main()
