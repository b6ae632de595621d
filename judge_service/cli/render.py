"""``judge-service render IN.jsonl [--id ID]``: print the judge's marked view of rollouts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from judge_service.cli.jsonl import iter_rollouts


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "render", help="print what the judge sees: the trace with ⟦n⟧ markers"
    )
    parser.add_argument("input", type=Path, help="rollouts, one JSON object per line")
    parser.add_argument("--id", help="only the rollout with this id")
    parser.add_argument("--every", type=int, default=64, help="marker spacing inside long lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from judge_service.config import Settings
    from judge_service.errors import InputError
    from judge_service.pipeline import Engine
    from judge_service.trace import TokenizerCache, mark

    settings = Settings()
    engine = Engine(settings, tokenizers=TokenizerCache.from_settings(settings, trusted=True))
    found = False
    for _number, rollout, error, _raw in iter_rollouts(args.input):
        if rollout is None:
            print(error, file=sys.stderr)
            continue
        if args.id is not None and rollout.id != args.id:
            continue
        found = True
        try:
            trace = engine.decode(rollout)
        except InputError as exc:
            print(f"{rollout.id}: {exc.field}: {exc.message}", file=sys.stderr)
            continue
        print(f"=== {rollout.id} ({trace.num_tokens} tokens) ===")
        print(mark(trace, every=args.every).text)
    if args.id is not None and not found:
        print(f"no rollout with id {args.id!r} in {args.input}", file=sys.stderr)
        return 1
    return 0
