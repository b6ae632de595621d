"""What the exact checker says of each line of a trace, found once per rollout and shared.

Validation grounds *lines*, not spans (docs/design.md "Span validation", grounding):
the judge's word never outweighs a computation, however a span cuts the claim. The
checker is the rules judge's (`judges.rules.claims.find_links`: exact numbers, other
spellings read through `forms.checker_form`, anything doubtful skipped). For every
marker line (a trace line, cut every 64 tokens) `LineChecks` says whether it holds

- a proven-false link (``contradicts_arithmetic`` for a positive span touching it),
- a link that takes a value produced by an unrepaired false one (the rules judge's
  taint, ``built_on_error``),
- only links proven true and nothing else the checker cannot read (an ``invalid``
  there is slander: ``contradicts_arithmetic``, the claim checks out).

`TraceLinks` parses a line's links; the rules judge reads every line through the same
object, so both ask one pure function of the same text: sharing it trusts nobody's
submission.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from judge_service import labels as L
from judge_service.trace.decode import Trace
from judge_service.trace.markers import marker_array

if TYPE_CHECKING:
    from judge_service.judges.rules.claims import Link

_NEWLINE = re.compile("\n")


@functools.cache
def _claims() -> ModuleType:
    """The module of `claims.find_links`, imported on first use: the rules package imports
    the judge interface, which imports validation, which imports this module."""
    from judge_service.judges.rules import claims

    return claims


@functools.cache
def _rules_judge() -> ModuleType:
    """The rules judge's module (its reader), imported on first use for the same reason."""
    from judge_service.judges.rules import rules_judge

    return rules_judge


class TraceLinks:
    """The links of each line of `text` (lines as ``text.split("\\n")``, ``\\r`` stripped)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_start_list: list[int] | None = None
        # Each line's links from the rules judge's walk, until `LineChecks` takes them:
        # each line is parsed once for the judge and validation, and not kept after.
        self._found: dict[int, list[Link]] = {}

    @classmethod
    def of(cls, trace: Trace) -> TraceLinks:
        """The trace's one instance (see `Trace.derived`)."""
        return trace.derived(cls, lambda: cls(trace.text))

    def line_starts(self) -> list[int]:
        """Where each line starts (a list for the line-by-line walks: no numpy scalars)."""
        if self._line_start_list is None:
            self._line_start_list = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return self._line_start_list

    def links(self, line: int) -> list[Link]:
        """Every checkable link of line `line`, offsets relative to the line. The line is
        always cut from the trace here, never taken from a caller."""
        found = self._found.get(line)
        if found is None:
            found = self._parse(line)
            if found:
                self._found[line] = found
        return found

    def take(self, line: int) -> list[Link]:
        """`links(line)`, no longer kept: `LineChecks` keeps what validation needs of each
        line (a 131k-token trace's 12,851 parsed links with their exact values would hold
        5.2 MB)."""
        found = self._found.pop(line, None)
        return self._parse(line) if found is None else found

    def _parse(self, line: int) -> list[Link]:
        # The rules judge calls this for every line of a trace (thousands), so the line
        # is cut inline and the checker's module imported once.
        starts = self._line_start_list or self.line_starts()
        base = starts[line]
        stop = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        text = self.text[base:stop].rstrip("\r\n")
        claims = _claims()
        found: list[Link] = claims.find_links(text) if claims.may_claim(text) else []
        return found


# What may stand on a line beside claims the checker proves true for the line to count
# as read whole: punctuation, a list or step number, markup, and words that assert
# nothing ("So", "Then", "Let me double-check", "Yes, that is right").
_FILLER = (
    "so then thus hence therefore now and first next finally also again we i get got have "
    "has which that this it is yes correct right ok okay good fine let lets let's me us "
    "compute calculate check double verify verified indeed true step checks out holds"
)
_READ_WHOLE = re.compile(
    r"\s*(?:(?:[-*+]|#+|>)\s+)?(?:(?:step\s*)?\d{1,3}[.):]\s+)?"
    rf"(?:[\s.,;:!?*_#>()\[\]{{}}$`'\"\\-]|\b(?:{'|'.join(_FILLER.split())})\b)*",
    re.IGNORECASE,
)


class LineChecks:
    """The checker's verdict on each marker line of one trace (see the module docstring),
    built once per trace (`of`) by one walk of the rules judge's reader over the links."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.line_starts = marker_array(trace)
        n = self.line_starts.shape[0]
        self.false = np.zeros(n, np.bool_)
        self.tainted = np.zeros(n, np.bool_)
        self._true_chars: dict[int, list[tuple[int, int]]] = {}  # line -> true links' chars
        self._false_text: dict[int, str] = {}  # line -> a false link on it, for the reason
        self._proven: dict[int, bool] = {}
        if n:
            self._walk()
        self._false_count = np.concatenate(([0], np.cumsum(self.false)))
        self._taint_count = np.concatenate(([0], np.cumsum(self.tainted)))

    @classmethod
    def of(cls, trace: Trace) -> LineChecks:
        """The trace's one instance (see `Trace.derived`)."""
        return trace.derived(cls, lambda: cls(trace))

    def _walk(self) -> None:
        links = TraceLinks.of(self.trace)
        reader = _rules_judge().new_reader()
        starts = links.line_starts()
        no_sentences: list[tuple[int, int, str]] = []
        false: list[tuple[int, int, str]] = []
        tainted: list[tuple[int, int]] = []
        true: list[tuple[int, int]] = []
        for number, base in enumerate(starts):
            found = links.take(number)
            if not found:
                continue
            before = len(reader.findings)
            reader.read_line(base, found, no_sentences, iter(()))
            labels = iter(reader.findings[before:])
            for link in found:
                if link.trivial:
                    continue
                finding = next(labels)  # the reader labels every non-trivial link, in order
                a, b = base + link.left_start, base + link.right_end
                if not link.holds:
                    false.append((a, b, link.left_text + " = " + link.right_text))
                elif finding.label == L.UNSUPPORTED:
                    tainted.append((a, b))
                else:
                    true.append((a, b))
        for (_a, _b, text), (first, last) in zip(false, self._lines(false), strict=True):
            self.false[first : last + 1] = True
            for line in range(first, last + 1):
                self._false_text.setdefault(line, " ".join(text.split()))
        for first, last in self._lines(tainted):
            self.tainted[first : last + 1] = True
        for (a, b), (first, last) in zip(true, self._lines(true), strict=True):
            for line in range(first, last + 1):
                self._true_chars.setdefault(line, []).append((a, b))

    def _lines(
        self, ranges: list[tuple[int, int]] | list[tuple[int, int, str]]
    ) -> list[tuple[int, int]]:
        """The first and last marker line each char range touches."""
        if not ranges:
            return []
        firsts, ends = self.trace.tokens_for_char_ranges(
            [r[0] for r in ranges], [r[1] for r in ranges]
        )
        lo = self.line_starts.searchsorted(firsts, side="right") - 1
        hi = self.line_starts.searchsorted(ends - 1, side="right") - 1
        return list(zip(lo.tolist(), hi.tolist(), strict=True))

    def lines_of(self, start: int, end: int) -> tuple[int, int]:
        """The first and last marker line of tokens ``[start, end)``."""
        starts = self.line_starts
        return (
            int(starts.searchsorted(start, side="right")) - 1,
            int(starts.searchsorted(end - 1, side="right")) - 1,
        )

    def false_on(self, start: int, end: int) -> str | None:
        """A false link on a line that tokens ``[start, end)`` touch (its text), if any."""
        first, last = self.lines_of(start, end)
        if self._false_count[last + 1] == self._false_count[first]:
            return None
        hit = first + int(np.flatnonzero(self.false[first : last + 1])[0])
        return self._false_text.get(hit, "a false computation")

    def tainted_on(self, start: int, end: int) -> bool:
        first, last = self.lines_of(start, end)
        return bool(self._taint_count[last + 1] > self._taint_count[first])

    def proven_true(self, start: int, end: int) -> bool:
        """Whether every line of tokens ``[start, end)`` holds claims the checker proves
        true and nothing else it cannot read (no other number, operator or word)."""
        first, last = self.lines_of(start, end)
        if last - first > 8:  # a long stretch is never read whole; no need to look
            return False
        return all(self._proven_line(line) for line in range(first, last + 1))

    def _proven_line(self, line: int) -> bool:
        known = self._proven.get(line)
        if known is None:
            known = self._proven[line] = self._read_whole(line)
        return known

    def _read_whole(self, line: int) -> bool:
        true = self._true_chars.get(line)
        if not true or self.false[line] or self.tainted[line]:
            return False
        n = self.trace.num_tokens
        stop = int(self.line_starts[line + 1]) if line + 1 < self.line_starts.shape[0] else n
        low, high = self.trace.char_range(int(self.line_starts[line]), stop)
        text = self.trace.text
        rest, at = [], low
        for a, b in sorted(true):
            rest.append(text[at : max(at, a)])
            at = max(at, b)
        rest.append(text[at:high])
        return _READ_WHOLE.fullmatch(" ".join(rest)) is not None


@dataclass(frozen=True)
class Verdict:
    """What validation knows of a rollout's verdict: the final answer as stated (else the
    trace's last ``\\boxed{}``), the reference and the verifier's reward."""

    final_answer: str | None = None
    reference_answer: str | None = None
    reward: float | None = None


def wrong_answer_tokens(trace: Trace, verdict: Verdict | None) -> tuple[int, int] | None:
    """The tokens of the trace's final answer when the verdict says it is wrong."""
    if verdict is None:
        return None
    from judge_service.judges.rules import final_answer as fa  # see `_claims`

    answer = fa.locate_final_answer(trace.text, verdict.final_answer)
    if answer is None or answer.end <= answer.start:
        return None
    if not fa.answer_is_wrong(answer.content, verdict.reference_answer, verdict.reward):
        return None
    return trace.tokens_for_chars(answer.start, answer.end)
