"""``python -m bench.multihost``: the multi-host scenario; prints its summary as JSON,
then as a markdown table. Exits 1 when a rollout was lost or a result was wrong, 2 when
this machine cannot run it (not root, no `ip netns`, haproxy or redis-server missing).

    .venv/bin/python -m bench.multihost [--cycles 20 --jobs 6] [--json OUT] [--logs DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from bench.multihost.config import Config
from bench.multihost.driver import run
from bench.multihost.haproxy import Timing
from bench.multihost.preflight import bounded, missing
from bench.multihost.report import markdown


def main(argv: list[str] | None = None) -> int:
    defaults = Config()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=defaults.cycles,
                        help="a job holds CYCLES × 12 rollouts")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=defaults.jobs,
                        help="jobs per throughput phase, and judged across the cut")  # fmt: skip
    parser.add_argument("--after-cut", type=float, default=defaults.after_cut_s,
                        help="s of batch calls after the cut")  # fmt: skip
    parser.add_argument("--dead-after", type=float, default=defaults.dead_after_s,
                        help="the workers' JUDGE_JOBS_DEAD_AFTER_S")  # fmt: skip
    parser.add_argument("--server-timeout-ms", type=int, default=Timing().server_ms,
                        help="haproxy's timeout server")  # fmt: skip
    parser.add_argument("--limit", type=float, default=900.0, help="stop after this many s")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    args = parser.parse_args(argv)
    if reason := missing():
        print(f"bench.multihost: cannot run here: {reason}", file=sys.stderr)
        return 2
    config = replace(
        defaults,
        cycles=args.cycles,
        jobs=args.jobs,
        after_cut_s=args.after_cut,
        dead_after_s=args.dead_after,
        timing=replace(Timing(), server_ms=args.server_timeout_ms),
        logs=args.logs,
    )
    with bounded(args.limit):
        summary = run(config)
    text = json.dumps(summary, indent=2)
    print(text + "\n\n" + markdown(summary))
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 1 if summary["problems"] or summary["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
