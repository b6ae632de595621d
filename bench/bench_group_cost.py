"""What a group session costs against judging each rollout alone (issue 30).

The same rollouts are judged twice by an LLM judge whose provider is a scripted server on
loopback (the real `anthropic` / `openai` SDK talking HTTP; the server counts input
tokens at 4 characters each and simulates the provider's prompt cache: Anthropic from
the request's cache_control breakpoints, OpenAI's automatic prefix cache):

* single: `Engine.judge_batch`, one session per rollout;
* group: `group.judge.judge_group`, one session per group of G.

Both scripts do the same work per rollout: turn 1 views tokens [0, 40) of every rollout
the session shows (one call alone, G calls in one turn for the group), turn 2 submits
no spans. Input tokens per rollout = every request's uncached + cache-write + cache-read
input over the rollouts judged; "billed" weighs them as Anthropic bills (1, 1.25, 0.1).
Groups of G are the first G rollouts of each group with at least G: examples/sampled/
holds 16 problems x 4 samples (rollouts.jsonl) and 8 problems x 16 (rollouts-g16.jsonl,
the same SmolLM2-135M, `judge-service sample -o examples/sampled/rollouts-g16.jsonl
--samples 16 --problems 8 --max-new-tokens 128 --seed 0 --threads 1 --rubric
examples/sampled/rubrics.json`, 4.4 min here). "prefix" is the share of the groups'
tokens a shared prefix keeps out of the view.

    .venv/bin/python bench/bench_group_cost.py [--rollouts FILE ...] [--sizes 4 8 16]
        [--provider anthropic|openai]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge_service.group.judge import judge_group
from judge_service.group.view import Shared
from judge_service.judges.llm.ratelimit import reset_shared_limiters
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from tests.harness.scripted import FakeProviderServer, Reply, View, submit
from tests.harness.scripted.harness import llm_settings
from tests.harness.scripted.script import Call
from tests.harness.scripted.server import anthropic_server, openai_server

MODELS = {"anthropic": "anthropic:claude-bench", "openai": "openai:gpt-bench"}
_ROLLOUT = re.compile(r"## Rollout (\d+) \(")


def load_groups(paths: list[Path]) -> dict[str, list[Rollout]]:
    groups: dict[str, list[Rollout]] = defaultdict(list)
    for path in paths:
        tokenizer = str(path.parent.resolve() / "tokenizer")
        for line in path.read_text().splitlines():
            data = json.loads(line)
            data["tokenizer"] = tokenizer
            rollout = Rollout.model_validate(data)
            groups[f"{path}:{rollout.group_id}"].append(rollout)
    return groups


def tagged(rollouts: list[Rollout], tag: str) -> list[Rollout]:
    return [
        r.model_copy(update={"problem": f"{r.problem}\nSCRIPT:{tag}", "id": f"{tag}-{r.id}"})
        for r in rollouts
    ]


def view_all(view: View) -> Reply:
    """Turn 1: view tokens [0, 40) of every rollout the session shows."""
    text = json.dumps(view.body)
    shown = sorted({int(r) for r in _ROLLOUT.findall(text)})
    if not shown:  # a single session: no rollout index
        return Reply((Call("view_tokens", {"start": 0, "end": 40}),))
    return Reply(tuple(Call("view_tokens", {"rollout": r, "start": 0, "end": 40}) for r in shown))


def input_tokens(server: FakeProviderServer, tag: str) -> tuple[int, float]:
    """(uncached + write + read, billed) input tokens of every request of `tag`."""
    total, billed = 0, 0.0
    for r in server.requests_for(tag):
        usage = r.response.get("usage", {})
        if "prompt_tokens" in usage:  # OpenAI: cached tokens are part of prompt_tokens
            cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            total += usage["prompt_tokens"]
            billed += usage["prompt_tokens"] - cached + 0.1 * cached  # read at 0.1x as well
        else:
            plain = usage.get("input_tokens", 0)
            write = usage.get("cache_creation_input_tokens", 0)
            read = usage.get("cache_read_input_tokens", 0)
            total += plain + write + read
            billed += plain + 1.25 * write + 0.1 * read
    return total, billed


def prefix_share(engine: Engine, groups: list[list[Rollout]]) -> tuple[int, int]:
    """(tokens the group views show, tokens the groups hold), copies left out."""
    shown = held = 0
    for group in groups:
        traces = {i: engine.decode(r) for i, r in enumerate(group)}
        shared = Shared.of(traces)
        held += sum(t.num_tokens for t in traces.values())
        shown += sum(t.num_tokens - shared.start(i) for i, t in traces.items())
    return shown, held


async def run(paths: list[Path], sizes: list[int], provider: str) -> list[dict[str, Any]]:
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    groups = load_groups(paths)
    rows = []
    server = anthropic_server() if provider == "anthropic" else openai_server()
    with server:
        url = server.url if provider == "anthropic" else server.url + "/v1"
        roots = sorted({str(p.parent.resolve()) for p in paths})
        settings = llm_settings({provider: url}, max_group_size=max(sizes), tokenizer_roots=roots)
        for size in sizes:
            chosen = [g[:size] for g in groups.values() if len(g) >= size]
            if not chosen:
                continue
            single_tag, group_tag = f"single-{size}", f"group-{size}"
            for tag in (single_tag, group_tag):
                server.book.add(tag, view_all, submit([]))
            reset_shared_limiters()
            engine = Engine(settings)
            options = Options(judge=MODELS[provider], fallback="none", use_cache=False)
            single = [r for g in chosen for r in tagged(g, single_tag)]
            batch = await engine.judge_batch(single, options)
            together = [await judge_group(engine, tagged(g, group_tag), options) for g in chosen]
            await engine.aclose()
            statuses = [r.status for r in batch.results] + [
                r.status for g in together for r in g.results
            ]
            if set(statuses) != {"ok"}:
                raise SystemExit(f"G={size}: not every rollout was judged: {statuses}")
            n = len(single)
            shown, held = prefix_share(engine, chosen)
            alone, alone_billed = input_tokens(server, single_tag)
            grouped, grouped_billed = input_tokens(server, group_tag)
            rows.append(
                {
                    "G": size,
                    "groups": len(chosen),
                    "rollouts": n,
                    "single_per_rollout": alone / n,
                    "group_per_rollout": grouped / n,
                    "ratio": grouped / alone,
                    "billed_ratio": grouped_billed / alone_billed,
                    "single_requests": len(server.requests_for(single_tag)),
                    "group_requests": len(server.requests_for(group_tag)),
                    "prefix_share": 1 - shown / held,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=Path, action="append")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--provider", choices=sorted(MODELS), default="anthropic")
    args = parser.parse_args()
    paths = args.rollouts or [
        Path("examples/sampled/rollouts.jsonl"),
        Path("examples/sampled/rollouts-g16.jsonl"),
    ]
    rows = asyncio.run(run(paths, args.sizes, args.provider))
    print(f"provider {args.provider}; input tokens per rollout (4 chars a token)")
    print("| G | groups | rollouts | single | group | group/single | billed | prefix |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['G']} | {r['groups']} | {r['rollouts']} | {r['single_per_rollout']:,.0f} | "
            f"{r['group_per_rollout']:,.0f} | {r['ratio']:.2f}x | {r['billed_ratio']:.2f}x | "
            f"{r['prefix_share']:.1%} |"
        )


if __name__ == "__main__":
    main()
