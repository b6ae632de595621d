"""The rules judge: the embedded default that needs no API key.

It reads the trace line by line and labels what it can check exactly, by the
rubric it hands the LLM judges (``prompts/v1/rubric.md``):

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
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from judge_service import labels as L
from judge_service.collector import collector_paused
from judge_service.errors import ParseError
from judge_service.grounding import LineChecks, TraceLinks, Verdict, wrong_answer_tokens
from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.judges.rules.arithmetic import parse_number_expr
from judge_service.judges.rules.final_answer import (
    answer_is_wrong,
    judged_answer,
    normalise_answer,
)
from judge_service.judges.rules.reader import Finding, LinkKinds, Reading, new_reader
from judge_service.judges.rules.repetition import repeated_sentences
from judge_service.judges.rules.shape import shape_spans
from judge_service.judges.rules.token_spans import SpanColumns
from judge_service.offload import OFFLOAD_CHARS, off_loop
from judge_service.spans import SpanLimits
from judge_service.trace.decode import Trace

if TYPE_CHECKING:  # sympy only names a type here (the line reader's is lazy: lazy_sympy.py)
    import sympy

PROMPT_VERSION = "rules-3"  # rules-3: line grounding, the checker's other spellings

# When two findings cover the same tokens, the more important one keeps them; the same
# order decides which spans stay on a crowded line.
PRIORITY = {
    L.INVALID: 0,
    L.VERIFIED_CORRECTION: 1,
    L.UNSUPPORTED: 2,
    L.UNPRODUCTIVE_REPETITION: 3,  # a re-check of a true claim is still a re-check
    L.VALID_PROGRESS: 4,
}
ANSWER_CONFIDENCE = 0.9

SENTENCE_LABELS = frozenset({L.UNSUPPORTED, L.UNPRODUCTIVE_REPETITION})

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")


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
    reader = new_reader()
    # Through the trace's shared links: validation's grounding check then finds every
    # line's links parsed already (judge_service/grounding.py).
    links = TraceLinks.of(request.trace)
    lines = line_sentences(request.trace.text)
    # Near-duplicates are found for the whole trace at once (repetition.py), in the order
    # the lines are then read.
    flags = iter(repeated_sentences([sentence[2] for line in lines for sentence in line[2]]))
    # The kind of each link as the reader reads it: validation's line checks are made of
    # them (one walk of the trace for the judge and validation).
    kinds = LinkKinds()
    reader.read_text_lines(links.text, links.line_starts(), lines, flags, kinds)
    request.trace.derived(LineChecks, lambda: LineChecks(request.trace, kinds))
    reading = Reading(reader.findings)
    answer, verdict = judged_answer(
        request.trace, request.final_answer, request.reference_answer, request.reward
    )
    if answer is None or verdict is None:
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
    elif answer_is_wrong(verdict, request.reward):
        return reading  # the reference's value, unrewarded: no credit either way
    reading.findings.append(Finding(answer.start, answer.end, label, ANSWER_CONFIDENCE))
    return reading


def _value(answer: str) -> sympy.Expr | None:
    try:
        return parse_number_expr(normalise_answer(answer))
    except ParseError:
        return None


def to_token_spans(findings: list[Finding], trace: Trace) -> SpanColumns:
    """Char findings to non-overlapping token spans, cut in order of importance (the more
    important first), by start. As columns: a long trace has thousands, of which
    `shape_spans` keeps a few hundred (`token_spans`)."""
    columns = SpanColumns.of([])
    if not findings:
        return columns
    n = len(findings)
    char_starts, char_ends, labels, confidences = zip(*findings, strict=True)  # in C
    names = list(dict.fromkeys(labels))  # distinct, in first-seen order
    code = {name: i for i, name in enumerate(names)}
    codes = np.fromiter(map(code.__getitem__, labels), np.int64, n)
    ranks = np.array([PRIORITY.get(name, 9) for name in names], np.int64)[codes]
    starts = np.fromiter(char_starts, np.int64, n)
    ends = np.fromiter(char_ends, np.int64, n)
    # By priority, then start, then the longer first; ties stay in reading order (lexsort
    # is stable, as sorted() was).
    order = np.lexsort((-ends, starts, ranks))
    firsts, lasts = trace.tokens_for_char_ranges(starts[order], ends[order])
    index, start, end = disjoint_ranges(firsts, lasts)
    # By start: the spans are disjoint and nonempty, so no two starts tie.
    by = np.argsort(start, kind="stable")
    rows = order[index[by]]
    return SpanColumns(
        start[by], end[by], codes[rows], names, np.fromiter(confidences, np.float64, n)[rows]
    )


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


IntArray = npt.NDArray[np.int64]


def python_disjoint_ranges(
    firsts: IntArray, lasts: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """`python_disjoint_spans` of two arrays, as three columns: index, start and end (the
    definition, which the compiled `_spans.disjoint_ranges` equals)."""
    found = python_disjoint_spans(firsts.tolist(), lasts.tolist())
    index, start, end = np.array(found, np.int64).reshape(-1, 3).T
    return index, start, end


def _compiled_ranges(firsts: IntArray, lasts: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    index, start, end = _disjoint_ranges(
        np.ascontiguousarray(firsts, np.int64), np.ascontiguousarray(lasts, np.int64)
    )
    return (
        np.frombuffer(index, np.int64),
        np.frombuffer(start, np.int64),
        np.frombuffer(end, np.int64),
    )


try:  # the compiled loops (_spans.pyx), where the install could build them
    from judge_service.judges.rules._spans import disjoint_ranges as _disjoint_ranges
    from judge_service.judges.rules._spans import disjoint_spans

    disjoint_ranges = _compiled_ranges
except ImportError:  # pragma: no cover - a build without a C compiler
    disjoint_spans = python_disjoint_spans
    disjoint_ranges = python_disjoint_ranges


def judge_spans(request: JudgeRequest, limits: SpanLimits) -> list[dict[str, object]]:
    """The rules judge's submission for one trace: every span passes validation."""
    with collector_paused():  # thousands of small objects, all held to the end
        # In a call of its own, whose findings are freed as it returns: still held when
        # the collector resumed, they were its first young collection's work (thousands
        # of tuples, a collection a request: 3% of a 32k-token arithmetic request).
        return _shaped(request, limits)


def _shaped(request: JudgeRequest, limits: SpanLimits) -> list[dict[str, object]]:
    reading = read_trace(request)
    return shape_spans(
        to_token_spans(reading.findings, request.trace),
        request.trace,
        priority=PRIORITY,
        positive=frozenset(label for label, score in request.label_scores.items() if score > 0),
        blocked=blocked_lines(request),
        limits=limits,
    )


def blocked_lines(request: JudgeRequest) -> npt.NDArray[np.bool_]:
    """The marker lines validation lets no positive span touch (`grounding.LineChecks`):
    a false link, a link built on an error's value, the final answer of a wrong rollout."""
    checks = LineChecks.of(request.trace)
    blocked = checks.mask(checks.false_lines | checks.tainted_lines)
    verdict = Verdict(request.final_answer, request.reference_answer, request.reward)
    answer = wrong_answer_tokens(request.trace, verdict)
    if answer is not None:
        first, last = checks.lines_of(*answer)
        blocked[first : last + 1] = True
    return blocked


class RulesJudge(Judge):
    name = "rules"
    prompt_version = PROMPT_VERSION
    reads_view = False  # it reads the text; its quotes come from shape_spans

    def __init__(self, limits: SpanLimits | None = None) -> None:
        self.limits = limits or SpanLimits()  # validation's: every span it submits passes

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        spans = await off_loop(
            len(request.trace.text),
            functools.partial(judge_spans, request, self.limits),
            threshold=OFFLOAD_CHARS,
        )
        return JudgeOutcome(spans=list(spans), turns=1)
