"""Benchmarks of the live drift audit (issue 40), all with the default drift settings
(window 200 judgments, chunks of 25, thresholds 0.08 / 0.2, shadow 1%) unless named.

1. Overhead. `Engine.judge_batch` throughput with the audit off against on (default
   sample rate), side by side in one process: rounds alternate off / on, each judging the
   same batches of the example rollouts with the rules judge and the cache bypassed (the
   fastest judge, so the audit's share is at its largest). Goal: at most 3% slower.
2. Flips. A scripted Anthropic judge (tests/harness/scripted/degrade.py, the real SDK
   over loopback) judges `--clean` rollouts as usual, then degrades: errors labelled
   valid_progress, no spans at all, or half its sessions failing into the fallback. The
   verdict is read after every chunk; reported: judgments and seconds from the switch
   until it first reads `bad` (seconds are this machine's judging rate, not the audit's).
   Goal: within 500 judgments.
3. False alarms. The same judge left alone (its ordinary noise: spans left out at random,
   3% of sessions falling back) for `--long` judgments; every chunk's verdict counted.
   Goal: no `bad` in 20,000.

    .venv/bin/python bench/bench_drift.py [--rounds 6 --batches 20] [--long 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge_service.config import Settings
from judge_service.drift.monitor import series_of
from judge_service.judges.llm.ratelimit import reset_shared_limiters
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.trace.tokenizer import TokenizerCache
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.degrade import Degrader, engine_settings
from tests.harness.tokenizers import build_byte_level_bpe

ROOT = Path(__file__).resolve().parent.parent
JUDGE = "anthropic:claude-test"


async def overhead(rounds: int, batches: int) -> dict[str, Any]:
    rows = [json.loads(line) for line in (ROOT / "examples/rollouts.jsonl").open()]
    for row in rows:
        row["tokenizer"] = str(ROOT / "examples/tokenizer")
    rollouts = [Rollout.model_validate(r) for r in rows] * 4
    options = Options(use_cache=False)
    tokenizers = TokenizerCache.from_settings(Settings(), trusted=True)
    engines = {
        "off": Engine(Settings(drift_enabled=False), tokenizers=tokenizers, store=MemoryStore()),
        "on": Engine(Settings(), tokenizers=tokenizers, store=MemoryStore()),
    }
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for engine in engines.values():  # warm: tokenizer, judge, numpy paths
        await engine.judge_batch(rollouts, options)
    count = batches * len(rollouts)
    for turn in range(rounds):
        # Alternate which goes first: a machine shared with other work drifts in speed.
        for name in ("off", "on") if turn % 2 == 0 else ("on", "off"):
            engine = engines[name]
            began, cpu_began = time.perf_counter(), time.process_time()
            for _ in range(batches):
                await engine.judge_batch(rollouts, options)
            if engine.audit is not None:
                await engine.audit.drain()
            wall[name].append(count / (time.perf_counter() - began))
            cpu[name].append(count / (time.process_time() - cpu_began))
    for engine in engines.values():
        await engine.aclose()

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    out: dict[str, Any] = {"rollouts_per_round": count, "rounds": rounds}
    for kind, rates in (("wall", wall), ("cpu", cpu)):
        off, on = median(rates["off"]), median(rates["on"])
        # Each round's two runs are neighbours in time: their ratio cancels the machine's drift.
        paired = median([b / a for a, b in zip(rates["off"], rates["on"], strict=True)])
        out[kind] = {
            "off_per_s": round(off, 1),
            "on_per_s": round(on, 1),
            "slowdown_of_medians": round(1 - on / off, 4),
            "slowdown_paired_median": round(1 - paired, 4),
        }
    out["audit_share_of_wall"] = await audit_share(rollouts, options, tokenizers, batches * rounds)
    return out


async def audit_share(
    rollouts: list[Rollout], options: Options, tokenizers: TokenizerCache, batches: int
) -> dict[str, float]:
    """The audit's own time (counting each result, writing and scoring chunks, shadow
    checks) as a share of the judging's wall time, timed inside one run with it on."""
    from judge_service.drift import monitor

    spent = {"observe": 0.0, "flush": 0.0, "shadow": 0.0}
    observe, flush, shadow = (
        monitor.DriftMonitor.observe,
        monitor.DriftMonitor._flush,
        monitor.shadow_tally,
    )

    def timed_observe(self: monitor.DriftMonitor, *args: Any) -> None:
        began = time.perf_counter()
        observe(self, *args)
        spent["observe"] += time.perf_counter() - began

    async def timed_flush(self: monitor.DriftMonitor, *args: Any) -> None:
        began = time.perf_counter()
        await flush(self, *args)
        spent["flush"] += time.perf_counter() - began

    def timed_shadow(*args: Any) -> Any:
        began = time.perf_counter()
        found = shadow(*args)
        spent["shadow"] += time.perf_counter() - began
        return found

    monitor.DriftMonitor.observe = timed_observe  # type: ignore[method-assign]
    monitor.DriftMonitor._flush = timed_flush  # type: ignore[method-assign]
    monitor.shadow_tally = timed_shadow
    engine = Engine(Settings(), tokenizers=tokenizers, store=MemoryStore())
    try:
        await engine.judge_batch(rollouts, options)
        spent.update(dict.fromkeys(spent, 0.0))
        began = time.perf_counter()
        for _ in range(batches):
            await engine.judge_batch(rollouts, options)
        assert engine.audit is not None
        await engine.audit.drain()
        total = time.perf_counter() - began
    finally:
        monitor.DriftMonitor.observe = observe  # type: ignore[method-assign]
        monitor.DriftMonitor._flush = flush  # type: ignore[method-assign]
        monitor.shadow_tally = shadow
        await engine.aclose()
    return {name: round(value / total, 4) for name, value in spent.items()} | {
        "total": round(sum(spent.values()) / total, 4)
    }


def _engine(server: FakeProviderServer) -> Engine:
    return Engine(Settings(**engine_settings(server, max_concurrency=32)), store=MemoryStore())


class Run:
    """One engine judging the degrader's rollouts chunk by chunk, reading the verdict."""

    def __init__(self, server: FakeProviderServer, degrader: Degrader, tokenizer: str) -> None:
        self.server, self.degrader, self.tokenizer = server, degrader, tokenizer
        self.engine = _engine(server)
        self.options = Options(judge=JUDGE, use_cache=False)
        self.series = series_of("open", JUDGE, self.engine.judge_for(JUDGE).prompt_version)
        self.done = 0

    async def chunk(self) -> str:
        size = self.engine.settings.drift_chunk
        rows = [
            self.degrader.rollout(i, self.tokenizer) for i in range(self.done, self.done + size)
        ]
        await self.engine.judge_batch([Rollout.model_validate(r) for r in rows], self.options)
        self.done += size
        self.server.requests.clear()  # the server keeps every request otherwise
        audit = self.engine.audit
        assert audit is not None
        await audit.drain()
        return audit.verdicts[self.series].verdict


async def flips(
    server: FakeProviderServer, degrader: Degrader, tok: str, clean: int
) -> dict[str, Any]:
    out = {}
    for mode in ("mislabel", "lazy", "half_fail"):
        degrader.mode = "good"
        run = Run(server, degrader, tok)
        while run.done < clean:
            verdict = await run.chunk()
        assert verdict == "ok", f"{mode}: the clean part is already {verdict}"
        degrader.mode = mode
        began, start = time.perf_counter(), run.done
        while verdict != "bad" and run.done - start < 5000:
            verdict = await run.chunk()
        out[mode] = {
            "judgments_to_bad": run.done - start if verdict == "bad" else None,
            "seconds_to_bad": round(time.perf_counter() - began, 2),
            "reason": run.engine.audit.verdicts[run.series].reason if run.engine.audit else "",
        }
        await run.engine.aclose()
    degrader.mode = "good"
    return out


async def false_alarms(
    server: FakeProviderServer, degrader: Degrader, tok: str, long: int
) -> dict[str, Any]:
    run = Run(server, degrader, tok)
    counts = {"ok": 0, "drifting": 0, "bad": 0}
    worst = 0.0
    began = time.perf_counter()
    while run.done < long:
        counts[await run.chunk()] += 1
        audit = run.engine.audit
        assert audit is not None
        worst = max(worst, audit.verdicts[run.series].score)
    await run.engine.aclose()
    return {
        "judgments": run.done,
        "verdicts_read": counts,
        "worst_score": round(worst, 4),
        "seconds": round(time.perf_counter() - began, 1),
    }


async def main(args: argparse.Namespace) -> None:
    report: dict[str, Any] = {"overhead": await overhead(args.rounds, args.batches)}
    print(json.dumps(report["overhead"], indent=2), flush=True)
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
    reset_shared_limiters()
    with tempfile.TemporaryDirectory() as tmp, anthropic_server() as server:
        os.environ["JUDGE_TOKENIZER_ROOTS"] = tmp  # the server-side allow-list of tokenizers
        tok_dir = build_byte_level_bpe(Path(tmp) / "bpe")
        bpe = TokenizerCache().get(str(tok_dir))
        degrader = Degrader(bpe, seed=7)
        degrader.install(server)
        report["flips"] = await flips(server, degrader, str(tok_dir), args.clean)
        print(json.dumps(report["flips"], indent=2), flush=True)
        if args.long:
            report["false_alarms"] = await false_alarms(server, degrader, str(tok_dir), args.long)
            print(json.dumps(report["false_alarms"], indent=2), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--clean", type=int, default=400, help="judgments before degrading")
    parser.add_argument("--long", type=int, default=20_000, help="the clean run (0: skip)")
    asyncio.run(main(parser.parse_args()))
