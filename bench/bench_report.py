"""The run report (``judge-service report``) for a run of 10,000 rollouts of 2k tokens:
build time, file size, and (with Chromium) how long the file takes to open and to show
one rollout's painted trace.

    .venv/bin/python bench/bench_report.py [--rollouts 10000] [--tokens 2048] [--no-browser]

The rollouts are windows of a long math-like trace (a local byte-level tokenizer);
the results are synthetic but shaped like the rules judge's: ~8 accepted spans with
evidence quotes, ~1.5 rejected spans, 5% fallbacks, credit as run-length spans (the
``--encoding spans`` a saved run would use). Only the report is timed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)

from judge_service import credit
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.schemas import Rollout
from judge_service.spans import Span
from judge_service.trace import TokenizerCache
from judge_service.view.report import write_report
from tests.harness.tokenizers import synthetic_trace

CODES = ["evidence_not_anchored", "overlap", "flood", "evidence_not_found", "out_of_range"]


def make_run(directory: Path, rollouts: int, tokens: int) -> tuple[Path, Path]:
    tok_dir, stream = synthetic_trace(tokens * 50, seed=1)
    tok = TokenizerCache().get(str(tok_dir))
    rng = random.Random(0)
    labels = list(DEFAULT_LABEL_SCORES)
    rollouts_path, results_path = directory / "rollouts.jsonl", directory / "results.jsonl"
    with rollouts_path.open("w") as rf, results_path.open("w") as sf:
        for i in range(rollouts):
            at = rng.randrange(0, len(stream) - tokens)
            ids = stream[at : at + tokens]
            reward = float(rng.random() < 0.5)
            rf.write(
                json.dumps(
                    {
                        "id": f"run-{i:05d}",
                        "group_id": f"p{i // 8}",
                        "problem": "What is 17 × 24?",
                        "reward": reward,
                        "reference_answer": "408",
                        "tokenizer": str(tok_dir),
                        "response_token_ids": ids,
                    }
                )
                + "\n"
            )
            trace = tok.decode(ids)
            spans = []
            for k in range(8):
                start = k * (tokens // 8) + rng.randrange(0, tokens // 16)
                end = min(tokens, start + rng.randrange(4, 60))
                text = trace.span_text(start, end).strip()
                spans.append(Span(start, end, rng.choice(labels), 0.9, text[:24] or "x"))
            values = credit.token_credit(
                tokens, spans, DEFAULT_LABEL_SCORES, lam=0.25, kappa=0.25, min_confidence=0.5
            )
            scores = credit.span_scores(spans, DEFAULT_LABEL_SCORES, 0.5)
            rejected = [
                {
                    "span": {"start": s, "end": s + 20, "label": "valid_progress"},
                    "code": rng.choice(CODES),
                    "reason": "the quote is not in the span's first line",
                    "round": 1,
                }
                for s in rng.sample(range(tokens - 20), rng.choice([0, 1, 2, 3]))
            ]
            fallback = rng.random() < 0.05
            result = {
                "id": f"run-{i:05d}",
                "status": "fallback" if fallback else "ok",
                "num_tokens": tokens,
                "spans": [
                    {**s.as_dict(), "score": score} for s, score in zip(spans, scores, strict=True)
                ],
                "rejected_spans": rejected,
                "credit": credit.encode(values.values, "spans"),
                "credit_scale": values.scale,
                "judge": {
                    "name": "rules" if fallback else "openai:judge",
                    "prompt_version": "v3",
                    "turns": 3,
                    "input_tokens": 9000,
                    "output_tokens": 700,
                    "latency_ms": rng.randrange(800, 9000),
                    "cost_usd": 0.004,
                    "rejected": {r["code"]: 1 for r in rejected},
                },
                "error": "provider: timed out after 60 s" if fallback else None,
            }
            sf.write(json.dumps(result) + "\n")
    Rollout.model_validate_json(rollouts_path.open().readline())  # the file is valid
    return rollouts_path, results_path


def open_in_chromium(report: Path) -> dict[str, float]:
    """Seconds to the load event; to filter the table to one id; from a click on it to its
    painted trace; to sort the table by a column."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    timings: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        began = time.perf_counter()
        page.goto(report.as_uri(), wait_until="load", timeout=300_000)
        timings["load"] = time.perf_counter() - began
        rows = page.locator("#rows tbody tr").count()
        wanted = f"run-{rows * 3 // 7:05d}"
        began = time.perf_counter()
        page.fill("#q", wanted)
        page.evaluate("() => 0")  # the input handler has run
        timings["filter"] = time.perf_counter() - began
        began = time.perf_counter()
        page.locator("#rows a", has_text=wanted).click()
        page.locator("#trace .trace").wait_for()
        timings["open a trace"] = time.perf_counter() - began
        page.fill("#q", "")
        began = time.perf_counter()
        page.locator("#rows th", has_text="rejections").click()
        page.evaluate("() => 0")
        timings["sort"] = time.perf_counter() - began
        browser.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp())
    try:
        rollouts, results = make_run(directory, args.rollouts, args.tokens)
        tok = TokenizerCache()
        out = directory / "run.html"
        began = time.perf_counter()
        report = write_report(
            rollouts,
            results,
            out,
            lambda r: tok.get(r.tokenizer or "").decode(r.response_token_ids),
        )
        built = time.perf_counter() - began
        size = out.stat().st_size
        print(
            f"{len(report.rows)} rollouts x {args.tokens} tokens: report built in {built:.1f} s, "
            f"{size / 1e6:.1f} MB ({size / len(report.rows) / 1e3:.1f} kB a rollout); "
            f"inputs {rollouts.stat().st_size / 1e6:.0f} MB + {results.stat().st_size / 1e6:.0f} MB"
        )
        if not args.no_browser:
            timings = open_in_chromium(out)
            print(
                "chromium (headless): "
                + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in timings.items())
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
