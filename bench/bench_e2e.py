"""End to end over HTTP (issue 16): a 32k-token rollout judged by a real server, timed in
the client, against a bare ``tokenizer.decode`` of the same ids; and small-rollout
throughput at concurrency 32 with its p99. Everything uncached (options.use_cache false,
distinct ids), the rules judge, the default ``dense`` credit encoding.

    .venv/bin/python bench/bench_e2e.py [--tokens 32768] [--repeats 7] [--requests 1500]
        [--concurrency 32] [--only TEXT] [--source DIR] [--profile OUT.svg]

Cases: varied prose, and a trace of thousands of arithmetic claims, each for a byte-level
BPE (GPT-2 / Qwen style) and a SentencePiece-style tokenizer (Metaspace with byte
fallback), both trained here with `tokenizers` and loaded through `transformers` from a
directory. "End to end" is the client's whole call: the request's JSON, the POST, the
server (HTTP parse, pydantic, decode, markers, rules judge, validation, credit, result,
JSON bytes) and ``response.json()``.

``--source DIR`` serves the judge_service package of another checkout (``git worktree add
/tmp/old <commit>``), for before/after figures from one session. ``--profile OUT`` runs
the server under ``py-spy record`` (speedscope JSON if OUT ends in .json, collapsed
stacks if .txt, else a flame graph) while the 32k cases run.

Targets (issue 39): end to end at most 3x the bare decode for prose and 6x for arithmetic;
at least 800 uncached small rollouts a second with p99 under 50 ms at concurrency 32.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import httpx
from _load import post_many
from _serve import PIDS, cpu_seconds, free_port, missing_dependencies, served, wait_ready
from _timing import median_ms

from tests.harness.tokenizers import (
    build_byte_level_bpe,
    build_metaspace_bpe,
    math_corpus,
)

WORDS = [
    "the",
    "of",
    "a",
    "river",
    "mountain",
    "quietly",
    "engine",
    "language",
    "because",
    "however",
    "theory",
    "small",
    "window",
    "colour",
    "children",
    "thousand",
    "whether",
    "argument",
    "measured",
    "beautiful",
    "sudden",
    "north",
    "library",
    "patience",
    "electric",
    "ancient",
    "variable",
    "harbour",
    "remarkable",
    "yesterday",
    "signal",
    "careful",
    "through",
    "although",
    "moment",
    "structure",
    "village",
    "evidence",
    "garden",
]
SERIAL = itertools.count()  # distinct rollout ids: nothing is cached
UNICODE = ["café", "naïve", "—", "“quoted”", "数学", "Zürich", "…", "½", "→", "façade"]


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of varied words, punctuation, numbers, accents, CJK and paragraph breaks."""
    out: list[str] = []
    size = 0
    while size < chars:
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 18))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(UNICODE))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 99_999)))
        sentence = " ".join(words).capitalize() + rng.choice([".", ".", "!", "?", ";", ":"])
        sentence += "\n\n" if rng.random() < 0.15 else " "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)


def arithmetic(rng: random.Random, chars: int) -> str:
    """Lines of checkable claims (a few wrong): thousands per 32k tokens."""
    out: list[str] = []
    size = 0
    while size < chars:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice(["×", "+", "-", "*"])
        value = a * b if op in "×*" else a + b if op == "+" else a - b
        if rng.random() < 0.05:
            value += rng.choice([-10, 1, 10])
        line = (
            f"{a} {op} {b} = {value}.\n" if rng.random() < 0.7 else f"So {a} {op} {b} = {value}, "
        )
        out.append(line)
        size += len(line)
    return "".join(out) + "\nThe answer is \\boxed{42}."


def ids_of(tokenizer: Any, text_of: Any, tokens: int) -> list[int]:
    chars = tokens * 2
    while True:
        ids: list[int] = tokenizer.encode(text_of(chars), add_special_tokens=False)
        if len(ids) >= tokens:
            return ids[:tokens]
        chars *= 2


async def throughput(
    url: str, tokenizer: str, ids: list[int], total: int, concurrency: int
) -> tuple[float, float, float, float]:
    """Requests per second, p50 and p99 latency (ms) of `total` small uncached requests,
    sent by `_load.post_many` (keep-alive connections, one request in flight on each), and
    the server's CPU time per request (ms; NaN under --profile). The rate follows the
    share of the 2 cores the server gets beside the client and whatever else runs; its
    CPU per request does not."""

    def body_of(n: int) -> bytes:
        body = {
            "rollout": {
                "id": f"small-{n}",
                "problem": "What is 17 × 24?",
                "reference_answer": "408",
                "tokenizer": tokenizer,
                "response_token_ids": ids,
            },
            "options": {"use_cache": False},
        }
        return json.dumps(body).encode()

    # From /healthz on, the start-up import took ~1 ms of server CPU a request more.
    await asyncio.to_thread(wait_ready, url)
    pid = PIDS.get(url)
    server_before = cpu_seconds(pid) if pid else float("nan")
    latencies, elapsed, cpu = await post_many(url, "/v1/judge", body_of, total, concurrency)
    # (the warm-up round post_many sends first is counted too: 32 of `total`)
    server = (cpu_seconds(pid) - server_before) if pid else float("nan")
    print(f"  client CPU {cpu:.2f} s, server CPU {server:.2f} s of {elapsed:.2f} s wall")
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    per_request = 1000 * server / (total + concurrency)
    return total / elapsed, statistics.median(latencies), p99, per_request


SMALL_TEXT = (
    "<think>\n17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408.\n</think>\n"
    "So the answer is \\boxed{408}."
)


def cases(
    url: str,
    args: argparse.Namespace,
    dirs: dict[str, Path],
    hf: dict[str, Any],
    bare: dict[str, float],
) -> list[str]:
    """One table row per 32k-token case: end to end against the bare decode, timed
    alternately in this run (each server's figure lands in `bare`)."""
    rows = []
    texts = {"varied prose": prose, "arithmetic claims": arithmetic}
    with httpx.Client(base_url=url, timeout=120) as client:
        for (tok_name, directory), (text_name, text_of) in (
            (t, x) for t in dirs.items() for x in texts.items()
        ):
            name = f"{text_name}, {tok_name}"
            if args.only not in name:
                continue
            tok = hf[tok_name]
            ids = ids_of(tok, lambda n, f=text_of: f(random.Random(1), n), args.tokens)
            text = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

            def decode(tok: Any = tok, ids: list[int] = ids) -> object:
                return tok.decode(
                    ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
                )

            raw: list[bytes] = []

            def call(
                directory: Path = directory, ids: list[int] = ids, raw: list[bytes] = raw
            ) -> dict[str, Any]:
                body = {
                    "rollout": {
                        "id": f"e2e-{next(SERIAL)}",
                        "problem": "Work it out.",
                        "tokenizer": str(directory),
                        "response_token_ids": ids,
                    },
                    "options": {"use_cache": False},
                }
                response = client.post("/v1/judge", json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
                raw[:] = [response.content]
                out: dict[str, Any] = response.json()
                return out

            alone = median_ms(decode, 3 * args.repeats)  # as before: in a row, first
            result = call()
            assert len(result["credit"]) == args.tokens and result["cache"] == "bypass"
            # The bare decode is timed between the calls (3 for each), not once before them:
            # this machine's speed drifts by up to 2x over minutes, and a ratio of figures
            # taken at different times measured the drift.
            calls: list[float] = []
            decodes: list[float] = []
            for _ in range(args.repeats):
                calls.append(median_ms(call, 1))
                decodes.extend(median_ms(decode, 1) for _ in range(3))
            e2e = statistics.median(calls)
            bare[name] = statistics.median(decodes)
            client_json = client_json_ms(ids, raw[0])
            target = 6 if text_name.startswith("arith") else 3
            rows.append(
                f"| {name} | {len(text):,} | {len(result['spans'])} | {alone:.2f} "
                f"| {bare[name]:.2f} | {client_json:.1f} | {e2e:.1f} | {e2e / alone:.1f}x "
                f"| **{e2e / bare[name]:.1f}x** | {target}x |"
            )
            print(rows[-1], flush=True)
    return rows


def build_tokenizers(work: Path) -> dict[str, Path]:
    """The two tokenizers every case runs on, trained here (bench_rules_judge.py too)."""
    rng = random.Random(0)
    corpus = math_corpus(20) + [prose(rng, 400) for _ in range(200)]
    return {
        "byte-level BPE": build_byte_level_bpe(work / "bpe", vocab_size=2000, corpus=corpus),
        "Metaspace + byte fallback": build_metaspace_bpe(work / "sp"),
    }


def client_json_ms(ids: list[int], response: bytes) -> float:
    """The client's own JSON work inside "end to end": the request body's dumps and the
    response's loads, which no change to the server can remove."""
    body = {"rollout": {"id": "e2e", "response_token_ids": ids}, "options": {}}
    return median_ms(lambda: (json.dumps(body), json.loads(response)), 5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32_768)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="throughput runs per server")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--source", default=None, help="serve judge_service from this checkout")
    parser.add_argument("--before", default=None, help="also serve this checkout, compared")
    parser.add_argument("--profile", default=None, help="py-spy record the server to OUT")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    work = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    dirs = build_tokenizers(work)
    hf = {name: AutoTokenizer.from_pretrained(str(d)) for name, d in dirs.items()}
    env = {
        "JUDGE_DEFAULT_TOKENIZER": str(dirs["byte-level BPE"]),
        "JUDGE_ALLOWED_TOKENIZERS": ",".join(str(d) for d in dirs.values()),
        "JUDGE_TOKENIZER_ROOTS": str(work),
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens: unreachable
    }
    prefix = None
    if args.profile:
        spy = Path(sys.executable).parent / "py-spy"
        formats = {".json": "speedscope", ".txt": "raw"}
        fmt = [f for suffix, f in formats.items() if args.profile.endswith(suffix)]
        prefix = [str(spy), "record", "--rate", "250", "-o", args.profile]
        prefix += [*(["--format", fmt[0]] if fmt else []), "--"]
    servers = {"after": args.source} if args.before else {"": args.source}
    if args.before:
        servers = {"before": args.before, **servers}
    bare: dict[str, float] = {}
    tables: dict[str, list[str]] = {}
    rates: dict[str, list[tuple[float, float, float, float]]] = {label: [] for label in servers}
    small_ids = hf["byte-level BPE"].encode(SMALL_TEXT, add_special_tokens=False)
    run_small = "throughput" in args.only or not args.only
    for round_ in range(max(1, args.rounds if run_small else 1)):
        for label, source in servers.items():
            print(f"server {label or ''} {source or 'this checkout'}", flush=True)
            without = missing_dependencies(source, ("uvloop", "httptools")) if source else []
            if without:
                print(f"  (without {', '.join(without)}: not among its dependencies)", flush=True)
            with served(env, source, prefix, without) as url:
                if round_ == 0:
                    tables[label] = cases(url, args, dirs, hf, bare)
                if run_small:
                    rates[label].append(
                        asyncio.run(
                            throughput(
                                url,
                                str(dirs["byte-level BPE"]),
                                small_ids,
                                args.requests,
                                args.concurrency,
                            )
                        )
                    )
                    print(f"  {rates[label][-1][0]:.0f} req/s", flush=True)
    print(
        f"\n{args.tokens} tokens, median of {args.repeats} (bare decode: of {3 * args.repeats}, "
        "in a row before the calls, and again timed between them)"
    )
    for label, rows in tables.items():
        print(
            f"\n| 32k-token rollout {label} | chars | spans | bare decode ms, in a row "
            "| bare decode ms, between calls | of it client JSON ms | end to end ms "
            "| ratio to in a row | ratio to between calls | target |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
    if run_small:
        print(
            f"\nsmall rollouts ({len(small_ids)} tokens), uncached, concurrency "
            f"{args.concurrency}, {args.requests} requests a run:\n"
        )
        print(
            "| server | req/s (each run) | p50 ms | p99 ms | server CPU ms per request |\n"
            "|---|---|---|---|---|"
        )
        for label, runs in rates.items():
            print(
                f"| {label or 'this checkout'} | **{' / '.join(f'{r[0]:.0f}' for r in runs)}** "
                f"| {' / '.join(f'{r[1]:.0f}' for r in runs)} "
                f"| {' / '.join(f'{r[2]:.0f}' for r in runs)} "
                f"| {' / '.join(f'{r[3]:.2f}' for r in runs)} |"
            )


if __name__ == "__main__":
    main()
