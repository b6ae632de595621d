"""Per-problem rubrics: the file, deterministic 0/1 criterion scores, POW3R group bodies.

A rubric file is JSON keyed by problem id (`sampling.PROBLEMS`); each problem has
a list of criteria::

    {"apples": {"criteria": [
        {"name": "subtracts", "weight": 2, "text": "Subtracts the 5 given away from the 12.",
         "check": "regex", "pattern": "12\\\\s*-\\\\s*5"},
        {"name": "answer", "weight": 3, "text": "Gives 7 as the final answer.", "check": "answer"},
        {"name": "boxed", "weight": 1, "text": "Puts the final answer in \\\\boxed{}.",
         "check": "boxed"}]}}

``text`` is what the policy reads (`sampling.criteria_text` numbers them into the
prompt); ``check`` is how a sampled response is scored on it, so the scores need no
judge and are the same on every run:

* ``answer``: 1 when the rollout's reward is positive (the equivalence checker's
  verdict on the final answer), else 0;
* ``boxed``: 1 when the response has a non-empty last ``\\boxed{}``;
* ``regex``: 1 when ``pattern`` occurs in the response text (``re.search``).

The groups of a rollouts file become request bodies of ``POST /v1/rubric/weights``
(one JSON line per group, `RubricWeightsRequest`), so POW3R runs on them::

    python -m judge_service.probe.rubric_scores examples/sampled/rollouts.jsonl \\
        --rubric examples/sampled/rubrics.json -o examples/sampled/pow3r_groups.jsonl
    judge-service rubric-weights examples/sampled/pow3r_groups.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_service.trace.boxed import last_boxed

CHECKS = ("answer", "boxed", "regex")


@dataclass(frozen=True)
class RubricCriterion:
    name: str
    weight: float
    text: str
    check: str
    pattern: str | None = None
    category: str | None = None


def load_rubrics(path: Path) -> dict[str, list[RubricCriterion]]:
    """The rubric file, checked: ValueError naming the problem and criterion at fault."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON object keyed by problem id")
    out: dict[str, list[RubricCriterion]] = {}
    for problem, entry in data.items():
        criteria = entry.get("criteria") if isinstance(entry, dict) else None
        if not isinstance(criteria, list) or not criteria:
            raise ValueError(f"{path}: {problem}: needs a non-empty list 'criteria'")
        out[problem] = [_criterion(f"{path}: {problem}[{k}]", c) for k, c in enumerate(criteria)]
        names = [c.name for c in out[problem]]
        if len(set(names)) != len(names):
            raise ValueError(f"{path}: {problem}: criterion names must be unique")
    return out


def _criterion(where: str, raw: Any) -> RubricCriterion:
    if not isinstance(raw, dict) or not {"name", "weight", "text", "check"} <= raw.keys():
        raise ValueError(f"{where}: needs name, weight, text and check")
    check = raw["check"]
    if check not in CHECKS:
        raise ValueError(f"{where}: check must be one of {', '.join(CHECKS)}")
    pattern = raw.get("pattern")
    if check == "regex":
        if not isinstance(pattern, str):
            raise ValueError(f"{where}: a regex check needs a pattern")
        re.compile(pattern)  # a bad pattern fails on loading, not on the first score
    weight = float(raw["weight"])
    if weight < 0:
        raise ValueError(f"{where}: weight must be >= 0")
    return RubricCriterion(
        str(raw["name"]), weight, str(raw["text"]), check, pattern, raw.get("category")
    )


def criteria_texts(rubrics: Mapping[str, Sequence[RubricCriterion]]) -> dict[str, str]:
    """Per problem, the criteria block the sampler writes into the prompt."""
    from judge_service.probe.sampling import criteria_text

    return {pid: criteria_text([c.text for c in crit]) for pid, crit in rubrics.items()}


def score(criterion: RubricCriterion, text: str, reward: float | None) -> float:
    if criterion.check == "answer":
        return 1.0 if reward is not None and reward > 0 else 0.0
    if criterion.check == "boxed":
        boxed = last_boxed(text)
        return 1.0 if boxed is not None and boxed.content.strip() else 0.0
    return 1.0 if re.search(str(criterion.pattern), text) else 0.0


def group_bodies(
    rollouts: Iterable[Mapping[str, Any]],
    rubrics: Mapping[str, Sequence[RubricCriterion]],
    text_of: Callable[[Mapping[str, Any]], str],
) -> list[dict[str, Any]]:
    """One `RubricWeightsRequest` body per group (in order of first appearance) whose
    problem has a rubric; `text_of` gives a rollout's response text."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for rollout in rollouts:
        gid = rollout.get("group_id")
        if gid is not None and str(gid) in rubrics:
            groups.setdefault(str(gid), []).append(rollout)
    bodies = []
    for gid, members in groups.items():
        crit = rubrics[gid]
        criteria = [
            {"name": c.name, "weight": c.weight, **({"category": c.category} if c.category else {})}
            for c in crit
        ]
        scores = [[score(c, text_of(r), _reward(r)) for c in crit] for r in members]
        bodies.append(
            {"criteria": criteria, "scores": scores, "rollout_ids": [str(r["id"]) for r in members]}
        )
    return bodies


def _reward(rollout: Mapping[str, Any]) -> float | None:
    reward = rollout.get("reward")
    return None if reward is None else float(reward)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="POW3R group bodies from rollouts + rubrics")
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("--rubric", type=Path, required=True, help="the rubric file (JSON)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="group bodies JSONL")
    args = parser.parse_args(argv)
    from judge_service.probe.files import read_jsonl, write_jsonl
    from judge_service.trace.tokenizer import TokenizerCache

    rubrics = load_rubrics(args.rubric)
    tokenizers = TokenizerCache()
    rollouts = list(read_jsonl(args.rollouts))

    def text_of(rollout: Mapping[str, Any]) -> str:
        tokenizer = tokenizers.get(str(rollout["tokenizer"]))
        return tokenizer.decode(list(rollout["response_token_ids"])).text

    bodies = group_bodies(rollouts, rubrics, text_of)
    written = write_jsonl(args.output, bodies)
    met = [sum(row[k] for row in b["scores"]) for b in bodies for k in range(len(b["criteria"]))]
    print(
        f"{written} groups -> {args.output}; {sum(len(b['scores']) for b in bodies)} rollouts, "
        f"{sum(1 for m in met if m)} of {len(met)} criteria met by some rollout",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
