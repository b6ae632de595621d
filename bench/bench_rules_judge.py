"""The rules judge alone, in process: `judge_spans` on the end-to-end bench's 32k-token
traces (bench_e2e.py's arithmetic and prose, byte-level BPE and Metaspace), median of 9,
each on a freshly decoded trace (nothing memoised from a run before).

    .venv/bin/python bench/bench_rules_judge.py [--cpu] [--repeats N]
    # another checkout's package, for before/after figures in one session:
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before .venv/bin/python bench/bench_rules_judge.py

``--cpu``: the thread's CPU time, the least of the repeats (default: wall time, their
median). On this shared VM the wall time of one trace swings by up to 2x between runs
minutes apart; the least CPU time of 21 moves by a few percent, so before/after figures
from alternating runs of each checkout can be compared.
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_e2e import arithmetic, build_tokenizers, ids_of, prose

import judge_service
from judge_service.judges.base import JudgeRequest
from judge_service.judges.rules import rules_judge
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import SpanLimits
from judge_service.trace.markers import mark
from judge_service.trace.tokenizer import TokenizerCache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true", help="thread CPU time, least of the repeats")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    clock = time.thread_time if args.cpu else time.perf_counter
    summary = min if args.cpu else statistics.median
    print(f"judge_service from {Path(judge_service.__file__).parent}")
    work = Path(tempfile.mkdtemp(prefix="bench-rules-"))
    tokenizers = build_tokenizers(work)
    # Before session 6 a request carried its marked view as a field.
    wants_view = "view" in inspect.signature(JudgeRequest).parameters
    what = "least CPU" if args.cpu else "median wall"
    print(f"| 32k-token trace | chars | judge_spans ms ({what}) |\n|---|---:|---:|")
    for tok_name, directory in tokenizers.items():
        tok = TokenizerCache().get(str(directory))
        for text_name, text_of in (("varied prose", prose), ("arithmetic claims", arithmetic)):
            ids = ids_of(tok.hf, lambda n, f=text_of: f(random.Random(1), n), 32_768)

            def fresh(ids: list[int] = ids, tok: Any = tok) -> JudgeRequest:
                trace = tok.decode(ids)
                extra: dict[str, Any] = {"view": mark(trace)} if wants_view else {}
                return JudgeRequest(
                    rollout_id="bench",
                    trace=trace,
                    problem="Work it out.",
                    final_answer=None,
                    reward=None,
                    reference_answer=None,
                    reference_solution=None,
                    label_scores=dict(DEFAULT_LABEL_SCORES),
                    **extra,
                )

            times = []
            for request in [fresh() for _ in range(args.repeats)]:
                began = clock()
                rules_judge.judge_spans(request, SpanLimits())
                times.append((clock() - began) * 1000)
            chars = len(request.trace.text)
            print(f"| {text_name}, {tok_name} | {chars:,} | {summary(times):.1f} |")


if __name__ == "__main__":
    main()
