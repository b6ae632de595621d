"""Benchmarks of the LLM judge: concurrency overhead, and what prompt caching saves.

1. Throughput. A scripted provider answers every call after 200 ms; 512
   rollouts of 6 calls each (5 tool calls, then submit_spans) at concurrency
   256 ideally take 512/256 x 6 x 0.2 s = 2.4 s. Target: at most 1.15x. Run
   three ways: the judge loop alone (in-process provider), the whole
   pipeline (`Engine.judge_batch`: decode, mark, judge, validate, credit), and
   the real `anthropic` SDK over loopback HTTP to a scripted server in another
   process. The last is bound by the SDK's and httpx2's CPU per request (a few
   ms on a small machine), not by the loop: the CPU column shows it.
2. Caching. A 10-turn session on a 16k-token trace against the scripted
   Anthropic server, whose usage simulates the prompt cache from the request's
   cache_control breakpoints. Per turn: the cacheable-prefix share of the
   input, and the input cost with caching (write 1.25x, read 0.1x) against
   none. Target: at least 4x cheaper.

    .venv/bin/python bench/bench_llm_judge.py [--rollouts 512 --concurrency 256]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge_service.config import Settings
from judge_service.judges import registry
from judge_service.judges.base import JudgeLimits, JudgeRequest
from judge_service.judges.llm.anthropic_provider import AnthropicProvider
from judge_service.judges.llm.llm_judge import LLMJudge
from judge_service.judges.llm.loop import LoopConfig
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.tools.trace_tools import SearchTraceTool, ViewTokensTool
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from judge_service.validate import validate_spans
from tests.harness.scripted import anthropic_server, call, submit
from tests.harness.scripted.harness import make_provider, make_request
from tests.harness.scripted.inprocess import ScriptedProvider
from tests.harness.scripted.script import ScriptBook
from tests.harness.tokenizers import MATH_CORPUS, build_byte_level_bpe

DELAY_S = 0.2
CALLS = 6
WRITE, READ = 1.25, 0.1


def trace_text(lines: int) -> str:
    return "<think>\n" + "\n".join(MATH_CORPUS[i % 14] for i in range(lines)) + "\n</think>"


def session_steps(evidence: str, start: int, end: int) -> list[Any]:
    span = {
        "start": start,
        "end": end,
        "label": "valid_progress",
        "confidence": 0.9,
        "evidence": evidence,
    }
    return [
        call("view_tokens", start=0, end=60),
        call("search_trace", pattern="408"),
        call("view_tokens", start=60, end=120),
        call("search_trace", pattern="wrong"),
        call("view_tokens", start=120, end=180),
        submit([span]),
    ]


def request_for(bpe: LoadedTokenizer, ids: list[int], name: str) -> JudgeRequest:
    return make_request(bpe, name, ids=ids, limits=JudgeLimits(deadline_s=60.0))


def first_line_span(bpe: LoadedTokenizer, ids: list[int]) -> tuple[str, int, int]:
    trace = bpe.decode(ids)
    phrase = MATH_CORPUS[1]
    at = trace.text.index(phrase)
    start, end = trace.tokens_for_chars(at, at + len(phrase))
    return phrase[:30], start, end


async def timed_sessions(judge: LLMJudge, requests: list[JudgeRequest], width: int) -> float:
    """Wall time to judge `requests`, at most `width` at once; every session must run
    its full script."""
    slots = asyncio.Semaphore(width)

    async def one(request: JudgeRequest) -> int:
        async with slots:
            outcome = await judge.judge(
                request, lambda s: validate_spans(s, request.trace, request.label_scores)
            )
            return outcome.turns

    began = time.perf_counter()
    turns = await asyncio.gather(*(one(r) for r in requests))
    elapsed = time.perf_counter() - began
    assert set(turns) == {CALLS}, set(turns)
    return elapsed


async def bench_loop(bpe: LoadedTokenizer, ids: list[int], rollouts: int, width: int) -> float:
    """The judge loop alone: in-process provider, one judge, a semaphore of `width`."""
    book = ScriptBook()
    evidence, start, end = first_line_span(bpe, ids)
    requests = []
    for i in range(rollouts):
        book.add(f"loop{i}", *session_steps(evidence, start, end))
        requests.append(request_for(bpe, ids, f"loop{i}"))
    judge = LLMJudge(
        ScriptedProvider(book, delay_s=DELAY_S),
        tools=[ViewTokensTool(), SearchTraceTool()],
        config=LoopConfig(),
    )
    return await timed_sessions(judge, requests, width)


async def bench_engine(
    bpe: LoadedTokenizer, bpe_dir: Path, ids: list[int], rollouts: int, width: int
) -> float:
    """The whole pipeline: Engine.judge_batch with max_concurrency = width."""
    book = ScriptBook()
    evidence, start, end = first_line_span(bpe, ids)
    provider = ScriptedProvider(book, delay_s=DELAY_S)
    judge = LLMJudge(provider, tools=[ViewTokensTool(), SearchTraceTool()])
    registry.FACTORIES["scripted"] = lambda model, settings: judge
    batch = []
    for i in range(rollouts):
        book.add(f"eng{i}", *session_steps(evidence, start, end))
        batch.append(
            Rollout(
                id=f"r{i}",
                problem=f"Compute. SCRIPT:eng{i}",
                response_token_ids=ids,
                tokenizer=str(bpe_dir),
                reward=1.0,
            )
        )
    engine = Engine(Settings(max_concurrency=width, max_rollouts_per_batch=4096))
    began = time.perf_counter()
    response = await engine.judge_batch(batch, Options(judge="scripted:fake", deadline_s=60.0))
    elapsed = time.perf_counter() - began
    counts = response.stats.counts
    assert counts["ok"] == rollouts and provider.calls == rollouts * CALLS, counts
    return elapsed


def serve(scripts: dict[str, list[Any]], delay_s: float, port: Any, stop: Any) -> None:
    """The scripted Anthropic server in its own process (its own GIL, like a real provider)."""
    with anthropic_server(delay_s=delay_s) as server:
        for name, steps in scripts.items():
            server.book.add(name, *steps)
        port.put(server.url)
        stop.wait()


async def bench_http(bpe: LoadedTokenizer, ids: list[int], rollouts: int, width: int) -> float:
    """The real anthropic SDK over loopback HTTP to a scripted server (200 ms per answer)."""
    evidence, start, end = first_line_span(bpe, ids)
    scripts = {f"http{i}": session_steps(evidence, start, end) for i in range(rollouts)}
    requests = [request_for(bpe, ids, name) for name in scripts]
    context = multiprocessing.get_context("spawn")
    port, stop = context.Queue(), context.Event()
    process = context.Process(target=serve, args=(scripts, DELAY_S, port, stop), daemon=True)
    process.start()
    try:
        url = port.get(timeout=120)
        provider = AnthropicProvider(
            "claude-bench", RateLimiter(), base_url=url, api_key="bench", request_timeout_s=60.0
        )
        judge = LLMJudge(provider, tools=[ViewTokensTool(), SearchTraceTool()])
        elapsed = await timed_sessions(judge, requests, width)
        await judge.aclose()
    finally:
        stop.set()
        process.join(10)
    return elapsed


async def bench_cache(bpe: LoadedTokenizer, target_tokens: int, turns: int) -> dict[str, Any]:
    lines = 10
    while True:
        ids = bpe.hf.encode(trace_text(lines), add_special_tokens=False)
        if len(ids) >= target_tokens:
            break
        lines = int(lines * target_tokens / max(1, len(ids))) + 1
    ids = ids[:target_tokens]
    evidence, start, end = first_line_span(bpe, ids)
    steps: list[Any] = []
    for k in range(turns - 1):
        steps.append(
            call("view_tokens", start=k * 150, end=k * 150 + 120)
            if k % 2 == 0
            else call("search_trace", pattern=MATH_CORPUS[k % 14][:12])
        )
    steps.append(
        submit(
            [
                {
                    "start": start,
                    "end": end,
                    "label": "valid_progress",
                    "confidence": 0.9,
                    "evidence": evidence,
                }
            ]
        )
    )
    with anthropic_server() as server:
        server.book.add("cache", *steps)
        request = request_for(bpe, ids, "cache")
        request = JudgeRequest(
            **{**request.__dict__, "limits": JudgeLimits(max_turns=turns, deadline_s=60)}
        )
        judge = LLMJudge(
            make_provider("anthropic", server), tools=[ViewTokensTool(), SearchTraceTool()]
        )
        outcome = await judge.judge(
            request, lambda s: validate_spans(s, request.trace, request.label_scores)
        )
        await judge.aclose()
        usages = [r.response["usage"] for r in server.requests_for("cache")]
    assert outcome.turns == turns
    rows = []
    for turn, u in enumerate(usages, start=1):
        total = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        rows.append(
            {
                "turn": turn,
                "input": total,
                "prefix_share": (u["cache_creation_input_tokens"] + u["cache_read_input_tokens"])
                / total,
                "read_share": u["cache_read_input_tokens"] / total,
                "cost": u["input_tokens"]
                + WRITE * u["cache_creation_input_tokens"]
                + READ * u["cache_read_input_tokens"],
            }
        )
    plain = sum(r["input"] for r in rows)
    cached = sum(r["cost"] for r in rows)
    return {
        "policy_tokens": len(ids),
        "rows": rows,
        "plain": plain,
        "cached": cached,
        "saving": plain / cached,
        "outcome_usage": outcome.usage,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--trace-lines", type=int, default=40)
    parser.add_argument("--cache-trace-tokens", type=int, default=16_384)
    parser.add_argument("--cache-turns", type=int, default=10)
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")

    with tempfile.TemporaryDirectory() as tmp:
        bpe_dir = build_byte_level_bpe(Path(tmp) / "bpe")
        bpe = TokenizerCache().get(str(bpe_dir))
        ids = bpe.hf.encode(trace_text(args.trace_lines), add_special_tokens=False)
        ideal = args.rollouts / args.concurrency * CALLS * DELAY_S
        print(
            f"## Throughput: {args.rollouts} rollouts x {CALLS} calls, concurrency "
            f"{args.concurrency}, {DELAY_S * 1000:.0f} ms per call, {len(ids)}-token traces"
        )
        print(f"ideal {ideal:.2f} s; target <= {1.15 * ideal:.2f} s (1.15x)\n")
        runs = [
            (
                "judge loop (in-process provider)",
                bench_loop(bpe, ids, args.rollouts, args.concurrency),
            ),
            (
                "Engine.judge_batch (decode+judge+validate+credit)",
                bench_engine(bpe, bpe_dir, ids, args.rollouts, args.concurrency),
            ),
        ]
        if not args.skip_http:
            runs.append(
                (
                    "anthropic SDK over loopback HTTP",
                    bench_http(bpe, ids, args.rollouts, args.concurrency),
                )
            )
        print("| path | wall s | x ideal | CPU ms per call (this process) |")
        print("|---|---:|---:|---:|")
        for label, coroutine in runs:
            cpu = time.process_time()
            elapsed = await coroutine
            per_call = (time.process_time() - cpu) / (args.rollouts * CALLS) * 1000
            print(f"| {label} | {elapsed:.2f} | {elapsed / ideal:.3f} | {per_call:.2f} |")

        cache = await bench_cache(bpe, args.cache_trace_tokens, args.cache_turns)
        print(
            f"\n## Prompt caching: {args.cache_turns}-turn session, {cache['policy_tokens']}"
            "-token trace (Anthropic wire, simulated cache, 4 chars a judge token)\n"
        )
        print("| turn | input tokens | cacheable prefix | read from cache | cost (x input) |")
        print("|---:|---:|---:|---:|---:|")
        for r in cache["rows"]:
            print(
                f"| {r['turn']} | {r['input']} | {r['prefix_share']:.1%} | "
                f"{r['read_share']:.1%} | {r['cost']:.0f} |"
            )
        print(
            f"\ninput cost: {cache['plain']} token-units uncached vs {cache['cached']:.0f} "
            f"cached (write {WRITE}x, read {READ}x): {cache['saving']:.2f}x cheaper "
            "(target >= 4x)"
        )


if __name__ == "__main__":
    asyncio.run(main())
