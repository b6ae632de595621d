"""``judge-service serve``: run the HTTP API."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("serve", help="run the HTTP API")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info")
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log a line per request (off by default: at hundreds of small requests a "
        "second its formatting was ~8%% of the server's time; /metrics counts requests)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from judge_service.api.app import create_app

    # uvloop and httptools (main dependencies): under the pure-Python h11 parser, its
    # protocol was ~17% of the server's samples on small requests (BENCHMARKS.md "End to
    # end"). httptools' protocol gets the head-size bound that h11's has (http_protocol.py).
    from judge_service.api.http_protocol import BoundedHeadProtocol

    uvicorn.run(
        create_app(),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.access_log,
        loop="auto",
        http=BoundedHeadProtocol,
    )
    return 0
