"""What the exact checker says of each line of a trace, found once per rollout and shared.

Validation grounds *lines*, not spans (docs/concepts.md "Validation: what a span must show"):
the judge's word never outweighs a computation, however a span cuts the claim. The
checker is the rules judge's (`judges.rules.claims.find_links`: exact numbers, other
spellings read through `forms.checker_form`, anything doubtful skipped). For every
marker line (a trace line, cut every 64 tokens) `LineChecks` says whether it holds

- a proven-false link (``contradicts_arithmetic`` for a positive span touching it),
- a link that takes a value produced by an unrepaired false one (the rules judge's
  taint, ``built_on_error``),
- only links proven true and nothing else the checker cannot read (an ``invalid``
  there is slander: ``contradicts_arithmetic``, the claim checks out).

`TraceLinks` parses a line's links. The rules judge reads every line through the same
object and hands its reader's labels to `LineChecks` (`LinkKinds`), so that a trace it
judges is walked once: both ask one pure function of the same text, so sharing it
trusts nobody's submission.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.judges.rules import final_answer as fa
from judge_service.judges.rules.claims import Link
from judge_service.judges.rules.claims import line_links as _line_links
from judge_service.judges.rules.reader import FALSE, TAINTED, TRUE, LinkKinds, new_reader
from judge_service.trace.decode import Trace
from judge_service.trace.markers import line_chars, marker_array


class TraceLinks:
    """The links of each line of `text` (lines as ``text.split("\\n")``, ``\\r`` stripped)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_start_list: list[int] | None = None

    @classmethod
    def of(cls, trace: Trace) -> TraceLinks:
        """The trace's one instance (see `Trace.derived`)."""
        return trace.derived(cls, lambda: cls(trace.text))

    def line_starts(self) -> list[int]:
        """Where each line starts (a list for the line-by-line walks: no numpy scalars)."""
        if self._line_start_list is None:
            # The char after each newline as the markers find it: one array over the code
            # points (a regex match a line cost four times as much: 2,451 lines, 0.22 ->
            # 0.06 ms), a plain search on a short text.
            self._line_start_list = [0, *line_chars(self.text).tolist()]
        return self._line_start_list

    def links(self, line: int) -> list[Link]:
        """Every checkable link of line `line`, offsets relative to the line, parsed now.
        The line is always cut from the trace here, never taken from a caller. Nothing is
        kept: `LineChecks` keeps what validation needs of each line (a 131k-token trace's
        12,851 parsed links with their exact values would hold 5.2 MB)."""
        # The rules judge calls this for every line of a trace (thousands): the compiled
        # scan reads the line in place and cuts it out only when it may hold a claim.
        starts = self._line_start_list or self.line_starts()
        stop = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        found: list[Link] = _line_links(self.text, starts[line], stop)
        return found


# What may stand on a line beside claims the checker proves true for the line to count
# as read whole (issue 38: words that claim nothing): punctuation, a list or step number,
# markup, a short lead-in label ("Week 2:", "Check one part:"), unicode operators, a
# percentage's "of", and words that assert nothing ("So", "Then", "As a sanity check",
# "Let me double-check", "Yes, that is right"). A word about the problem ("eggs left",
# "she sells") or a method ("a product was asked, so") is none of these: the line then
# says more than its arithmetic, and a negative label there is the judge's to argue.
_FILLER = (
    "so then thus hence therefore now and first next finally also again we i get got have "
    "has which that this it is yes correct right ok okay good fine let lets let's me us "
    "compute calculate check double verify verified indeed true step checks out holds "
    "as a an sanity quick quickly recheck re-check confirm confirms confirmed note just "
    "simply once more still see"
)
# A label names where a line stands ("Week 2:", "Check one part:"), never what it does: a
# word of method ("Add 4:", "Take half:") makes the label a claim about the problem.
_METHOD = (
    "add|adds|adding|subtract|subtracts|subtracting|multiply|multiplies|multiplying|divide|"
    "divides|dividing|take|takes|taking|use|uses|using|split|times|plus|minus|sum|product|"
    "difference|quotient|half|double|twice|triple|thrice|square|remove|removes|keep|keeps|"
    "sell|sells|buy|buys|pay|pays|left|remain|remaining|each|per|total"
)
_WORD = rf"(?!(?:{_METHOD})\b)[A-Za-z][A-Za-z'-]*"
_LABEL = rf"(?:{_WORD}\s+){{0,3}}{_WORD}(?:\s+\d{{1,3}})?\s*:(?:\*\*)?\s+"
_READ_WHOLE = re.compile(
    r"\s*(?:(?:[-*+]|#+|>)\s+)?(?:(?:step\s*)?\d{1,3}[.):]\s+)?"
    rf"(?:\*\*)?(?:{_LABEL})?(?:\*\*)?"
    rf"(?:[\s.,;:!?*_#>()\[\]{{}}$`'\"\\·×−÷-]|%\s*of\b|\b(?:{'|'.join(_FILLER.split())})\b)*",
    re.IGNORECASE,
)


def walk_kinds(trace: Trace) -> LinkKinds:
    """One walk of the rules judge's reader over the trace's links (no sentences)."""
    read = LinkKinds()
    links = TraceLinks.of(trace)
    none: list[tuple[int, int, str]] = []  # no sentences: the links alone
    lines = [(number, base, none) for number, base in enumerate(links.line_starts())]
    new_reader().read_text_lines(links.text, links.line_starts(), lines, iter(()), read)
    return read


class LineChecks:
    """The checker's verdict on each marker line of one trace (see the module docstring),
    built once per trace (`of`) by one walk of the rules judge's reader over the links."""

    def __init__(self, trace: Trace, read: LinkKinds | None = None) -> None:
        """`read`: the kinds of the trace's links as a walk of the reader found them (the
        rules judge's own walk, `LinkKinds.add`); without it, this walks the trace."""
        self.trace = trace
        self.line_starts = marker_array(trace)
        n = self.line_starts.shape[0]
        if read is None:
            read = walk_kinds(trace) if n else LinkKinds()
        # Every non-trivial link: its kind, chars, and first and last marker line. Plain
        # lists and sets: most traces are short, and numpy's cost a call is then the most.
        self._kind, self._a, self._b = read.kinds, read.lows, read.highs
        self._lo: list[int] = []
        self._hi: list[int] = []
        count = len(self._kind)
        lo = hi = np.zeros(0, np.int64)
        if count and n:
            # The reader's arrays as they are (LinkKinds: int64); converting lists of
            # thousands of ints, and the line lists back for `_touched`, was half of this.
            firsts, ends = trace.tokens_for_char_ranges(_int64(self._a), _int64(self._b))
            lo = self.line_starts.searchsorted(firsts, side="right") - 1
            hi = self.line_starts.searchsorted(ends - 1, side="right") - 1
            self._lo, self._hi = lo.tolist(), hi.tolist()
        self.false_lines: set[int] = set()
        self.tainted_lines: set[int] = set()
        if count > 256 and n:  # thousands of links: whole-array steps pay again
            kinds = _int64(self._kind)
            self.false_lines = _touched(lo[kinds == FALSE], hi[kinds == FALSE], n)
            self.tainted_lines = _touched(lo[kinds == TAINTED], hi[kinds == TAINTED], n)
        else:
            for kind, first, last in zip(self._kind, self._lo, self._hi, strict=True):
                if kind != TRUE:
                    (self.false_lines if kind == FALSE else self.tainted_lines).update(
                        range(first, last + 1)
                    )
        self.has_false, self.has_taint = bool(self.false_lines), bool(self.tainted_lines)
        self._true_chars: dict[int, list[tuple[int, int]]] | None = None  # on first use
        self._proven: dict[int, bool] = {}
        self._line_list: list[int] | None = None

    def _links(self) -> Iterator[tuple[int, int, int, int, int]]:
        """Each link's kind, first and last line, and chars."""
        return zip(self._kind, self._lo, self._hi, self._a, self._b, strict=True)

    def mask(self, lines: set[int]) -> npt.NDArray[np.bool_]:
        """`lines` (false_lines, tainted_lines) as a mask over the marker lines."""
        out = np.zeros(self.line_starts.shape[0], np.bool_)
        out[list(lines)] = True
        return out

    @classmethod
    def of(cls, trace: Trace) -> LineChecks:
        """The trace's one instance (see `Trace.derived`)."""
        return trace.derived(cls, lambda: cls(trace))

    def lines_of(self, start: int, end: int) -> tuple[int, int]:
        """The first and last marker line of tokens ``[start, end)``."""
        if self._line_list is None:  # bisect on a list: a fifth of a searchsorted call
            self._line_list = self.line_starts.tolist()
        starts = self._line_list
        return bisect.bisect_right(starts, start) - 1, bisect.bisect_right(starts, end - 1) - 1

    def false_on(self, start: int, end: int) -> str | None:
        """A false link on a line that tokens ``[start, end)`` touch (its text), if any."""
        first, last = self.lines_of(start, end)
        hits = self.false_lines
        hit = next((line for line in range(first, last + 1) if line in hits), None)
        if hit is None:
            return None
        for kind, lo, hi, a, b in self._links():
            if kind == FALSE and lo <= hit <= hi:
                return " ".join(self.trace.text[a:b].split())
        return "a false computation"  # pragma: no cover - every false line has its link

    def tainted_on(self, start: int, end: int) -> bool:
        first, last = self.lines_of(start, end)
        return any(line in self.tainted_lines for line in range(first, last + 1))

    def proven_true(self, start: int, end: int) -> bool:
        """Whether every line of tokens ``[start, end)`` holds claims the checker proves
        true and nothing else it cannot read (no other number, operator or word)."""
        first, last = self.lines_of(start, end)
        if last - first > 8:  # a long stretch is never read whole; no need to look
            return False
        return all(self._proven_line(line) for line in range(first, last + 1))

    def proven_claims(self, start: int, end: int) -> list[str]:
        """The text of each true computation on the lines of tokens ``[start, end)``, in
        order (what a rejection of slander names)."""
        first, last = self.lines_of(start, end)
        text = self.trace.text
        return [
            " ".join(text[a:b].split())
            for kind, lo, hi, a, b in self._links()
            if kind == TRUE and lo <= last and first <= hi
        ]

    def true_lines(self) -> list[int]:
        """Every marker line `proven_true` holds of (the drift shadow's checker-true lines)."""
        candidates = {
            at for kind, lo, hi, _, _ in self._links() if kind == TRUE for at in range(lo, hi + 1)
        }
        return sorted(line for line in candidates if self._proven_line(line))

    def _proven_line(self, line: int) -> bool:
        known = self._proven.get(line)
        if known is None:
            known = self._proven[line] = self._read_whole(line)
        return known

    def _read_whole(self, line: int) -> bool:
        if line in self.false_lines or line in self.tainted_lines:
            return False
        if self._true_chars is None:  # only an invalid span asks: built on its first ask
            self._true_chars = {}
            for kind, lo, hi, a, b in self._links():
                if kind == TRUE:
                    for at in range(lo, hi + 1):
                        self._true_chars.setdefault(at, []).append((a, b))
        true = self._true_chars.get(line)
        if not true:
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


def _int64(values: Sequence[int]) -> npt.NDArray[np.int64]:
    """`values` (an array("q") of `LinkKinds`, or a list) as an int64 array, without a copy
    where they are one already."""
    if isinstance(values, array) and values.typecode == "q":
        return np.frombuffer(values, np.int64) if len(values) else np.zeros(0, np.int64)
    return np.fromiter(values, np.int64, len(values))


def _touched(lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], n: int) -> set[int]:
    """The marker lines of `n` that links from line lo[i] to line hi[i] touch."""
    mark = np.bincount(lo, minlength=n + 1) - np.bincount(hi + 1, minlength=n + 1)
    return set(np.flatnonzero(np.cumsum(mark[:n])).tolist())


@dataclass(frozen=True)
class Verdict:
    """What validation knows of a rollout's verdict: the final answer as stated (else the
    trace's last ``\\boxed{}``), the reference and the verifier's reward."""

    final_answer: str | None = None
    reference_answer: str | None = None
    reward: float | None = None


def wrong_answer_tokens(trace: Trace, verdict: Verdict | None) -> tuple[int, int] | None:
    """The tokens of the trace's final answer when the verdict says it is wrong (once per
    trace and verdict: the rules judge and validation both ask)."""
    if verdict is None:
        return None
    return trace.derived(("wrong answer", verdict), lambda: _wrong_answer(trace, verdict))


def _wrong_answer(trace: Trace, verdict: Verdict) -> tuple[int, int] | None:

    answer, match = fa.judged_answer(
        trace, verdict.final_answer, verdict.reference_answer, verdict.reward
    )
    if answer is None or answer.end <= answer.start:
        return None
    if not fa.answer_is_wrong(match, verdict.reward):
        return None
    return trace.tokens_for_chars(answer.start, answer.end)
