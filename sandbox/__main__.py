"""``python -m sandbox``: run the code on stdin, print the result as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from sandbox.runner import Sandbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--memory-mb", type=int, default=256, help="MiB per call (default 256)")
    parser.add_argument(
        "--isolation", choices=("auto", "require", "off"), default="auto",
        help="the OS layer: use it when possible (auto), insist on it, or skip it",
    )  # fmt: skip
    parser.add_argument("--status", action="store_true", help="also print the isolation status")
    args = parser.parse_args(argv)
    code = sys.stdin.read()
    with Sandbox(pool_size=1, isolation=args.isolation) as box:
        result = box.run(code, timeout_s=args.timeout, memory_mb=args.memory_mb)
        output = result.to_dict()
        if args.status:
            output["isolation"] = box.isolation_status()
    print(json.dumps(output, ensure_ascii=False))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
