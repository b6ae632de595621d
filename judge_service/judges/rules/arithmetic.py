"""Exact values of purely numeric expressions, parsed without `eval`.

Trace text is untrusted: `sympy.sympify` and `parse_expr` call `eval`, so this
module has its own lexer and recursive-descent grammar and builds sympy numbers
directly. Every size that could make parsing or arithmetic slow is checked
*before* the work is done; anything out of bounds raises `TooLarge`, a
`ParseError`, which callers treat as "not checkable", never as a verdict.

Supported: integers, decimals (exact: `0.1` is 1/10), strict thousands groups
(`12,345,678`), `.5`; `+ - * / ^ **`, `× · ⋅ ∗ ∙ ÷ −`, `\\times \\cdot \\div`;
`( ) [ ] { }` and `\\left( \\right)`; `\\frac \\dfrac \\tfrac \\cfrac` with brace
arguments; `\\sqrt{x}`, `\\sqrt(x)`, `\\sqrt[n]{x}`, `√x ∛x ∜x`; superscript
digits (`2²`); percent `50%` / `50\\%` (postfix, times 1/100 by default).
`^` is right-associative and binds tighter than unary minus (`-2^2` is -4).

Implicit multiplication is accepted only when the factors touch and the right
one is a parenthesised group or a root: `2(3+4)`, `(2)(3)`, `2\\sqrt{2}`, `2√3`.
Refused (ParseError): `2 (3)` with a space (often an annotation such as
`= 12 (3×4)`), `2\\frac{1}{2}` and `2 1/2` (mixed numbers), implicit
multiplication after a division (`6/2(3)` is ambiguous), numbers with leading
zeros (`05`: dates, codes), division by zero, `0^0`, even roots of negatives,
irrational exponents, and anything else (letters, `\\pi`, `!`, `|x|`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from judge_service.errors import ParseError, TooLarge
from judge_service.lazy_sympy import sympy

__all__ = ["ParseError", "Parsed", "Token", "TooLarge", "has_operator", "lex"]
__all__ += ["literal_value", "parse_number_expr", "parse_tokens"]

MAX_EXPR_CHARS = 500
MAX_LITERAL_DIGITS = 200
MAX_DEPTH = 50
# About 6,000 decimal digits: far beyond real reasoning, still microseconds to compute.
MAX_BITS = 20_000
# sympy factors radicands to pull out perfect powers; that cost grows fast with size
# and root index (a 2,000-bit 7th root of a fraction takes seconds), so roots are
# bounded much more tightly than plain integers.
MAX_ROOT_BITS = 256
MAX_ROOT_INDEX = 12
MAX_IRRATIONAL_EXPONENT = 64


@functools.cache
def percent() -> Any:
    """What ``%`` multiplies by unless told otherwise: sympy's 1/100, made on first use
    (sympy is imported lazily, lazy_sympy.py)."""
    return sympy.Rational(1, 100)


class Token(NamedTuple):
    kind: str
    # OP: canonical operator (+ - * / ^ %); OPEN/CLOSE: ( [ {  ) ] }; RADIC: root
    # index; SUP: ascii exponent; TEXT: the braced content; others: the raw text.
    text: str
    start: int
    end: int


NUM, OP, SUP, OPEN, CLOSE = "NUM", "OP", "SUP", "OPEN", "CLOSE"
FRAC, SQRT, RADIC, SPACE, EQ, REL = "FRAC", "SQRT", "RADIC", "SPACE", "EQ", "REL"
DELIM, PUNCT, POISON, WORD, TEXT, OTHER = "DELIM", "PUNCT", "POISON", "WORD", "TEXT", "OTHER"
MATH_KINDS = frozenset({NUM, OP, SUP, OPEN, CLOSE, FRAC, SQRT, RADIC, SPACE})

# One master pattern so a line is lexed in a single C-level scan. Order matters
# where alternatives share a prefix: relations before `=`/operators/punctuation
# (`<=`, `!=`, `:=`, `+=`), known commands before the generic `\\name`.
_LEX = re.compile(
    r"""
      (?P<DELIM>\$\$|\$|`+|\\[()\[\]]|\\\\)
    | (?P<TEXT>\\(?:text|textbf|textit|textrm|textsf|mathrm|mathbf|mathit|mathsf|mbox
               |operatorname)\s*\{[^{}]*\})
    | (?P<SPACE>\s+|\\[,;:!\ ]|~|&|\\(?:q?quad|displaystyle|textstyle|boxed|[bB]igg?[lr]?)
               (?![A-Za-z]))
    | (?P<OPEN>\\left\s*[(\[]|[(\[{])
    | (?P<CLOSE>\\right\s*[)\]]|[)\]}])
    | (?P<FRAC>\\[dtc]?frac(?![A-Za-z]))
    | (?P<SQRT>\\sqrt(?![A-Za-z]))
    | (?P<RADIC>[√∛∜])
    | (?P<REL>==+|<=|>=|!=|:=|=:|=>|=<|[-+*/]=|\\not\s*=|[<>≤≥≠≈≡≅∼≃∝]
             |\\(?:le|leq|ge|geq|ne|neq|approx|equiv|sim|simeq|cong|lt|gt|leqslant|geqslant
             |propto)(?![A-Za-z]))
    | (?P<EQ>=)
    | (?P<NUM>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?
             |(?<![0-9])\.[0-9]+)
    | (?P<SUP>[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)
    | (?P<ELLIPSIS>\.\.\.|…|\\[lc]?dots[bc]?(?![A-Za-z]))
    | (?P<OP>\*\*|[-+*/^×·÷−⋅∗∙%]|\\(?:times|cdot|div|ast)(?![A-Za-z])|\\%)
    | (?P<POISON>[.,](?=[0-9]))
    | (?P<PUNCT>[.,;:!?])
    | (?P<CMD>\\[A-Za-z]+|\\.?)
    | (?P<WORD>[^\W\d_]+)
    | (?P<OTHER>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_OP_CANON = {"−": "-", "×": "*", "·": "*", "⋅": "*", "∗": "*", "∙": "*", "\\times": "*"}
_OP_CANON |= {"\\cdot": "*", "\\ast": "*", "÷": "/", "\\div": "/", "**": "^", "\\%": "%"}
_SUP_CANON = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_RADIC_INDEX = {"√": "2", "∛": "3", "∜": "4"}
CLOSER = {"(": ")", "[": "]", "{": "}"}


_new_token = tuple.__new__  # Token(...) without NamedTuple's Python-level __new__
# Kinds whose text is not the raw match (None: no group matched, which the OTHER
# alternative rules out, kept as OTHER all the same).
_RENAMED = frozenset({OP, OPEN, CLOSE, SUP, RADIC, TEXT, "ELLIPSIS", "CMD", None})


def lex(src: str) -> list[Token]:
    """Tokens of `src` with char offsets; every char belongs to exactly one token."""
    out: list[Token] = []
    append = out.append
    for m in _LEX.finditer(src):
        kind = m.lastgroup
        text = m.group()
        if kind in _RENAMED:
            kind, text = _canonical(kind, text)
        start, end = m.span()
        append(_new_token(Token, (kind, text, start, end)))
    return out


def _canonical(kind: str | None, raw: str) -> tuple[str, str]:
    if kind == OP:
        return kind, _OP_CANON.get(raw, raw)
    if kind in (OPEN, CLOSE):
        return kind, raw[-1]
    if kind == SUP:
        return kind, raw.translate(_SUP_CANON)
    if kind == RADIC:
        return kind, _RADIC_INDEX[raw]
    if kind == TEXT:
        return kind, raw[raw.index("{") + 1 : -1]
    if kind == "ELLIPSIS":
        return PUNCT, "..."
    return OTHER, raw  # a command, or nothing matched


class Parsed(NamedTuple):
    value: Any  # a sympy.Expr: Rational, or algebraic with radicals
    ops: int  # operations applied beyond sign and grouping; 0 means a bare literal


def parse_tokens(tokens: Sequence[Token], scale: Any = None) -> Parsed:
    """Parse math tokens (spaces allowed) as one expression. `scale` is what `%` multiplies
    by (`percent()` when None)."""
    toks = [t for t in tokens if t.kind != SPACE]
    if not toks:
        raise ParseError("empty expression")
    if toks[-1].end - toks[0].start > MAX_EXPR_CHARS:
        raise TooLarge("expression too long")
    if any(t.kind not in MATH_KINDS for t in toks):
        raise ParseError("not a purely numeric expression")
    simple = _parse_simple(toks)
    if simple is not None:
        return simple
    parser = _Parser(toks, percent() if scale is None else scale)
    value = parser.expr()
    if parser.i != len(toks):
        raise ParseError(f"unexpected {toks[parser.i].text!r}")
    return Parsed(value, parser.ops)


_SIGNS = frozenset("+-")
_PRODUCT_OPS = frozenset("*/")
_SIMPLE_OPS = _SIGNS | _PRODUCT_OPS


def _parse_simple(toks: Sequence[Token]) -> Parsed | None:
    """The common case, literals joined by ``+ - * /`` with signs ("17 × 24", "340 + 68",
    "-3 * 4 / 6"), in Python integers and fractions: about half the full parser's time.
    The value and the operation count are the full parser's; None for anything else, and
    for anything the full parser might refuse (a bad literal, division by zero, a size or
    depth limit), which it then decides with its own error."""
    total: int | Fraction = 0  # the sum of the finished terms
    term: int | Fraction = 0  # the term being multiplied out
    additive = "+"  # the operator before `term`
    multiplicative = ""  # the operator before the next operand, inside `term`
    ops = 0
    i, n = 0, len(toks)
    while True:
        negative, signs = False, 0
        while i < n and toks[i].kind == OP and toks[i].text in _SIGNS:
            negative ^= toks[i].text == "-"
            signs += 1
            i += 1
        if i >= n or toks[i].kind != NUM or signs >= MAX_DEPTH - 1:
            return None
        operand = _simple_literal(toks[i].text)
        if operand is None:
            return None
        if negative:
            operand = -operand
        i += 1
        if multiplicative == "*":
            term = term * operand
        elif multiplicative == "/":
            if operand == 0:
                return None
            term = Fraction(term) / operand
        else:
            term = operand
        if _too_big(term):
            return None
        if i == n:
            break
        t = toks[i]
        if t.kind != OP or t.text not in _SIMPLE_OPS:
            return None
        i += 1
        ops += 1
        if t.text in _PRODUCT_OPS:
            multiplicative = t.text
            continue
        total = total + term if additive == "+" else total - term
        if _too_big(total):
            return None
        additive, multiplicative = t.text, ""
    total = total + term if additive == "+" else total - term
    if _too_big(total):
        return None
    if isinstance(total, Fraction):
        return Parsed(sympy.Rational(total.numerator, total.denominator), ops)
    return Parsed(sympy.Integer(total), ops)


def _simple_literal(text: str) -> int | Fraction | None:
    """`literal_value` in Python numbers; None where it would refuse the text."""
    digits = text.replace(",", "")
    whole, _, frac = digits.partition(".")
    if len(whole) + len(frac) > MAX_LITERAL_DIGITS or (len(whole) > 1 and whole[0] == "0"):
        return None
    if not frac:
        return int(whole or "0")
    return Fraction(int(whole + frac), 10 ** len(frac))


def _too_big(v: int | Fraction) -> bool:
    if isinstance(v, int):
        return v.bit_length() > MAX_BITS
    return max(v.numerator.bit_length(), v.denominator.bit_length()) > MAX_BITS


def parse_number_expr(src: str) -> Any:
    """Exact sympy value of a purely numeric expression; `ParseError`/`TooLarge` otherwise."""
    if len(src) > MAX_EXPR_CHARS:
        raise TooLarge("expression too long")
    return parse_tokens(lex(src)).value


def has_operator(src: str) -> bool:
    """Whether `src` applies any operation beyond a sign and grouping (`2+3` yes, `-5` no)."""
    if len(src) <= MAX_EXPR_CHARS:
        try:
            return parse_tokens(lex(src)).ops > 0
        except ParseError:
            pass
    # Unparseable text: judge by tokens, counting `+`/`-` only in a binary position.
    toks = [t for t in lex(src) if t.kind != SPACE]
    binary = {i for i in range(1, len(toks)) if toks[i - 1].kind in (NUM, CLOSE, SUP)}
    return any(
        t.kind in (FRAC, SQRT, RADIC, SUP) or (t.kind == OP and (t.text not in "+-" or i in binary))
        for i, t in enumerate(toks)
    )


def _check(v: Any) -> Any:
    """Refuse results that are too large or not a finite real number."""
    if not v.is_Rational and v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo, sympy.I):
        raise ParseError("not a finite real number")
    if _bits(v) > MAX_BITS:
        raise TooLarge("result too large")
    return v


def _bits(v: Any) -> int:
    """Bit size of a rational, or of the largest rational inside an algebraic value."""
    if v.is_Rational:
        return max(int(v.p).bit_length(), int(v.q).bit_length())
    return max((_bits(r) for r in v.atoms(sympy.Rational)), default=0)


def _div(a: Any, b: Any) -> Any:
    zero = b == 0 if b.is_Rational else b.is_zero
    if zero is not False:
        raise ParseError("division by zero")
    return _check(a / b)


def _root(x: Any, n: int) -> Any:
    if n == 1:
        return x
    if _bits(x) > MAX_ROOT_BITS:
        raise TooLarge("radicand too large")
    negative = x < 0 if x.is_Rational else x.is_extended_negative
    if negative is None:
        raise ParseError("radicand sign undecidable")
    if negative:
        if n % 2 == 0:
            raise ParseError("even root of a negative number")
        return _check(-sympy.root(-x, n))
    return _check(sympy.root(x, n))


def _pow(b: Any, e: Any) -> Any:
    if not e.is_Rational:
        raise ParseError("irrational exponent")
    p, q = int(e.p), int(e.q)
    if q > MAX_ROOT_INDEX:
        raise TooLarge("root index too large")
    if b.is_Rational:
        if b == 0:
            if e > 0:
                return sympy.Integer(0)
            raise ParseError("zero to a non-positive power")
        if b == 1:
            return sympy.Integer(1)
        if b == -1 and q == 1:
            return sympy.Integer(1 - 2 * (p % 2))
        if q != 1 and b < 0:
            raise ParseError("fractional power of a negative number")
        # Size of the result, estimated before computing it: `10^10^10` stops here.
        if _bits(b) * abs(p) > (MAX_BITS if q == 1 else MAX_ROOT_BITS):
            raise TooLarge("power too large")
    elif abs(p) > MAX_IRRATIONAL_EXPONENT or _bits(b) * abs(p) > MAX_BITS:
        raise TooLarge("power too large")
    return _check(b**p) if q == 1 else _root(_check(b**p), q)


def literal_value(text: str) -> Any:
    """Exact value of one number token's text (`1,234.5`)."""
    digits = text.replace(",", "")
    whole, _, frac = digits.partition(".")
    if len(whole) + len(frac) > MAX_LITERAL_DIGITS:
        raise TooLarge("literal too long")
    if len(whole) > 1 and whole[0] == "0":
        raise ParseError("leading zero")
    return sympy.Rational(int(whole + frac or "0"), 10 ** len(frac))


class _Parser:
    """expr := term (±term)*; term := signed ((*|/) signed | implicit power)*;
    signed := ±signed | power; power := postfix (^ signed)?; postfix := atom (² | %)*."""

    def __init__(self, toks: list[Token], percent: Any) -> None:
        self.toks = toks
        self.i = 0
        self.ops = 0
        self.depth = 0
        self.percent = percent

    def _peek(self) -> Token | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _next(self) -> Token:
        if self.i >= len(self.toks):
            raise ParseError("unexpected end")
        t = self.toks[self.i]
        self.i += 1
        return t

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooLarge("nesting too deep")

    def _is_op(self, chars: str) -> str | None:
        t = self._peek()
        if t is not None and t.kind == OP and t.text in chars:
            self.i += 1
            return t.text
        return None

    def expr(self) -> Any:
        self._enter()
        v = self.term()
        while (op := self._is_op("+-")) is not None:
            self.ops += 1
            r = self.term()
            v = _check(v + r if op == "+" else v - r)
        self.depth -= 1
        return v

    def term(self) -> Any:
        v = self.signed()
        divided = False
        while True:
            op = self._is_op("*/")
            if op is not None:
                self.ops += 1
                r = self.signed()
                if op == "/":
                    divided = True
                    v = _div(v, r)
                else:
                    v = _check(v * r)
            elif self._implicit():
                if divided:
                    raise ParseError("implicit multiplication after division is ambiguous")
                self.ops += 1
                v = _check(v * self.power())
            else:
                return v

    def _implicit(self) -> bool:
        t = self._peek()
        if t is None or self.toks[self.i - 1].end != t.start:
            return False
        return (t.kind == OPEN and t.text in "([") or t.kind in (SQRT, RADIC)

    def signed(self) -> Any:
        op = self._is_op("+-")
        if op is None:
            return self.power()
        self._enter()
        v = self.signed()
        self.depth -= 1
        return -v if op == "-" else v

    def power(self) -> Any:
        base = self.postfix()
        if self._is_op("^") is None:
            return base
        self.ops += 1
        self._enter()
        exponent = self.signed()
        self.depth -= 1
        return _pow(base, exponent)

    def postfix(self) -> Any:
        v = self.atom()
        while (t := self._peek()) is not None:
            if t.kind == SUP:
                self.i += 1
                v = _pow(v, sympy.Integer(int(t.text)))
            elif t.kind == OP and t.text == "%":
                self.i += 1
                v = _check(v * self.percent)
            else:
                return v
            self.ops += 1
        return v

    def _group(self, openers: str, t: Token | None = None) -> Any:
        t = t or self._next()
        if t.kind != OPEN or t.text not in openers:
            raise ParseError(f"expected a group, got {t.text!r}")
        v = self.expr()
        c = self._next()
        if c.kind != CLOSE or c.text != CLOSER[t.text]:
            raise ParseError(f"expected {CLOSER[t.text]!r}")
        return v

    def atom(self) -> Any:
        t = self._next()
        if t.kind == NUM:
            return literal_value(t.text)
        if t.kind == OPEN:
            return self._group("([{", t)
        if t.kind == FRAC:
            num = self._group("{")
            den = self._group("{")
            self.ops += 1
            return _div(num, den)
        if t.kind == SQRT:
            index = 2
            nt = self._peek()
            if nt is not None and nt.kind == OPEN and nt.text == "[":
                idx = self._group("[")
                if not (idx.is_Integer and 1 <= idx <= MAX_ROOT_INDEX):
                    raise ParseError("root index must be a small positive integer")
                index = int(idx)
            arg = self._group("{(")
            self.ops += 1
            return _root(arg, index)
        if t.kind == RADIC:
            self._enter()
            arg = self.atom()
            self.depth -= 1
            self.ops += 1
            return _root(arg, int(t.text))
        raise ParseError(f"unexpected {t.text!r}")
