"""The rules judge's numeric-expression parser: exact values, refusals, and no `eval`."""

from __future__ import annotations

import builtins
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
import sympy

from judge_service.judges.rules.arithmetic import (
    ParseError,
    TooLarge,
    has_operator,
    lex,
    parse_number_expr,
)

R = sympy.Rational
S2 = sympy.sqrt(2)

VALUES: list[tuple[str, Any]] = [
    ("408", 408),
    ("17 * 24", 408),
    ("17 × 24", 408),
    ("17 \\times 24", 408),
    ("17 \\cdot 24", 408),
    ("17 · 24", 408),
    ("17 ⋅ 24", 408),
    ("144 / 12", 12),
    ("144 ÷ 12", 12),
    ("144 \\div 12", 12),
    ("7 / 2", R(7, 2)),
    ("0.1", R(1, 10)),
    ("0.1 + 0.2", R(3, 10)),
    (".5", R(1, 2)),
    ("3.14159", R(314159, 100000)),
    ("1,000", 1000),
    ("12,345,678", 12345678),
    ("1,234.5", R(12345, 10)),
    ("-5", -5),
    ("−5", -5),
    ("5 - -3", 8),
    ("+5", 5),
    ("-3 \\times 4", -12),
    ("(-2)^2", 4),
    ("-2^2", -4),
    ("−2²", -4),
    ("2^3^2", 512),  # right-associative
    ("2^{10}", 1024),
    ("2**10", 1024),
    ("2^{-2}", R(1, 4)),
    ("2^-2", R(1, 4)),
    ("10^{-3}", R(1, 1000)),
    ("3² + 4²", 25),
    ("2⁻¹", R(1, 2)),
    ("8^{1/3}", 2),
    ("4^{0.5}", 2),
    ("(3 + 4) × 2", 14),
    ("3 + 4 × 2", 11),
    ("[2 + 3] \\times 4", 20),
    ("{2 + 3} \\cdot 4", 20),
    ("\\left(\\frac{1}{2}\\right)^2", R(1, 4)),
    ("\\left[ 1 + 1 \\right] ^ 3", 8),
    ("\\frac{3}{4} + \\frac{1}{4}", 1),
    ("\\dfrac{1}{2} + \\tfrac{1}{3}", R(5, 6)),
    ("\\frac{\\frac{1}{2}}{3}", R(1, 6)),
    ("\\sqrt{144}", 12),
    ("\\sqrt{8}", 2 * S2),
    ("\\sqrt(16)", 4),
    ("\\sqrt[3]{27}", 3),
    ("\\sqrt[3]{-8}", -2),
    ("√16", 4),
    ("√(9 + 16)", 5),
    ("∛27", 3),
    ("2√3", 2 * sympy.sqrt(3)),
    ("2\\sqrt{2}", 2 * S2),
    ("\\sqrt{2}\\sqrt{2}", 2),
    ("\\sqrt{2}^2", 2),
    ("2(3 + 4)", 14),
    ("(2)(3)", 6),
    ("2(3)^2", 18),
    ("2(3)/6", 1),
    ("50%", R(1, 2)),
    ("50\\%", R(1, 2)),
    ("20% × 50", 10),
    ("0^5", 0),
    ("1^{1000000000}", 1),
    ("(-1)^{1000000001}", -1),
    ("2^{10000}", 2**10000),
    ("\\,3\\, +\\; 4~", 7),
    ("\\boxed{408}", 408),
]


@pytest.mark.parametrize(("src", "expected"), VALUES)
def test_exact_values(src: str, expected: Any) -> None:
    value = parse_number_expr(src)
    assert sympy.simplify(value - expected) == 0, (src, value)


REFUSED = [
    "",
    "x + 1",
    "2x",
    "\\pi",
    "e^2",
    "5!",
    "|-3|",
    "3 +",
    "(3 + 4",
    "3 + 4)",
    "(3 + 4]",
    "2 3",  # two numbers, no operator
    "2 1/2",  # mixed number: 2.5 or 1?
    "2\\frac{1}{2}",
    "2 (3 + 4)",  # a spaced group is often an annotation, not a factor
    "6/2(3)",  # ambiguous: 9 or 1
    "6 ÷ 2(1 + 2)",
    "1/0",
    "\\frac{1}{0}",
    "1 / (2 - 2)",
    "\\frac{1}{\\sqrt{2} - \\sqrt{2}}",
    "0^0",
    "0^{-1}",
    "\\sqrt{-4}",
    "(-8)^{1/3}",
    "2^{\\sqrt{2}}",
    "05",  # dates, codes
    "2,5",  # decimal comma or a list: either way not a number here
    "1,0000",
    "3.14.15",
    "\\sqrt[0]{8}",
    "\\sqrt[x]{8}",
    "\\frac12",
]


@pytest.mark.parametrize("src", REFUSED)
def test_refused(src: str) -> None:
    with pytest.raises(ParseError):
        parse_number_expr(src)


HUGE = [
    "10^10^10",
    "9^9^9^9",
    "2^{100000}",
    "10^{10^{10}}",
    "(10^{1000})^{1000}",
    "2^{-100000}",
    "(1/3)^{100000}",
    "(\\sqrt{2} + 1)^{100000}",
    "1" * 201,  # literal too long
    "(" * 10_000 + "1" + ")" * 10_000,
    "(" * 60 + "1" + ")" * 60,  # short enough, too deep
    "-" * 60 + "1",
    "√" * 60 + "2",
    "+".join(["1"] * 300),  # longer than 500 chars
    "\\sqrt{" + "9" * 150 + "}",  # radicands are bounded tighter than integers
    "\\sqrt[7]{" + "1" + "0" * 89 + "1/" + "3" * 90 + "}",
    ("9" * 199 + "*") * 3 + "9",
]


@pytest.mark.parametrize("src", HUGE, ids=lambda s: s[:30])
def test_too_large_is_refused_fast(src: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TooLarge):
        parse_number_expr(src)
    assert time.perf_counter() - start < 0.5


def test_product_of_big_literals_is_bounded() -> None:
    # Each literal is allowed; their product grows past the result bound.
    src = " * ".join(["9" * 200] * 2)
    assert parse_number_expr(src) == (10**200 - 1) ** 2
    with pytest.raises(TooLarge):
        parse_number_expr("(" + src + ")^{20}")


def test_no_eval_on_trace_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "pwned"

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec reached")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    for payload in (
        f"__import__('os').system('touch {marker}')",
        f'__import__("os").system("touch {marker}")',
        "().__class__.__bases__[0].__subclasses__()",
        f"exec(\"open('{marker}', 'w')\")",
        "lambda: 1",
    ):
        with pytest.raises(ParseError):
            parse_number_expr(payload)
        has_operator(payload)  # must not raise or evaluate either
    assert not marker.exists()
    # The whole grammar runs with eval and exec disabled.
    for src, expected in VALUES[:20]:
        assert parse_number_expr(src) == expected


def test_has_operator() -> None:
    assert has_operator("2 + 3")
    assert has_operator("17 \\times 24")
    assert has_operator("\\frac{1}{2}")
    assert has_operator("\\sqrt{4}")
    assert has_operator("2^{10}")
    assert has_operator("3²")
    assert has_operator("50%")
    assert has_operator("2(3)")
    assert has_operator("5 - x")  # unparseable: judged by tokens
    assert not has_operator("5")
    assert not has_operator("-5")
    assert not has_operator("−5")
    assert not has_operator("(5)")
    assert not has_operator("1,000")
    assert not has_operator("3.5")
    assert not has_operator("- x")


def test_lexer_offsets_cover_the_text() -> None:
    src = "So $\\frac{3}{4} + 1,000 × 2^{10} = x$ — done…"
    toks = lex(src)
    assert "".join(src[t.start : t.end] for t in toks) == src
    assert all(a.end == b.start for a, b in itertools.pairwise(toks))
