"""The one reader of written numbers (judge_service/reading/numbers.py) and what reads
through it: the audit's gate finds an answer written early in any form the reader knows
(issue 43), and never in a longer number or word."""

from __future__ import annotations

from fractions import Fraction

import pytest

from judge_service.probe.answer_cut import first_occurrence, gate_start
from judge_service.reading.numbers import number_value, read_numbers


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("twenty-one", 21),
        ("one hundred and five", 105),
        ("one hundred fifteen", 115),
        ("three thousand four hundred and twelve", 3412),
        ("two million", 2_000_000),
        ("\\frac12", Fraction(1, 2)),
        ("\\tfrac34", Fraction(3, 4)),
        ("\\dfrac{3}{4}", Fraction(3, 4)),
        ("\\frac1{2}", Fraction(1, 2)),
        ("32,\\!349", 32349),
        ("32,\\! 349", 32349),  # TeX ignores the space after a control symbol
        ("11,\\! 111,\\! 100", 11111100),
        ("1{,}000", 1000),
        ("1\u2009000", 1000),
        ("\\boxed{\\tfrac34}", Fraction(3, 4)),
        ("$-1,000$", 1000),
        ("７", 7),
    ],
)
def test_one_number_in_any_written_form(text: str, value: int | Fraction) -> None:
    assert number_value(text) == value


@pytest.mark.parametrize(
    "text",
    ["5 or 7", "x = 5", "twenty thirty", "five six", "someone", "twentieth", "1 000"],
)
def test_more_or_less_than_one_number_is_no_answer(text: str) -> None:
    assert number_value(text) is None


def test_numbers_inside_longer_numbers_or_words_are_not_read() -> None:
    found = read_numbers("118 and someone at 2.5, then 18")
    assert [(n.value, n.form) for n in found] == [
        (118, "digits"),
        (Fraction(5, 2), "digits"),
        (18, "digits"),
    ]


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("that makes one hundred and five in all; so 105", "105", "one hundred"),
        ("twenty-one cards, hence 21", "21", "twenty-one"),
        ("Three thousand four hundred: 3400", "3400", "Three thousand"),
        ("half, i.e. \\frac12 of it, is 0.5", "0.5", "\\frac12"),
        ("we take \\tfrac34 of it: 3/4", "\\frac{3}{4}", "\\tfrac34"),
    ],
)
def test_the_gate_finds_an_answer_written_early_in_words_or_shorthand(
    text: str, answer: str, expected: str
) -> None:
    assert first_occurrence(text, answer) == text.index(expected)
    cut = gate_start(text, answer, None)
    assert cut is not None and cut[0] <= text.index(expected)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("we have 1105 and 1050 but not the answer", "105"),  # longer numbers
        ("someone went twentyone ways", "21"),  # no number words there
        ("a hundredth of it", "100"),  # an ordinal is no number
        ("\\frac{12}{3} is four", "12"),  # a fraction's part is not the number
    ],
)
def test_decoys_are_not_the_answer(text: str, answer: str) -> None:
    assert first_occurrence(text, answer) is None
