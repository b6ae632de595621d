"""The judge's view of a trace: ⟦n⟧ position markers, with forged markers escaped.

A marker ⟦n⟧ (n the original token index) goes before token n where n starts a
line and every `every` tokens inside a long line. The trace is untrusted, so
text that could be read as a marker, and control characters, are mapped to
visible stand-ins: ⟦ ⟧ become 〚 〛, runs of three or more ``<`` or ``>`` (the
fence lines around the trace in the judge's prompt) become ‹‹‹ / ›››, C0/C1
controls and bidi overrides become their control pictures. Every escape is one
char for one, so offsets into the text hold for its escaped form. Validation
folds quotes with the same map, so a judge may quote either form.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace

MARKER_RE = re.compile(r"⟦(\d+)⟧")
DEFAULT_EVERY = 64

_ESCAPES: dict[int, str] = {ord("⟦"): "〚", ord("⟧"): "〛"}
for _code in range(0x20):
    if chr(_code) not in "\n\t\r":
        _ESCAPES[_code] = chr(0x2400 + _code)
_ESCAPES[0x7F] = "\u2421"
for _code in range(0x80, 0xA0):
    _ESCAPES[_code] = "\ufffd"
for _code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F):
    _ESCAPES[_code] = "\ufffd"


_FENCE_RUN = re.compile(r"<{3,}|>{3,}")
# Most traces need no escape at all: one scan for any escaped char is cheaper than
# `str.translate` (a dict lookup per char) over the whole text.
_NEEDS_ESCAPE = re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(_ESCAPES)) + "]")


def _fence(match: re.Match[str]) -> str:
    run = match.group()
    return ("‹" if run[0] == "<" else "›") * len(run)


def escape_chars(text: str) -> str:
    """The char-by-char part of `escape_view_text` (markers and control characters)."""
    return text.translate(_ESCAPES) if _NEEDS_ESCAPE.search(text) else text


def escape_view_text(text: str) -> str:
    """Trace text as the judge sees it: no forgeable markers or fences, no raw control chars."""
    text = escape_chars(text)
    if "<<<" in text or ">>>" in text:
        text = _FENCE_RUN.sub(_fence, text)
    return text


def strip_markers(text: str) -> str:
    return MARKER_RE.sub("", text)


@dataclass(frozen=True)
class MarkedView:
    text: str
    marked_tokens: tuple[int, ...]  # token indices that carry a marker, ascending


def marker_positions(trace: Trace, every: int = DEFAULT_EVERY) -> list[int]:
    """Token indices that get a marker: line starts, and every `every` tokens in between."""
    positions: list[int] = marker_array(trace, every).tolist()
    return positions


def marker_array(trace: Trace, every: int = DEFAULT_EVERY) -> npt.NDArray[np.int64]:
    """`marker_positions` as a read-only array, computed once per trace (the view, the
    validator's line index and the rules judge's span shaping all need it)."""
    return trace.derived(("markers", every), lambda: _frozen(_marker_positions(trace, every)))


def _frozen(array: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    array.setflags(write=False)
    return array


def _marker_positions(trace: Trace, every: int) -> npt.NDArray[np.int64]:
    """Line starts, and every `every` tokens after each, up to the next (as `range` steps)."""
    n = trace.num_tokens
    if n == 0 or every < 0:  # as range() with a negative step: no positions at all
        return np.zeros(0, np.int64)
    if every == 0:  # as range() with a zero step
        raise ValueError("marker spacing must not be zero")
    # The token that starts at (or first after) each line's first char, ascending; a token
    # that starts several lines repeats, and the empty range between repeats adds nothing.
    line_tokens = np.searchsorted(trace.offsets[:-1], line_chars(trace.text), side="left")
    inner = line_tokens[(line_tokens > 0) & (line_tokens < n)]
    return _every_between(np.concatenate(([0], inner, [n])).astype(np.int64), every)


# Below this many chars, or lines, plain Python is faster than numpy's fixed cost per call
# (a small rollout's markers were ~3% of its request).
_SHORT = 2048


def line_chars(text: str) -> npt.NDArray[np.int64]:
    """The char index after each "\n": a vector compare over the UTF-32 code points is
    ~10x faster than iterating `re.finditer` on a trace with thousands of lines."""
    if len(text) <= _SHORT:
        after: list[int] = []
        at = text.find("\n")
        while at >= 0:
            after.append(at + 1)
            at = text.find("\n", at + 1)
        return np.array(after, np.int64)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
    return np.flatnonzero(codes == ord("\n")).astype(np.int64) + 1


def _every_between(anchors: npt.NDArray[np.int64], every: int) -> npt.NDArray[np.int64]:
    """`range(a, b, every)` for each pair of neighbours a <= b in `anchors`, concatenated."""
    if anchors.shape[0] <= _SHORT // 64 and int(anchors[-1]) <= _SHORT:
        bounds = anchors.tolist()
        out = [p for a, b in itertools.pairwise(bounds) for p in range(a, b, every)]
        return np.array(out, np.int64)
    heads = anchors[:-1]
    counts = (anchors[1:] - heads + (every - 1)) // every  # the length of each range
    firsts = np.cumsum(counts) - counts  # where each range begins in the output
    steps = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(firsts, counts)
    positions: npt.NDArray[np.int64] = np.repeat(heads, counts) + steps * every
    return positions


def mark(
    trace: Trace, every: int = DEFAULT_EVERY, start: int = 0, end: int | None = None
) -> MarkedView:
    """The marked view of tokens ``[start, end)``; the first token always gets a marker."""
    stop = trace.num_tokens if end is None else end
    positions = [p for p in marker_array(trace, every).tolist() if start < p < stop]
    cuts = [start, *positions, stop]
    # Escaped whole (one char for one), so a fence run split by a marker is still caught.
    chars = trace.offsets[cuts].tolist()
    low = chars[0]
    escaped = escape_view_text(trace.text[low : chars[-1]])
    parts: list[str] = []
    for here, a, b in zip(cuts, chars, chars[1:], strict=False):
        parts.append(f"⟦{here}⟧")
        parts.append(escaped[a - low : b - low])
    return MarkedView("".join(parts), tuple(cuts[:-1]) if stop > start else ())


def marked_view(trace: Trace) -> MarkedView:
    """`mark(trace)`, once per trace (`Trace.derived`)."""
    return trace.derived(MarkedView, lambda: mark(trace))


def mark_every_token(trace: Trace, start: int, end: int) -> str:
    """Tokens ``[start, end)`` with a marker before each one (the view_tokens tool)."""
    return "".join(f"⟦{i}⟧{escape_view_text(trace.token_text(i))}" for i in range(start, end))
