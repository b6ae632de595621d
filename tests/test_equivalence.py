"""check_equivalence: labelled pairs, the policy flags, timeouts and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_service.equivalence import EquivalenceChecker, EquivalencePolicy
from judge_service.equivalence.checker import _to_result
from judge_service.equivalence.normalize import prepare, right_associate_powers
from sandbox import Envelope

REPO = Path(__file__).resolve().parent.parent
E, N, U = "equivalent", "not_equivalent", "unknown"
RAD: dict[str, Any] = {"degrees_as_radians": True}
STRICT: dict[str, Any] = {"percent": "strict"}
TOL: dict[str, Any] = {"tolerance": 1e-3}

# (reference, answer, verdict, policy); the reference goes in as gold.
PAIRS: list[tuple[str, str, str, dict[str, Any]]] = [
    # fractions
    ("\\frac{1}{2}", "0.5", E, {}),
    ("\\frac{2}{4}", "\\frac{1}{2}", E, {}),
    ("1/3", "\\frac{1}{3}", E, {}),
    ("\\frac{3}{4}", "0.75", E, {}),
    ("-\\frac{3}{4}", "\\frac{-3}{4}", E, {}),
    ("\\dfrac{7}{2}", "3.5", E, {}),
    ("\\frac{1}{3}", "0.33", N, {}),
    # decimals
    ("0.5", "0.50", E, {}),
    ("2.5", "5/2", E, {}),
    ("0.1", "0.01", N, {}),
    # percent
    ("50\\%", "0.5", E, {}),
    ("50\\%", "50", E, {}),
    ("50", "50\\%", N, STRICT),
    ("0.5", "50\\%", E, STRICT),
    ("25\\%", "0.5", N, {}),
    # units
    ("5\\text{ cm}", "5", E, {}),
    ("5", "5 cm", E, {}),
    ("12\\text{ meters}", "12", E, {}),
    ("\\$5", "5", E, {}),
    ("5\\text{ cm}", "6", N, {}),
    # intervals, open vs closed
    ("[1,2)", "[1,2)", E, {}),
    ("[1,2)", "[1,2]", N, {}),
    ("(1,2)", "[1,2]", N, {}),
    ("(-\\infty, 3]", "(-\\infty,3]", E, {}),
    ("[1,2)\\cup(3,4]", "[1,2)\\cup(3,4]", E, {}),
    ("[1,2)\\cup(3,4]", "[1,2]\\cup(3,4]", N, {}),
    ("x \\in [1,2)", "[1,2)", E, {}),
    # sets
    ("\\{1,2,3\\}", "\\{3,2,1\\}", E, {}),
    ("\\{1,2\\}", "\\{1,2,3\\}", N, {}),
    # ordered tuples
    ("(1,2,3)", "(1,2,3)", E, {}),
    ("(1,2,3)", "(3,2,1)", N, {}),
    ("(1,2)", "(2,1)", N, {}),
    # matrices
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", E, {}),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", N, {}),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", E, {}),
    # degrees
    ("30^\\circ", "30", E, {}),
    ("\\frac{\\pi}{6}", "30^\\circ", E, {}),  # a degree sign reads both ways
    ("\\frac{\\pi}{6}", "30", N, {}),
    ("\\frac{\\pi}{6}", "30^\\circ", E, RAD),
    ("30", "30^\\circ", N, RAD),
    ("\\frac{\\pi}{4}", "45°", E, RAD),
    # scientific notation
    ("1500", "1.5e3", E, {}),
    ("1500", "1.5E3", E, {}),
    ("1500", "1.5\\times10^{3}", E, {}),
    ("0.001", "1e-3", E, {}),
    ("1500", "1.5e4", N, {}),
    # negative exponents
    ("\\frac{1}{4}", "2^{-2}", E, {}),
    ("0.25", "2^{-2}", E, {}),
    ("\\frac{1}{8}", "2^{-2}", N, {}),
    # equations
    ("3", "x=3", E, {}),
    ("x=3", "3", E, {}),
    ("y=2x+3", "2x+3", E, {}),
    ("x=3", "x=4", N, {}),
    # plus-minus
    ("\\pm 2", "2, -2", E, {}),
    ("\\pm 2", "2", N, {}),
    ("1 \\pm \\sqrt{2}", "1+\\sqrt{2}, 1-\\sqrt{2}", E, {}),
    # several answers
    ("1, 2", "2, 1", E, {}),
    ("x=1 or x=2", "2, 1", E, {}),
    ("1, 2", "1", N, {}),
    # symbolic forms
    ("(x+1)^2", "x^2+2x+1", E, {}),
    ("\\sqrt{8}", "2\\sqrt{2}", E, {}),
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", E, {}),
    ("x>5", "5<x", E, {}),
    ("\\infty", "\\infty", E, {}),
    # numeric tolerance
    ("\\pi", "3.14", E, TOL),
    ("3.14", "\\pi", N, {}),
    # near misses
    ("0.5", "50", N, {}),
    ("123456", "123457", N, {}),
    ("x>5", "x<5", N, {}),
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", N, {}),
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{99}}", E, {}),
    ("2^{100}", "2^{100}+1", N, {}),
]


@pytest.fixture(scope="module")
def checker() -> Iterator[EquivalenceChecker]:
    with EquivalenceChecker(pool_size=2, timeout_s=5.0) as instance:
        instance.start()
        yield instance


def test_there_are_at_least_fifty_labelled_pairs() -> None:
    assert len(PAIRS) >= 50
    assert {verdict for _, _, verdict, _ in PAIRS} == {E, N}


@pytest.mark.parametrize(("gold", "pred", "verdict", "policy"), PAIRS)
def test_labelled_pair(
    checker: EquivalenceChecker, gold: str, pred: str, verdict: str, policy: dict[str, Any]
) -> None:
    result = checker.check(gold, pred, EquivalencePolicy.from_dict(policy))
    assert result.verdict == verdict, result
    assert result.gold_parsed and result.pred_parsed


def test_parsed_forms_show_what_was_compared(checker: EquivalenceChecker) -> None:
    result = checker.check("(1,2)", "(2,1)")
    assert result.gold_parsed[0] == "Interval.open(1, 2)"
    assert result.pred_parsed[0] == "(2, 1)"


def test_a_power_tower_is_unknown_within_the_timeout() -> None:
    with EquivalenceChecker(timeout_s=2.0) as quick:
        quick.start()
        started = time.monotonic()
        result = quick.check("1", "9^9^9^9")
        elapsed = time.monotonic() - started
        after = quick.check("2", "2")
    assert result.verdict == U and "timed out" in result.reason
    assert result.pred_parsed == ["9**(9**(9**9))", "9^{9^{9^{9}}}"]
    assert elapsed < 2.0 + 1.0 + 0.5  # the timeout, the kill grace, some slack
    assert after.verdict == E


def test_a_worker_killed_at_the_deadline_reads_as_unknown() -> None:
    # The zygote's hard kill (exercised by the sandbox tests: C code where the
    # alarm cannot fire) comes back as a timeout envelope.
    result = _to_result(Envelope("timeout", message="killed after 2 s"), 1.0, 2000.0)
    assert (result.verdict, result.reason) == (
        U,
        "the check ran past its 1 s limit and was stopped",
    )
    crashed = _to_result(Envelope("crashed", signal="SIGKILL"), 1.0, 5.0)
    assert crashed.verdict == U and "memory" in crashed.reason


def test_unparseable_answers_are_unknown(checker: EquivalenceChecker) -> None:
    assert checker.check("5", "$$").verdict == U
    assert checker.check("", "5").verdict == U
    assert checker.check("5", "x" * 5000).verdict == U


def test_policy_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="percent"):
        EquivalencePolicy.from_dict({"percent": "sometimes"})
    with pytest.raises(ValueError, match="tolerance"):
        EquivalencePolicy.from_dict({"tolerance": 2})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9^9^9^9", "9^{9^{9^{9}}}"),
        ("2^{-2}", "2^{-2}"),
        ("a^b^{c+1}", "a^{b^{c+1}}"),
        ("x^2 + y^2", "x^2 + y^2"),
        ("30^\\circ", "30^\\circ"),
    ],
)
def test_power_chains_associate_to_the_right(text: str, expected: str) -> None:
    assert right_associate_powers(text) == expected


@pytest.mark.parametrize(
    ("text", "policy", "expected"),
    [
        ("1/2", {}, "$1/2$"),
        ("1.5e3", {}, "$1.5\\times 10^{3}$"),
        ("x = 1 or x = 2", {}, "$x = 1, x = 2$"),
        ("30^\\circ", RAD, "$30\\cdot\\frac{\\pi}{180}$"),
        ("\\$5", {}, "$\\$5$"),
        ("The answer is $7$", {}, "The answer is $7$"),
        ("The answer is 7", {}, "The answer is 7"),
        # a long run of white space keeps its ends (math-verify's number pattern costs the
        # square of the run); one of 32 chars is kept whole
        ("The answer is 7" + " " * 32 + "apples", {}, "The answer is 7" + " " * 32 + "apples"),
        ("Answer: 7" + " \n" * 3000 + "apples", {}, "Answer: 7" + " \n" * 16 + "apples"),
    ],
)
def test_answers_are_prepared_for_the_latex_parser(
    text: str, policy: dict[str, Any], expected: str
) -> None:
    assert prepare(text, EquivalencePolicy.from_dict(policy)) == expected


def test_cli_prints_the_verdict_as_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "judge_service", "check-equivalence", "\\frac{1}{2}", "0.5"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == E and result["gold_parsed"][0] == "1/2"


def test_cli_passes_the_policy_flags() -> None:
    command = [sys.executable, "-m", "judge_service", "check-equivalence", "50", "50\\%"]
    done = subprocess.run(
        [*command, "--percent", "strict"], capture_output=True, text=True, cwd=REPO, timeout=180
    )
    assert json.loads(done.stdout)["verdict"] == N
    bad = subprocess.run(
        [*command, "--tolerance", "3"], capture_output=True, text=True, cwd=REPO, timeout=180
    )
    assert bad.returncode == 2 and "tolerance" in json.loads(bad.stdout)["error"]
