"""``judge-service judge IN.jsonl -o OUT.jsonl``: judge a rollout file offline.

One output line per input line, in input order, written as results complete
(a reorder window keeps the order while up to `--concurrency` rollouts are
judged at once). Re-running skips ids already in OUT, so an interrupted run
resumes where it stopped. ``--retry failed,fallback`` judges again the lines of
OUT with those statuses (e.g. after fixing a provider key) and rewrites OUT
atomically, in input order. Rollouts that share a ``group_id`` and carry a
``reward`` get Dr. GRPO advantages computed over the whole file.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_service.cli.jsonl import iter_rollouts
from judge_service.cli.judge_groups import Groups
from judge_service.cli.results_file import Existing, Line, Writer, appending, rewriting, scan

if TYPE_CHECKING:
    from judge_service.credit import GroupAdvantage
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options, Result, Rollout

STATUSES = ("ok", "fallback", "failed")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "judge", help="judge a JSONL file of rollouts into a JSONL file of results"
    )
    parser.add_argument("input", type=Path, help="rollouts, one JSON object per line")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="results (appended; see --retry)"
    )
    parser.add_argument("--judge", help="rules | anthropic:<model> | openai:<model>")
    parser.add_argument("--lambda", dest="lam", type=float, help="credit strength λ")
    parser.add_argument("--kappa", type=float, help="credit cap κ")
    parser.add_argument("--min-confidence", type=float)
    parser.add_argument("--encoding", choices=["dense", "spans", "base64-f32"], default="dense")
    parser.add_argument(
        "--concurrency", type=int, help="rollouts judged at once (default JUDGE_MAX_CONCURRENCY)"
    )
    parser.add_argument(
        "--retry",
        type=_statuses,
        default=frozenset(),
        metavar="STATUSES",
        help="judge again the lines of OUT with these statuses, e.g. failed,fallback; "
        "OUT is then rewritten atomically (a temporary file renamed over it)",
    )
    parser.add_argument(
        "--no-fallback",
        action="store_true",
        help="a judge failure (e.g. the provider) writes a failed line instead of the rules "
        "judge's credit (options.fallback none), so --retry failed judges it again",
    )
    parser.add_argument(
        "--deadline-s",
        type=_option("deadline_s", float),
        help="per-rollout deadline of the judge in seconds (options.deadline_s)",
    )
    parser.add_argument(
        "--max-turns",
        type=_option("max_turns", int),
        help="model turns per rollout at most (options.max_turns)",
    )
    parser.add_argument(
        "--include-transcript",
        action="store_true",
        help="write each LLM session's transcript into its result line",
    )
    parser.add_argument(
        "--skip-preflight",
        action="store_true",
        help="do not check an LLM judge's provider (models list, one tiny request) first",
    )
    parser.add_argument(
        "--groupwise",
        action="store_true",
        help="judge the lines that share a group_id as one group (options.groupwise): "
        "divergence points, equal-reward scores",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def _option(name: str, kind: Callable[[str], object]) -> Callable[[str], Any]:
    """An argument checked as the request option `name` is (its type and range)."""

    def parse(value: str) -> Any:
        from pydantic import ValidationError

        from judge_service.schemas import Options

        try:
            return getattr(Options.model_validate({name: kind(value)}), name)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(
                f"options.{name}: {exc.errors()[0]['msg']}; got {value!r}"
            ) from exc
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"options.{name}: not a number: {value!r}") from exc

    return parse


def _statuses(value: str) -> frozenset[str]:
    chosen = frozenset(part.strip() for part in value.split(",") if part.strip())
    unknown = sorted(chosen - set(STATUSES))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(STATUSES)}; got {value!r}"
        )
    return chosen


def _group_advantages(path: Path) -> dict[str, GroupAdvantage]:
    from judge_service import credit

    ids, rewards, groups, fields = [], [], [], []
    for number, rollout, _e, _raw in iter_rollouts(path):
        if rollout is not None:
            ids.append(rollout.id)
            rewards.append(rollout.reward)
            groups.append(rollout.group_id)
            fields.append(f"line {number}.reward")
    advantages = credit.group_advantages(rewards, groups, fields)
    return {i: a for i, a in zip(ids, advantages, strict=True) if a is not None}


def run(args: argparse.Namespace) -> int:
    if not args.input.exists():
        print(f"no such file: {args.input}", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from judge_service.config import Settings
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options
    from judge_service.trace.tokenizer import TokenizerCache

    settings = Settings()
    if args.concurrency is not None:
        settings.max_concurrency = max(1, args.concurrency)
    # The operator's own command: any tokenizer the file names (JUDGE_ALLOWED_TOKENIZERS
    # and JUDGE_TOKENIZER_ROOTS guard the server).
    engine = Engine(settings, tokenizers=TokenizerCache.from_settings(settings, trusted=True))
    options = Options.model_validate(
        {
            k: v
            for k, v in {
                "judge": args.judge,
                "lambda": args.lam,
                "kappa": args.kappa,
                "min_confidence": args.min_confidence,
                "credit_encoding": args.encoding,
                "fallback": "none" if args.no_fallback else None,
                "deadline_s": args.deadline_s,
                "max_turns": args.max_turns,
                "include_transcript": args.include_transcript or None,
                "groupwise": args.groupwise or None,
            }.items()
            if v is not None
        }
    )
    failure = None if args.skip_preflight else await check_judge_or_explain(engine, options)
    if failure is not None:
        await engine.aclose()
        print(failure, file=sys.stderr)
        return 1
    existing = scan(args.output)
    advantages = _group_advantages(args.input)
    with args.input.open(encoding="utf-8") as handle:
        total = sum(1 for line in handle if line.strip())
    counts: Counter[str] = Counter()
    open_out = rewriting if args.retry else appending
    try:
        with (
            open_out(args.output, existing) as out,
            tqdm(total=total, disable=args.no_progress, unit="rollout") as bar,
        ):
            groups = Groups(engine, options, args.input) if args.groupwise else None
            await _judge_file(args, engine, options, existing, advantages, groups, out, bar, counts)
    finally:
        await engine.aclose()
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(f"judged {args.input} -> {args.output}: {summary}", file=sys.stderr)
    return 0


async def check_judge_or_explain(engine: Engine, options: Options) -> str | None:
    """Why the run cannot judge at all (an LLM judge's provider is unusable), else None."""
    from judge_service.errors import InputError
    from judge_service.judges.llm.llm_judge import LLMJudge
    from judge_service.judges.llm.preflight import preflight
    from judge_service.resolve import resolve

    try:
        judge = engine.judge_for(resolve(options, engine.settings).judge)
    except InputError:
        return None  # every line fails with that error, as without the pre-flight
    if not isinstance(judge, LLMJudge):
        return None
    checked = await preflight(judge, timeout_s=engine.settings.llm_preflight_timeout_s)
    if not checked.ok:
        return f"pre-flight: {checked.message} (--skip-preflight to judge anyway)"
    print(f"pre-flight: {checked.message}", file=sys.stderr)
    return None


async def _judge_file(
    args: argparse.Namespace,
    engine: Engine,
    options: Options,
    existing: Existing,
    advantages: dict[str, GroupAdvantage],
    groups: Groups | None,
    out: Writer,
    bar: Any,
    counts: Counter[str],
) -> None:
    """Every input line, in order: a line kept from OUT, or a result judged now."""
    retry: frozenset[str] = args.retry
    earlier = existing.by_id()
    window: deque[Line | asyncio.Task[Result]] = deque()
    depth = 2 * engine.settings.max_concurrency

    def emit(entry: Line | Result) -> None:
        if isinstance(entry, Line):
            out.copy(entry)
            counts["kept"] += 1
        else:
            out.write(entry.model_dump_json(exclude_none=True))
            counts[entry.status] += 1
        bar.update(1)

    async def drain(keep: int) -> None:
        while window and (len(window) > keep or _ready(window[0])):
            entry = window.popleft()
            emit(entry if isinstance(entry, Line) else await entry)

    for number, rollout, error, raw in iter_rollouts(args.input):
        rollout_id = rollout.id if rollout else _raw_id(raw, number)
        found = earlier.get(rollout_id)
        before = found.popleft() if found else None
        if before is not None and not retry:
            counts["skipped"] += 1  # appending: the line is in OUT already
            bar.update(1)
            continue
        if before is not None and before.status not in retry:
            window.append(before)
        elif groups is not None and rollout is not None and groups.holds(number, rollout):
            window.append(asyncio.create_task(groups.result(number, rollout)))
        else:
            coroutine = _judge_line(engine, rollout, error, options, advantages, number, rollout_id)
            window.append(asyncio.create_task(coroutine))
        await drain(depth - 1)
    await drain(0)
    if retry:  # lines of OUT for rollouts no longer in IN: kept, after the others
        for leftover in sorted((x for q in earlier.values() for x in q), key=_offset):
            emit(leftover)


async def _judge_line(
    engine: Engine,
    rollout: Rollout | None,
    error: str | None,
    options: Options,
    advantages: dict[str, GroupAdvantage],
    number: int,
    rollout_id: str,
) -> Result:
    from judge_service.errors import InputError
    from judge_service.schemas import Result

    if rollout is None:
        return Result(id=rollout_id, status="failed", error=error or f"line {number}: unreadable")
    advantage = advantages.get(rollout.id)
    if advantage is not None:
        try:
            advantage.check()  # an overflowing group: fail before spending a judge call
        except InputError as exc:
            return Result(id=rollout.id, status="failed", error=f"{exc.field}: {exc.message}")
    result, _ = await engine.judge_or_fail(rollout, options, advantage, field=f"line {number}")
    return result


def _ready(entry: Line | asyncio.Task[Result]) -> bool:
    return isinstance(entry, Line) or entry.done()


def _offset(line: Line) -> int:
    return line.offset


def _raw_id(raw: Any, number: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
        return str(raw["id"])
    return f"line-{number}"
