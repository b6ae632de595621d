"""``judge-service eval GOLD.jsonl --judge J -o REPORT.json``: score a judge on known labels.

GOLD holds ProcessBench records and/or gold-span records
(`judge_service.evaluation.records`); each is judged in this process by the
same `Engine` as ``judge-service judge``, and REPORT.json gets ProcessBench F1,
token-level span precision/recall by label, boundary error, rejections by code,
fallback rate, cost and p50/p95 latency (`judge_service.evaluation.report`).
A record that fails counts as wrong and is listed. Exit status: 0 when the
report is written, 1 when no record could be judged or an LLM judge's pre-flight
(as ``judge-service judge`` runs it) fails, 2 for bad input (every bad line is
named before anything is judged).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_service.config import Settings
    from judge_service.evaluation.records import Case
    from judge_service.schemas import Options, Result
    from judge_service.trace.tokenizer import TokenizerCache


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="score a judge on ProcessBench and gold-span records into REPORT.json",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", type=Path, metavar="GOLD.jsonl", help="records, one a line")
    parser.add_argument("-o", "--output", type=Path, required=True, help="REPORT.json")
    parser.add_argument(
        "--judge", help="rules | anthropic:<model> | openai:<model> (default JUDGE_DEFAULT_JUDGE)"
    )
    parser.add_argument(
        "--tokenizer",
        help="encodes ProcessBench steps into a rollout (default JUDGE_DEFAULT_TOKENIZER); "
        "also the tokenizer of gold-span rollouts that name none",
    )
    parser.add_argument(
        "--concurrency", type=int, help="records judged at once (default JUDGE_MAX_CONCURRENCY)"
    )
    parser.add_argument("--min-confidence", type=float, help="options.min_confidence")
    parser.add_argument("--max-turns", type=int, help="options.max_turns (LLM judges)")
    parser.add_argument("--deadline-s", type=float, help="options.deadline_s (LLM judges)")
    parser.add_argument(
        "--fallback",
        help="options.fallback: what a failed LLM judge falls back to (rules, zero; none: the "
        "record fails and counts as wrong)",
    )
    parser.add_argument(
        "--skip-preflight",
        action="store_true",
        help="do not check an LLM judge's provider (models list, one tiny request) first",
    )
    parser.add_argument(
        "--prompt-version", help="the LLM judge's prompts (default JUDGE_LLM_PROMPT_VERSION)"
    )
    parser.add_argument(
        "--with-verdict",
        action="store_true",
        help="give the judge ProcessBench's final_answer_correct as the reward (1.0/0.0); "
        "off by default, as ProcessBench's critics see only the problem and the steps",
    )
    parser.add_argument(
        "--without-reference",
        action="store_true",
        help="drop the records' reference_solution and reference_answer: the judge alone "
        "(by default a record's reference solution is a correct sibling, and the rollout "
        "gets its divergence point against it)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from judge_service.config import Settings
    from judge_service.errors import RecordsError
    from judge_service.evaluation.records import read_cases
    from judge_service.trace.tokenizer import TokenizerCache

    if not args.input.exists():
        print(f"no such file: {args.input}", file=sys.stderr)
        return 2
    settings = Settings()
    if args.concurrency is not None:
        settings.max_concurrency = max(1, args.concurrency)
    if args.prompt_version:
        settings.llm_prompt_version = args.prompt_version
    spec: str = args.judge or settings.default_judge
    # The operator's own command: the judge it names is allowed, and any tokenizer.
    settings.allowed_judges = [*settings.judge_patterns, spec]
    try:
        options = _options(args, spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        option = "-".join(str(p) for p in first["loc"]).replace("_", "-")
        print(f"--{option}: {first['msg']}", file=sys.stderr)
        return 2
    tokenizers = TokenizerCache.from_settings(settings, trusted=True)
    try:
        cases = read_cases(
            args.input,
            tokenizers.get,
            tokenizer=args.tokenizer or settings.default_tokenizer,
            with_verdict=args.with_verdict,
            with_reference=not args.without_reference,
        )
    except RecordsError as exc:
        print(f"{args.input}: cannot evaluate:\n{exc}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    results = asyncio.run(_judge_all(settings, tokenizers, cases, options, args))
    if results is None:
        return 1
    from judge_service.evaluation.report import build_report

    report = build_report(
        cases, results, judge=spec, source=str(args.input), wall_s=time.perf_counter() - began
    )
    _write_atomically(args.output, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"{args.input} -> {args.output}: {_summary(report)}", file=sys.stderr)
    return 1 if report["statuses"]["failed"] == len(results) else 0


def _options(args: argparse.Namespace, spec: str) -> Options:
    from judge_service.schemas import Options

    values = {
        "judge": spec,
        "min_confidence": args.min_confidence,
        "max_turns": args.max_turns,
        "deadline_s": args.deadline_s,
        "fallback": args.fallback,
    }
    return Options.model_validate({k: v for k, v in values.items() if v is not None})


async def _judge_all(
    settings: Settings,
    tokenizers: TokenizerCache,
    cases: list[Case],
    options: Options,
    args: argparse.Namespace,
) -> list[Result] | None:
    """Every case's result, in order; None when the pre-flight finds the judge unusable."""
    from tqdm import tqdm

    from judge_service.cli.judge import check_judge_or_explain
    from judge_service.pipeline import Engine

    engine = Engine(settings, tokenizers=tokenizers)
    # Scoring a judge that cannot run would only score its fallback: stop first, saying why.
    failure = None if args.skip_preflight else await check_judge_or_explain(engine, options)
    if failure is not None:
        await engine.aclose()
        print(failure, file=sys.stderr)
        return None
    # The engine's slots bound the judging; this bounds the records decoded and waiting.
    window = asyncio.Semaphore(2 * settings.max_concurrency)

    async def judge(case: Case, bar: Any) -> Result:
        async with window:
            result, _ = await engine.judge_or_fail(
                case.rollout, options, None, field=f"line {case.line}"
            )
        bar.update(1)
        return result

    try:
        with tqdm(total=len(cases), disable=args.no_progress, unit="record") as bar:
            return list(await asyncio.gather(*(judge(case, bar) for case in cases)))
    finally:
        await engine.aclose()


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _summary(report: dict[str, Any]) -> str:
    parts = []
    pb = report["processbench"]
    if pb is not None:
        parts.append(
            f"ProcessBench F1 {_fmt(pb['f1'])} (acc_error {_fmt(pb['acc_error'])}, "
            f"acc_correct {_fmt(pb['acc_correct'])})"
        )
    spans = report["spans"]
    if spans is not None:
        micro = spans["micro"]
        parts.append(f"spans P {_fmt(micro['precision'])} R {_fmt(micro['recall'])}")
    parts.append(", ".join(f"{k}={v}" for k, v in report["statuses"].items()))
    return "; ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
