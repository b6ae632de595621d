"""The rules judge: the embedded default that needs no API key.

It reads the trace line by line and labels what it can check exactly, by the
rubric it hands the LLM judges (``judge_service/prompts/v1/rubric.md``):

* every numeric ``a = b`` link (`claims.find_links`): false -> ``invalid`` when it is
  the original error; false but computed from or landing on a tainted value (one
  produced by an unrepaired false claim: "340 + 78 = 419" after "17 × 4 = 78", or the
  error restated) -> ``unsupported``, its result tainted too; true and recomputing the
  left side of an earlier false claim -> ``verified_correction``; true but built on a
  tainted value -> ``unsupported``; otherwise ``valid_progress``, except re-checks;
* re-checks, by the rubric's rule: a true claim with the same left side and result as
  one already made is ``unproductive_repetition``; a claim relating the same numbers as
  an established one (turned around: "24 × 17 = 408" or "408 / 24 = 17" after
  "17 × 24 = 408") re-checks it, ``valid_progress`` the first time and
  ``unproductive_repetition`` after. A re-check by another route ("17 × 25 - 17 = 408")
  is not recognised and stays ``valid_progress``: a coincidence of values is no proof;
* lines that only restate a tainted value -> ``unsupported``;
* sentences that repeat earlier content (near-duplicates) -> ``unproductive_repetition``;
* the final answer span against ``reference_answer`` -> ``valid_progress``, or when
  wrong ``unsupported`` if it is a tainted value, else ``invalid``.

It quotes evidence like any judge and its spans go through the same validation;
`shape.shape_spans` makes sure that validation accepts all of them.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import sympy

from judge_service import labels as L
from judge_service.errors import ParseError
from judge_service.grounding import TraceLinks
from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.judges.rules.arithmetic import parse_number_expr
from judge_service.judges.rules.claims import Link
from judge_service.judges.rules.final_answer import (
    answers_match,
    locate_final_answer,
    normalise_answer,
)
from judge_service.judges.rules.repetition import repeated_sentences
from judge_service.judges.rules.shape import TokenSpan, shape_spans
from judge_service.offload import OFFLOAD_CHARS, off_loop
from judge_service.spans import SpanLimits
from judge_service.trace.decode import Trace

PROMPT_VERSION = "rules-2"

# When two findings cover the same tokens, the more important one keeps them; the same
# order decides which spans stay on a crowded line.
PRIORITY = {
    L.INVALID: 0,
    L.VERIFIED_CORRECTION: 1,
    L.UNSUPPORTED: 2,
    L.UNPRODUCTIVE_REPETITION: 3,  # a re-check of a true claim is still a re-check
    L.VALID_PROGRESS: 4,
}
CONFIDENCE = {
    L.INVALID: 0.95,
    L.VERIFIED_CORRECTION: 0.85,
    L.UNSUPPORTED: 0.7,
    L.VALID_PROGRESS: 0.9,
    L.UNPRODUCTIVE_REPETITION: 0.75,
}
ANSWER_CONFIDENCE = 0.9

SENTENCE_LABELS = frozenset({L.UNSUPPORTED, L.UNPRODUCTIVE_REPETITION})

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")
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


@dataclass
class Reading:
    findings: list[Finding]
    false_links: list[tuple[int, int]]  # char ranges of every false link (for grounding)


def _relation(*sides: str) -> tuple[int | Fraction, ...]:
    """The numbers a claim relates, signs and order aside: "17 × 24 = 408", "24 × 17 = 408"
    and "408 / 24 = 17" state one relation. Relations are only compared with each other,
    so they hold Python numbers (exact, and a quarter of sympy's cost)."""
    numbers = [m for side in sides for m in _NUMBER.findall(side)]
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


def _normal(expression: str) -> str:
    out = "".join(expression.split()).translate(_SYMBOLS)
    if "\\" in out:
        for spelling, canonical in _COMMANDS:
            out = out.replace(spelling, canonical)
    return out


@dataclass
class _Reader:
    """Walks the lines of one trace, keeping the state that links claims across lines."""

    findings: list[Finding] = field(default_factory=list)
    false_links: list[tuple[int, int]] = field(default_factory=list)
    # Unrepaired false claims: the value of their left side -> the wrong values given.
    errors: dict[sympy.Expr | int, list[sympy.Expr | int]] = field(default_factory=dict)
    tainted: set[sympy.Expr | int] = field(default_factory=set)
    # The rational tainted values as Python numbers: a sentence's numbers are looked up
    # in it without making sympy numbers of them (a number in text is never irrational,
    # and an irrational value never equals one).
    tainted_numbers: set[int | Fraction] = field(default_factory=set)
    claims: set[tuple[str, sympy.Expr | int]] = field(default_factory=set)  # true: (left, value)
    # Relations established by true claims -> how often each was re-checked since.
    rechecks: dict[tuple[int | Fraction, ...], int] = field(default_factory=dict)

    def _uses_tainted(self, text: str) -> bool:
        numbers = self.tainted_numbers
        if not numbers:
            return False
        found = _NUMBER.findall(text)
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
            if not link.holds and not link.trivial:
                self.false_links.append((base + link.left_start, base + link.right_end))
            if not link.trivial:
                label = self._judge_link(link, sides)
                found.append(Finding(base + start, base + link.right_end, label, CONFIDENCE[label]))
            sides.append(link.right_text)
        return found

    def _judge_link(self, link: Link, sides: list[str]) -> str:
        claim = (_normal(link.left_text), link.right_value)
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


def python_sentences(line: str) -> list[tuple[int, int, str]]:
    """Sentences of a line as (start, end, text), surrounding spaces excluded: the
    definition, which the compiled `_sentences.sentences` equals."""
    pieces = _SENTENCE_END.split(line)
    if len(pieces) == 1:  # most lines: one sentence, no search for where it starts
        stripped = line.strip()
        lead = len(line) - len(line.lstrip())
        return [(lead, lead + len(stripped), stripped)] if stripped else []
    out: list[tuple[int, int, str]] = []
    position = 0
    for piece in pieces:
        start = line.index(piece, position) if piece else position
        stripped = piece.strip()
        if stripped:
            lead = start + (len(piece) - len(piece.lstrip()))
            out.append((lead, lead + len(stripped), stripped))
        position = start + len(piece)
    return out


def python_line_sentences(text: str) -> list[tuple[int, int, list[tuple[int, int, str]]]]:
    """(line number, where it starts, its sentences) of every line that is not blank; lines
    end at "\\n" (a "\\r" before it is not theirs). The definition, which the compiled
    `_sentences.line_sentences` equals."""
    out: list[tuple[int, int, list[tuple[int, int, str]]]] = []
    position = 0
    for number, line in enumerate(text.split("\n")):
        line_text = line.rstrip("\r")
        if line_text.strip():
            out.append((number, position, python_sentences(line_text)))
        position += len(line) + 1
    return out


try:  # the compiled scanners (_sentences.pyx), where the install could build them
    from judge_service.judges.rules._sentences import line_sentences
except ImportError:  # pragma: no cover - a build without a C compiler
    line_sentences = python_line_sentences


def read_trace(request: JudgeRequest) -> Reading:
    reader = _Reader()
    # Through the trace's shared links: validation's grounding check then finds every
    # line's links parsed already (judge_service/grounding.py).
    links = TraceLinks.of(request.trace)
    lines = line_sentences(request.trace.text)
    # Near-duplicates are found for the whole trace at once (repetition.py), in the order
    # the lines are then read.
    flags = iter(repeated_sentences([text for *_, found in lines for *_, text in found]))
    for number, base, found in lines:
        reader.read_line(base, links.links(number), found, flags)
    reading = Reading(reader.findings, reader.false_links)
    answer = locate_final_answer(request.trace.text, request.final_answer)
    if answer is None:
        return reading
    verdict = answers_match(answer.content, request.reference_answer, request.reward)
    if verdict is None:
        return reading
    # The answer gets its own verdict; a sentence-level label around it would only
    # leave fragments such as "\boxed{" behind.
    reading.findings = [
        f
        for f in reading.findings
        if f.label not in SENTENCE_LABELS
        or f.char_end <= answer.start
        or f.char_start >= answer.end
    ]
    label = L.VALID_PROGRESS
    if not verdict:
        # A wrong answer that carries an error's value forward depends on that error.
        label = L.UNSUPPORTED if _value(answer.content) in reader.tainted else L.INVALID
    reading.findings.append(Finding(answer.start, answer.end, label, ANSWER_CONFIDENCE))
    return reading


def _value(answer: str) -> sympy.Expr | None:
    try:
        return parse_number_expr(normalise_answer(answer))
    except ParseError:
        return None


def to_token_spans(findings: list[Finding], trace: Trace) -> list[TokenSpan]:
    """Char findings to non-overlapping token spans, the more important first."""
    if not findings:
        return []
    starts = np.array([f.char_start for f in findings], np.int64)
    ends = np.array([f.char_end for f in findings], np.int64)
    ranks = np.array([PRIORITY.get(f.label, 9) for f in findings], np.int64)
    # By priority, then start, then the longer first; ties stay in reading order (lexsort
    # is stable, as sorted() was).
    order = np.lexsort((-ends, starts, ranks))
    firsts, lasts = trace.tokens_for_char_ranges(starts[order], ends[order])
    spans: list[TokenSpan] = []
    chosen = order.tolist()
    for index, start, end in disjoint_spans(firsts.tolist(), lasts.tolist()):
        finding = findings[chosen[index]]
        spans.append(TokenSpan(start, end, finding.label, finding.confidence))
    spans.sort()  # by start: the spans are disjoint and nonempty, so no two starts tie
    return spans


def python_disjoint_spans(firsts: list[int], lasts: list[int]) -> list[tuple[int, int, int]]:
    """Token ranges ``[firsts[i], lasts[i])``, the more important first, each cut so that
    it overlaps none taken before it: a start inside a taken range moves past it, an end
    running into one stops before it. (index, start, end) of each range left nonempty.
    The definition, which the compiled `_spans.disjoint_spans` equals."""
    starts: list[int] = []  # the spans taken so far, disjoint, by start
    ends: list[int] = []
    out: list[tuple[int, int, int]] = []
    for index, (start, end) in enumerate(zip(firsts, lasts, strict=True)):
        at = bisect.bisect_right(starts, start) - 1
        while 0 <= at < len(starts) and starts[at] <= start < ends[at]:
            start, at = ends[at], at + 1  # begins inside a taken span: start after it
        after = bisect.bisect_right(starts, start)
        if after < len(starts) and starts[after] < end:
            end = starts[after]  # runs into a taken span: stop before it
        if start >= end:
            continue
        starts.insert(after, start)
        ends.insert(after, end)
        out.append((index, start, end))
    return out


try:  # the compiled loop (_spans.pyx), where the install could build it
    from judge_service.judges.rules._spans import disjoint_spans
except ImportError:  # pragma: no cover - a build without a C compiler
    disjoint_spans = python_disjoint_spans


def judge_spans(request: JudgeRequest, limits: SpanLimits) -> list[dict[str, object]]:
    """The rules judge's submission for one trace: every span passes validation."""
    reading = read_trace(request)
    return shape_spans(
        to_token_spans(reading.findings, request.trace),
        request.trace,
        priority=PRIORITY,
        positive=frozenset(label for label, score in request.label_scores.items() if score > 0),
        false_links=reading.false_links,
        limits=limits,
    )


class RulesJudge(Judge):
    name = "rules"
    prompt_version = PROMPT_VERSION
    reads_view = False  # it reads the text; its quotes come from shape_spans

    def __init__(
        self, max_point_tokens: int = 512, max_region_share: float = 0.5, max_spans: int = 256
    ) -> None:
        self.limits = SpanLimits(
            max_point_tokens=max_point_tokens,
            max_region_share=max_region_share,
            max_spans=max_spans,
        )

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        spans = await off_loop(
            len(request.trace.text),
            functools.partial(judge_spans, request, self.limits),
            threshold=OFFLOAD_CHARS,
        )
        return JudgeOutcome(spans=list(spans), turns=1)
