"""Quantities with units, checked exactly: ``2.5 km = 2500 m``, ``3 h 20 min = 200 min``,
``1.5 kg = 1500 g``, ``2 m^2 = 20000 cm^2`` (issue 38).

The arithmetic checker reads no number beside a word, so a conversion written with units
was never read: a false one (``2.5 km = 250 m``) could earn positive credit. Here a side
is one quantity or a run of them of one dimension (``3 h 20 min``), each a number (the
project's reader, `reading.numbers`: separators, other scripts) and a unit from the table
below; the two sides of an ``=`` are compared in the dimension's base unit, exactly
(`Fraction`). A side with a unit the table lacks, units of two dimensions, or anything
else between the number and its unit is not read: nothing doubtful becomes a verdict.

A link found here has the shape of the arithmetic checker's (`links.Link`): its values
are the two sides in the base unit, and it is never trivial (a conversion is a claim).
"""

from __future__ import annotations

import re
from fractions import Fraction

from judge_service.judges.rules.links import Link
from judge_service.lazy_sympy import sympy
from judge_service.reading.numbers import read_numbers

__all__ = ["unit_links"]

_LENGTH = {"mm": Fraction(1, 1000), "cm": Fraction(1, 100), "m": Fraction(1), "km": Fraction(1000)}
_LENGTH |= {"in": Fraction(254, 10000), "ft": Fraction(3048, 10000), "yd": Fraction(9144, 10000)}
_LENGTH |= {"mi": Fraction(1609344, 1000)}
_MASS = {"mg": Fraction(1, 1000), "g": Fraction(1), "kg": Fraction(1000), "t": Fraction(10**6)}
_MASS |= {"oz": Fraction(28349523125, 10**9), "lb": Fraction(45359237, 10**5)}
_TIME = {"s": Fraction(1), "sec": Fraction(1), "min": Fraction(60), "h": Fraction(3600)}
_TIME |= {"hr": Fraction(3600), "hrs": Fraction(3600), "hour": Fraction(3600)}
_TIME |= {"hours": Fraction(3600), "minute": Fraction(60), "minutes": Fraction(60)}
_TIME |= {"second": Fraction(1), "seconds": Fraction(1), "day": Fraction(86400)}
_TIME |= {"days": Fraction(86400), "week": Fraction(604800), "weeks": Fraction(604800)}
_VOLUME = {"ml": Fraction(1, 1000), "mL": Fraction(1, 1000), "l": Fraction(1), "L": Fraction(1)}

# unit -> (dimension, factor to the base unit)
UNITS: dict[str, tuple[str, Fraction]] = {}
for _dim, _table in (("length", _LENGTH), ("mass", _MASS), ("time", _TIME), ("volume", _VOLUME)):
    UNITS |= {unit: (_dim, factor) for unit, factor in _table.items()}
for _unit, _factor in _LENGTH.items():  # areas: m^2, m², cm^2 ...
    for _mark in ("^2", "²", "^{2}"):
        UNITS[_unit + _mark] = ("area", _factor**2)

_UNIT = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
# A unit as written, or in LaTeX's \text{ } / \mathrm{ } (`2 \text{ hours}`).
_WRAP_OPEN, _WRAP_CLOSE = r"(?:\\(?:text|mathrm|mbox)\s*\{\s*)?", r"(?:\s*\})?"
_QUANTITY = rf"{_NUMBER}\s*{_WRAP_OPEN}(?:{_UNIT})(?![\w^²]){_WRAP_CLOSE}"
_SIDE = rf"(?:{_QUANTITY})(?:\s+(?:and\s+)?{_QUANTITY})*"
_CLAIM = re.compile(rf"(?<![\w.])(?P<left>{_SIDE})\s*=\s*(?P<right>{_SIDE})")
_PART = re.compile(rf"(?P<number>{_NUMBER})\s*{_WRAP_OPEN}(?P<unit>{_UNIT})(?![\w^²])")
_TRIGGER = re.compile(r"\d\s*\\?[A-Za-z]")


def unit_links(line: str) -> list[Link]:
    """Every ``quantity = quantity`` claim of `line` whose sides this module reads."""
    if "=" not in line or _TRIGGER.search(line) is None:
        return []
    found: list[Link] = []
    for match in _CLAIM.finditer(line):
        if _operand(line[: match.start()].rstrip(), line[match.end() :].lstrip()):
            continue  # a term of a longer expression ("2 h + 1.5 h + 2 h = 5.5 h")
        left, right = _value(match.group("left")), _value(match.group("right"))
        if left is None or right is None or left[0] != right[0]:
            continue
        lv, rv = (
            sympy.Rational(left[1].numerator, left[1].denominator),
            sympy.Rational(right[1].numerator, right[1].denominator),
        )
        ls, le = match.span("left")
        rs, re_ = match.span("right")
        found.append(
            Link(ls, le, rs, re_, line[ls:le], line[rs:re_], lv, rv, lv == rv, False, False)
        )
    return found


_OPERATORS = ("+", "-", "*", "/", "×", "·", "÷", "−", "=", "\\times", "\\cdot", "\\div")


def _operand(before: str, after: str) -> bool:
    """Whether an operator joins the claim to more text on either side."""
    return before.endswith(_OPERATORS) or after.startswith(_OPERATORS)


def _value(side: str) -> tuple[str, Fraction] | None:
    """A side's dimension and value in its base unit; None when not one dimension."""
    dimension: str | None = None
    total = Fraction(0)
    for part in _PART.finditer(side):
        numbers = read_numbers(part.group("number"), words=False)
        if len(numbers) != 1:
            return None
        dim, factor = UNITS[part.group("unit")]
        if dimension not in (None, dim):
            return None
        dimension = dim
        total += numbers[0].value * factor
    return None if dimension is None else (dimension, total)
