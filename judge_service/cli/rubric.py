"""``judge-service rubric-weights FILE``: POW3R criterion weights for groups of rollouts.

FILE holds one request body of ``POST /v1/rubric/weights`` per line (JSON lines;
a file holding one JSON object also works); each line's answer is printed as one
JSON line, in order. A bad line prints its error on stderr and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "rubric-weights",
        help="POW3R: policy-aware rubric criterion weights and rewards, one group per line",
    )
    parser.add_argument("input", type=Path, help="request bodies, one JSON object per line")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    parser.set_defaults(func=run)


def _bodies(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return [line for line in text.splitlines() if line.strip()]
    return [text]  # one JSON object, possibly spread over lines


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from judge_service.methods.pow3r import RubricWeightsRequest, rubric_weights

    failed = False
    out = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    try:
        for number, line in enumerate(_bodies(args.input), 1):
            try:
                body = RubricWeightsRequest.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                print(f"line {number}: {where}: {first['msg']}", file=sys.stderr)
                failed = True
                continue
            out.write(rubric_weights(body).model_dump_json(exclude_none=True) + "\n")
    finally:
        if args.output:
            out.close()
    return 1 if failed else 0
