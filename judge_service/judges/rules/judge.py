"""The rules judge: the embedded default that needs no API key.

It reads the trace line by line and labels what it can check exactly:

* every numeric ``a = b`` link (`claims.find_links`): false -> ``invalid``;
  true -> ``valid_progress``; true and recomputing the left side of an earlier
  false claim -> ``verified_correction``; true but built on a value produced by
  an unrepaired false claim -> ``unsupported`` (and its result is tainted too);
* lines that only restate a tainted value -> ``unsupported``;
* sentences that repeat earlier content (near-duplicates) -> ``unproductive_repetition``;
* the final answer span against ``reference_answer`` -> ``valid_progress`` / ``invalid``.

It quotes evidence like any judge and its spans go through the same validation.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import sympy

from judge_service import labels as L
from judge_service.judges.base import Judge, JudgeOutcome, JudgeRequest, SpanCheck
from judge_service.judges.rules.answers import answers_match, locate_final_answer
from judge_service.judges.rules.claims import find_links
from judge_service.judges.rules.repetition import RepetitionIndex
from judge_service.trace.decode import Trace

PROMPT_VERSION = "rules-1"
EVIDENCE_CHARS = 160

# When two findings cover the same tokens, the more important one keeps them.
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

SENTENCE_LABELS = frozenset({L.UNSUPPORTED, L.UNPRODUCTIVE_REPETITION})

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")
_CORRECTION_WORDS = re.compile(
    r"\b(wait|actually|mistake|wrong|incorrect|error|oops|instead|not|isn't|correct(?:ion|ed)?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """A labelled char range of the trace text (converted to tokens at the end)."""

    char_start: int
    char_end: int
    label: str
    confidence: float


@dataclass
class _Error:
    left_value: sympy.Expr
    wrong_value: sympy.Expr
    repaired: bool = False


def _numbers(text: str) -> list[sympy.Rational]:
    return [sympy.Rational(m.group()) for m in _NUMBER.finditer(text)]


class _Reader:
    """Walks the lines of one trace, keeping the state that links claims across lines."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.errors: list[_Error] = []
        self.tainted: set[sympy.Expr] = set()
        self.repeats = RepetitionIndex()
        self.checked: set[tuple[str, str]] = set()

    def _uses_tainted(self, text: str) -> bool:
        return bool(self.tainted) and any(n in self.tainted for n in _numbers(text))

    def read_line(self, line: str, base: int) -> None:
        claim_findings = self._claims(line, base) if "=" in line else []
        self.findings.extend(claim_findings)
        strong = any(f.label != L.VALID_PROGRESS for f in claim_findings)
        for match in _sentences(line):
            text = match[2]
            start, end = base + match[0], base + match[1]
            repeated = self.repeats.seen_before(text)
            if strong or any(f.char_start < end and start < f.char_end for f in claim_findings):
                if repeated and not strong:
                    self._add(start, end, L.UNPRODUCTIVE_REPETITION)
                continue
            if repeated:
                self._add(start, end, L.UNPRODUCTIVE_REPETITION)
            elif self._uses_tainted(text) and not _CORRECTION_WORDS.search(text):
                self._add(start, end, L.UNSUPPORTED)

    def _add(self, start: int, end: int, label: str) -> None:
        self.findings.append(Finding(start, end, label, CONFIDENCE[label]))

    def _claims(self, line: str, base: int) -> list[Finding]:
        found: list[Finding] = []
        previous_end = -1
        for link in find_links(line):
            start = link.left_start if link.left_start >= previous_end else previous_end
            previous_end = link.right_end
            if link.trivial:
                continue
            label = self._judge_link(link.left_text, link.left_value, link.right_value, link.holds)
            claim = (_compact(link.left_text), _compact(link.right_text))
            if label == L.VALID_PROGRESS and claim in self.checked:
                label = L.UNPRODUCTIVE_REPETITION  # the same true claim, checked again
            self.checked.add(claim)
            found.append(Finding(base + start, base + link.right_end, label, CONFIDENCE[label]))
        return found

    def _judge_link(self, left_text: str, left: sympy.Expr, right: sympy.Expr, holds: bool) -> str:
        if not holds:
            self.errors.append(_Error(left, right))
            self.tainted.add(right)
            return L.INVALID
        repaired = [e for e in self.errors if not e.repaired and e.left_value == left]
        if repaired:
            for error in repaired:
                error.repaired = True
                self.tainted.discard(error.wrong_value)
            return L.VERIFIED_CORRECTION
        if self._uses_tainted(left_text):
            self.tainted.add(right)
            return L.UNSUPPORTED
        return L.VALID_PROGRESS


def _compact(expression: str) -> str:
    return "".join(expression.split())


def _sentences(line: str) -> list[tuple[int, int, str]]:
    """Sentences of a line as (start, end, text), surrounding spaces excluded."""
    out: list[tuple[int, int, str]] = []
    position = 0
    for piece in [*_SENTENCE_END.split(line)]:
        start = line.index(piece, position) if piece else position
        stripped = piece.strip()
        if stripped:
            lead = start + (len(piece) - len(piece.lstrip()))
            out.append((lead, lead + len(stripped), stripped))
        position = start + len(piece)
    return out


def _lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    position = 0
    for line in text.split("\n"):
        out.append((position, line.rstrip("\r")))
        position += len(line) + 1
    return out


def label_trace(request: JudgeRequest) -> list[Finding]:
    reader = _Reader()
    for base, line in _lines(request.trace.text):
        if line.strip():
            reader.read_line(line, base)
    findings = reader.findings
    answer = locate_final_answer(request.trace.text, request.final_answer)
    if answer is None:
        return findings
    verdict = answers_match(answer.content, request.reference_answer, request.reward)
    if verdict is None:
        return findings
    # The answer gets its own verdict; a sentence-level label around it would only
    # leave fragments such as "\boxed{" behind.
    kept = [
        f
        for f in findings
        if f.label not in SENTENCE_LABELS
        or f.char_end <= answer.start
        or f.char_start >= answer.end
    ]
    kept.append(Finding(answer.start, answer.end, L.VALID_PROGRESS if verdict else L.INVALID, 0.9))
    return kept


def to_token_spans(findings: list[Finding], trace: Trace) -> list[dict[str, object]]:
    """Char findings to non-overlapping token spans with their evidence quotes."""
    ordered = sorted(findings, key=lambda f: (PRIORITY.get(f.label, 9), f.char_start, -f.char_end))
    taken: list[tuple[int, int]] = []
    spans: list[dict[str, object]] = []
    for finding in ordered:
        start, end = trace.tokens_for_chars(finding.char_start, finding.char_end)
        for a, b in sorted(taken):
            if a <= start < b:
                start = b
            if start < a < end:
                end = a
        if start >= end:
            continue
        taken.append((start, end))
        evidence = trace.span_text(start, end).strip()[:EVIDENCE_CHARS]
        spans.append(
            {
                "start": start,
                "end": end,
                "label": finding.label,
                "confidence": finding.confidence,
                "evidence": evidence,
            }
        )
    return sorted(spans, key=lambda s: int(str(s["start"])))


class RulesJudge(Judge):
    name = "rules"
    prompt_version = PROMPT_VERSION

    async def judge(self, request: JudgeRequest, check: SpanCheck) -> JudgeOutcome:
        spans = await asyncio.to_thread(lambda: to_token_spans(label_trace(request), request.trace))
        return JudgeOutcome(spans=list(spans), turns=1)
