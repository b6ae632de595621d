"""Judge the same rollouts with two checkouts and compare every result field but the
latencies: the check behind "no behaviour change" for performance work (issue 16).

    git worktree add /tmp/old <commit>
    .venv/bin/python bench/same_results.py --before /tmp/old [--work DIR]

Inputs: the bundled examples, the sampled policy rollouts, and generated traces for a
byte-level BPE and a Metaspace tokenizer: lines of claims (some false, some built on a
false value, some corrected), repeats, LaTeX, percent, fake ⟦n⟧ markers and fences,
non-ASCII words, and 16k-token prose and arithmetic. Each file is judged by
``judge-service judge`` from each checkout (its own package first on the path), in
``dense`` and in ``base64-f32`` with other λ and κ. Exits 1 when any result differs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
from bench_e2e import UNICODE, WORDS, arithmetic, prose

from tests.harness.tokenizers import build_metaspace_bpe

ROOT = Path(__file__).resolve().parents[1]


def mixed(rng: random.Random, lines: int) -> str:
    out: list[str] = []
    values: list[int] = []
    for _ in range(lines):
        r, a, b = rng.random(), rng.randint(2, 40), rng.randint(2, 40)
        if r < 0.25:
            value = a * b + rng.choice([0, 0, 0, 1, -10])
            out.append(f"{a} × {b} = {value}.")
            values.append(value)
        elif r < 0.35 and values:
            v = rng.choice(values)
            out.append(f"So {v} + {a} = {v + a + rng.choice([0, 0, 1])}, then {b} - 1 = {b - 1}.")
        elif r < 0.45 and out:
            out.append(rng.choice(out))
        elif r < 0.5:
            out.append(f"Wait, that is wrong: {a} × {b} = {a * b} actually.")
        elif r < 0.55:
            out.append(
                f"$\\frac{{{a}}}{{{b}}} = {a / b:.3f}$ and \\sqrt{{{a * a}}} = {a}; "
                f"25% of {4 * a} = {a}"
            )
        elif r < 0.6:
            out.append(f"**Check:** {b} × {a} = {a * b}** — ✓ ⟦12⟧ fake marker <<<<")
        else:
            pool = [*WORDS, *UNICODE, "İstanbul", "Σ'Α", "x=1"]
            words = " ".join(rng.choice(pool) for _ in range(rng.randint(3, 16)))
            out.append(words + rng.choice([".", "!", "?", ""]))
    return "\n".join(out) + f"\nThe answer is \\boxed{{{rng.randint(1, 500)}}}."


def inputs(work: Path) -> list[Path]:
    from transformers import AutoTokenizer

    files = [ROOT / "examples" / "rollouts.jsonl", ROOT / "examples" / "sampled" / "rollouts.jsonl"]
    tokenizers = {
        "bpe": ROOT / "examples" / "tokenizer",
        "sp": build_metaspace_bpe(work / "sp"),
    }
    for name, directory in tokenizers.items():
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
        rng = random.Random(7)
        rows: list[dict[str, Any]] = []
        for k in range(40):
            ids = tokenizer.encode(mixed(rng, rng.randint(3, 120)), add_special_tokens=False)
            rows.append(
                {
                    "id": f"{name}-mixed-{k}",
                    "group_id": f"g{k % 5}",
                    "problem": "p",
                    "reward": float(k % 2),
                    "reference_answer": str(rng.randint(1, 500)),
                    "tokenizer": str(directory),
                    "response_token_ids": ids,
                }
            )
        for k, text_of in enumerate((prose, arithmetic)):
            text = text_of(random.Random(k), 60_000)
            ids = tokenizer.encode(text, add_special_tokens=False)[:16_384]
            rows.append(
                {
                    "id": f"{name}-big-{k}",
                    "problem": "p",
                    "tokenizer": str(directory),
                    "response_token_ids": ids,
                }
            )
        path = work / f"generated-{name}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        files.append(path)
    return files


RUNS = {"dense": [], "b64": ["--encoding", "base64-f32", "--lambda", "0.5", "--kappa", "0.1"]}


def judge_all(tree: Path, files: list[Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for path in files:
        for run, extra in RUNS.items():
            target = out / f"{path.stem}-{path.parent.name}-{run}.jsonl"
            target.unlink(missing_ok=True)
            command = [sys.executable, "-m", "judge_service.cli.main", "judge", str(path)]
            command += ["-o", str(target), "--no-progress", "--skip-preflight", *extra]
            # cwd: the examples name their tokenizer relative to the checkout.
            subprocess.run(command, cwd=tree, env=env, check=True, capture_output=True)


def clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if "latency" not in k and k != "queue_ms"}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the other checkout")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="same-results-"))
    files = inputs(work)
    judge_all(Path(args.before).resolve(), files, work / "before")
    judge_all(ROOT, files, work / "after")
    compared = differ = spans = 0
    for before in sorted((work / "before").glob("*.jsonl")):
        after = work / "after" / before.name
        rows = [
            sorted((json.loads(line) for line in p.open(encoding="utf-8")), key=lambda r: r["id"])
            for p in (before, after)
        ]
        if len(rows[0]) != len(rows[1]):
            print(f"{before.name}: {len(rows[0])} results before, {len(rows[1])} after")
            differ += 1
        for old, new in zip(*rows, strict=False):
            compared += 1
            spans += len(new.get("spans", []))
            if clean(old) != clean(new):
                differ += 1
                fields = sorted(k for k in {*old, *new} if clean(old.get(k)) != clean(new.get(k)))
                print(f"{before.name} {old['id']}: {', '.join(fields)} differ")
    print(f"{compared} results compared ({spans} spans): {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
