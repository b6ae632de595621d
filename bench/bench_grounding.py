"""Line grounding (issue 25): the attacks before and after, and validation's cost.

    git worktree add /tmp/old25 321d4f4   # or `git archive`, with the compiled modules
    .venv/bin/python bench/bench_grounding.py --before /tmp/old25 [--repeats 15]

1. The attacks of `tests.harness.attacks_lines`, each span list validated by
   the code in ``--before`` (a checkout of an earlier commit, run as a subprocess with
   its own ``judge_service``) and by this one, side by side: how many hostile spans each
   accepts and the credit (λ = 0.25) those put on false, proven-true and tainted lines.
2. Cost: a fresh `Validator` checking 256 spans over a 32k-token arithmetic trace (the
   fold and the checker's walk over every line included), a hostile mix and 256
   anchored positive spans, the median of ``--repeats`` runs; target under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
from bench_validation import arithmetic_trace, hostile_mix, positive_spans

from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import Trace
from judge_service.trace.tokenizer import TokenizerCache
from judge_service.validate import Validator, Verdict
from tests.harness.attacks_lines import line_attacks, measure
from tests.harness.tokenizers import build_byte_level_bpe

# Run inside the older checkout: validate each case with its own code, print what stays.
_BEFORE = """
import json, sys
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace.tokenizer import TokenizerCache
from judge_service.validate import validate_spans
job = json.load(sys.stdin)
tok = TokenizerCache().get(job["tokenizer"])
out = []
for case in job["cases"]:
    trace = tok.decode(case["ids"])
    report = validate_spans(case["spans"], trace, DEFAULT_LABEL_SCORES)
    out.append([s.as_dict() for s in report.accepted])
json.dump(out, sys.stdout)
"""


def attack_rows(tokenizer: str, before: Path) -> list[str]:
    tok = TokenizerCache().get(tokenizer)

    def trace_for(text: str) -> Trace:
        return tok.decode(tok.hf.encode(text, add_special_tokens=False))

    attacks = line_attacks(trace_for)
    job = {
        "tokenizer": tokenizer,
        "cases": [{"ids": a.trace.token_ids.tolist(), "spans": a.spans} for a in attacks],
    }
    done = subprocess.run(
        [sys.executable, "-c", _BEFORE],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=before,
        env={"PYTHONPATH": str(before), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    old = json.loads(done.stdout)
    rows = [
        "| attack | hostile | before: accepted, credit on false / true / tainted lines "
        "| after: accepted, credit | after: codes |",
        "|---|---:|---|---|---|",
    ]
    totals = {"before": [0.0, 0.0, 0.0], "after": [0.0, 0.0, 0.0]}
    for attack, accepted_before in zip(attacks, old, strict=True):
        verdict = Verdict(None, attack.case.reference, attack.case.reward)
        report = Validator(attack.trace, DEFAULT_LABEL_SCORES, verdict=verdict).check(attack.spans)
        cells = []
        for side, accepted in (("before", accepted_before), ("after", report.accepted)):
            m = measure(attack, accepted)
            parts = (m["false_lines"], m["true_lines"], m["tainted_lines"])
            totals[side] = [t + p for t, p in zip(totals[side], parts, strict=True)]
            cells.append(f"{int(m['accepted'])}: " + " / ".join(f"{p:+.2f}" for p in parts))
        codes = sorted({r.code for r in report.rejected})
        rows.append(
            f"| {attack.name} | {len(attack.hostile)} | {cells[0]} | {cells[1]} | "
            f"{', '.join(codes)} |"
        )
    rows.append(
        "| **sum** | | "
        + " / ".join(f"{t:+.2f}" for t in totals["before"])
        + " | "
        + " / ".join(f"{t:+.2f}" for t in totals["after"])
        + " | |"
    )
    return rows


def cost_rows(tokenizer: str, repeats: int) -> list[str]:
    tok = TokenizerCache().get(tokenizer)
    rows = [
        "| 32k-token arithmetic trace, 256 spans | median | p90 | accepted |",
        "|---|---:|---:|---:|",
    ]
    for name, make in (
        ("hostile mix", lambda t: [s for _, s in hostile_mix(t, 256)]),
        ("anchored positive spans", lambda t: positive_spans(t, 256)),
    ):
        times: list[float] = []
        accepted = 0
        for k in range(repeats):
            trace = arithmetic_trace(tok, 32768, seed=k % 3 + 1)  # fresh: nothing derived
            spans = make(trace)
            began = time.perf_counter()
            report = Validator(trace, DEFAULT_LABEL_SCORES).check(spans)
            times.append((time.perf_counter() - began) * 1000)
            accepted = len(report.accepted)
        times.sort()
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        rows.append(f"| {name} | {statistics.median(times):.1f} ms | {p90:.1f} ms | {accepted} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="an earlier checkout")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = str(build_byte_level_bpe(Path(tmp) / "bpe"))
        print("\n".join(attack_rows(tokenizer, args.before.resolve())))
        print()
        print("\n".join(cost_rows(tokenizer, args.repeats)))


if __name__ == "__main__":
    main()
