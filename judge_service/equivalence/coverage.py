"""Does a parse account for the whole answer? The one rule behind every "equal" verdict.

math-verify extracts what it can from text it cannot fully read: ``19, 46,, 82``
becomes 82 and ``1 - \\frac{1}{\\mathrm{e}}`` becomes 1, so two answers that
differ only in what was dropped compare equal. A parse is trusted only when it
holds everything the answer states:

- every name the answer uses (a single letter, a Greek letter, ``\\infty``,
  ``\\mathrm{e}``) appears in the parse (``e`` as ``E`` or ``exp``, ``i`` as ``I``,
  ``\\infty`` as ``oo``);
- every number written in the answer appears in the parse (up to sign; a
  fraction's numerator and denominator count), unless the parse holds numbers the
  answer never wrote: then sympy folded constants (``\\frac{2}{4}`` is 1/2,
  ``\\binom{5}{2}`` is 10) and the written ones cannot be looked for;
- an answer listing several items (top-level ``,`` ``;`` ``and`` ``or``) is not
  parsed as one value: the parse is a set, tuple, interval or matrix.

Words of two or more letters (``cm``, ``apples``, ``and``) and the contents of
``\\text{}`` are read as units or prose, which math-verify drops on purpose. Signs
and operators are not checked: a parse that keeps every number and name of the
answer but misreads how they combine is a misreading, not a partial read.

This module imports only the standard library; sympy is imported when a sympy
form is walked, so the rules judge can share the rule without math-verify.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = ["unaccounted"]

_GREEK = frozenset(
    {
        *("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta"),
        *("vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "varpi"),
        *("rho", "varrho", "sigma", "varsigma", "tau", "upsilon", "phi", "varphi", "chi", "psi"),
        *("omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi"),
        *("Psi", "Omega"),
    }
)
_UNICODE_NAMES = {"π": "pi", "∞": "infty"}
_SCAN = re.compile(
    r"""
      (?P<prose>\\(?:text|textrm|textit|textbf|textsf|texttt|mbox)\s*\{(?P<prose_body>[^{}]*)\})
    | (?P<roman>\\(?:mathrm|mathit|mathbf|mathsf|mathbb|operatorname)\s*
                \{\s*(?P<roman_body>[^{}]*?)\s*\})
    | (?P<command>\\[A-Za-z]+)
    | (?P<escape>\\.)
    | (?P<grouped>\d{1,3}(?:(?:,|\{,\}|\\,|\ )\d{3})+(?!\d)(?:\.\d+)?)
    | (?P<number>\d+(?:\.\d+)?|\.\d+)
    | (?P<word>[^\W\d_]+)
    | (?P<symbol>[π∞])
    """,
    re.VERBOSE,
)
_GROUP_SEPARATOR = re.compile(r",|\{,\}|\\,|\ ")
# A top-level comma between a digit and exactly three digits groups thousands.
_ITEM_BREAK = re.compile(r"(?<!\d),|,(?!\d{3}(?!\d))|;|\band\b|\bor\b")
_DELIMITERS = re.compile(r"\$|\\[()\[\]]|\\boxed|\s")  # "2, 2" lists one item, "$2, 2$" too
_OPENERS, _CLOSERS = ("(", "[", "\\{"), (")", "]", "\\}")
# Numbers sympy introduces without folding anything: 1 (from -x and 1/x) and the
# percent factor; root and reciprocal exponents are skipped where they occur.
_INCIDENTAL = frozenset({Fraction(1), Fraction(1, 100)})
# sympy's constants by class name, as the answer would name them
_CONSTANTS = {
    "Exp1": "e", "exp": "e", "Pi": "pi", "ImaginaryUnit": "i",
    "Infinity": "infty", "NegativeInfinity": "infty", "ComplexInfinity": "infty",
}  # fmt: skip


@dataclass
class _Footprint:
    """Numbers and names, as an answer states them or as a parse holds them."""

    # Each written number: its alternative readings, each a set of values that
    # must all be present ("1,234" is 1234, or 1 and 234).
    numbers: list[tuple[str, tuple[frozenset[Fraction], ...]]] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    def values(self) -> set[Fraction]:
        return {v for _, readings in self.numbers for reading in readings for v in reading}


def _scan(text: str, footprint: _Footprint, *, prose: bool = False) -> None:
    for match in _SCAN.finditer(text):
        kind, raw = match.lastgroup, match.group()
        if kind == "prose":
            _scan(match.group("prose_body"), footprint, prose=True)
        elif kind == "roman":
            body = match.group("roman_body")
            if len(body) == 1 and body.isalpha():
                footprint.names.add(body)
            else:
                _scan(body, footprint, prose=True)
        elif kind == "command" and raw[1:] in _GREEK | {"infty"}:
            footprint.names.add(raw[1:])
        elif kind == "grouped":
            parts = _GROUP_SEPARATOR.split(raw)
            joined = frozenset({Fraction("".join(parts))})
            split = frozenset(Fraction(part) for part in parts)
            footprint.numbers.append((raw, (joined, split)))
        elif kind == "number":
            footprint.numbers.append((raw, (frozenset({Fraction(raw)}),)))
        elif kind == "word" and len(raw) == 1 and not prose:
            footprint.names.add(raw)
        elif kind == "symbol":
            footprint.names.add(_UNICODE_NAMES[raw])


def _stated(text: str) -> _Footprint:
    footprint = _Footprint()
    _scan(text, footprint)
    return footprint


def _items(text: str) -> int:
    """How many distinct items `text` lists at the top level (outside brackets)."""
    text = _SCAN.sub(
        lambda m: f" {m.group('prose_body')} " if m.lastgroup == "prose" else m.group(), text
    )
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        if text.startswith(_OPENERS, index):
            depth += 1
        elif text.startswith(_CLOSERS, index):
            depth = max(0, depth - 1)
        elif depth == 0 and (brk := _ITEM_BREAK.match(text, index)) is not None:
            parts.append(text[start:index])
            start = index = brk.end()
            continue
        index += 2 if text[index] == "\\" else 1
    parts.append(text[start:])
    return len({_DELIMITERS.sub("", part) for part in parts if _has_content(part)})


def _has_content(part: str) -> bool:
    footprint = _stated(part)
    return bool(footprint.numbers or footprint.names)


@dataclass
class _Held:
    """What a parsed form holds."""

    numbers: set[Fraction] = field(default_factory=set)
    floats: list[float] = field(default_factory=list)
    folded: bool = False  # holds a number the answer never wrote
    names: set[str] = field(default_factory=set)
    collection: bool = False
    items: int = 1


def _held(form: object, written: set[Fraction]) -> _Held:
    held = _Held()
    if isinstance(form, str):
        footprint = _stated(form)
        held.numbers = footprint.values()
        held.folded = bool(held.numbers - written - _INCIDENTAL)
        held.names = footprint.names
        held.items = _items(form)
        held.collection = held.items > 1
        return held
    _walk(form, held, written)
    return held


def _walk(form: object, held: _Held, written: set[Fraction]) -> None:
    from sympy import Basic, Float, Pow, Rational, Set, Symbol, Tuple
    from sympy.core.function import AppliedUndef
    from sympy.matrices import MatrixBase

    held.collection = isinstance(form, list | tuple | Set | Tuple | MatrixBase)
    # (node, whether it is the exponent of a root or a reciprocal: sympy's spelling of
    # sqrt(x) and 1/x, not a number anyone wrote)
    pending: list[tuple[Any, bool]] = [(form, False)]
    while pending:
        node, root_exponent = pending.pop()
        if isinstance(node, list | tuple | MatrixBase):
            pending.extend((item, False) for item in node)
        elif not isinstance(node, Basic):
            continue
        elif isinstance(node, Float):
            approximate = abs(float(node))
            held.floats.append(approximate)
            if math.isfinite(approximate):
                exact = Fraction(repr(approximate))
                held.numbers.add(exact)
                held.folded |= exact not in written
        elif isinstance(node, Rational):
            p, q = abs(int(node.p)), int(node.q)
            held.numbers |= {Fraction(p, q), Fraction(p), Fraction(q)}
            held.folded |= not root_exponent and Fraction(p, q) not in written | _INCIDENTAL
        elif isinstance(node, Symbol):
            _hold_name(str(node.name), held)
        else:
            if type(node).__name__ in _CONSTANTS:
                held.names.add(_CONSTANTS[type(node).__name__])
            elif isinstance(node, AppliedUndef):
                _hold_name(str(node.func.__name__), held)
            for index, arg in enumerate(node.args):
                reciprocal = isinstance(node, Pow) and index == 1 and _unit_fraction(arg)
                pending.append((arg, reciprocal))


def _unit_fraction(value: Any) -> bool:
    from sympy import Rational

    return isinstance(value, Rational) and abs(int(value.p)) == 1


def _hold_name(name: str, held: _Held) -> None:
    """A symbol's name holds itself, its letters and its digits (``x_1``, ``5cm``)."""
    held.names.add(name)
    held.names.update(re.findall(r"[^\W\d_]+", name))
    footprint = _Footprint()
    _scan(name, footprint, prose=True)
    held.numbers |= footprint.values()


def _present(readings: tuple[frozenset[Fraction], ...], held: _Held) -> bool:
    return any(all(_held_number(value, held) for value in reading) for reading in readings)


def _held_number(value: Fraction, held: _Held) -> bool:
    if value in held.numbers:
        return True
    try:
        approximate = float(value)
    except OverflowError:
        return False
    return any(math.isclose(approximate, f, rel_tol=1e-12) for f in held.floats)


def unaccounted(text: str, form: object) -> str | None:
    """What of the answer `text` the parsed `form` leaves out, said in words (``leaves out
    19, e``); None when the form accounts for all of it. `form` is one of math-verify's
    results: a sympy object (or a list of them) or its text fallback."""
    stated = _stated(text)
    held = _held(form, stated.values())
    items = _items(text)
    if items > 1 and not held.collection:
        return f"is one value where the answer lists {items} items"
    if items > held.items > 1:
        return f"has {held.items} items where the answer lists {items}"
    missing: list[str] = []
    if not held.folded:  # once sympy has folded constants, the written ones are gone
        missing += dict.fromkeys(
            raw for raw, readings in stated.numbers if not _present(readings, held)
        )
    missing += sorted(stated.names - held.names)
    shown = [raw if len(raw) <= 24 else raw[:20] + "..." for raw in missing]
    return "leaves out " + ", ".join(shown) if missing else None
