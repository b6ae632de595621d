"""Entry point of the ``judge-service`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from judge_service.cli.equivalence import COMMAND as CHECK_EQUIVALENCE
from judge_service.cli.equivalence import answers_last

# Each module defines ``register(subparsers)``, which adds its subcommand and sets
# ``func`` (args -> exit code) on the parser.
SUBCOMMAND_MODULES = (
    "judge_service.cli.serve",
    "judge_service.cli.worker",
    "judge_service.cli.judge",
    "judge_service.cli.render",
    "judge_service.cli.openapi",
    "judge_service.cli.probe",
    "judge_service.cli.equivalence",
    "judge_service.cli.eval",
    "judge_service.cli.rubric",
    "judge_service.cli.report",
    "judge_service.cli.sample",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="judge-service", description="Per-token credit for LLM reasoning rollouts."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == [CHECK_EQUIVALENCE]:
        words = [CHECK_EQUIVALENCE, *answers_last(words[1:])]
    args = build_parser().parse_args(words)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
