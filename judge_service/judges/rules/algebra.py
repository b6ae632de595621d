"""Algebra steps in one variable, checked exactly (issue 38): a solution substituted back
(``x^2 = 9 gives x = 4`` is false, ``2x + 3 = 11 so x = 4`` true) and a factorisation or
expansion compared as polynomials (``x^2 - 5x + 6 = (x - 2)(x - 3)``,
``(x + 1)^2 = x^2 + 2x + 1``).

Trace text is untrusted, so nothing here calls `sympify` (it runs `eval`): a small
recursive-descent parser builds sympy polynomials from numbers, one letter, ``+ - * / ^``
(``×``, ``·``, ``**``), parentheses and implicit products (``2x``, ``3(x + 1)``,
``(x - 2)(x - 3)``), with the size of every expression bounded before it is built
(`MAX_CHARS`, `MAX_DEGREE`). Anything else is not read. What is read:

- a **solution**: an equation in the letter, then a connective (``so``, ``gives``,
  ``then``, ``hence``, ``thus``, ``therefore``, ``⇒``, ``=>``, ``\\Rightarrow``,
  ``\\implies``, a comma or semicolon), then ``x = value`` (or several joined by ``or``):
  it holds when every value satisfies the equation;
- an **identity**: ``A = B`` with the letter on both sides and one side a product or a
  power of parenthesised factors, the other written out: it holds when ``A − B`` expands
  to 0. An equation that is neither (``2x + 3 = 11`` alone) states a condition, not a
  claim, and is not read.

A link found here has the arithmetic checker's shape (`links.Link`).
"""

from __future__ import annotations

import re
from fractions import Fraction

from judge_service.judges.rules.links import Link
from judge_service.lazy_sympy import sympy

__all__ = ["algebra_links"]

MAX_CHARS = 120
MAX_DEGREE = 12
MAX_DIGITS = 30

# The words between an equation and the solution it gives, read backwards from the
# solution: `, so `, ` gives `, ` ⇒ `, `; hence `.
_CONNECTIVE = re.compile(
    r"(?:\s|[,;]|\b(?:so|gives|then|hence|thus|therefore|we get|which gives)\b"
    r"|⇒|=>|→|\\Rightarrow|\\implies|\\to\b)+$",
    re.IGNORECASE,
)
_SOLUTION = re.compile(
    r"(?<![\w\\])(?P<var>[a-zA-Z])\s*=\s*(?P<value>-?\d+(?:\.\d+)?(?:/\d+)?)"
    r"(?:\s*(?:or|,)\s*(?P=var)\s*=\s*(?P<other>-?\d+(?:\.\d+)?(?:/\d+)?))?"
    r"(?!\w|\.\d|\s*[-+*/^(])"
)
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([a-zA-Z])|(\*\*|[-+*/^()×·−]))")
_TRIGGER = re.compile(r"\d[a-zA-Z]|[a-zA-Z]\s*[\^²]|[a-zA-Z]\s*=\s*-?\d")


class _Unread(Exception):
    """Not an expression this parser reads."""


def algebra_links(line: str) -> list[Link]:
    """Every algebra claim of `line` this module reads (see the module docstring)."""
    if "=" not in line or _TRIGGER.search(line) is None:
        return []
    found = _solutions(line)
    found += [link for link in _identities(line) if not _overlaps(link, found)]
    return sorted(found, key=lambda lk: lk.left_start)


def _solutions(line: str) -> list[Link]:
    found: list[Link] = []
    for solution in _SOLUTION.finditer(line):
        var = solution.group("var")
        window = max(0, solution.start() - MAX_CHARS - 40)  # the equation and its joining words
        before = line[: solution.start()]
        connective = _CONNECTIVE.search(before, window)
        if connective is None or not connective.group().strip():
            continue
        start = max(window, _clause_start(before, connective.start()))
        equation = before[start : connective.start()]
        if equation.count("=") == 1:  # "We solve 3y - 6 = 0": from where the math begins
            start += _math_start(equation.split("=")[0], var)
            equation = before[start : connective.start()]
        sides = _equation(equation, var)
        if sides is None:
            continue
        values = [v for v in (solution.group("value"), solution.group("other")) if v]
        difference = sympy.expand(sides[0] - sides[1])
        symbol = sympy.Symbol(var)
        holds = all(difference.subs(symbol, _number(v)) == 0 for v in values)
        lead = len(equation) - len(equation.lstrip())
        ls, le = start + lead, start + len(equation.rstrip())
        rs, re_ = solution.span()
        right = sympy.Rational(_number(values[0]))
        found.append(
            Link(ls, le, rs, re_, line[ls:le], line[rs:re_], difference, right, holds, False, False)
        )
    return found


def _identities(line: str) -> list[Link]:
    found: list[Link] = []
    for clause in re.finditer(r"[^,;:]+", line):
        text = clause.group().rstrip().rstrip(".")
        if text.count("=") != 1:
            continue
        left, right = text.split("=")
        letters = set(re.findall(r"(?<![a-zA-Z\\])[a-zA-Z](?![a-zA-Z])", text))
        if len(letters) != 1:
            continue
        var = letters.pop()
        if not (_factored(left) ^ _factored(right)):
            continue
        sides = _equation(text, var)
        if sides is None or not all(side.has(sympy.Symbol(var)) for side in sides):
            continue
        holds = sympy.expand(sides[0] - sides[1]) == 0
        base = clause.start()
        ls = base + len(left) - len(left.lstrip())
        le = base + len(left.rstrip())
        rs = base + len(left) + 1 + len(right) - len(right.lstrip())
        re_ = base + len(left) + 1 + len(right.rstrip())
        found.append(
            Link(
                ls, le, rs, re_, line[ls:le], line[rs:re_], sides[0], sides[1], holds, False, False
            )
        )
    return found


def _math_start(text: str, var: str) -> int:
    """Where the expression that `text` ends with begins: after the last word that is not
    the letter (`We solve 3y - 6` -> `3y - 6`)."""
    at = len(text)
    while at > 0:
        char = text[at - 1]
        if char == var:
            neighbours = text[at - 2 : at - 1] + text[at : at + 1]
            if any(c.isalpha() for c in neighbours):
                break
        elif not (char.isdigit() or char in " .+-*/^()×·−²"):
            break
        at -= 1
    return at


def _factored(side: str) -> bool:
    """A product or a power of parenthesised factors: ``(x - 2)(x - 3)``, ``(x + 1)^2``,
    ``2(x + 3)``."""
    return bool(re.search(r"\)\s*(?:\(|\^|\*\*|²)|\d\s*\(", side))


def _clause_start(text: str, end: int) -> int:
    """Where the clause ending at `end` starts: after the last sentence break or colon."""
    cut = max(text.rfind(mark, 0, end) for mark in (". ", ": ", ", ", "; ", "(", "\n"))
    return 0 if cut < 0 else cut + (1 if text[cut] == "(" else 2)


def _equation(text: str, var: str) -> tuple[sympy.Expr, sympy.Expr] | None:
    if text.count("=") != 1 or len(text) > MAX_CHARS:
        return None
    left, right = text.split("=")
    try:
        return _Parser(left, var).parse(), _Parser(right, var).parse()
    except (_Unread, ZeroDivisionError, ValueError):
        return None


def _number(text: str) -> Fraction:
    return Fraction(text)


def _overlaps(link: Link, links: list[Link]) -> bool:
    return any(link.left_start < o.right_end and o.left_start < link.right_end for o in links)


class _Parser:
    """expr := term (('+'|'-') term)*; term := power (('*'|'/')? power)*;
    power := unary ('^' integer)?; unary := '-' unary | atom;
    atom := number | var | '(' expr ')'."""

    def __init__(self, text: str, var: str) -> None:
        self.tokens: list[str] = []
        self.var = var
        at = 0
        text = text.strip().replace("²", "^2")
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None or match.end() == at:
                raise _Unread
            number, letter, op = match.groups()
            if letter is not None and letter != var:
                raise _Unread
            if number is not None and len(number) > MAX_DIGITS:
                raise _Unread
            token = number or letter or {"×": "*", "·": "*", "−": "-", "**": "^"}.get(op, op)
            self.tokens.append(token)
            at = match.end()
        if not self.tokens:
            raise _Unread
        self.at = 0
        self.symbol = sympy.Symbol(var)

    def parse(self) -> sympy.Expr:
        value = self.expr()
        if self.at != len(self.tokens):
            raise _Unread
        if sympy.degree(value, self.symbol) > MAX_DEGREE if value.has(self.symbol) else False:
            raise _Unread
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise _Unread
        self.at += 1
        return token

    def expr(self) -> sympy.Expr:
        value = self.term()
        while self._peek() in ("+", "-"):
            op = self._take()
            value = value + self.term() if op == "+" else value - self.term()
        return value

    def term(self) -> sympy.Expr:
        value = self.power()
        while True:
            token = self._peek()
            if token in ("*", "/"):
                self._take()
                other = self.power()
                value = value * other if token == "*" else value / other
            elif token is not None and (token == "(" or token == self.var or token[0].isdigit()):
                value = value * self.power()  # implicit: 2x, 3(x + 1), (x - 2)(x - 3)
            else:
                return value
            if len(self.tokens) > MAX_CHARS:
                raise _Unread

    def power(self) -> sympy.Expr:
        base = self.unary()
        if self._peek() == "^":
            self._take()
            exponent = self._take()
            if not exponent.isdigit() or int(exponent) > MAX_DEGREE:
                raise _Unread
            return base ** int(exponent)
        return base

    def unary(self) -> sympy.Expr:
        if self._peek() == "-":
            self._take()
            return -self.unary()
        return self.atom()

    def atom(self) -> sympy.Expr:
        token = self._take()
        if token == "(":
            value = self.expr()
            if self._take() != ")":
                raise _Unread
            return value
        if token == self.var:
            return self.symbol
        if token[0].isdigit():
            return sympy.Rational(token)
        raise _Unread
