"""``judge-service probe | audit | lockin``: audit a judge with the progress probe.

* ``probe ROLLOUTS RESULTS --model M -o PROBE.jsonl``: probe values at every
  judged span's boundaries (needs the ``probe`` extra: torch).
* ``audit PROBE.jsonl -o REPORT.html``: the statistics, as an HTML report and a
  JSON summary (numpy only). Exit 1 when the sanity gate fails (report written).
* ``lockin ROLLOUTS --model M -o LOCKIN.jsonl``: where traces lock in their answer.

``--model`` is a hub id, a local directory or a GGUF file. torch and the probe
modules are imported inside the commands, so the CLI runs without the extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    probe = subparsers.add_parser(
        "probe", help="probe an LM at judged spans' boundaries (the judge audit's input)"
    )
    probe.add_argument("rollouts", type=Path, help="rollouts JSONL")
    probe.add_argument("results", type=Path, help="judge results JSONL (joined on id)")
    _model_options(probe)
    probe.add_argument("-o", "--output", type=Path, required=True, help="probe records JSONL")
    probe.add_argument(
        "--no-second-wording", action="store_true", help="skip the robustness wording (faster)"
    )
    probe.set_defaults(func=run_probe)

    audit = subparsers.add_parser("audit", help="audit a judge from probe records: HTML + JSON")
    audit.add_argument("probe", type=Path, nargs="?", help="probe records JSONL (from `probe`)")
    audit.add_argument(
        "--compare",
        nargs="+",
        metavar="RUN",
        default=[],
        help="compare credit sources: probe JSONL files, each NAME=PATH or PATH (name: stem)",
    )
    audit.add_argument(
        "--lockin-threshold",
        type=float,
        default=0.9,
        help="--compare: probe probability at which a trace counts as locked in",
    )
    audit.add_argument(
        "--lockin-answer",
        choices=["reference", "final"],
        default="reference",
        help="--compare: the answer that locks in: the reference (default) or the trace's own",
    )
    audit.add_argument("-o", "--output", type=Path, required=True, help="HTML report")
    audit.add_argument("--json", type=Path, help="JSON summary (default: the report's .json)")
    audit.add_argument(
        "--lockin",
        type=Path,
        action="append",
        default=[],
        help="lock-in JSONL to plot (repeatable)",
    )
    audit.add_argument("--auroc-threshold", type=float, default=0.9)
    audit.add_argument("--permutations", type=int, default=10_000)
    audit.add_argument("--bootstrap", type=int, default=2000)
    audit.add_argument("--seed", type=int, default=0)
    audit.set_defaults(func=run_audit)

    lockin = subparsers.add_parser("lockin", help="find where traces lock in their answer")
    lockin.add_argument("rollouts", type=Path, help="rollouts JSONL")
    _model_options(lockin)
    lockin.add_argument("-o", "--output", type=Path, required=True, help="lock-in records JSONL")
    lockin.add_argument("--every", type=int, default=4096, help="probe every N tokens")
    lockin.add_argument("--threshold", type=float, default=0.9, help="answer probability")
    lockin.add_argument(
        "--answer",
        choices=["reference", "final"],
        default="reference",
        help="which answer locks in: the reference (the right answer; default) or the trace's own",
    )
    lockin.set_defaults(func=run_lockin)


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="hub id, local directory or GGUF file")
    parser.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if present)")
    parser.add_argument("--dtype", help="float32, bfloat16 (default: bf16 on GPU, fp32 on CPU)")
    parser.add_argument(
        "--ending-family",
        choices=["think", "plain"],
        help="forced ending (default: from the model)",
    )
    parser.add_argument(
        "--tokenizer", help="policy tokenizer for rollouts that name none (default: the model's)"
    )
    parser.add_argument("--chunk-size", type=int, default=1024, help="tokens per cache extension")
    parser.add_argument(
        "--threads", type=int, help="CPU threads for torch (1 is fastest on a busy shared CPU)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _load(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from judge_service.probe.alignment import Aligner
    from judge_service.probe.endings import ENDING_FAMILIES, resolve_family
    from judge_service.probe.loading import load_scorer

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    scorer = load_scorer(args.model, device=args.device, dtype=args.dtype)
    endings = (
        ENDING_FAMILIES[args.ending_family]
        if args.ending_family
        else resolve_family(scorer.hf_tokenizer, scorer.model_type)
    )
    return scorer, Aligner(scorer.hf_tokenizer, args.model), endings


def _missing(*paths: Path) -> bool:
    for path in paths:
        if not path.exists():
            print(f"no such file: {path}", file=sys.stderr)
            return True
    return False


def run_probe(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from judge_service.probe.files import join_on_id, read_jsonl, write_jsonl
    from judge_service.probe.progress import ProbeSettings, group_wrong_answers, probe_rollout

    if _missing(args.rollouts, args.results):
        return 2
    pairs, unmatched = join_on_id(read_jsonl(args.rollouts), read_jsonl(args.results))
    scorer, aligner, endings = _load(args)
    settings = ProbeSettings(endings, not args.no_second_wording, args.chunk_size)
    if args.tokenizer:
        pairs = [
            ({**r, "tokenizer": r.get("tokenizer") or args.tokenizer}, res) for r, res in pairs
        ]
    # A correct trace's wrong answer is a wrong answer another sample of its group wrote.
    group_wrong = group_wrong_answers([r for r, _ in pairs], aligner)
    skipped: dict[str, str] = {}

    def records() -> Any:
        for rollout, result in tqdm(pairs, disable=args.no_progress, unit="rollout"):
            if result.get("status") == "failed":
                skipped[str(rollout.get("id"))] = "judge failed"
                continue
            group = rollout.get("group_id")
            wrong = group_wrong.get(str(group)) if group is not None else None
            try:
                yield probe_rollout(scorer, aligner, rollout, result, settings, wrong)
            except Exception as exc:  # one bad rollout (no reference, bad ids) never stops a run
                skipped[str(rollout.get("id"))] = f"{type(exc).__name__}: {exc}"

    written = write_jsonl(args.output, records())
    print(
        f"probed {written} rollouts -> {args.output} (model {args.model}, endings "
        f"{endings.family}); skipped {len(skipped)}; ids in one file only: {len(unmatched)}",
        file=sys.stderr,
    )
    for rollout_id, why in list(skipped.items())[:20]:
        print(f"  skipped {rollout_id}: {why}", file=sys.stderr)
    return 0 if written else 1


def run_audit(args: argparse.Namespace) -> int:
    from judge_service.probe.audit import AuditSettings, run_audit
    from judge_service.probe.files import read_jsonl
    from judge_service.probe.lockin import summarize
    from judge_service.probe.report import render_report

    if args.compare:
        return run_compare(args)
    if args.probe is None:
        print("audit needs a probe JSONL, or --compare RUN ...", file=sys.stderr)
        return 2
    if _missing(args.probe, *args.lockin):
        return 2
    records = list(read_jsonl(args.probe))
    if not records:
        print(f"no probe records in {args.probe}", file=sys.stderr)
        return 2
    settings = AuditSettings(args.auroc_threshold, args.permutations, args.bootstrap, args.seed)
    summary = run_audit(records, settings)
    runs: dict[str, dict[str, Any]] = {}
    for path in args.lockin:
        lock_records = list(read_jsonl(path))
        runs[path.stem] = {"summary": summarize(lock_records), "records": lock_records}
    if runs:
        summary["lockin"] = {name: run["summary"] for name, run in runs.items()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render_report(summary, runs or None), encoding="utf-8")
    json_path = args.json or args.output.with_suffix(".json")
    json_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    print(_headline(summary), file=sys.stderr)
    print(f"report: {args.output}  summary: {json_path}", file=sys.stderr)
    return 0 if summary["valid"] else 1


def _named_runs(args: argparse.Namespace) -> dict[str, Path]:
    runs: dict[str, Path] = {}
    items = ([str(args.probe)] if args.probe else []) + list(args.compare)
    for item in items:
        name, sep, path = item.partition("=")
        where = Path(path) if sep else Path(item)
        runs[name if sep else where.stem] = where
    return runs


def run_compare(args: argparse.Namespace) -> int:
    from judge_service.probe.audit import AuditSettings
    from judge_service.probe.compare import compare_runs
    from judge_service.probe.compare_report import render_compare
    from judge_service.probe.files import read_jsonl

    paths = _named_runs(args)
    if _missing(*paths.values()):
        return 2
    settings = AuditSettings(args.auroc_threshold, args.permutations, args.bootstrap, args.seed)
    runs = {name: list(read_jsonl(path)) for name, path in paths.items()}
    summary = compare_runs(runs, settings, args.lockin_threshold, args.lockin_answer)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render_compare(summary), encoding="utf-8")
    json_path = args.json or args.output.with_suffix(".json")
    json_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    for name, run in summary["runs"].items():
        slope, clean = run["slope"], run["slope_clean"]
        equal = run["equal_reward_credited"]
        print(
            f"{name}: slope {slope['slope']} {slope['ci']} p {slope['p_value']} (Holm "
            f"{slope['p_holm']}); clean {clean['slope']} {clean['ci']} p {clean['p_value']} "
            f"(Holm {clean['p_holm']}); after lock-in "
            f"{run['share_after_lockin']}; on final answer {run['share_on_final_answer']}; "
            f"equal-reward groups credited {equal['n_credited']}/{equal['n_groups']} "
            f"(Wilson {equal['ci']})",
            file=sys.stderr,
        )
    print(f"report: {args.output}  summary: {json_path}", file=sys.stderr)
    return 0


def _headline(summary: dict[str, Any]) -> str:
    gate = summary["gate"]
    ref = summary["effects"]["reference"]
    verdict = "VALID" if summary["valid"] else f"INVALID ({summary['invalid_reason']})"
    clean = summary["effects_clean"]["reference"]
    return (
        f"audit {verdict}: gate AUROC {gate['auroc']} {gate.get('ci')} at cut {gate.get('cut')} "
        f"(n = {gate.get('n')}, {gate.get('n_excluded', 0)} left out; end of trace: "
        f"{gate.get('auroc_end')}; {gate['n_correct']} correct, "
        f"{gate['n_wrong']} wrong); clean slope {clean['slope']} {clean['ci']} p "
        f"{clean['p_value']} (Holm {clean.get('p_holm')}); slope {ref['slope']} per score "
        f"point, 95% CI {ref['ci']}, p {ref['p_value']} (Holm {ref.get('p_holm')}) over "
        f"{ref['n_spans']} spans in {ref['n_traces']} traces"
    )


def run_lockin(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from judge_service.probe.files import read_jsonl, write_jsonl
    from judge_service.probe.lockin import lockin_rollout, summarize

    if _missing(args.rollouts):
        return 2
    rollouts = list(read_jsonl(args.rollouts))
    scorer, aligner, endings = _load(args)
    kept: list[dict[str, Any]] = []

    def records() -> Any:
        for rollout in tqdm(rollouts, disable=args.no_progress, unit="rollout"):
            if args.tokenizer and not rollout.get("tokenizer"):
                rollout = {**rollout, "tokenizer": args.tokenizer}
            try:
                record = lockin_rollout(
                    scorer,
                    aligner,
                    rollout,
                    endings.default,
                    every=args.every,
                    threshold=args.threshold,
                    answer=args.answer,
                    chunk_size=args.chunk_size,
                )
            except Exception as exc:  # a bad rollout is recorded, never fatal
                record = {"id": rollout.get("id"), "status": "error", "error": str(exc)}
            kept.append(record)
            yield record

    write_jsonl(args.output, records())
    summary = summarize(kept)
    summary_path = args.output.with_suffix(".summary.json")
    summary_path.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(f"lock-in -> {args.output}: {json.dumps(summary)}", file=sys.stderr)
    return 0
