"""``judge-service report ROLLOUTS.jsonl RESULTS.jsonl -o RUN.html``: a run as one HTML file.

The file is self-contained (no CDN, no request of any kind, works offline): totals,
credit by label, a sortable and filterable table of rollouts, and each rollout's
judged trace, painted when it is opened. See `judge_service.view.report`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report", help="write a run's rollouts and results as one self-contained HTML report"
    )
    parser.add_argument("rollouts", type=Path, help="the rollouts file that was judged")
    parser.add_argument("results", type=Path, help="its results (judge-service judge -o ...)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the HTML file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from judge_service.config import Settings
    from judge_service.pipeline import Engine
    from judge_service.trace.tokenizer import TokenizerCache
    from judge_service.view.report import write_report

    for name, path in (("rollouts", args.rollouts), ("results", args.results)):
        if not path.is_file():
            print(f"{name}: no such file: {path}", file=sys.stderr)
            return 2
    settings = Settings()
    # The operator's own files: any tokenizer they name, as `judge` does.
    engine = Engine(settings, tokenizers=TokenizerCache.from_settings(settings, trusted=True))
    began = time.perf_counter()
    report = write_report(args.rollouts, args.results, args.output, engine.decode)
    size = args.output.stat().st_size
    print(
        f"{len(report.rows)} rollouts -> {args.output} ({size / 1e6:.1f} MB, "
        f"{time.perf_counter() - began:.1f} s)",
        file=sys.stderr,
    )
    for note in report.notes:
        print(note, file=sys.stderr)
    return 0
