"""Credit on real multi-step rollouts (issue 46): does the first negative credit land on
the first wrong step of solutions written by capable models?

Data (examples/real/, sources and licenses in its README):

- `gsm8k-model-solutions.jsonl`: GSM8K test problems with four GPT-3 solutions each and
  their correctness; `gold/gold.jsonl`: the first wrong line of 80 wrong solutions of
  mixed groups, read twice (77 agreed: those are scored; the 3 disagreements are left out).

What runs is the service's own path: the groups are written as rollouts (token ids of
examples/tokenizer, reward 1/0, the problem and its reference answer) and judged by
`/v1/judge/group`'s function (`group.judge.judge_group`, rules judge), with and without
each problem's reference solution on its rollouts; the figures are read off the results
and the group blocks:

- pointed: share of gold wrong rollouts given a divergence point; precision: share of
  points on the gold line; exact: share whose first negative credit is on the gold line;
- F1 over all rollouts of the gold groups, ProcessBench-style: a wrong rollout counts when
  its first negative credit is on its gold line, a correct one when it has no negative
  credit;
- equal-reward groups (all four right or all four wrong, the first `--equal` of the
  file): share given non-zero relative scores, with a Wilson 95% interval.

    .venv/bin/python bench/bench_real_credit.py [--equal 24] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "examples" / "real"
TOKENIZER = str(ROOT / "examples" / "tokenizer")
MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
_ANNOTATION = re.compile(r"<<[^<>]*>>")


def reference_of(ground_truth: str) -> tuple[str, str]:
    """GSM8K's reference solution without its answer line, and its answer."""
    lines = ground_truth.strip().split("\n")
    return "\n".join(lines[:-1]).strip(), lines[-1].removeprefix("A:").strip()


def rollouts(
    problems: list[dict[str, Any]], indices: list[int], reference: bool
) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    out = []
    for index in indices:
        problem = problems[index]
        solution_ref, answer = reference_of(problem["ground_truth"])
        for model in MODELS:
            solution = problem[model]["solution"]
            row: dict[str, Any] = {
                "id": f"{index}-{model}",
                "group_id": str(index),
                "problem": problem["question"],
                "response_token_ids": tok.encode(solution, add_special_tokens=False),
                "reward": 1.0 if problem[model]["is_correct"] else 0.0,
                "reference_answer": answer,
            }
            if reference:
                row["reference_solution"] = _ANNOTATION.sub("", solution_ref)
            out.append(row)
    return out


def judge(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, int]]:
    """Each group judged by `/v1/judge/group`'s own function (rules judge): the results by
    rollout id, and each pointed rollout's point (its start token) from the group blocks."""
    from judge_service.config import Settings
    from judge_service.group.judge import judge_group
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options, Rollout
    from judge_service.trace.tokenizer import TokenizerCache

    settings = Settings(default_tokenizer=TOKENIZER)
    engine = Engine(settings, tokenizers=TokenizerCache.from_settings(settings, trusted=True))
    groups: dict[str, list[Rollout]] = {}
    for row in rows:
        groups.setdefault(row["group_id"], []).append(Rollout.model_validate(row))

    async def run() -> tuple[dict[str, Any], dict[str, int]]:
        results: dict[str, Any] = {}
        points: dict[str, int] = {}
        for members in groups.values():
            response = await judge_group(engine, members, Options(credit_encoding="spans"))
            for rollout, result in zip(members, response.results, strict=True):
                results[rollout.id] = result.model_dump(warnings=False)
                results[rollout.id]["group_scores"] = response.group.scores
            for point in response.group.divergence:
                points[members[point.rollout].id] = point.start
        await engine.aclose()
        return results, points

    return asyncio.run(run())


NEGATIVE = {"invalid", "unsupported", "unproductive_repetition", "hallucinated_tool_use"}


def char_offsets(ids: list[int]) -> tuple[str, list[int]]:
    """The decoded text and each token's first char, as the service decodes them."""
    from judge_service.trace.tokenizer import TokenizerCache

    trace = TokenizerCache().get(TOKENIZER).decode(ids)
    return trace.text, [trace.char_range(t, t + 1)[0] for t in range(trace.num_tokens)]


def first_negative_line(result: dict[str, Any], text: str, offsets: list[int]) -> int | None:
    negative = [s for s in result.get("spans") or [] if s["label"] in NEGATIVE]
    if not negative:
        return None
    first = min(negative, key=lambda s: s["start"])
    return text.count("\n", 0, offsets[first["start"]])


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def score(
    rows: list[dict[str, Any]], judged: tuple[dict[str, Any], dict[str, int]], gold: dict[str, int]
) -> dict[str, Any]:
    results, points = judged
    pointed = on_gold = exact = labelled = correct = clean = 0
    for row in rows:
        text, offsets = char_offsets(row["response_token_ids"])
        first = first_negative_line(results[row["id"]], text, offsets)
        if row["reward"] > 0:
            correct += 1
            clean += first is None
            continue
        if row["id"] not in gold:
            continue
        labelled += 1
        exact += first == gold[row["id"]]
        if row["id"] in points:
            pointed += 1
            on_gold += text.count("\n", 0, offsets[points[row["id"]]]) == gold[row["id"]]
    acc_error, acc_correct = exact / labelled, clean / correct
    f1 = 2 * acc_error * acc_correct / (acc_error + acc_correct) if acc_error + acc_correct else 0
    return {
        "labelled_wrong": labelled,
        "pointed": pointed,
        "pointed_share": round(pointed / labelled, 3),
        "point_precision": round(on_gold / pointed, 3) if pointed else None,
        "points_on_gold_line": on_gold,
        "exact_first_negative": exact,
        "acc_error": round(acc_error, 3),
        "correct_rollouts": correct,
        "correct_clean": clean,
        "acc_correct": round(acc_correct, 3),
        "f1": round(f1, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--equal", type=int, default=24, help="equal-reward groups to judge")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    problems = [json.loads(line) for line in (REAL / "gsm8k-model-solutions.jsonl").open()]
    gold_rows = [json.loads(line) for line in (REAL / "gold" / "gold.jsonl").open()]
    gold = {
        f"{g['problem_index']}-{g['model']}": g["first_wrong_line"]
        for g in gold_rows
        if g["first_wrong_line"] is not None
    }
    indices = sorted({g["problem_index"] for g in gold_rows})
    equal = [i for i, p in enumerate(problems) if len({p[m]["is_correct"] for m in MODELS}) == 1]
    equal = equal[: args.equal]
    report: dict[str, Any] = {"groups": len(indices), "gold_scored": len(gold)}
    for name, with_reference in (("siblings", False), ("siblings+reference", True)):
        rows = rollouts(problems, indices, with_reference)
        report[name] = score(rows, judge(rows), gold)
    results, _ = judge(rollouts(problems, equal, False))
    scored = {
        r_id.split("-")[0]
        for r_id, r in results.items()
        if any(abs(s) > 0 for s in r["group_scores"] or [])
    }
    low, high = wilson(len(scored), len(equal))
    report["equal_reward"] = {
        "groups": len(equal),
        "with_nonzero_scores": len(scored),
        "share": round(len(scored) / len(equal), 3) if equal else None,
        "wilson95": [round(low, 3), round(high, 3)],
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
