"""The equivalence checker's speed: this checkout against another, side by side in one run.

    .venv/bin/python bench/bench_equivalence.py --before /tmp/before-44 [--rounds 5]

Each round runs the worker's comparison (what a zygote child runs for one check, default
policy) over math-verify's suite (examples/math_verify_suite): the answer-form cases (gold
and pred of at most 80 characters, what the rules judge and the check_equivalence tool
send) and the prose cases, in a fresh process per checkout, alternating, with
math-verify's parse caches cleared before each pass so every parse is paid for. Reported:
the median over rounds of the milliseconds per case, and after/before, on the cases whose
verdict is the same before and after (the same work: a case that was refused as read only
in part skips math-verify's comparison, which a case now read whole pays for) and on all;
and the coverage rule alone on the same parsed forms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_math_verify_suite import answer_form, load_cases  # noqa: E402


def _clear_caches() -> None:
    from math_verify import parser

    for cached in (parser.parse_latex_cached, parser.parse_expr_cached, parser.extract_latex):
        cached.cache_clear()


def _pass(cases: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """Each case's milliseconds and verdict, in one pass over `cases`."""
    from judge_service.equivalence.checker import MAX_ANSWER_CHARS
    from judge_service.equivalence.result import EquivalencePolicy
    from judge_service.equivalence.worker import compare

    _clear_caches()
    out = []
    for case in cases:
        began = time.perf_counter()
        verdict = "unknown"  # the checker refuses an over-long answer before any work
        if max(len(case["gold"]), len(case["pred"])) <= MAX_ANSWER_CHARS:
            verdict = compare(case["gold"], case["pred"], EquivalencePolicy(), 10).verdict
        out.append(((time.perf_counter() - began) * 1000, verdict))
    return out


def _coverage_ms(cases: list[dict[str, Any]]) -> float:
    """Milliseconds per (answer, parsed form) of the coverage rule alone, on the answer-form
    sides as math-verify parses them (the same forms for every checkout)."""
    from math_verify import parse

    from judge_service.equivalence import coverage

    pairs = [
        (f"${text}$", form)
        for case in cases
        if answer_form(case)
        for text in (case["gold"].strip("$ "), case["pred"].strip("$ "))
        for form in parse(f"${text}$")
    ]
    began = time.perf_counter()
    for _ in range(3):
        for cached in ("_stated", "_items"):  # a fresh reading each time (caches came later)
            getattr(getattr(coverage, cached), "cache_clear", lambda: None)()
        for text, form in pairs:
            coverage.unaccounted(text, form)
    return (time.perf_counter() - began) * 1000 / (3 * len(pairs))


def _child() -> None:
    cases = load_cases()
    _pass(cases)  # warm: imports, sympy's own caches
    print(json.dumps({"cases": _pass(cases), "coverage_ms": _coverage_ms(cases)}))


def _run(checkout: Path) -> tuple[list[tuple[float, str]], float]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, str(Path(__file__)), "--child"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    return [(ms, verdict) for ms, verdict in result["cases"]], float(result["coverage_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--rule-ab",
        action="store_true",
        help="the coverage rule only: both checkouts' "
        "coverage.py in one process, passes alternating (steadier on a loaded machine)",
    )
    args = parser.parse_args()
    if args.child:
        _child()
        return
    if args.rule_ab:
        _rule_ab(args.before or ROOT, args.rounds)
        return
    cases = load_cases()
    checkouts = {"before": args.before or ROOT, "after": ROOT}
    runs: dict[str, list[list[tuple[float, str]]]] = {"before": [], "after": []}
    rule: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label, checkout in checkouts.items():
            cases_run, coverage_ms = _run(checkout)
            runs[label].append(cases_run)
            rule[label].append(coverage_ms)
    same = [runs["before"][0][k][1] == runs["after"][0][k][1] for k in range(len(cases))]
    groups = {
        "answer-form, same verdict before and after": [
            k for k, c in enumerate(cases) if answer_form(c) and same[k]
        ],
        "answer-form, all": [k for k, c in enumerate(cases) if answer_form(c)],
        "prose, same verdict before and after": [
            k for k, c in enumerate(cases) if not answer_form(c) and same[k]
        ],
        "prose, all": [k for k, c in enumerate(cases) if not answer_form(c)],
    }
    print(
        "| cases | before, ms per case | after, ms per case | after/before "
        "| median case before / after |"
    )
    print("|---|---|---|---|---|")
    for name, members in groups.items():
        if not members:
            continue
        per_case = {
            label: statistics.median(
                sum(run[k][0] for k in members) / len(members) for run in runs[label]
            )
            for label in runs
        }
        # A case's median over rounds, then the median case: one cold parse (ANTLR fills
        # its prediction cache on first sight of a form) does not move it.
        typical = {
            label: statistics.median(
                statistics.median(run[k][0] for run in runs[label]) for k in members
            )
            for label in runs
        }
        before, after = per_case["before"], per_case["after"]
        print(
            f"| {name}, {len(members)} | {before:.2f} | {after:.2f} | {after / before:.2f} "
            f"| {typical['before']:.2f} / {typical['after']:.2f} |"
        )
    before, after = statistics.median(rule["before"]), statistics.median(rule["after"])
    print(
        f"| the coverage rule alone, per parsed form | {before:.3f} | {after:.3f} | "
        f"{after / before:.2f} | |"
    )


def _rule_ab(before: Path, rounds: int) -> None:
    """The coverage rule of `before` and of this checkout, loaded side by side in this
    process (each imports the reader from this checkout), on the answer-form sides as
    math-verify parses them; passes alternate, so load falls on both alike."""
    import importlib.util

    from math_verify import parse

    modules = {}
    for label, root in (("before", before), ("after", ROOT)):
        name = f"_coverage_{label}"
        path = root / "judge_service" / "equivalence" / "coverage.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        modules[label] = module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    pairs = [
        (f"${text}$", form)
        for case in load_cases()
        if answer_form(case)
        for text in (case["gold"].strip("$ "), case["pred"].strip("$ "))
        for form in parse(f"${text}$")
    ]

    def one_pass(module: Any) -> float:
        for cached in ("_stated", "_items"):
            getattr(getattr(module, cached), "cache_clear", lambda: None)()
        began = time.perf_counter()
        for text, form in pairs:
            module.unaccounted(text, form)
        return (time.perf_counter() - began) * 1000 / len(pairs)

    times: dict[str, list[float]] = {"before": [], "after": []}
    for index in range(rounds * 6 + 1):
        for label in ("before", "after") if index % 2 else ("after", "before"):
            times[label].append(one_pass(modules[label]))
    times = {label: values[1:] for label, values in times.items()}  # the first warms up
    ratio = statistics.median(a / b for a, b in zip(times["after"], times["before"], strict=True))
    print("| the coverage rule, ms per parsed form | before | after | after/before (paired) |")
    print("|---|---|---|---|")
    for stat in (min, statistics.median):
        before_ms, after_ms = stat(times["before"]), stat(times["after"])
        print(f"| {stat.__name__} over passes | {before_ms:.4f} | {after_ms:.4f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
