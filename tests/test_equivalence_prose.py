"""The coverage rule on the project's one reader, and final answers written in prose
(issue 44): what annotates a value (a label, a unit, a separator, markup) is not "left
out"; an answer in a sentence or a whole solution is read where math-verify finds it; and
every way of stating more than math-verify read stays unknown or not_equivalent."""

from __future__ import annotations

import pytest
from sympy import Eq, FiniteSet, Float, Integer, Rational, Symbol

from judge_service.equivalence import EquivalenceChecker
from judge_service.equivalence.checker import MAX_ANSWER_CHARS
from judge_service.equivalence.coverage import unaccounted

E, N, U = "equivalent", "not_equivalent", "unknown"
v1, v2, a = Symbol("v_1"), Symbol("v_2"), Symbol("a")


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("\\frac3{3}", Integer(1)),  # shorthand: one fraction, not a 3 left out
        ("\\tfrac34", Rational(3, 4)),
        ("32,\\! 349", Integer(32349)),  # a separator, not a second item
        ("11,\\! 111,\\! 111,\\! 100", Integer(11111111100)),
        ("14 {, }916", Integer(14916)),
        ("1{,}000", Integer(1000)),
        ("x\\approx11", Integer(11)),  # labels
        ("V_{1}:V_{2}=11:21", Eq(v1 / v2, Rational(11, 21))),
        ("A:B=1", Eq(Symbol("a") / Symbol("b"), 1)),
        ("(p,q) = (3,2)", FiniteSet(3, 2)),
        ("a=4,-8,-10", Eq(a, FiniteSet(4, -8, -10), evaluate=False)),  # a labelled list
        ("The largest $n$ is 34", Integer(34)),
        ("E", Symbol("e")),  # math-verify reads names in lower case
        ("15\\mbox{ cm}^2", Integer(15)),  # a unit's power
        ("x = 1/3 \\approx 0.33", Eq(Symbol("x"), Rational(1, 3))),  # a closing approximation
        ("2,74", Float(2.74)),  # a decimal comma
        ("x = 3 = 5", Integer(5)),  # a chain is its last part, as math-verify's tests read it
        ("1 = \\zzz = x = 0", Integer(0)),
    ],
)
def test_what_annotates_a_value_is_not_left_out(text: str, form: object) -> None:
    assert unaccounted(text, form) is None


@pytest.mark.parametrize(
    ("text", "form", "said"),
    [
        ("x = 3, y = 4", Integer(3), "lists 2 items"),  # two labelled values
        ("5 or seven", Integer(5), "lists 2 items"),  # an alternative in words
        ("\\frac12 or \\frac13", Rational(1, 3), "lists 2 items"),
        ("1,2,3", Integer(3), "lists 3 items"),  # commas without spaces still list
        ("1, 234", Integer(1234), "lists 2 items"),
        ("x \\approx 5, 7", Integer(5), "lists 2 items"),
        ("V_1:V_2 = 11:21 or 21:11", Eq(v1 / v2, Rational(11, 21)), "lists 2 items"),
        ("7 \\text{ if } n > 2", Integer(7), "leaves out 2, n"),  # a condition
        ("3 = 5", Integer(5), "leaves out 3"),  # a number is no label
        ("x = 3 = 5 \\text{ or } 7", Integer(7), "lists 2 items"),  # a chain, then more
        ("a," * 7000 + "1", Integer(1), "items"),  # a chain of names is no label
        ("2\\,\\mathrm{e}", Integer(2), "leaves out e"),
    ],
)
def test_more_than_the_parse_holds_is_still_refused(text: str, form: object, said: str) -> None:
    reason = unaccounted(text, form)
    assert reason is not None and said in reason, reason


SOLUTION = (
    "We use the distance formula: \\begin{align*} \\sqrt{(2 - (-4))^2 + ((-6) - 3)^2} &= "
    "\\sqrt{6^2 + (-9)^2}\\\\ & = \\sqrt{36 + 81}\\\\ & = \\sqrt{117} = \\boxed{3\\sqrt{13}}. "
    "\\end{align*}"
)

IN_FORMULA = "$f(0)=\\frac{3(0)-2}{0-2}=1$, so the sum is $2+\\frac{5}{3}+1=\\boxed{\\frac{14}{3}}$"
ROOTS = (
    "The roots are $-2$ and $1 \\pm \\sqrt{5}$, so the answer is "
    "$\\boxed{\\{1\\pm\\sqrt{5},-2\\}}.$"
)


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("34", "Final Answer: The largest $n$ is 34."),
        ("3\\sqrt{13}", SOLUTION),  # a whole solution: its last box
        ("\\frac{14}{3}", IN_FORMULA),
        ("(6,31,-1)", "Then solving the system, we find $(p,q,r) = \\boxed{(6,31,-1)}.$"),
        ("1000.99", "the number is not 10 which is 1,000.99€"),
        ("2.74", "Soucis : 2,74 $ a.."),
        ("\\{1\\pm\\sqrt{5},-2\\}", ROOTS),
        ("\\{1, 2, 3\\}", "\\boxed{1} and \\boxed{2} and \\boxed{3}"),  # boxes read together
        ("1000", "1 000"),
        ("1000.99", "1000,99"),
        ("11", "$x\\approx11$"),
        ("11:21", "$V_{1}:V_{2}=11:21$"),
    ],
)
def test_an_answer_in_prose_is_read_where_math_verify_reads_it(
    equivalence_checker: EquivalenceChecker, gold: str, pred: str
) -> None:
    checker = equivalence_checker
    assert checker.check(gold, pred).verdict == E
    assert checker.check(pred, gold).verdict == E


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("7", "The answer is 5 or 7."),
        ("7", "The answer is $5$ or $7$."),
        ("7", "The answer is $5$, or maybe $7$."),
        ("5", "The answer is 5 (or 7)."),
        ("7", "The answer is either 5 or 7"),
        ("7", "5 apples or 7 pears"),
        ("34", "Final Answer: The largest $n$ is 34 or 35."),
        ("7", "\\boxed{5 \\text{ or } 7}"),
        ("7", "\\boxed{5}, \\boxed{7}"),
        ("7", "So the answer is \\boxed{5}\nor \\boxed{7}"),
        ("7", "First \\boxed{5}. Wait, that is wrong. So \\boxed{7}."),  # a set, not the last
        ("7", "The answer is 5 or seven"),
        ("1", "The answer is x, 1."),
        ("3", "The roots are 2 and 3."),
        ("2", "The roots are $2$ and $3$."),
        ("7", "x = 7, y = 3"),
        ("7", "we get $x=7$ and $y = 5$"),
        # a value plus a condition that changes it
        ("7", "The answer is 7 if n is even."),
        ("7", "The answer is 7 when n is even and 8 otherwise."),
        ("5", "The answer is 5, but if n is odd it is 7."),
        ("7", "So $n = \\boxed{7}$ for even $n$ and $5$ otherwise."),
        ("7", "The answer is $7$ for $n > 3$."),
        ("5", "5 \\text{ if } a>0"),
        # another number the sentence joins to the answer by words
        ("5", "The answer is 5 plus 7."),
        ("7", "The answer is 7 minus 5."),
        ("7", "The answer is 7 over 5"),
        ("7", "The answer is 7 divided by 5"),
        ("7", "The answer is 7 times 10^3"),
        ("5", "The answer is 5, not 7."),
        ("7", "The final answer is 7 cm by 5 cm."),
        # words that change the value math-verify read
        ("7", "The answer is 7 squared."),
        ("7", "The answer is 7 thousand."),
        ("7", "The answer is 7 million"),
        ("7", "The answer is not 7."),
        ("7", "The answer is at most 7."),
        ("7", "The answer is at least 7."),
        ("7", "The answer is 7 or more."),
        # a piece of a formula math-verify could not read whole
        ("1", "1 - \\frac{1}{\\mathrm{e}}"),
        ("7", "Final Answer: The final answer is $7 + x$. I hope it is correct."),
    ],
)
def test_an_answer_that_states_more_is_never_equivalent(
    equivalence_checker: EquivalenceChecker, gold: str, pred: str
) -> None:
    checker = equivalence_checker
    assert checker.check(gold, pred).verdict in (U, N)


def test_a_whole_solution_fits_and_a_longer_text_is_refused_before_parsing(
    equivalence_checker: EquivalenceChecker,
) -> None:
    checker = equivalence_checker
    working = "We check the working once more: $2 + 3 = 5$ and $5 \\cdot 7 = 35$. " * 180
    assert 10_000 < len(working) < MAX_ANSWER_CHARS
    assert checker.check("34", working + "So the answer is $\\boxed{34}$.").verdict == E
    result = checker.check("34", "x" * (MAX_ANSWER_CHARS + 1) + " \\boxed{34}")
    assert result.verdict == U and "limit" in result.reason and not result.pred_parsed


@pytest.mark.parametrize(
    "pred",
    [
        "The answer is 5" + " " * 5000 + " or 7.",
        "The answer is 5" + "\n" * 5000 + "or \\boxed{7}.",
        "1" * 8000 + " " * 7000 + ", 7 apples",  # was a regular expression's cube of 7000
    ],
)
def test_padding_hides_no_alternative_and_costs_one_pass(
    equivalence_checker: EquivalenceChecker, pred: str
) -> None:
    result = equivalence_checker.check("7", pred)
    assert result.verdict == U and "lists more values" in result.reason, result.reason
