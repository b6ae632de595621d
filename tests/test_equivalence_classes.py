"""Answer forms math-verify misreads (issue 38), each with near-misses that must not pass.

Every class has pairs that are the same answer written two ways, and near-misses that
must stay ``not_equivalent`` (or ``unknown``: never a false ``equivalent``).
"""

from __future__ import annotations

import pytest

from judge_service.equivalence import EquivalenceChecker

E, N, U = "equivalent", "not_equivalent", "unknown"


# (reference, answer)
SAME: list[tuple[str, str]] = [
    # LaTeX thousands separators and \mbox units (already read: kept as regressions)
    ("32,\\!349", "32349"),
    ("1,\\!000,\\!000", "1000000"),
    ("12\\mbox{ cm}^2", "12"),
    ("12\\mbox{ cm}^2", "12\\text{ cm}^2"),
    ("12 \\mathrm{~cm}^{2}", "12"),
    ("3\\,\\mathrm{~m}^3", "3\\text{ m}^3"),
    # clock times
    ("1:30 pm", "13:30"),
    ("13:30", "1:30 \\text{ p.m.}"),
    ("12:00", "12:00 pm"),
    ("0:00", "12:00 a.m."),
    ("9:05", "09:05"),
    ("7:15:30 PM", "19:15:30"),
    # repeating decimals
    ("0.\\overline{3}", "\\frac{1}{3}"),
    ("0.1\\overline{6}", "\\frac{1}{6}"),
    ("0.\\overline{142857}", "1/7"),
    ("2.\\overline{45}", "\\frac{27}{11}"),
    ("-0.\\overline{6}", "-\\frac{2}{3}"),
    ("0.\\bar{3}", "0.\\overline{3}"),
    ("0.\\overline{9}", "1"),
    # \mathrm{e} is Euler's number, and i in its exponent the imaginary unit
    ("\\mathrm{e}", "e"),
    ("1 - \\frac{1}{\\mathrm{e}}", "1 - 1/e"),
    ("1 - \\frac{1}{\\mathrm{e}}", "1 - e^{-1}"),
    ("2\\mathrm{e}", "2e"),
    ("3\\cdot\\mathrm{e}", "3e"),
    ("\\mathrm{e}^{2}", "e^2"),
    ("\\frac{1}{7} + \\mathrm{e}", "\\frac{1}{7} + e"),
    ("\\mathrm{e}^{i\\pi}", "-1"),
    ("e^{i\\pi} + 1", "0"),
    ("e^{\\pi i}", "-1"),
    ("e^{2\\pi i}", "1"),
    # an interval against the inequality it denotes
    ("[2, 5)", "2 \\le x < 5"),
    ("[2, 5)", "5 > x \\geq 2"),
    ("(-\\infty, 3]", "x \\le 3"),
    ("(2, \\infty)", "x > 2"),
    ("(-\\infty, 3) \\cup (3, \\infty)", "x \\ne 3"),
    ("(-\\infty, 1) \\cup (4, \\infty)", "x < 1 or x > 4"),
    ("(-\\infty, 1) \\cup [4, \\infty)", "x < 1 \\lor x \\ge 4"),
    # a written degree sign: the angle in radians too (or, as before, its number)
    ("90^\\circ", "\\frac{\\pi}{2}"),
    ("\\frac{\\pi}{6}", "30°"),
    ("180^{\\circ}", "\\pi"),
    ("45\\degree", "\\frac{\\pi}{4}"),
    ("\\sin 30^\\circ", "\\frac{1}{2}"),
    ("30^\\circ", "30"),
]
DIFFERENT: list[tuple[str, str]] = [
    ("32,\\!349", "32350"),
    ("12\\mbox{ cm}^2", "13"),
    ("12 \\mathrm{~cm}^{2}", "144"),
    # clock times
    ("12:00", "1:00"),
    ("1:30 pm", "1:30 am"),
    ("1:30", "13:30"),  # no suffix: a 24-hour time
    ("9:05", "9:50"),
    ("12:00 am", "12:00 pm"),
    # repeating decimals
    ("0.\\overline{3}", "0.3"),
    ("0.\\overline{3}", "0.33"),
    ("0.1\\overline{6}", "0.\\overline{16}"),
    ("0.\\overline{6}", "-\\frac{2}{3}"),
    # \mathrm{e}
    ("1 - \\frac{1}{\\mathrm{e}}", "1 + 1/e"),
    ("1 - \\frac{1}{\\mathrm{e}}", "1 + \\frac{1}{\\mathrm{e}}"),
    ("1 - \\frac{1}{\\mathrm{e}}", "1 - \\mathrm{e}"),
    ("2\\mathrm{e}", "3\\mathrm{e}"),
    ("\\mathrm{e}^{i\\pi}", "1"),
    ("e^{i\\pi}", "e^{\\pi}"),
    # an interval against an inequality: the ends and their closedness count
    ("[2, 5)", "2 \\le x \\le 5"),
    ("[2, 5)", "2 < x < 5"),
    ("[2, 5)", "2 \\le x < 6"),
    ("(2, \\infty)", "x \\ge 2"),
    ("(-\\infty, 3]", "x < 3"),
    ("(-\\infty, 3]", "x \\ge 3"),
    ("(-\\infty, 1) \\cup (4, \\infty)", "1 < x < 4"),
    ("(-\\infty, 1) \\cup (4, \\infty)", "x < 1 or x \\ge 4"),
    ("(1, 4)", "x > 1 or x < 4"),  # or: the union, every number
    # degrees against radians: only where a degree sign is written
    ("90", "\\frac{\\pi}{2}"),
    ("90^\\circ", "\\pi"),
    ("60^\\circ", "\\frac{\\pi}{6}"),
    ("30^\\circ", "31"),
]
UNDECIDED: list[tuple[str, str]] = [
    ("1:30 pm", "1/30"),  # a time of day against a number
    ("90", "1:30 pm"),
    ("0.\\overline{" + "3" * 5000 + "}", "1/3"),  # a period too long to convert: not read
]


CASES = [(g, p, E) for g, p in SAME] + [(g, p, N) for g, p in DIFFERENT]
CASES += [(g, p, U) for g, p in UNDECIDED]


@pytest.mark.parametrize(("gold", "pred", "verdict"), CASES)
def test_each_class_and_its_near_misses(
    equivalence_checker: EquivalenceChecker, gold: str, pred: str, verdict: str
) -> None:
    """Both ways round: the reference goes in as gold, and math-verify is asymmetric."""
    assert equivalence_checker.check(gold, pred).verdict == verdict
    assert equivalence_checker.check(pred, gold).verdict == verdict
