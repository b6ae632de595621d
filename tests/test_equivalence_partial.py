"""No false "equivalent" from a partial parse: the coverage rule, in the checker, the
check_equivalence tool, the rules judge's final-answer check and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sympy import E, FiniteSet, Integer, Interval, Rational, Symbol, oo, pi

from judge_service.cli.equivalence import answers_last
from judge_service.equivalence import EquivalenceChecker
from judge_service.equivalence.coverage import unaccounted
from judge_service.judges.rules.final_answer import answers_match
from judge_service.tools.base import ToolContext
from judge_service.tools.check_equivalence import CheckEquivalenceTool
from judge_service.trace.decode import Trace

REPO = Path(__file__).resolve().parent.parent
E_, N, U = "equivalent", "not_equivalent", "unknown"


@pytest.fixture(scope="module")
def checker() -> Iterator[EquivalenceChecker]:
    with EquivalenceChecker(pool_size=2, timeout_s=5.0) as instance:
        instance.start()
        yield instance


# -- the rule itself, on the forms math-verify returns -------------------------


@pytest.mark.parametrize(
    ("text", "form", "dropped"),
    [
        ("19, 46, 82", Integer(82), "lists 3 items"),
        ("1, 234", Integer(1234), "lists 2 items"),
        ("1 - \\frac{1}{\\mathrm{e}}", Integer(1), "leaves out e"),
        ("1 - \\frac{1}{\\mathrm{e}}", "1 - \\frac{1}{", "leaves out e"),  # the text fallback
        ("2\\mathrm{e}", Integer(2), "leaves out e"),
        ("1 - \\frac{1}{7}", Integer(1), "leaves out \\frac{1}{7}"),
        ("x + 1", Integer(1), "leaves out x"),
        ("3\\pi", Integer(3), "leaves out pi"),
        ("5 m", Integer(5), "leaves out m"),  # one letter may be a variable
        ("\\{1, 2, 3\\}", "\\{1, 2\\}", "leaves out 3"),
    ],
)
def test_a_parse_that_drops_part_of_the_answer_says_what(
    text: str, form: object, dropped: str
) -> None:
    reason = unaccounted(text, form)
    assert reason is not None and dropped in reason


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("82", Integer(82)),
        ("19, 46, 82", FiniteSet(19, 46, 82)),
        ("2, 2", FiniteSet(2)),  # a set holds a repeated item once
        ("1,234", Integer(1234)),  # thousands, not a list
        ("12 345", Integer(12345)),
        ("\\frac{2}{4}", Rational(1, 2)),  # sympy folded the constants
        ("\\binom{5}{2}", Integer(10)),
        ("0.5", Rational(1, 2)),
        ("-0.75", -Rational(3, 4)),
        ("[1, 2)", Interval.Ropen(1, 2)),
        ("(-\\infty, 3]", Interval(-oo, 3)),
        ("\\frac{\\pi}{6}", pi / 6),
        ("e", E),
        ("x_1 + 1", Symbol("x_1") + 1),
        ("5 cm", Integer(5)),  # units and prose are dropped on purpose
        ("5\\text{ m}", Integer(5)),
        ("The answer is $7$", Integer(7)),
    ],
)
def test_a_parse_of_the_whole_answer_passes(text: str, form: object) -> None:
    assert unaccounted(text, form) is None


# -- through the checker and the tool ------------------------------------------


@pytest.mark.parametrize(
    ("gold", "pred", "dropped"),
    [
        # an upright variable is dropped (\\mathrm{e} alone is read: Euler's number)
        ("1 - \\frac{1}{\\mathrm{x}}", "1 + \\frac{1}{\\mathrm{x}}", "leaves out x"),
        ("2\\mathrm{x}", "3\\mathrm{x}", "leaves out x"),
        ("19, 46,, 82", "21, 36,, 82", "lists 3 items"),
        ("\\frac{1}{7} + \\mathrm{x}", "\\frac{1}{7} + x", "leaves out x"),
        # a partial parse cannot call answers different either: these are equal
        ("1 + \\frac{1}{\\mathrm{x}}", "1 + x^{-1}", "leaves out x"),
        ("5 m", "5 s", "leaves out m"),
    ],
)
def test_a_partial_parse_is_unknown_with_what_was_dropped(
    checker: EquivalenceChecker, gold: str, pred: str, dropped: str
) -> None:
    result = checker.check(gold, pred)
    assert result.verdict == U, result
    assert "math-verify read only part of the reference" in result.reason
    assert dropped in result.reason
    assert result.gold_parsed and result.pred_parsed  # what was parsed is still shown


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("19, 46, and 82", "21, 36, and 82"),
        ("1, 2, 3", "4, 5, 3"),
        ("1, 2, and 3", "4, 5, and 3"),
        ("1, 2 and 3", "4, 5 and 3"),
        ("(1, 2)", "(3, 2)"),
        ("1, 234", "1234"),
        ("\\text{1, 234}", "1234"),
        # a connective written against a number lists two values (math-verify: o*r, equal)
        ("-1", "W(x)=1orW(x)=-1"),
        ("7", "x=5orx=7"),
        ("5", "x=5andx=7"),
        # a chain's value is its last part; an item break ends a chain, prose is no head
        ("5", "5 = \\zzz = 7"),
        ("7", "x = 5, 6 = \\zzz = 7"),
        ("7", "x = 5 \\text{ or } 6 = \\zzz = 7"),
        ("7", "7 \\text{ if } n = \\zzz = 7"),
        # a numeral in base b is compared only with one in base b
        ("1112112_3", "1112112"),
        ("1112112_3", "1121"),
        ("1112112_3", "1112112_4"),
        ("10_9", "5_9 + 5_9"),  # math-verify would add the digits in base ten
        ("5_9 + 5_9", "10_9"),
        ("2", "√4"),  # math-verify finds nothing in it, yet it is 2
    ],
)
def test_near_misses_are_never_equivalent(
    checker: EquivalenceChecker, gold: str, pred: str
) -> None:
    assert checker.check(gold, pred).verdict in (U, N)


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("19, 46, and 82", "82, 46, 19"),  # the Oxford comma no longer hides the list
        ("1, 2, and 3", "\\{3, 2, 1\\}"),
        ("2\\mathrm{x}", "2\\mathrm{x}"),  # the same text, however little was parsed
        ("\\frac{2}{4}", "0.5"),
        ("1,234", "1234"),
        ("1 = \\zzz = x = 0", "0"),  # a chain is its last part, as math-verify reads it
        ("0", "y = \\zzz = x = 0"),
        ("1112112_3", "\\boxed{1112112_{3}}"),  # one base: math-verify compares the digits
        ("1121_{10}", "1121"),
    ],
)
def test_whole_parses_are_still_equivalent(
    checker: EquivalenceChecker, gold: str, pred: str
) -> None:
    assert checker.check(gold, pred).verdict == E_


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("5", "x = \\zzz = 5 = 7"),  # the chain's value, 7, is compared
        ("1112112_3", "1112122_3"),
        ("2", "AZYUK2A"),  # one word of letters and digits: a code, not a number
        ("7", "CO2"),
    ],
)
def test_whole_answers_that_differ_are_not_equivalent(
    checker: EquivalenceChecker, gold: str, pred: str
) -> None:
    assert checker.check(gold, pred).verdict == N


async def test_the_tool_reports_the_partial_parse(checker: EquivalenceChecker) -> None:
    empty = Trace(np.zeros(0, dtype=np.int64), "", np.zeros(1, dtype=np.int64))
    context = ToolContext(rollout_id="r1", trace=empty, max_calls_per_tool=4)
    arguments = {"reference": "1 - \\frac{1}{\\mathrm{x}}", "answer": "1 + \\frac{1}{\\mathrm{x}}"}
    result = await CheckEquivalenceTool(checker).call(arguments, context)
    assert result.ok and result.data["verdict"] == U
    assert result.content.startswith("verdict: unknown (math-verify read only part")


# -- the rules judge's final-answer check: the same rule ------------------------


@pytest.mark.parametrize(
    ("answer", "reference", "reward", "expected"),
    [
        ("1, 234", "1234", None, None),  # a list; the lexer saw 1,234 (was True)
        ("1, 234, 567", "1234567", None, None),
        ("\\text{1, 234}", "1234", None, None),
        ("1, 234", "1234", 0.0, False),  # undecided here: the verifier's verdict
        ("1,234", "1234", None, True),
        ("12 345", "12345", None, True),
        ("2+3", "5", None, True),  # folded, not dropped
        ("\\sqrt{8}", "2\\sqrt{2}", None, True),
        ("x = -5", "-5", None, True),
        ("418", "408", None, False),
    ],
)
def test_answers_match_decides_only_on_a_whole_parse(
    answer: str, reference: str, reward: float | None, expected: bool | None
) -> None:
    assert answers_match(answer, reference, reward) is expected
    assert answers_match(reference, answer, reward) is expected


# -- the command line: answers that start with "-" ----------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "judge_service", "check-equivalence", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=180)


@pytest.mark.slow
def test_cli_takes_answers_that_start_with_a_minus() -> None:
    done = _cli("-\\frac{3}{4}", "-0.75")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == E_ and result["gold_parsed"][0] == "-3/4"
    after_options = _cli("--percent", "strict", "-\\frac{1}{2}", "-50\\%")
    assert after_options.returncode == 0, after_options.stderr
    assert json.loads(after_options.stdout)["verdict"] == E_


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-\\frac{3}{4}", "-0.75"], ["--", "-\\frac{3}{4}", "-0.75"]),
        (["-x", "-x", "--percent", "strict"], ["--percent", "strict", "--", "-x", "-x"]),
        (["--tol", "-1", "5", "-5"], ["--tol", "-1", "--", "5", "-5"]),  # an option's value
        (["5", "--timeout=3", "-5"], ["--timeout=3", "--", "5", "-5"]),
        (["--", "-a", "-b"], ["--", "-a", "-b"]),
        (["-h"], ["-h"]),
        (["--degrees-as-radians", "-1"], ["--degrees-as-radians", "--", "-1"]),
    ],
)
def test_answers_go_after_the_options(args: list[str], expected: list[str]) -> None:
    assert answers_last(args) == expected


def test_the_option_table_matches_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    from judge_service.cli import equivalence
    from judge_service.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["check-equivalence", "-h"])
    assert done.value.code == 0
    usage = capsys.readouterr().out.split("\n\n")[0]
    valued = set(re.findall(r"\[(--[a-z-]+) [A-Z{]", usage))
    flags = set(re.findall(r"\[(--[a-z-]+)\]", usage)) | {"--help"}
    assert valued == set(equivalence._VALUE_OPTIONS)
    assert flags == set(equivalence._FLAG_OPTIONS)
