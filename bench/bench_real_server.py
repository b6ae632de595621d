"""The LLM judge against a real server: llama-cpp-python serving SmolLM2-135M on the CPU.

Runs `judge-service judge` on the first N bundled example rollouts, once with native
tool calls (tool_choice named: submit_spans) and once in JSON mode, with the settings
of docs/llm-judges.md "Self-hosted judge model", and prints per rollout: status, judge latency and
queue time, model turns, input and output tokens, and what stopped the session.

    .venv/bin/python bench/bench_real_server.py [--rollouts 3] [--deadline-s 300]

Needs the llama-cpp-python venv that .ci/run builds (.venv-llamacpp, or
JUDGE_LLAMACPP_PYTHON).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)

from tests.harness import llama_server

REPO = Path(__file__).resolve().parents[1]


def run(server: llama_server.LlamaServer, mode: str, choice: str, args: Any, work: Path) -> None:
    lines = (REPO / "examples" / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()
    source = work / "in.jsonl"
    source.write_text("\n".join(lines[: args.rollouts]) + "\n", encoding="utf-8")
    out = work / f"out-{mode}.jsonl"
    began = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "judge_service.cli.main",
            "judge",
            str(source),
            "-o",
            str(out),
            "--judge",
            f"openai:{llama_server.MODEL_ALIAS}",
            "--no-progress",
            "--include-transcript",
            "--deadline-s",
            str(args.deadline_s),
            "--max-turns",
            "3",
        ],
        cwd=REPO,
        env={**os.environ, **llama_server.judge_env(server, mode, choice)},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    print(f"\n### {mode} (tool_choice {choice}): exit {done.returncode}, {wall:.0f} s wall")
    print("| rollout | status | latency s | queue s | turns | input tok | output tok | stop |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    latencies = []
    for line in out.read_text().splitlines() if out.exists() else []:
        result = json.loads(line)
        judge = result["judge"]
        attempt = judge.get("attempt") or judge
        stops = [e["reason"] for e in result.get("transcript") or [] if e["type"] == "stop"]
        latencies.append(judge["latency_ms"] / 1000)
        print(
            f"| {result['id']} | {result['status']} | {judge['latency_ms'] / 1000:.1f} "
            f"| {judge.get('queue_ms', 0) / 1000:.1f} | {attempt['turns']} "
            f"| {attempt['input_tokens'] + attempt['cache_read_tokens']} "
            f"| {attempt['output_tokens']} | {', '.join(stops)} |"
        )
    if latencies:
        print(f"median latency {statistics.median(latencies):.1f} s")
    if done.returncode:
        print(done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=3)
    parser.add_argument("--deadline-s", type=float, default=300.0)
    args = parser.parse_args()
    python = llama_server.llama_python()
    if python is None:
        raise SystemExit("no llama-cpp-python venv: see .ci/run")
    work = Path(tempfile.mkdtemp(prefix="bench-real-"))
    server = llama_server.start(python, work / "server.log")
    try:
        for mode, choice in (("native", "submit_spans"), ("json", "auto")):
            run(server, mode, choice, args, work)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
