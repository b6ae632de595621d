"""``judge-service judge IN.jsonl -o OUT.jsonl``: judge a rollout file offline.

One output line per input line, in input order, written as results complete
(a reorder window keeps the order while up to `--concurrency` rollouts are
judged at once). Re-running skips ids already in OUT, so an interrupted run
resumes where it stopped. Rollouts that share a ``group_id`` and carry a
``reward`` get Dr. GRPO advantages computed over the whole file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_service.cli.jsonl import iter_rollouts

if TYPE_CHECKING:
    from judge_service.schemas import Result


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "judge", help="judge a JSONL file of rollouts into a JSONL file of results"
    )
    parser.add_argument("input", type=Path, help="rollouts, one JSON object per line")
    parser.add_argument("-o", "--output", type=Path, required=True, help="results (appended)")
    parser.add_argument("--judge", help="rules | anthropic:<model> | openai:<model>")
    parser.add_argument("--lambda", dest="lam", type=float, help="credit strength λ")
    parser.add_argument("--kappa", type=float, help="credit cap κ")
    parser.add_argument("--min-confidence", type=float)
    parser.add_argument("--encoding", choices=["dense", "spans", "base64-f32"], default="dense")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def _done_ids(path: Path) -> set[str]:
    done: set[str] = set()
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash: judge that rollout again
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                done.add(record["id"])
    return done


def _group_advantages(path: Path) -> dict[str, Any]:
    from judge_service import credit

    ids, rewards, groups = [], [], []
    for _n, rollout, _e, _raw in iter_rollouts(path):
        if rollout is not None:
            ids.append(rollout.id)
            rewards.append(rollout.reward)
            groups.append(rollout.group_id)
    advantages = credit.group_advantages(rewards, groups)
    return {i: a for i, a in zip(ids, advantages, strict=True) if a is not None}


def run(args: argparse.Namespace) -> int:
    if not args.input.exists():
        print(f"no such file: {args.input}", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from judge_service.config import Settings
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options, Result

    settings = Settings()
    settings.max_concurrency = max(1, args.concurrency)
    engine = Engine(settings)
    options = Options.model_validate(
        {
            k: v
            for k, v in {
                "judge": args.judge,
                "lambda": args.lam,
                "kappa": args.kappa,
                "min_confidence": args.min_confidence,
                "credit_encoding": args.encoding,
            }.items()
            if v is not None
        }
    )
    done = _done_ids(args.output)
    advantages = _group_advantages(args.input)
    total = sum(1 for line in args.input.open(encoding="utf-8") if line.strip())
    counts: Counter[str] = Counter()
    window: deque[asyncio.Task[Result]] = deque()
    args.output.parent.mkdir(parents=True, exist_ok=True)

    async def failed(rollout_id: str, error: str) -> Result:
        return Result(id=rollout_id, status="failed", error=error)

    with (
        args.output.open("a", encoding="utf-8") as out,
        tqdm(total=total, disable=args.no_progress, unit="rollout") as bar,
    ):

        def write(result: Result) -> None:
            out.write(result.model_dump_json(exclude_none=True) + "\n")
            out.flush()
            counts[result.status] += 1
            bar.update(1)

        for number, rollout, error, raw in iter_rollouts(args.input):
            rollout_id = rollout.id if rollout else _raw_id(raw, number)
            if rollout_id in done:
                counts["skipped"] += 1
                bar.update(1)
                continue
            if rollout is None:
                coroutine = failed(rollout_id, error or "unreadable line")
            else:
                coroutine = _judge(engine, rollout, options, advantages.get(rollout.id), number)
            window.append(asyncio.create_task(coroutine))
            while window and (len(window) >= 2 * settings.max_concurrency or window[0].done()):
                write(await window.popleft())
        while window:
            write(await window.popleft())
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(f"judged {args.input} -> {args.output}: {summary}", file=sys.stderr)
    return 0


async def _judge(engine: Any, rollout: Any, options: Any, advantage: Any, number: int) -> Any:
    result, _ = await engine.judge_or_fail(rollout, options, advantage, field=f"line {number}")
    return result


def _raw_id(raw: Any, number: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
        return str(raw["id"])
    return f"line-{number}"
