"""Credit of CSCR / CoRT and gap-filled span judges as span results, for ``audit --compare``.

    python -m judge_service.devtools.credit_runs ROLLOUTS --model M -o DIR \\
        [--judged rules=RULES.jsonl --judged value=VALUE.jsonl] \\
        [--judged-credit groupwise=GROUPWISE.jsonl]

The probe reads credit as spans with a score. So that every source is measured on
the same kind of unit:

* CSCR and CoRT (per-token weights w that multiply the advantage A): the trace's
  line segments (the value judge's segmentation), each scored A·(mean w − 1) over
  its tokens, the credit it gets beyond the uniform A. A rollout of a group whose
  rewards are all equal has A = 0 and so no credit from these methods.
* a span judge's results (``--judged NAME=FILE``): its spans, and every line
  segment no span touches as a span of score 0 (``unjudged``): the credit a
  trainer gives those tokens is the plain advantage, none of the judge's.
* a result file read for its per-token credit (``--judged-credit NAME=FILE``): the
  same units as ``--judged``, each scored by the mean over its tokens of the result's
  ``credit`` array (any wire encoding, decoded by the client's ``credit_array``; the
  span's own score kept as ``label_score``). Groupwise judging gives an equal-reward
  group's rollouts a term g·λ·s_i on every token and no span for it, so its spans'
  label scores miss that credit; the array holds it, after λ and the κ cap, as a
  trainer receives it. The scores are then in credit units (λ times a label score
  where the cap does not bind), not label points: compare such runs with each other.

Writes ``DIR/cscr.jsonl``, ``DIR/cort.jsonl`` and ``DIR/NAME.jsonl`` per judged
file (result lines: id, status, spans). CSCR's lines also carry ``diagnostics``
(the API's ``reweight_diagnostics``: the correct-vs-incorrect contrast of its two
privileged shifts), and the run prints the share of sign reversals over all compared
tokens of all rollouts. CoRT skips a rollout with no rubric (no criteria to condition
on). Needs the ``probe`` extra.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from judge_service.client.arrays import credit_array
from judge_service.config import Settings
from judge_service.methods.models import MODELS
from judge_service.methods.reweight import METHODS, compute_shifts, parse_spec, signal_of
from judge_service.methods.value import segments
from judge_service.methods.weights import bounded_weights
from judge_service.probe.files import read_jsonl, write_jsonl
from judge_service.schemas import Rollout
from judge_service.trace.decode import Trace
from judge_service.trace.tokenizer import TokenizerCache


def advantages(rollouts: list[dict[str, Any]]) -> dict[str, float]:
    """Dr. GRPO advantages: reward minus the group's mean reward (0 without a group)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        if r.get("group_id") is not None and r.get("reward") is not None:
            rewards[str(r["group_id"])].append(float(r["reward"]))
    out = {}
    for r in rollouts:
        group = rewards.get(str(r.get("group_id")))
        reward = r.get("reward")
        if group and reward is not None:
            out[str(r["id"])] = float(reward) - float(np.mean(group))
        else:
            out[str(r["id"])] = 0.0
    return out


def weight_spans(
    trace: Trace, weights: np.ndarray[Any, Any], advantage: float, max_spans: int
) -> list[dict[str, Any]]:
    spans = []
    for a, b in segments(trace, max_spans):
        score = advantage * (float(np.mean(weights[a:b])) - 1.0)
        spans.append({"start": a, "end": b, "label": "reweight", "score": round(score, 8)})
    return spans


def fill_gaps(trace: Trace, spans: list[dict[str, Any]], max_spans: int) -> list[dict[str, Any]]:
    """The judge's spans plus a score-0 span for each line segment none of them touches."""
    kept = [s for s in spans if 0 <= int(s["start"]) < int(s["end"]) <= trace.num_tokens]
    out = list(kept)
    for a, b in segments(trace, max_spans):
        if not any(int(s["start"]) < b and int(s["end"]) > a for s in kept):
            out.append({"start": a, "end": b, "label": "unjudged", "score": 0.0})
    return sorted(out, key=lambda s: (int(s["start"]), int(s["end"])))


def credit_spans(trace: Trace, result: dict[str, Any], max_spans: int) -> list[dict[str, Any]]:
    """`fill_gaps`' units of a result, each scored by its mean per-token credit."""
    credit = credit_array(result, dtype=np.float64)
    if credit.shape[0] != trace.num_tokens:
        raise ValueError(
            f"result {result.get('id')!r}: credit has {credit.shape[0]} values for a trace "
            f"of {trace.num_tokens} tokens"
        )
    out = []
    for span in fill_gaps(trace, result.get("spans") or [], max_spans):
        start, end = int(span["start"]), int(span["end"])
        mean = round(float(credit[start:end].mean()), 8)
        out.append({**span, "label_score": float(span["score"]), "score": mean})
    return out


def judged_lines(
    path: Path, traces: dict[str, Trace], max_spans: int, from_credit: bool
) -> list[dict[str, Any]]:
    """One line per rollout the result file judged: its units, scored by label or credit."""
    results = {str(r.get("id")): r for r in read_jsonl(path)}
    lines = []
    for rid, trace in traces.items():
        result = results.get(rid)
        if result is None:
            continue
        if from_credit and result.get("status") != "failed":
            spans = credit_spans(trace, result, max_spans)
        else:
            spans = fill_gaps(trace, result.get("spans") or [], max_spans)
        lines.append({"id": rid, "status": result.get("status"), "spans": spans})
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("--model", required=True, help="scorer model (hub id, dir or GGUF)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="output directory")
    parser.add_argument("--judged", action="append", default=[], metavar="NAME=FILE")
    parser.add_argument(
        "--judged-credit",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="like --judged, each unit scored by the result's mean per-token credit",
    )
    parser.add_argument("--methods", default=",".join(METHODS), help="cscr,cort")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    settings = Settings(allowed_scorer_models=[args.model])
    rollouts = list(read_jsonl(args.rollouts))
    tokenizers = TokenizerCache.from_settings(settings, trusted=True)
    traces = {
        str(r["id"]): tokenizers.get(str(r["tokenizer"])).decode(r["response_token_ids"])
        for r in rollouts
    }
    args.out.mkdir(parents=True, exist_ok=True)
    judged = [(item, False) for item in args.judged]
    judged += [(item, True) for item in args.judged_credit]
    for item, from_credit in judged:
        name, _, path = item.partition("=")
        lines = judged_lines(Path(path), traces, settings.max_spans, from_credit)
        print(f"{name}: {write_jsonl(args.out / f'{name}.jsonl', lines)} results", file=sys.stderr)
    advantage = advantages(rollouts)
    model = MODELS.get(args.model, settings) if args.methods else None
    for method in [m for m in args.methods.split(",") if m]:
        spec = parse_spec(f"{method}:{args.model}", None, settings)
        lines = []
        compared = reversed_ = 0.0
        for raw in rollouts:
            rollout = Rollout.model_validate(raw)
            rid = str(rollout.id)
            if method == "cort" and not (rollout.rubric or "").strip():
                continue
            policy = tokenizers.get(str(raw["tokenizer"]))
            assert model is not None
            shifts = compute_shifts(model, spec, rollout, traces[rid], policy, settings, "")
            signal, found = signal_of(spec, shifts, rollout.reward, None)
            weights = bounded_weights(signal, None, **spec.knobs())
            spans = weight_spans(traces[rid], weights, advantage[rid], settings.max_spans)
            line: dict[str, Any] = {"id": rid, "status": "ok", "spans": spans}
            if found is not None:
                line["diagnostics"] = found.model_dump()
                compared += found.compared_tokens
                reversed_ += (found.sign_reversal_share or 0.0) * found.compared_tokens
            lines.append(line)
        written = write_jsonl(args.out / f"{method}.jsonl", lines)
        print(f"{method}: {written} of {len(rollouts)} rollouts", file=sys.stderr)
        if method == "cscr":
            share = f"{reversed_ / compared:.3f}" if compared else "n/a"
            print(
                f"cscr: sign reversals of the correct / incorrect shifts: {share} of "
                f"{int(compared)} compared tokens",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
