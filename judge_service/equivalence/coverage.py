"""Does a parse account for the whole answer? The one rule behind every "equal" verdict.

math-verify extracts what it can from text it cannot fully read: ``19, 46,, 82``
becomes 82 and ``1 - \\frac{1}{\\mathrm{e}}`` becomes 1, so two answers that
differ only in what was dropped compare equal. A parse is trusted only when it
holds everything the answer states:

- every name the answer uses (a single letter, a Greek letter, ``\\infty``,
  ``\\mathrm{e}``) appears in the parse, in either case (``e`` as ``E`` or ``exp``,
  ``V_1`` as ``v_1``, ``\\infty`` as ``oo``);
- every number written in the answer appears in the parse (up to sign; a
  fraction's value, or its numerator and denominator), unless the parse holds numbers
  the answer never wrote: then sympy folded constants (``\\frac{2}{4}`` is 1/2,
  ``\\binom{5}{2}`` is 10) and the written ones cannot be looked for;
- an answer listing several items (top-level ``,`` ``;`` ``and`` ``or``) is not
  parsed as one value: the parse is a set, tuple, interval or matrix (or an equation
  whose right side is one: ``a = 4, -8``).

Numbers are read by the project's one reader (`reading.numbers`): a separator is no
item break and no second number (``1{,}000``, ``32,\\! 349``, ``14 {, }916``), shorthand
is a fraction (``\\frac3{3}`` is 1), words are numbers (``5 or seven`` lists two items).
Digits it declines in mathematics (the items of ``1,2,3``, a subscript) are read here;
``2,74`` is read both as a decimal comma and as two items. What annotates the value is
not looked for: a label (``x =``, ``x \\approx``, ``V_1:V_2 =``, ``(x, y) =``, ``W(n) =``,
``n is``), a unit's power (``\\mbox{ cm}^2``), a closing approximation (``1/3 \\approx
0.33``), the head of a chain of equalities (``1 = \\zzz = x =`` before ``0``: the value is
its last part) and the base of a lone numeral (``1112112_3``; the worker compares it only
with a numeral in the same base): `annotation`. ``or``/``and`` written against a number
(``W(x)=1orW(x)=-1``) still lists two items. Words of two or more letters (``cm``,
``apples``, ``and``) and the contents of ``\\text{}`` are read as units or prose, which
math-verify drops on purpose. Signs and operators are not checked: a parse that keeps
every number and name of the answer but misreads how they combine is a misreading, not a
partial read.

This module imports only the standard library, the reader and `annotation`; sympy is
imported when a sympy form is walked, so the rules judge can share the rule without
math-verify.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from judge_service.equivalence.annotation import GLUED_CONNECTIVE, blank_chain_heads, without_base
from judge_service.reading.numbers import read_numbers

__all__ = ["DECIMAL_COMMA", "SPACED_GROUPS", "unaccounted"]

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
# Names, units and prose: numbers are read by the project's one reader (`_numbers`).
_SCAN = re.compile(
    r"""
      (?P<prose>\\(?:text|textrm|textit|textbf|textsf|texttt|mbox)\s*\{(?P<prose_body>[^{}]*)\})
    | (?P<roman>\\(?:mathrm|mathit|mathbf|mathsf|mathbb|operatorname)\s*
                \{\s*(?P<roman_body>[^{}]*?)\s*\})
    | (?P<command>\\[A-Za-z]+)
    | (?P<escape>\\.)
    | (?P<word>[^\W\d_]+)
    | (?P<symbol>[π∞])
    """,
    re.VERBOSE,
)
# Digits the reader declines in mathematics: the items of ``1,2,3``, a subscript's ``1``.
_BARE = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_PART = re.compile(r"\d+(?:\.\d+)?")
_SEPARATED = re.compile(r"[^\d.]")
# ``2,74``: a decimal comma, or the two items 2 and 74 (a comma before three digits groups
# thousands; the reader reads that one).
DECIMAL_COMMA = re.compile(r"(?<![\d.,])(\d+),(\d{1,2}|\d{4,})(?![\d.,])")
# Digit groups split by plain spaces (``12 345``): one number, or a list (the reader reads
# a plain space as two numbers; here both readings count).
SPACED_GROUPS = re.compile(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d.])")
# A comma between digits is a break unless the reader read the digits as one number (its
# commas are gone by then); ``or``/``and`` between items too.
_ITEM_BREAK = re.compile(rf",|;|\band\b|\bor\b|{GLUED_CONNECTIVE}")
# A label names the value that follows it (``x =``, ``x \\approx``, ``V_1:V_2 =``, ``(x, y) =``,
# ``W(n) =``, ``n is``): at the start, after an item break or an opening delimiter. math-verify
# compares what follows, so the label's names and digits are not looked for in its parse.
_NAME = (
    r"(?:\\(?:text|mathrm|mathit|operatorname)\s*\{[^{}\d]*\}|\\[A-Za-z]+|[A-Za-z]+)"
    r"(?:_\{[^{}]*\}|_[A-Za-z\d])?(?:\^\{[^{}]*\}|\^[A-Za-z\d])?(?:\s*\([^()]*\))?"
)
_LABEL = re.compile(
    rf"(?:^|(?<=[,;$({{])|(?<=\\\()|(?<=\\\[)|(?<=\band)|(?<=\bor)|(?<=\dand)|(?<=\dor)|(?<=\\quad))(\s*"
    rf"(?:{_NAME}(?:\s*+[:/,]\s*+{_NAME}){{0,5}}|\(\s*+{_NAME}(?:\s*+[,;]\s*+{_NAME}){{0,7}}\s*+\))"
    r"\s*+(?:\$\s*+)?(?:=|\\approx|\\simeq|\\sim|\bis\b|\bare\b)(?![=<>]))"
)
# What every label ends with: a text without one has no label to look for (most answers)
_LABEL_MARK = re.compile(r"=|\\approx|\\simeq|\\sim|\bis\b|\bare\b")
_SPACED_GROUP = re.compile(r" ?\{\s*+,\s*+\} ?")  # ``14 {, }916``, as some write 14{,}916
# ``\\mathrm{~cm}^{2}``: a tie or thin space may stand before the unit's letters
_UNIT_POWER = re.compile(
    r"((?:\\(?:text|mbox|mathrm)\s*\{(?:\s|~|\\[,;: ])*[A-Za-z]+\s*\}"
    r"|(?<![\\A-Za-z])[A-Za-z]{2,})\s*)"
    r"\^\s*(?:\{\s*[23]\s*\}|[23])"
)
_APPROXIMATION = re.compile(r"(?<=[\d}).])\s*+\\approx\s*+[-+]?[\d.,]++\s*+(?=\$?\s*+\Z)")
_SPELLED_CONNECTIVE = re.compile(r"\\(?:text|mbox)\s*\{\s*(and|or)\s*\}")
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
    """The names `text` uses (its numbers are `_numbers`)."""
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
        elif kind == "word" and len(raw) == 1 and not prose:
            footprint.names.add(raw)
        elif kind == "symbol":
            footprint.names.add(_UNICODE_NAMES[raw])


def _numbers(text: str) -> list[tuple[str, tuple[frozenset[Fraction], ...]]]:
    """Each number `text` writes, with its readings: the project's reader first (separators,
    ``\\frac12``, words), then the digits it declines in mathematics."""
    found: list[tuple[int, str, tuple[frozenset[Fraction], ...]]] = []
    taken = bytearray(len(text))  # chars already read as a number (linear, however many)
    readings: tuple[frozenset[Fraction], ...]
    for match in SPACED_GROUPS.finditer(text):
        groups = match.group().split(" ")
        readings = (frozenset({Fraction("".join(groups))}), frozenset(map(Fraction, groups)))
        found.append((match.start(), match.group(), readings))
        taken[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for number in read_numbers(text):
        if any(taken[number.start : number.end]):
            continue
        raw = text[number.start : number.end]
        whole = frozenset({number.value})
        parts: frozenset[Fraction] = frozenset(Fraction(part) for part in _PART.findall(raw))
        # A fraction's numerator and denominator count, and "1,234" may be 1 and 234.
        split = number.form == "fraction" or (
            number.form == "digits" and _SEPARATED.search(raw) is not None
        )
        readings = (whole, parts) if split and parts else (whole,)
        found.append((number.start, raw, readings))
        taken[number.start : number.end] = b"\x01" * (number.end - number.start)
    for match in _BARE.finditer(text):
        if not taken[match.start()]:
            found.append((match.start(), match.group(), (frozenset({Fraction(match.group())}),)))
    return [(raw, readings) for _, raw, readings in sorted(found, key=lambda f: f[0])]


def _unlabelled(text: str) -> str:
    """`text` without what annotates its value: labels (``x =``), a unit's power (the 2 of
    ``\\mbox{ cm}^2``), a closing approximation (``1/3 \\approx 0.33``)."""
    text = _SPELLED_CONNECTIVE.sub(r" \1 ", _SPACED_GROUP.sub("{,}", without_base(text)))
    text = blank_chain_heads(_UNIT_POWER.sub(r"\1", _APPROXIMATION.sub("", text)))
    if not _LABEL_MARK.search(text):
        return text
    return _LABEL.sub(lambda m: " " * len(m.group(1)), text)


@lru_cache(maxsize=256)  # each side's text is read once per form; a footprint is not changed
def _stated(text: str) -> _Footprint:
    text = _unlabelled(text)
    footprint = _Footprint(numbers=_numbers(text))
    _scan(text, footprint)
    return footprint


def _canonical(text: str) -> str:
    """`text` with each number the reader reads as its value: ``1,000`` is ``1000``, so its
    comma is no item break, and ``2, 2.0`` lists one item."""
    out, at = [], 0
    for number in read_numbers(text, words=False):
        out += [text[at : number.start], str(number.value)]
        at = number.end
    return "".join(out) + text[at:]


@lru_cache(maxsize=256)
def _items(text: str) -> int:
    """How many distinct items `text` lists at the top level (outside brackets)."""
    if not _ITEM_BREAK.search(text):  # no break anywhere, so none after any rewriting
        return int(_has_content(text))
    text = _SCAN.sub(
        lambda m: f" {m.group('prose_body')} " if m.lastgroup == "prose" else m.group(),
        _canonical(_unlabelled(text)),
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
        held.names = set(footprint.names)
        held.items = _items(form)
        held.collection = held.items > 1
        return held
    _walk(form, held, written)
    return held


def _walk(form: object, held: _Held, written: set[Fraction]) -> None:
    from sympy import Basic, Eq, Float, Pow, Rational, Set, Symbol, Tuple
    from sympy.core.function import AppliedUndef
    from sympy.matrices import MatrixBase

    collections = list | tuple | Set | Tuple | MatrixBase
    # ``a = 4, -8, -10`` is read as Eq(a, {4, -8, -10}): a labelled list
    value = form.rhs if isinstance(form, Eq) else form
    held.collection = isinstance(value, collections)
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
    gap = _gap(text, form)
    if gap is not None:
        # ``2,74`` may be a decimal comma: math-verify reads it so
        decimal = DECIMAL_COMMA.sub(r"\1.\2", text)
        if decimal != text and _gap(decimal, form) is None:
            return None
    return gap


def _gap(text: str, form: object) -> str | None:
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
    # math-verify reads ``E`` as ``e`` and ``V_1`` as ``v_1``: a name's case is no content
    names = {name.casefold() for name in held.names}
    missing += sorted(name for name in stated.names if name.casefold() not in names)
    shown = [raw if len(raw) <= 24 else raw[:20] + "..." for raw in missing]
    return "leaves out " + ", ".join(shown) if missing else None
