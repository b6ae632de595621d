"""The rules judge's reading of a trace's lines: which claims are errors, which depend
on one, which repair one, and which repeat earlier work (the rubric in
`rules_judge`'s docstring). `PythonReader` is the definition; `_reader.pyx` compiles
it, and `tests/test_rules_reader.py` holds the two equal.

A reader keeps the state that links claims across lines: the unrepaired errors, the
values they tainted, the true claims made and the relations they established.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

from judge_service import labels as L
from judge_service.judges.rules.claims import Link, line_links

if TYPE_CHECKING:  # sympy only names types here (its import is lazy: lazy_sympy.py)
    import sympy

    from judge_service.judges.rules._reader import Reader as CompiledReader

__all__ = ["CONFIDENCE", "Finding", "LinkKinds", "PythonReader", "Reading", "new_reader"]
__all__ += ["python_normal"]
__all__ += ["python_numbers"]

CONFIDENCE = {
    L.INVALID: 0.95,
    L.VERIFIED_CORRECTION: 0.85,
    L.UNSUPPORTED: 0.7,
    L.VALID_PROGRESS: 0.9,
    L.UNPRODUCTIVE_REPETITION: 0.75,
}

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
_CORRECTION_WORDS = re.compile(
    r"\b(wait|actually|mistake|wrong|incorrect|error|oops|instead|not|isn't|correct(?:ion|ed)?)\b",
    re.IGNORECASE,
)
# Spellings of one operation, so that "17 \times 24" repeats "17 × 24".
_SPELLINGS = (
    ("\\times", "×"),
    ("\\cdot", "×"),
    ("·", "×"),
    ("*", "×"),
    ("\\div", "/"),
    ("÷", "/"),
    ("−", "-"),
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\left", ""),
    ("\\right", ""),
)
# The one-character spellings, replaced in one pass: no command spelling contains or
# yields one of them, so this pass and the commands' commute.
_SYMBOLS = str.maketrans({k: v for k, v in _SPELLINGS if len(k) == 1})
_COMMANDS = tuple((k, v) for k, v in _SPELLINGS if len(k) > 1)


class Finding(NamedTuple):
    """A labelled char range of the trace text (converted to tokens at the end)."""

    char_start: int
    char_end: int
    label: str
    confidence: float


FALSE, TAINTED, TRUE = 0, 1, 2  # a link's kind: false, true on an error's value, true


class LinkKinds:
    """The kind of every non-trivial link of a trace, in reading order, with its chars.
    In arrays of int64 ("q"): the compiled reader writes thousands of them a trace in
    place, and `grounding.LineChecks` reads them as numpy arrays without a copy."""

    def __init__(self) -> None:
        self.kinds = array("q")
        self.lows = array("q")
        self.highs = array("q")

    def add(self, base: int, links: list[Link], labels: Sequence[Finding]) -> None:
        """A line's links (at char `base`) and the reader's findings for them: it labels
        every non-trivial link, in order, before any sentence of the line."""
        unsupported = L.UNSUPPORTED
        kinds, lows, highs = self.kinds, self.lows, self.highs
        # By index, not name: thousands of links a trace, and a named field costs more.
        real = [link for link in links if not link[9]]  # not trivial
        for link, finding in zip(real, labels, strict=False):
            kinds.append(FALSE if not link[8] else TAINTED if finding[2] == unsupported else TRUE)
            lows.append(base + link[0])  # left_start
            highs.append(base + link[3])  # right_end


@dataclass
class Reading:
    findings: list[Finding]


def python_numbers(text: str) -> list[str]:
    """The numbers of a text as written: a digit run with an optional sign and decimal
    part, not inside a word or another number (the definition, which the compiled
    `_reader.numbers` equals)."""
    return _NUMBER.findall(text)


def _relation(*sides: str) -> tuple[int | Fraction, ...]:
    """The numbers a claim relates, signs and order aside: "17 × 24 = 408", "24 × 17 = 408"
    and "408 / 24 = 17" state one relation. Relations are only compared with each other,
    so they hold Python numbers (exact, and a quarter of sympy's cost)."""
    numbers = [m for side in sides for m in python_numbers(side)]
    if not any("." in side for side in sides):  # integers only: int and abs run in C
        return tuple(sorted(map(abs, map(int, numbers))))
    return tuple(sorted(map(_magnitude, numbers)))


def _magnitude(number: str) -> int | Fraction:
    if "." in number:
        return abs(Fraction(number))
    return abs(int(number))


def _plain(number: str) -> int | Fraction:
    """A number of the text (`_NUMBER`) exactly, as sympy.Rational(number) would be."""
    return Fraction(number) if "." in number else int(number)


def _as_plain(value: sympy.Expr | int) -> int | Fraction | None:
    """A link's value as a Python number when it is rational (None: irrational). A plain
    line's values are Python ints already (`plain_claims`); sympy's Integer hashes and
    compares equal to its int, so the two meet in one set or dictionary."""
    if isinstance(value, int):
        return value
    if not value.is_Rational:
        return None
    p, q = int(value.p), int(value.q)
    return p if q == 1 else Fraction(p, q)


def python_normal(expression: str) -> str:
    """A claim's left side in one spelling: spaces gone, each operation's spellings as one
    (the definition, which the compiled `_reader.normal` equals)."""
    out = "".join(expression.split()).translate(_SYMBOLS)
    if "\\" in out:
        for spelling, canonical in _COMMANDS:
            out = out.replace(spelling, canonical)
    return out


class PythonReader:
    """Walks the lines of one trace, keeping the state that links claims across lines."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        # Unrepaired false claims: the value of their left side -> the wrong values given.
        self.errors: dict[sympy.Expr | int, list[sympy.Expr | int]] = {}
        self.tainted: set[sympy.Expr | int] = set()
        # The rational tainted values as Python numbers: a sentence's numbers are looked
        # up in it without making sympy numbers of them (a number in text is never
        # irrational, and an irrational value never equals one).
        self.tainted_numbers: set[int | Fraction] = set()
        self.claims: set[tuple[str, sympy.Expr | int]] = set()  # true ones: (left, value)
        # Relations established by true claims -> how often each was re-checked since.
        self.rechecks: dict[tuple[int | Fraction, ...], int] = {}

    def read_lines(
        self,
        lines: Iterable[tuple[int, int, list[tuple[int, int, str]]]],
        links_of: Callable[[int], list[Link]],
        repeated_flags: Iterator[bool],
        kinds: LinkKinds | None = None,
    ) -> None:
        """Judge each (line number, where it starts, its sentences) of `lines` in turn,
        its links found by `links_of(line number)`; see `read_line`. `kinds` gets the
        kind of every non-trivial link as it is read (validation's line checks)."""
        findings = self.findings
        for number, base, sentences in lines:
            found = links_of(number)
            before = len(findings)
            self.read_line(base, found, sentences, repeated_flags)
            if kinds is not None and found:
                kinds.add(base, found, findings[before:])

    def read_text_lines(
        self,
        text: str,
        starts: list[int],
        lines: Iterable[tuple[int, int, list[tuple[int, int, str]]]],
        repeated_flags: Iterator[bool],
        kinds: LinkKinds | None = None,
    ) -> None:
        """`read_lines`, each line's links `claims.line_links(text, starts[n], stop)` (stop:
        the next line's start, else the text's end), as `grounding.TraceLinks.links` reads
        them (the compiled reader asks for them from C)."""

        def links_of(number: int) -> list[Link]:
            stop = starts[number + 1] if number + 1 < len(starts) else len(text)
            return line_links(text, starts[number], stop)

        self.read_lines(lines, links_of, repeated_flags, kinds)

    def _uses_tainted(self, text: str) -> bool:
        numbers = self.tainted_numbers
        if not numbers:
            return False
        found = python_numbers(text)
        # In C (map, isdisjoint stops at the first hit); without a "." every number is an int.
        return not numbers.isdisjoint(map(int if "." not in text else _plain, found))

    def _taint(self, value: sympy.Expr | int) -> None:
        self.tainted.add(value)
        number = _as_plain(value)
        if number is not None:
            self.tainted_numbers.add(number)

    def _untaint(self, values: list[sympy.Expr | int]) -> None:
        self.tainted.difference_update(values)
        self.tainted_numbers.difference_update(n for n in map(_as_plain, values) if n is not None)

    def read_line(
        self,
        base: int,
        links: list[Link],
        sentences: list[tuple[int, int, str]],
        repeated_flags: Iterator[bool],
    ) -> None:
        """Judge one line, given its arithmetic links (`claims.find_links`), its sentences
        (`line_sentences`) and, for each of them in turn, whether it repeats an earlier one."""
        claim_findings = self._claims(links, base) if links else []
        self.findings.extend(claim_findings)
        # Plain loops, not any(<generator>): a line has a finding or two, and building the
        # generator cost more than the test (thousands of lines a trace).
        strong = False
        for f in claim_findings:
            strong = strong or f.label != L.VALID_PROGRESS
        for match in sentences:
            text = match[2]
            start, end = base + match[0], base + match[1]
            repeated = next(repeated_flags)
            claimed = strong
            for f in claim_findings:
                claimed = claimed or (f.char_start < end and start < f.char_end)
            if claimed:
                if repeated and not strong:
                    self._add(start, end, L.UNPRODUCTIVE_REPETITION)
                continue
            if repeated:
                self._add(start, end, L.UNPRODUCTIVE_REPETITION)
            elif self._uses_tainted(text) and not _CORRECTION_WORDS.search(text):
                self._add(start, end, L.UNSUPPORTED)

    def _add(self, start: int, end: int, label: str) -> None:
        self.findings.append(Finding(start, end, label, CONFIDENCE[label]))

    def _claims(self, links: list[Link], base: int) -> list[Finding]:
        found: list[Finding] = []
        previous_end = -1
        sides: list[str] = []  # of the chain `a = b = c` the link belongs to
        for link in links:
            chained = link.left_start < previous_end
            start = previous_end if chained else link.left_start
            previous_end = link.right_end
            sides = sides if chained else [link.left_text]
            if not link.trivial:
                label = self._judge_link(link, sides)
                found.append(Finding(base + start, base + link.right_end, label, CONFIDENCE[label]))
            sides.append(link.right_text)
        return found

    def _judge_link(self, link: Link, sides: list[str]) -> str:
        claim = (python_normal(link.left_text), link.right_value)
        if not link.holds:
            # Only the original false claim is invalid: one computed from a tainted value
            # ("340 + 78 = 419" after "17 × 4 = 78"), or landing on one (the unrepaired
            # error restated), depends on that error.
            dependent = (
                link.right_value in self.tainted
                or self._uses_tainted(link.left_text)
                or self._uses_tainted(link.right_text)
            )
            self._taint(link.right_value)
            if dependent:
                return L.UNSUPPORTED
            self.errors.setdefault(link.left_value, []).append(link.right_value)
            return L.INVALID
        repaired = self.errors.pop(link.left_value, None)
        if repaired:
            self._untaint(repaired)
            self._establish(claim, sides, link.right_text)
            return L.VERIFIED_CORRECTION
        if self._uses_tainted(link.left_text):
            self._taint(link.right_value)
            return L.UNSUPPORTED
        if claim in self.claims:
            return L.UNPRODUCTIVE_REPETITION  # the same computation, done again
        checked = self._establish(claim, sides, link.right_text)
        if checked and min(checked) > 0:
            return L.UNPRODUCTIVE_REPETITION  # a result re-checked before, re-checked again
        return L.VALID_PROGRESS

    def _establish(
        self, claim: tuple[str, sympy.Expr | int], sides: list[str], right: str
    ) -> list[int]:
        """Records a true claim and the relations it states with each earlier side of its
        chain (a = b = c also states a = c); returns how often each relation already known
        had been re-checked (empty: a new result)."""
        self.claims.add(claim)
        checked: list[int] = []
        for relation in dict.fromkeys(_relation(side, right) for side in sides):
            count = self.rechecks.get(relation)
            self.rechecks[relation] = 0 if count is None else count + 1
            if count is not None:
                checked.append(count)
        return checked


def _new_reader() -> Callable[[], PythonReader | CompiledReader]:
    """The compiled reader (_reader.pyx) where the install could build it, else this one.
    (Here, beside its Python definition, so that validation's line checks and the rules
    judge take it from one module that imports neither.)"""
    try:
        from judge_service.judges.rules._reader import Reader
    except ImportError:  # pragma: no cover - a build without a C compiler
        return PythonReader
    return Reader


new_reader = _new_reader()
