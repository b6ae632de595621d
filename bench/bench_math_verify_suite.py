"""The equivalence checker on math-verify's own test suite (issue 44), beside math-verify's
plain ``parse`` + ``verify`` defaults, in one process (the worker's comparison called
directly, with the checker's bound on an answer's length). Counts, not timings, so two
checkouts compare from two runs (or `--before` runs the other checkout in a subprocess):

    .venv/bin/python bench/bench_math_verify_suite.py
    .venv/bin/python bench/bench_math_verify_suite.py --before /tmp/before-44

A case is right when the checker says ``equivalent`` where math-verify's test expects 1,
and ``not_equivalent`` where it expects 0 (``unknown`` is never right). Answer-form cases
have a gold and a prediction of at most 80 characters; the rest are answers extracted
from prose. `--cases` prints every case the checker gets wrong, with its reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "examples" / "math_verify_suite" / "cases.jsonl"


def load_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line]


def answer_form(case: dict[str, Any]) -> bool:
    return len(case["gold"]) <= 80 and len(case["pred"]) <= 80


def verdicts(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checker's verdict (the worker's comparison, default policy) and math-verify's."""
    from math_verify import parse, verify

    from judge_service.equivalence.checker import MAX_ANSWER_CHARS
    from judge_service.equivalence.result import EquivalencePolicy, EquivalenceResult
    from judge_service.equivalence.worker import compare

    out = []
    for case in cases:
        if max(len(case["gold"]), len(case["pred"])) > MAX_ANSWER_CHARS:  # the checker's bound
            result = EquivalenceResult("unknown", f"longer than {MAX_ANSWER_CHARS} characters")
        else:
            result = compare(case["gold"], case["pred"], EquivalencePolicy(), budget_s=10)
        try:
            library = bool(verify(parse(case["gold"]), parse(case["pred"])))
        except Exception:
            library = False
        out.append({"verdict": result.verdict, "reason": result.reason, "library": library})
    return out


def _row(label: str, cases: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    right = fp = fn = unknown = library_right = library_fp = 0
    for case, seen in zip(cases, got, strict=True):
        want = "equivalent" if case["expected"] else "not_equivalent"
        right += seen["verdict"] == want
        fp += seen["verdict"] == "equivalent" and not case["expected"]
        fn += seen["verdict"] == "not_equivalent" and bool(case["expected"])
        unknown += seen["verdict"] == "unknown"
        library_right += seen["library"] == bool(case["expected"])
        library_fp += seen["library"] and not case["expected"]
    return (
        f"| {label}, {len(cases)} | **{right}** ({fp} false positives, {fn} false negatives, "
        f"{unknown} unknown) | {library_right} ({library_fp} false positives) |"
    )


def table(cases: list[dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    def pick(keep: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        pairs = [(c, g) for c, g in zip(cases, got, strict=True) if keep(c)]
        return [c for c, _ in pairs], [g for _, g in pairs]

    own = "answer-form, the test's own configuration"
    rows = [
        ("answer-form, default configuration", lambda c: answer_form(c) and c["defaults"]),
        (own, lambda c: answer_form(c) and not c["defaults"]),
        ("answer-form (gold and pred ≤ 80 characters)", answer_form),
        ("extraction from prose", lambda c: not answer_form(c)),
        ("all", lambda c: True),
    ]  # fmt: skip
    lines = ["| cases | judge-service right | math-verify defaults right |", "|---|---|---|"]
    return lines + [_row(label, *pick(keep)) for label, keep in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout, run first for the table")
    parser.add_argument("--cases", action="store_true", help="print every case got wrong")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    args = parser.parse_args()
    cases = load_cases()
    if args.json:
        print(json.dumps(verdicts(cases)))
        return
    runs = []
    if args.before is not None:
        env = dict(os.environ, PYTHONPATH=str(args.before))
        command = [sys.executable, str(Path(__file__)), "--json"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        runs.append(("before", json.loads(done.stdout.splitlines()[-1])))
    runs.append(("this checkout", verdicts(cases)))
    for label, got in runs:
        print(f"\n{label}:")
        print("\n".join(table(cases, got)))
    if args.cases:
        got = runs[-1][1]
        for case, seen in zip(cases, got, strict=True):
            want = "equivalent" if case["expected"] else "not_equivalent"
            if seen["verdict"] != want:
                mark = (
                    "" if seen["library"] == bool(case["expected"]) else " (math-verify wrong too)"
                )
                print(f"\n{case['id']}{mark}: {seen['verdict']}, want {want}: {seen['reason']}")
                print(f"  gold {case['gold'][:200]!r}\n  pred {case['pred'][:200]!r}")


if __name__ == "__main__":
    main()
