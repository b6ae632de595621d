"""Arithmetic equality links in free reasoning text: boundaries, verdicts, rounding, safety."""

from __future__ import annotations

import builtins
import random
import time
from pathlib import Path

import pytest
import sympy

from judge_service.judges.rules.claims import Link, find_links

Expected = list[tuple[str, str, bool]]  # (left_text, right_text, holds) per link, in order

CASES: list[tuple[str, Expected]] = [
    # Operator forms, true and false.
    ("So 17 × 24 = 408.", [("17 × 24", "408", True)]),
    ("Let me compute 17 * 24 = 418.", [("17 * 24", "418", False)]),
    ("We get 12 · 12 = 144, good.", [("12 · 12", "144", True)]),
    ("$17 \\times 24 = 408$", [("17 \\times 24", "408", True)]),
    ("`17 * 24 = 408`", [("17 * 24", "408", True)]),
    ("\\(17 \\cdot 24 = 407\\)", [("17 \\cdot 24", "407", False)]),
    ("144 ÷ 12 = 12", [("144 ÷ 12", "12", True)]),
    ("144 / 12 = 11", [("144 / 12", "11", False)]),
    ("$144 \\div 12 = 12$", [("144 \\div 12", "12", True)]),
    ("2^10 = 1024", [("2^10", "1024", True)]),
    ("Then 2^{10} = 1000.", [("2^{10}", "1000", False)]),
    ("2**10 = 1024", [("2**10", "1024", True)]),
    # Currency signs are no math delimiters (reading.markup): the claim is read.
    ("The price is $5 × 3 = $15", [("5 × 3", "15", True)]),
    ("**Total:** $3.5 * 4000 = $14,000.", [("3.5 * 4000", "14,000", True)]),
    ("10^2 = 100", [("10^2", "100", True)]),
    ("3² + 4² = 5²", [("3² + 4²", "5²", True)]),
    ("(3 + 4) × 2 = 14", [("(3 + 4) × 2", "14", True)]),
    ("3 + 4 × 2 = 14", [("3 + 4 × 2", "14", False)]),
    ("2(3 + 4) = 14", [("2(3 + 4)", "14", True)]),
    ("[2 + 3] \\times 4 = 20", [("[2 + 3] \\times 4", "20", True)]),
    # Negatives and unary minus.
    ("-3 \\times 4 = -12", [("-3 \\times 4", "-12", True)]),
    ("−3 × 4 = −12", [("−3 × 4", "−12", True)]),
    ("−3 × 4 = 12", [("−3 × 4", "12", False)]),
    ("(-2)^2 = 4", [("(-2)^2", "4", True)]),
    ("-2^2 = -4", [("-2^2", "-4", True)]),
    ("-2^2 = 4", [("-2^2", "4", False)]),
    ("5 - 8 = -3", [("5 - 8", "-3", True)]),
    ("5 - -3 = 8", [("5 - -3", "8", True)]),
    # Fractions and roots.
    ("\\frac{3}{4} + \\frac{1}{4} = 1", [("\\frac{3}{4} + \\frac{1}{4}", "1", True)]),
    (
        "$\\dfrac{1}{2} + \\tfrac{1}{3} = \\frac{5}{6}$",
        [("\\dfrac{1}{2} + \\tfrac{1}{3}", "\\frac{5}{6}", True)],
    ),
    (
        "\\frac{1}{2} + \\frac{1}{3} = \\frac{2}{5}",
        [("\\frac{1}{2} + \\frac{1}{3}", "\\frac{2}{5}", False)],
    ),
    (
        "\\left(\\frac{1}{2}\\right)^2 = \\frac{1}{4}",
        [("\\left(\\frac{1}{2}\\right)^2", "\\frac{1}{4}", True)],
    ),
    ("2^{-2} = \\frac{1}{4}", [("2^{-2}", "\\frac{1}{4}", True)]),
    ("\\sqrt{144} = 12", [("\\sqrt{144}", "12", True)]),
    ("√16 = 4", [("√16", "4", True)]),
    ("\\sqrt[3]{27} = 3", [("\\sqrt[3]{27}", "3", True)]),
    ("8^{1/3} = 2", [("8^{1/3}", "2", True)]),
    ("\\sqrt{8} = 2\\sqrt{2}", [("\\sqrt{8}", "2\\sqrt{2}", True)]),
    ("\\sqrt{8} = 3\\sqrt{2}", [("\\sqrt{8}", "3\\sqrt{2}", False)]),
    ("\\sqrt{50} = 5\\sqrt{2}", [("\\sqrt{50}", "5\\sqrt{2}", True)]),
    ("\\frac{1}{\\sqrt{2}+1} = \\sqrt{2}-1", [("\\frac{1}{\\sqrt{2}+1}", "\\sqrt{2}-1", True)]),
    ("\\frac{1}{\\sqrt{2}+1} = \\sqrt{2}+1", [("\\frac{1}{\\sqrt{2}+1}", "\\sqrt{2}+1", False)]),
    ("\\sqrt{3+2\\sqrt{2}} = 1 + \\sqrt{2}", [("\\sqrt{3+2\\sqrt{2}}", "1 + \\sqrt{2}", True)]),
    # Decimals and rounding.
    ("0.1 + 0.2 = 0.3", [("0.1 + 0.2", "0.3", True)]),
    ("1.5 × 4 = 6.0", [("1.5 × 4", "6.0", True)]),
    ("2.5 × 4 = 11", [("2.5 × 4", "11", False)]),
    ("1/3 = 0.333", [("1/3", "0.333", True)]),
    ("1/3 = 0.35", [("1/3", "0.35", False)]),
    ("22/7 = 3.14", [("22/7", "3.14", True)]),
    ("20 / 3 = 6.67", [("20 / 3", "6.67", True)]),
    ("20 / 3 = 6.6", [("20 / 3", "6.6", False)]),
    ("2/3 = 0.666...", [("2/3", "0.666", True)]),  # an ellipsis allows truncation
    ("0.333... = 1/3", [("0.333", "1/3", True)]),
    ("\\sqrt{2} = 1.414", [("\\sqrt{2}", "1.414", True)]),
    ("\\sqrt{2} = 1.42", [("\\sqrt{2}", "1.42", False)]),
    ("1/3 = 0.33 (rounded)", [("1/3", "0.33", True)]),
    ("0.1 + 0.2 = 0.4", [("0.1 + 0.2", "0.4", False)]),
    # A near miss built on decimals rounded earlier (33.33 for 100/3) is not judged;
    # a real miss still is.
    ("2 × 33.33 = 66.67", []),
    ("1.41^2 = 2", []),
    ("2 × 33.33 = 76.67", [("2 × 33.33", "76.67", False)]),
    ("6.02 × 10^{23} × 2 = 1.204 × 10^{24}", [("6.02 × 10^{23} × 2", "1.204 × 10^{24}", True)]),
    # Percent (1/100, or a unit label when the writer scaled by 100 already).
    ("50\\% = 0.5", [("50\\%", "0.5", True)]),
    ("20% × 50 = 10", [("20% × 50", "10", True)]),
    ("3/4 = 75%", [("3/4", "75%", True)]),
    ("3/4 = 80%", [("3/4", "80%", False)]),
    ("0.15 × 100 = 15%", [("0.15 × 100", "15%", True)]),
    ("1/3 = 33.3%", [("1/3", "33.3%", True)]),
    # Thousands separators.
    ("1,000 + 234 = 1,234", [("1,000 + 234", "1,234", True)]),
    ("12,345,678 - 1 = 12,345,677", [("12,345,678 - 1", "12,345,677", True)]),
    ("1,000 × 3 = 3,000, done", [("1,000 × 3", "3,000", True)]),
    ("2,5 + 1 = 3,5", []),  # decimal commas: not read as thousands, not guessed
    # Chains: each link on its own.
    (
        "17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408",
        [
            ("17 × 24", "17 × 20 + 17 × 4", True),
            ("17 × 20 + 17 × 4", "340 + 68", True),
            ("340 + 68", "408", True),
        ],
    ),
    (
        "12 × 3 = 36 = 6 × 5 = 30",
        [("12 × 3", "36", True), ("36", "6 × 5", False), ("6 × 5", "30", True)],
    ),
    ("2 + 2 = 5 = 5", [("2 + 2", "5", False), ("5", "5", True)]),
    (
        "3 + 4 = 7 = 8 - 1 = 2^3 - 1",
        [("3 + 4", "7", True), ("7", "8 - 1", True), ("8 - 1", "2^3 - 1", True)],
    ),
    # Several claims in one line, delimiters, trailing punctuation.
    (
        "$17 \\times 24 = 408$ and $408 / 24 = 17$.",
        [("17 \\times 24", "408", True), ("408 / 24", "17", True)],
    ),
    ("\\(3^4 = 81\\), \\(4^3 = 64\\)", [("3^4", "81", True), ("4^3", "64", True)]),
    ("So 3 × 4 = 12, and 5 × 6 = 30.", [("3 × 4", "12", True), ("5 × 6", "30", True)]),
    ("2 + 2 = 4 and 4 + 4 = 8", [("2 + 2", "4", True), ("4 + 4", "8", True)]),
    ("17 × 20 = 340 and 17 × 4 = 68.", [("17 × 20", "340", True), ("17 × 4", "68", True)]),
    ("and 340 + 68 = 408.", [("340 + 68", "408", True)]),
    (
        "so 99 × 99 = 9801; 999 × 999 = 998001!",
        [("99 × 99", "9801", True), ("999 × 999", "998001", True)],
    ),
    (
        "\\[ \\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6} \\]",
        [("\\frac{1}{2} + \\frac{1}{3}", "\\frac{5}{6}", True)],
    ),
    ("17 \\times 24 &= 340 + 68 \\\\", [("17 \\times 24", "340 + 68", True)]),
    ("\\boxed{17 \\times 24 = 408}", [("17 \\times 24", "408", True)]),
    ("17 \\times 24 = \\boxed{408}", [("17 \\times 24", "{408}", True)]),
    ("(17 × 24 = 408)", [("17 × 24", "408", True)]),
    ("Hmm, 7 × 8 = 56? Yes.", [("7 × 8", "56", True)]),
    ("3 × 40 = 120!", [("3 × 40", "120", True)]),
    ("17 × 24 = 408 ✓", [("17 × 24", "408", True)]),
    ("17 \\cdot 24 = 408 \\implies done", [("17 \\cdot 24", "408", True)]),
    ("100 − 37 = 63 cm", [("100 − 37", "63", True)]),
    ("total = 3 × 4 = 12 apples", [("3 × 4", "12", True)]),
    # Markdown around claims.
    ("- 17 × 24 = 408", [("17 × 24", "408", True)]),
    ("- 3 + 4 = 1", [("- 3 + 4", "1", True)]),  # a bullet, or a signed sum: either reading
    ("- 3 + 4 = 5", [("3 + 4", "5", False)]),
    ("1. 17 × 24 = 408", [("17 × 24", "408", True)]),
    ("**17 × 24 = 408**", [("17 × 24", "408", True)]),
    ("**Check:** 17 × 24 = 418", [("17 × 24", "418", False)]),
    # Boundaries with labels and relations.
    ("Step 2: 3 + 4 = 7", [("3 + 4", "7", True)]),
    ("Answer: 408 = 17 × 24", [("408", "17 × 24", True)]),
    ("x = 3 + 4 = 7", [("3 + 4", "7", True)]),
    ("y = 2x + 3 = 2(5) + 3 = 13", [("2(5) + 3", "13", True)]),
    ("0 < 3 + 4 = 7", [("3 + 4", "7", True)]),
    ("x := 3 + 4 = 8", [("3 + 4", "8", False)]),
    ("\\sum_{k=1}^{3} k^2 = 1 + 4 + 9 = 14", [("1 + 4 + 9", "14", True)]),
    ("In 2023, 5 + 5 = 10", [("5 + 5", "10", True)]),
    # Other spellings (forms.checker_form), read where they stand between numbers.
    ("5 x 3 = 15", [("5 x 3", "15", True)]),
    ("17x4=78", [("17x4", "78", False)]),
    ("0x10 = 16", []),  # a hex prefix, not a product
    ("12 divided by 4 = 3", [("12 divided by 4", "3", True)]),
    ("25% of 80 = 20", [("25% of 80", "20", True)]),
    ("20% of 150 is 35", [("20% of 150", "35", False)]),
    ("17 times 4 gives 78", [("17 times 4", "78", False)]),
    ("17 plus 4 equals 21.", [("17 plus 4", "21", True)]),
    ("17 minus 4 is equal to 13", [("17 minus 4", "13", True)]),
    ("So 340 + 68 makes 408", [("340 + 68", "408", True)]),
    ("１７ × ４ ＝ ７８", [("１７ × ４", "７８", False)]),
    ("٣ + ٤ = ٧", [("٣ + ٤", "٧", True)]),
    ("2 + 2 = 4 = 5", [("2 + 2", "4", True), ("4", "5", False)]),
    ("17 divided by 5 is 3 remainder 2", []),
    ("The answer is 408", []),
    # After an "=" in its clause a word goes on from the result: not a chain.
    (
        "So 17 × 4 = 68 gives 68 + 340 = 408.",
        [("17 × 4", "68", True), ("68 + 340", "408", True)],
    ),
    ("17 × 4 = 68 plus 4 = 72", []),  # "68 plus 4" may go on: all unread
    (
        "17 × 4 = 68, and 68 plus 340 is 408.",
        [("17 × 4", "68", True), ("68 plus 340", "408", True)],
    ),
    ("3 is 2 more than 1", []),
    # Variables, functions and words: skipped, never partially read.
    ("3x - 5 = 7", []),
    ("x - 5 = 7", []),
    ("2x + 3 = 13", []),
    ("If x = 5, then 2x + 3 = 13.", []),
    ("so = 7x", []),
    ("3 + 4 = 7x", []),
    ("3 + 4 = 7 + y", []),
    ("f(2) = 5", []),
    ("f'(2) = 5", []),
    ("a_1 = 5", []),
    ("x^2 = 100", []),
    ("e^2 = 7.39", []),
    ("n(n+1)/2 = 55", []),
    ("sqrt(16) = 4", []),
    ("\\log_2 8 = 3", []),
    ("\\sin 30 = 0.5", []),
    ("|−3| = 3", []),
    ("three times 4 = 12", []),
    ("the sum of 3 and 4 = 7", []),
    ("the sum of 3, 4 = 7", []),
    ("the ratio 3 : 4 = 0.75", []),
    ("6/2 = 3:1", []),
    ("7/2 = 3 remainder 1", []),
    ("7/2 = 3 and a half", []),
    ("2^4 = 1 (mod 5)", []),
    ("1.5 × 2 = 3 million", []),
    ("100 - 37 = 63cm", []),
    ("4 × 6 = 4!", []),  # false as 4, true as 4 factorial: not guessed
    ("5!/3! = 20", []),
    ("x**3 = 27", []),
    ("= 2**x", []),
    ("2 (3 + 4) = 14", []),  # a spaced group may be an annotation
    ("6/2(3) = 9", []),  # ambiguous
    ("1/0 = 5", []),
    # Not equalities.
    ("3 + 4 == 7", []),
    ("3 + 4 <= 8", []),
    ("3 + 4 >= 7", []),
    ("3 + 4 != 8", []),
    ("3 + 4 \\neq 8", []),
    ("3 + 4 \\leq 8", []),
    ("x := 7", []),
    ("3 + 4 => 7", []),
    ("\\pi \\approx 3.14", []),
    ("22/7 ≈ 3.14", []),
    ("3 + 4 ≠ 8", []),
]


def _summary(links: list[Link]) -> Expected:
    return [(lk.left_text, lk.right_text, lk.holds) for lk in links]


@pytest.mark.parametrize(("line", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_links(line: str, expected: Expected) -> None:
    links = find_links(line)
    assert _summary(links) == expected
    for lk in links:
        assert line[lk.left_start : lk.left_end] == lk.left_text
        assert line[lk.right_start : lk.right_end] == lk.right_text
        assert lk.left_end <= lk.right_start


def test_enough_cases() -> None:
    assert len(CASES) >= 60


def test_values_are_exact() -> None:
    (lk,) = find_links("$\\frac{3}{4} + 0.1 = 0.85$")
    assert lk.left_value == sympy.Rational(17, 20) and lk.right_value == sympy.Rational(17, 20)
    (lk,) = find_links("\\sqrt{8} = 2\\sqrt{2}")
    assert lk.left_value == 2 * sympy.sqrt(2)


def test_trivial_and_approximate_flags() -> None:
    (lk,) = find_links("2 = 2")
    assert lk.holds and lk.trivial and not lk.approximate
    (lk,) = find_links("-5 = -5")
    assert lk.trivial
    (lk,) = find_links("1,000 = 1000")
    assert lk.holds and lk.trivial
    (lk,) = find_links("2 + 3 = 5")
    assert not lk.trivial and not lk.approximate
    (lk,) = find_links("1/3 = 0.333")
    assert lk.holds and lk.approximate
    (lk,) = find_links("1/4 = 0.25")
    assert lk.holds and not lk.approximate


# The bounds below are on this thread's CPU time: they catch a blow-up (a cube, an
# exponential) by a wide margin, and a loaded machine that deschedules the test moves none.


def test_lines_without_claims_are_free() -> None:
    assert find_links("") == []
    assert find_links("No equals sign here, 3 + 4 is seven.") == []
    assert find_links("a = b and c = d") == []  # no digit: not even lexed
    line = "Let me think about this carefully; the answer should be the number of apples. " * 3
    start = time.thread_time()
    for _ in range(5000):
        find_links(line)
    assert time.thread_time() - start < 0.5


def test_typical_trace_is_fast() -> None:
    rng = random.Random(7)
    lines = []
    for _ in range(1000):
        a, b = rng.randint(2, 9999), rng.randint(2, 9999)
        lines += [
            f"So {a} × {b} = {a * b}, which we carry forward.",
            f"$\\frac{{{a}}}{{{b}}} + 1 = \\frac{{{a + b}}}{{{b}}}$",
            f"Then {a} - {b} = {a - b + rng.choice([0, 1])}.",
            "Now let me double-check the reasoning above before moving on.",
        ]
    start = time.thread_time()
    found = sum(len(find_links(line)) for line in lines)
    elapsed = time.thread_time() - start
    assert found == 3000
    assert elapsed / len(lines) < 2e-3  # well under a millisecond per line on a free core


SECURITY_LINES = [
    "__import__('os').system('touch {m}') = 0",
    "$__import__('os').system('touch {m}') = 0$",
    "0 = __import__('os').system('touch {m}')",
    "1 + 1 = __import__('os').system('touch {m}') = 2",
    "exec(\"open('{m}', 'w')\") = 0",
]


@pytest.mark.parametrize("template", SECURITY_LINES)
def test_code_in_a_claim_is_never_run(
    template: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec reached")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert find_links(template.format(m=marker)) == []
    assert not marker.exists()


HUGE_LINES = [
    "10^10^10 = 5",
    "9^9^9^9 = 1",
    "2^{100000} = 0",
    "So 2 = 10^{10^{10}}.",
    "(" * 10_000 + "1" + ")" * 10_000 + " = 1",
    "1 = " + "(" * 10_000 + "1" + ")" * 10_000,
    "(" * 60 + "1" + ")" * 60 + " = 1",
    " + ".join(["1"] * 5000) + " = 5000",
    "1" * 300 + " = 1",
    "(\\sqrt{2} + 1)^{100000} = 1",
    "\\sqrt{" + "9" * 150 + "} = 3",
]


@pytest.mark.parametrize("line", HUGE_LINES, ids=lambda s: s[:30])
def test_huge_claims_are_skipped_fast(line: str) -> None:
    start = time.thread_time()
    assert find_links(line) == []
    assert time.thread_time() - start < 0.5


def test_crafted_radicals_stay_bounded() -> None:
    # sympy's `equals` needs seconds to minutes here; the separation bound decides or skips.
    lines = [
        "1 + (\\sqrt[12]{3}-\\sqrt[11]{3})^{64}(\\sqrt[12]{5}-\\sqrt[11]{5})^{64} = 1",
        "(\\sqrt[12]{3}-\\sqrt[11]{3})^{64}(\\sqrt[12]{5}-\\sqrt[11]{5})^{64}"
        " = (\\sqrt[12]{2}-\\sqrt[11]{2})^{64}(\\sqrt[12]{7}-\\sqrt[11]{7})^{64}",
        "1 + (\\sqrt{3}-\\sqrt{2})^{64} = 1",
    ]
    for line in lines:
        start = time.thread_time()
        links = find_links(line)
        assert time.thread_time() - start < 1.0
        assert all(not lk.holds for lk in links)  # each is false; skipping is also fine
    (lk,) = find_links("1 + (\\sqrt{3}-\\sqrt{2})^{64} = 1")
    assert lk.holds is False  # differs only in the 32nd digit, still decided exactly


def test_long_line_with_many_claims() -> None:
    line = " ".join(f"Then {i} + {i} = {2 * i + (i % 7 == 0)}." for i in range(1, 400))
    start = time.thread_time()
    links = find_links(line)
    assert time.thread_time() - start < 2.0
    assert len(links) == 399
    assert [lk.holds for lk in links] == [i % 7 != 0 for i in range(1, 400)]
