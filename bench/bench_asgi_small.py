"""What the app costs per small uncached rollout, in process (issue 39, small rollouts):
POST /v1/judge driven through the whole ASGI app (middleware, routing, dependencies, body
parse and validation, the pipeline, the response) with no server or socket, timed as
this thread's CPU time per request, the least of the rounds. bench_e2e.py's throughput
over HTTP swings by 30% with this shared machine's load; this does not.

    .venv/bin/python bench/bench_asgi_small.py [--before DIR] [--direct-ab]
        [--rounds 7] [--requests 400]

``--before DIR`` measures the checkout at DIR too (``git worktree add``); ``--direct-ab``
measures this checkout with and without the direct route call (api/direct.py: without
it, FastAPI's request handler answers every request). Each variant runs in its own
process, the variants alternating three times; the table gives each one's least.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path after PYTHONPATH)
from bench_e2e import SMALL_TEXT, build_tokenizers


def _scope(body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/judge",
        "raw_path": b"/v1/judge",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }


async def _post(app: Any, body: bytes) -> int:
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # no disconnect while the response is made
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(_scope(body), receive, send)
    return status


async def _measure(rounds: int, requests: int, direct: bool) -> float:
    from judge_service.api.app import create_app

    if not direct:
        import judge_service.api.routing as routing

        routing.direct_call = lambda route: None  # type: ignore[assignment,unused-ignore]

    work = Path(tempfile.mkdtemp(prefix="bench-asgi-"))
    dirs = build_tokenizers(work)
    bpe = str(dirs["byte-level BPE"])
    os.environ.update(
        JUDGE_DEFAULT_TOKENIZER=bpe, JUDGE_ALLOWED_TOKENIZERS=bpe, JUDGE_TOKENIZER_ROOTS=str(work)
    )
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(bpe).encode(SMALL_TEXT, add_special_tokens=False)
    serial = iter(range(10**9))

    def body() -> bytes:
        rollout = {
            "id": f"small-{next(serial)}",
            "problem": "What is 17 × 24?",
            "reference_answer": "408",
            "tokenizer": bpe,
            "response_token_ids": ids,
        }
        return json.dumps({"rollout": rollout, "options": {"use_cache": False}}).encode()

    app = create_app()
    async with app.router.lifespan_context(app):
        for _ in range(50):  # warm-up: the tokenizer, the judge, the routes' contexts
            assert await _post(app, body()) == 200
        best = float("inf")
        for _ in range(rounds):
            bodies = [body() for _ in range(requests)]
            began = time.thread_time()
            for one in bodies:
                await _post(app, one)
            best = min(best, (time.thread_time() - began) / requests)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=None, help="also measure this checkout")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--direct-ab", action="store_true", help="with and without direct")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-direct", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(f"{asyncio.run(_measure(args.rounds, args.requests, not args.no_direct)):.1f}")
        return
    # label: (checkout, extra arguments)
    variants: dict[str, tuple[str | None, list[str]]] = {"this checkout": (None, [])}
    if args.before:
        variants = {"before": (args.before, []), **variants}
    if args.direct_ab:
        variants["this checkout, FastAPI's handler only"] = (None, ["--no-direct"])
    least: dict[str, float] = {}
    for _ in range(3 if len(variants) > 1 else 1):
        for label, (source, extra) in variants.items():
            env = dict(os.environ)
            if source:
                env["PYTHONPATH"] = source
            command = [sys.executable, __file__, "--child", "--rounds", str(args.rounds)]
            command += ["--requests", str(args.requests), *extra]
            out = subprocess.run(
                command, env=env, cwd=source, capture_output=True, text=True, check=True
            )
            us = float(out.stdout.strip().splitlines()[-1])
            least[label] = min(least.get(label, us), us)
            print(f"{label}: {us:.1f} µs CPU per request", flush=True)
    print("\n| server | app CPU per small rollout, µs (least) |\n|---|---:|")
    for label, us in least.items():
        print(f"| {label} | {us:.1f} |")


if __name__ == "__main__":
    main()
