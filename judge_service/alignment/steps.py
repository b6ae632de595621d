"""A solution read as steps, and each step as what it computes.

A step is a line that claims something (`reading.markup.claims_nothing` drops headings,
rules, fences and blank lines); the lines of a display-math block (between ``\\[`` and
``\\]`` fence lines) belong to the step before it, so markup never cuts a step in two.
What a step computes is read by the project's readers, never by a second list of forms:

- its claims: every non-trivial ``a = b`` link the exact checker reads in the line's
  checker form (`judges.rules.claims.find_links`: words, LaTeX, ``\\text{}`` unit
  labels, GSM8K's calculator annotations ``<<16-3=13>>``), as operand values
  (`reading.numbers`), a result and whether the checker proves it;
- its values: every number written in it outside its structural lead (``2. Food`` has
  none), words included (``three`` is 3).

Positions are chars of the text read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from judge_service.judges.rules.claims import find_links
from judge_service.lazy_sympy import sympy
from judge_service.reading.markup import claims_nothing, mask_markup, structure_end
from judge_service.reading.numbers import read_numbers

__all__ = ["Claim", "Step", "as_fraction", "read_steps", "values_of"]

_OPEN_BLOCK = re.compile(r"\s*(?:\\\[|\$\$)\s*")
_CLOSE_BLOCK = re.compile(r"\s*(?:\\\]|\$\$)\s*[.,]?\s*")


@dataclass(frozen=True)
class Claim:
    operands: tuple[Fraction, ...]  # the values its left side is computed from
    result: Fraction | None  # its right side's value; None when not a rational number
    holds: bool  # the checker's verdict
    start: int  # chars of the text, the whole link
    end: int


@dataclass(frozen=True)
class Step:
    start: int  # chars of the text: first claiming char to last, without white space
    end: int
    claims: tuple[Claim, ...]
    values: tuple[tuple[Fraction, int], ...]  # (value, char) of every number in it

    def computes(self) -> frozenset[Fraction]:
        return frozenset(c.result for c in self.claims if c.result is not None)


def as_fraction(value: Any) -> Fraction | None:
    """A checker value (sympy or int) as a Fraction, None when irrational or too odd."""
    if isinstance(value, int | Fraction):
        return Fraction(value)
    if isinstance(value, sympy.Rational):
        return Fraction(int(value.p), int(value.q))
    return None


def values_of(text: str, base: int = 0) -> list[tuple[Fraction, int]]:
    """(value, char) of every number in `text` (digits, fractions and their parts,
    coefficients, words)."""
    return sorted({(n.value, base + n.start) for n in read_numbers(text, parts=True)}, key=_at)


def _at(item: tuple[Fraction, int]) -> int:
    return item[1]


def read_steps(text: str) -> list[Step]:
    """The steps of `text` in order (see the module docstring)."""
    groups: list[list[tuple[int, str]]] = []
    at = 0
    in_block = False
    for line in text.split("\n"):
        if _OPEN_BLOCK.fullmatch(line):
            in_block = True
        elif _CLOSE_BLOCK.fullmatch(line):
            in_block = False
        elif not claims_nothing(line):
            if in_block and groups:
                groups[-1].append((at, line))
            else:
                groups.append([(at, line)])
        at += len(line) + 1
    return [_step(group) for group in groups]


def _step(lines: list[tuple[int, str]]) -> Step:
    claims: list[Claim] = []
    values: list[tuple[Fraction, int]] = []
    first = lines[0][0] + structure_end(lines[0][1])
    last = lines[-1][0] + len(lines[-1][1].rstrip())
    for base, line in lines:
        lead = structure_end(line)
        values.extend(values_of(mask_markup(line)[lead:], base + lead))
        for link in find_links(line):
            if link.trivial or link.left_end <= lead:
                continue
            operands = tuple(
                n.value
                for n in read_numbers(link.left_text, words=False, parts=True)
                if n.form != "fraction"  # a fraction's parts are its operands
            )
            claims.append(
                Claim(
                    operands,
                    as_fraction(link.right_value),
                    bool(link.holds),
                    base + link.left_start,
                    base + link.right_end,
                )
            )
    return Step(first, max(first, last), tuple(claims), tuple(values))
