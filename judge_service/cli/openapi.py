"""``judge-service openapi``: print the app's OpenAPI schema (openapi.yaml equals it)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "openapi", help="print the OpenAPI schema as YAML"
    )
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")
    parser.set_defaults(func=run)


def schema_yaml() -> str:
    import yaml  # here: every command's start (`serve` too) builds this module's parser

    from judge_service.api.app import create_app
    from judge_service.config import Settings

    schema = create_app(Settings()).openapi()
    return yaml.safe_dump(schema, sort_keys=False, allow_unicode=True)


def run(args: argparse.Namespace) -> int:
    text = schema_yaml()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0
