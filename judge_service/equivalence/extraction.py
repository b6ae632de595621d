"""Where in a text math-verify found its answer, so the coverage rule reads that answer.

A final answer written in prose (``Final Answer: The largest $n$ is 34.``, a solution that
ends in ``\\boxed{...}``) is read as math-verify reads it: its extraction patterns, tried in
their priority order (boxed, "final answer is", "answer:", the last expression), the
rightmost match of a priority first. `parse` here is math-verify's ``parse`` with its
defaults, returning besides the forms the span of text the successful match read; the
coverage rule then asks whether the forms account for *that* text (the boxes in it, read
together), and `surroundings` whether the text next to it states what math-verify left
out: more values (``$5$ or $7$``), a condition (``7 if n is even``), words that change it
(``at most 7``), another number joined to it (``5 plus 7``). A number math-verify took out
of a formula it could not read whole is no answer in prose: the whole text is read.
Each of these rules reads a bounded neighbourhood, so a long text costs one pass.

Imported only in the checker's worker (math-verify and sympy are heavy).
"""

from __future__ import annotations

import re
from itertools import groupby
from typing import Any

from math_verify.parser import (
    ExprExtractionConfig,
    LatexExtractionConfig,
    extract_match,
    get_extraction_regexes,
)
from math_verify.utils import timeout

from judge_service.reading.numbers import read_numbers

__all__ = ["Extracted", "parse", "surroundings"]

_CONFIG = (LatexExtractionConfig(), ExprExtractionConfig())

# The span an answer was read from, and whether it is a piece the text may continue (a
# number, a bare expression) rather than a unit by construction (a delimited formula, which
# may hold boxes, or the boxes themselves).
Span = tuple[int, int, bool]
Extracted = tuple[list[Any], Span | None]
_WHOLE_UNITS = ("Dollar", "Bracket", "Parenthesis", "Boxed")


def _extract(text: str) -> Extracted:
    """math_verify.parser.extract_target_from_pred (any_match, first_match fallback), which
    also says which span of `text` its answer came from."""
    patterns = [
        (pattern, target, priority)
        for target_patterns, target in get_extraction_regexes(_CONFIG)
        for pattern, priority in target_patterns
    ]
    patterns.sort(key=lambda p: p[2])
    fallbacks: list[str] = []
    for _, group in groupby(patterns, key=lambda p: p[2]):
        matches = [
            (match, target) for pattern, target, _ in group for match in pattern.finditer(text)
        ]
        matches.sort(key=lambda m: (m[0].end(), -m[0].start()), reverse=True)
        for match, target in matches:
            form, fallback = extract_match(match, target)
            if fallback:
                fallbacks.append(fallback)
            if form is not None:
                return [form, *fallbacks[:1]], _span(match)
    return fallbacks[:1], None


def _span(match: re.Match[str]) -> Span:
    """The chars of the answer itself: the match's groups, without an anchor such as
    ``final answer is`` that precedes them."""
    names = [name for name, value in match.groupdict().items() if value]
    spans = [match.span(name) for name in names]
    piece = not any(name.endswith(_WHOLE_UNITS) for name in names)
    return min(s for s, _ in spans), max(e for _, e in spans), piece


def parse(text: str, parsing_timeout: int) -> Extracted:
    """math-verify's ``parse(text)`` (its default extraction targets), raising its errors,
    and the span of `text` its forms were read from (None when none was read)."""
    result: Extracted = timeout(timeout_seconds=parsing_timeout)(_extract)(text)
    return result


# What may sit around an answer that states it alone: math delimiters, a box, punctuation.
_FRAME = re.compile(r"(?:\s|\$|\\[()\[\]]|\\boxed\s*\{|[{}.,;:!])*")
_FRAME_END = re.compile(r"(?:\s|\$|\\[()\[\]]|[{}.,;:!])*\Z")
# Another value next to the answer, joined to it as a list or alternative, perhaps after a
# unit word: ``5 apples or 7 pears``, ``$5$, or $7$``, ``34 or 35``, ``x, 1``.
_MORE_BEFORE = re.compile(
    r"(?:\d(?:\s*+[A-Za-z]+)?|\b[A-Za-z]\b|[)}\]$]|\\[)\]])\s*+\$?\s*+(?:,|;|\band|\bor|\\pm)\s*+"
    r"(?:\$|\\[(\[]|\\boxed\s*+\{)*\s*+\Z"
)
_MORE_AFTER = re.compile(
    r"\A\s*+(?:\}\s*+)?(?:\$|\\[)\]])?(?:\s*+[A-Za-z]+)?\s*+\(?\s*+(?:,|;|\band\b|\bor\b)\s*+"
    r"(?:\$|\\[(\[]|\\boxed|[-+]?\d|[-+]?\\frac)"
)
_OPERATOR_BEFORE = re.compile(r"[-+*/^=<>\\{_]\s*+\Z")
_OPERATOR_AFTER = re.compile(r"\s*+(?:[-+*/^=>\\}_(]|<(?!\|))")  # not a chat template's <|
# Words next to a value that change it: ``not 7``, ``at most 7``, ``7 squared``,
# ``7 thousand``, ``7 or more`` (math-verify reads 7 from each).
_QUALIFIED_BEFORE = re.compile(
    r"\b(?:not|never|at\s++most|at\s++least|less\s++than|more\s++than|greater\s++than|"
    r"fewer\s++than|up\s++to|over|under|above|below|exceeds?)\s*+(?:\$|\\[(\[]|\\boxed\s*+\{)*\s*+\Z",
    re.IGNORECASE,
)
_QUALIFIED_AFTER = re.compile(
    r"\A(?:\s|\}|\$|\\[)\]])*(?:squared|cubed|hundred|thousand|million|billion|trillion"
    r"|(?:,\s*+)?(?:(?:or|and)\s++)?(?:more|less|fewer|greater|above|below|higher|lower)"
    r"|(?:,\s*+)?(?:or|and)\s++(?:up|over))\b",
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")
_NEAR = 300  # chars on each side of the answer that the rules below read
# A sentence (or clause) ends at . ! ? : before a space or the end, ; or a line break.
_SENTENCE_END = re.compile(r"[.!?:](?=\s|\Z)|;|\n")
_DIGIT_RUN = re.compile(r"\d+(?:[.,]\d+)*")
_RESTATES = re.compile(
    r"=|\\approx|\b(?:is|are|was|were|equals?|gives?|get|gets|makes?|so|thus|hence|"
    r"therefore|then|which|that|it's|i\.e)\b",
    re.IGNORECASE,
)
_BOX = re.compile(r"\\boxed\s*\{")
# A condition on the answer in its sentence: ``7 if n is even``, ``7 for $n > 3$``.
_CONDITION = re.compile(
    r"\A[^.\n]*?\b(?:if|when|whenever|unless|otherwise|except|provided"
    r"|for\s+(?:all|every|each|any|some)\b"
    r"|for\s+(?:\$|\\\()?\s*[A-Za-z](?:_\w|_\{[^{}]*\})?\s*(?:[<>=]|\\[lgn]eq?\b|\\in\b))",
    re.IGNORECASE,
)


def surroundings(text: str, span: Span) -> tuple[str, str | None]:
    """The text the coverage rule reads for an answer math-verify took from `span` of `text`,
    and why that answer is not the whole of what the text states (None when it is).

    An answer that is all of `text` but its frame (delimiters, a box) is read whole, as
    before; in prose, only the span is read, unless the text lists more values next to it
    or attaches a condition to it in the same sentence."""
    start, end, piece = span
    boxes = _boxes(text, start, end)
    if boxes:  # math-verify reads the boxes in its span, several as one set
        start, end = boxes[0][0], boxes[-1][1]
    before, after = text[:start], text[end:]
    if _FRAME.fullmatch(before) and _FRAME_END.match(after):
        return text, None
    # What joins to the answer stands next to it: each rule reads a bounded neighbourhood
    # (runs of white space as one space, so padding hides nothing), so a long text costs
    # no more than a short one.
    before, after = _SPACES.sub(" ", before)[-_NEAR:], _SPACES.sub(" ", after)[:_NEAR]
    if piece and (
        _in_formula(text[:start]) or _OPERATOR_BEFORE.search(before) or _OPERATOR_AFTER.match(after)
    ):
        return text, None  # a piece of a formula math-verify could not read whole
    if _MORE_BEFORE.search(before) or _MORE_AFTER.match(after):
        return text, "the text lists more values beside the answer math-verify read"
    if _CONDITION.match(after):
        return text, "the text puts a condition on the answer math-verify read"
    if _QUALIFIED_BEFORE.search(before) or _QUALIFIED_AFTER.match(after):
        return text, "the text qualifies the answer math-verify read with words that change it"
    if not boxes and (other := _other_number(text, start, end)) is not None:
        return text, f"the sentence joins {other} to the answer math-verify read"
    if len(boxes) > 1:
        return ", ".join(text[lo:hi] for lo, hi in boxes), None
    return text[start:end], None


def _other_number(text: str, start: int, end: int) -> str | None:
    """A number the answer's sentence joins to it by words other than a restatement: the 5
    of ``5 plus 7``, ``7 over 5``, ``7 cm by 5 cm``, ``5, not 7`` (``not 10 which is
    1,000.99`` restates, and a box is the author's own mark of the answer)."""
    window = max(0, start - _NEAR), min(len(text), end + _NEAR)
    opened = max((m.end() for m in _SENTENCE_END.finditer(text, window[0], start)), default=0)
    closed = _SENTENCE_END.search(text, end, window[1])
    stop = closed.start() if closed else window[1]
    opened = max(opened, window[0])
    for lo, hi in _numbers_in(text, opened, stop):
        if start <= lo < end:
            continue
        between = text[hi:start] if hi <= start else text[end:lo]
        if not _RESTATES.search(between):
            return text[lo:hi]
    return None


def _numbers_in(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    """Where digits, and numbers in words (the project's reader), stand in text[start:stop]."""
    found = [m.span() for m in _DIGIT_RUN.finditer(text, start, stop)]
    words = (n for n in read_numbers(text[start:stop]) if n.form == "words")
    return found + [(start + n.start, start + n.end) for n in words]


def _in_formula(before: str) -> bool:
    """Whether the text after `before` is inside a ``$...$``, ``\\(...\\)`` or ``\\[...\\]``."""
    dollars = len(re.findall(r"(?<!\\)\$", before))
    opened = max(before.rfind("\\("), before.rfind("\\["))
    closed = max(before.rfind("\\)"), before.rfind("\\]"))
    return dollars % 2 == 1 or opened > closed


def _boxes(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The contents of the ``\\boxed{...}`` groups that open within text[start:end] (one
    pass over the braces: nested or unclosed boxes cost no more)."""
    opens = {match.end() - 1 for match in _BOX.finditer(text, start, end)}
    if not opens:
        return []
    found, stack = [], []
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            stack.append(index)
        elif char == "}" and stack:
            opened = stack.pop()
            if opened in opens:
                found.append((opened + 1, index))
    return sorted(found)
