"""``judge-service check-equivalence GOLD PRED``: print the verdict as JSON.

Exit status 0 for every verdict (``unknown`` included); 2 for bad options.
Answers may start with ``-`` (``-\\frac{3}{4}``): see `answers_last`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

COMMAND = "check-equivalence"
# Kept in step with register(): the options that take a value, and those that don't.
_VALUE_OPTIONS = ("--percent", "--tolerance", "--timeout")
_FLAG_OPTIONS = ("--degrees-as-radians", "--help")


def answers_last(args: Sequence[str]) -> list[str]:
    """The subcommand's arguments with its options first and the answers after ``--``.

    argparse reads any argument that starts with ``-`` and is not a plain negative
    number as an option, so ``-\\frac{3}{4}`` would be refused. Every argument that
    is not ``-h``, an option of this subcommand (``--name``, abbreviated or with
    ``=value``) or such an option's value is an answer, in the order given.
    """
    options: list[str] = []
    answers: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            answers.extend(rest)
        elif arg == "-h" or arg.startswith("--"):
            options.append(arg)
            name = arg.split("=", 1)[0]
            takes_value = [o for o in _VALUE_OPTIONS if o.startswith(name)]
            unique = len([o for o in (*_VALUE_OPTIONS, *_FLAG_OPTIONS) if o.startswith(name)])
            if "=" not in arg and takes_value and unique == 1:
                value = next(rest, None)
                options.extend([] if value is None else [value])
        else:
            answers.append(arg)
    return [*options, "--", *answers] if answers else options


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        COMMAND,
        help="is PRED mathematically equivalent to the reference GOLD? (math-verify)",
    )
    parser.add_argument("gold", help="the reference answer (LaTeX or plain)")
    parser.add_argument("pred", help="the answer to check")
    parser.add_argument(
        "--degrees-as-radians",
        action="store_true",
        help="read 30° as pi/6 only (default: as 30 or pi/6)",
    )
    parser.add_argument(
        "--percent", choices=("lenient", "strict"), default="lenient",
        help="lenient: 50%% matches 50 and 0.5; strict: only 0.5",
    )  # fmt: skip
    parser.add_argument("--tolerance", type=float, help="relative tolerance for numbers")
    parser.add_argument(
        "--timeout", type=float, help="seconds (default: JUDGE_EQUIVALENCE_TIMEOUT_S)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from judge_service.config import get_settings
    from judge_service.equivalence import EquivalenceChecker, EquivalencePolicy

    settings = get_settings()
    try:
        policy = EquivalencePolicy.from_dict(
            {
                "degrees_as_radians": args.degrees_as_radians,
                "percent": args.percent,
                "tolerance": args.tolerance,
            }
        )
    except ValueError as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    timeout = args.timeout if args.timeout is not None else settings.equivalence_timeout_s
    with EquivalenceChecker(
        pool_size=1, timeout_s=timeout, isolate=settings.sandbox_isolation != "off"
    ) as checker:
        result = checker.check(args.gold, args.pred, policy)
    print(json.dumps(result.to_dict(), ensure_ascii=False))
    return 0
