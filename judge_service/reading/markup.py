"""Markdown and LaTeX markup read as structure: it claims nothing.

Capable models write solutions as ``### Step 1: ...`` headings, numbered and bulleted
lists, ``**bold**`` labels, ``---`` rules and display-math blocks with ``\\text{...}``
unit labels. None of that is a claim: a heading or a list marker never carries a
divergence point or a negative label, its number (``2. Food``) is no value of the
solution, and a display block does not cut a step in two. Here:

- `claims_nothing(line)`: a line that is only structure (blank, a rule, a math fence,
  a heading, a bold label alone on its line);
- `structure_end(line)`: where a line's structural lead (heading marks, a list marker,
  a ``Step 1:`` label, bold marks) ends, so what follows is its claim text;
- `mask_markup(line)`: the line with its markup blanked, **keeping its length** (every
  blanked char is a space), so the exact checker reads ``\\(8 \\text{ pounds} + 4
  \\text{ pounds} = 13 \\text{ pounds}\\)`` as ``8 + 4 = 13`` and offsets stay the line's.

Unit labels are blanked only when every number of the line that carries one carries the
same unit (``8 pounds + 4 pounds``): ``2 \\text{ hours} = 120 \\text{ minutes}`` keeps its
labels, so the checker never reads the true conversion as ``2 = 120``. A label that is
not after a number names a quantity (``\\text{Total} =``, ``\\text{Jamal's apples} + 8``)
and stays, read by the checker as no number; a note after one (``\\text{ (French)}``) is
blanked.
"""

from __future__ import annotations

import bisect
import re

__all__ = ["claims_nothing", "mask_markup", "may_have_markup", "structure_end"]

_RULE = re.compile(r"\s*([-*_])(?:\s*\1){2,}\s*")
_FENCE = re.compile(
    r"\s*(?:\\\[|\\\]|\$\$|```[\w-]*|~~~|\\begin\{[A-Za-z*]+\}|\\end\{[A-Za-z*]+\})\s*[.,]?\s*"
)
_HEADING = re.compile(r"\s*#{1,6}(?:\s|$)")
_BOLD_LINE = re.compile(r"\s*(?:[-*+•]\s+|\d{1,3}[.)]\s+)?(\*\*|__)[^=]*?\1\s*[:.]?\s*")
_LEAD = re.compile(
    r"\s*(?:#{1,6}\s+)?(?:>\s*)*"
    r"(?:[*+•]\s+|-\s+(?=\D)|\d{1,3}[.)]\s+(?!\d)|\(?[a-z]\)\s+)?"
    r"(?:\*\*|__)?(?:step\s*\d{1,3}\s*[:.)-]\s*)?(?:\*\*|__)?\s*",
    re.IGNORECASE,
)
_TEXT = re.compile(
    r"\\(?:text|textbf|textit|textrm|textsf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
# Math delimiters stay: the checker reads them as the bounds of a claim ("with \\(10 - 3 =
# 7\\)": "with" is no operator of 10 across one). A currency `$` is blanked (`_currency`).
# `**` between operands is a power (`2**10`), not bold.
_DELIMS = re.compile(r"\\\$|(?<![0-9)])\*\*|\*\*(?![0-9(-])|__")
_DOLLAR = re.compile(r"(?<![\\$])\$(?!\$)")
# A display or inline segment that opens with a named quantity: `\\[ \\text{Total} = ...`.
_NAMED = re.compile(r"(?:\\\[|\\\(|\$\$?)\s*(\\text\s*\{([^{}]*)\})\s*(?==)")
_CLOSER = re.compile(r"\\[)\]]|\$")
_SEGMENT_GAP = re.compile(r"(?:\\[)\]]|\$\$?)\s*[.,;]?\s*(?:\\[(\[]|\$\$?)\s*")
# Never a false no: a `*` or `_` alone (a product, a name) is no markup.
LIST_MARKER = re.compile(r"(?:\d{1,3}[.)]|[+•*])\s")  # a list marker, once the line is stripped
_UNIT_WORD = re.compile(r"[A-Za-z]+")


def claims_nothing(line: str) -> bool:
    """Whether `line` is only structure: blank, a rule, a math fence, a heading, or a bold
    label alone on its line (no ``=`` in it)."""
    if not line.strip():
        return True
    return bool(
        _RULE.fullmatch(line)
        or _FENCE.fullmatch(line)
        or _HEADING.match(line)
        or _BOLD_LINE.fullmatch(line)
    )


def structure_end(line: str) -> int:
    """Where the structural lead of `line` ends: heading marks, quote marks, a list marker
    (``- ``, ``* ``, ``2. ``, ``(a) ``), a ``Step 1:`` label, bold marks around them."""
    if claims_nothing(line):
        return len(line)
    match = _LEAD.match(line)
    return match.end() if match else 0


def may_have_markup(line: str) -> bool:
    """A cheap test: False only when `mask_markup` would change nothing. (Substring tests
    first: the checker asks it of every line of a trace.)"""
    if "\\" in line or "$" in line or "#" in line or "**" in line or "__" in line:
        return True
    head = line.lstrip()[:6]
    return bool(head) and head[0] in "+•*0123456789" and LIST_MARKER.match(head) is not None


def mask_markup(line: str) -> str:
    """`line` with its markup as spaces (see the module docstring); the same length, and
    the same object when there is none."""
    if not may_have_markup(line):
        return line
    chars = list(line)
    if claims_nothing(line):
        return " " * len(line)

    def blank(start: int, end: int) -> None:
        chars[start:end] = " " * (end - start)

    lead = structure_end(line)
    # A "- " bullet stays: the checker reads a line-start "- " as a bullet or a sign.
    if not line.lstrip().startswith("-"):
        blank(0, lead)
    labels = list(_TEXT.finditer(line))
    trailing = _trailing(line, labels)
    units = {_unit(m.group(1)) for m, after in zip(labels, trailing, strict=True) if after}
    units.discard(None)
    for match, after in zip(labels, trailing, strict=True):
        content = match.group(1)
        if any(c.isdigit() for c in content):
            blank(match.start(), match.start(1))  # the wrapper only: its number is read
            blank(match.end(1), match.end())
        elif after and (len(units) <= 1 or _unit(content) is None):
            # A label after a number; one before or between operators names a quantity
            # (`\\text{Jamal's apples} + 8`) and stays: the checker reads it as no number.
            blank(match.start(), match.end())
    for start, end in _restated(line):
        blank(start, end)
    for match in _DELIMS.finditer(line):
        if not any(m.start() <= match.start() < m.end() for m in labels):
            blank(match.start(), match.end())
    for at in _currency(line):
        blank(at, at + 1)
    masked = "".join(chars)
    return line if masked == line else masked


def _restated(line: str) -> list[tuple[int, int]]:
    """The labels of segments that restate the quantity the segment before named
    (``\\[ \\text{Total} = 52 + 24 \\] \\[ \\text{Total} = 178 \\]``): blanked, the two
    read as one chain ``Total = 52 + 24 = 178``, so a false step across them is found."""
    found: list[tuple[int, int]] = []
    previous: str | None = None
    previous_end = 0
    # Every closing delimiter once, then a bisection per segment: a scan from each
    # segment would be quadratic on a hostile line of unclosed segments.
    closers = [m.start() for m in _CLOSER.finditer(line)]
    for match in _NAMED.finditer(line):
        name = " ".join(match.group(2).split())
        between = line[previous_end : match.start(1)]
        if name == previous and _SEGMENT_GAP.fullmatch(between):
            # The closing and opening delimiters between go too: one chain, not two.
            found.append((previous_end, match.end(1)))
        elif name == previous:
            found.append(match.span(1))
        previous = name
        at = bisect.bisect_left(closers, match.end())
        previous_end = closers[at] if at < len(closers) else len(line)
    return found


def _currency(line: str) -> list[int]:
    """The `$` signs of `line` that are currency, not math delimiters: a `$` before a digit
    that no closing `$` (after a non-space, before no digit) answers. ``$3.5 * 4000 =
    $14,000`` has two and both are currency; ``$3 + 4 = 7$`` is one formula."""
    signs = [m.start() for m in _DOLLAR.finditer(line)]
    found: list[int] = []
    k = 0
    while k < len(signs):
        at = signs[k]
        opens = at + 1 < len(line) and line[at + 1].isdigit()
        if not opens:
            k += 1
            continue
        following = signs[k + 1] if k + 1 < len(signs) else None
        if following is not None and _closes(line, following):
            k += 2  # a formula $...$
            continue
        found.append(at)
        k += 1
    return found


def _closes(line: str, at: int) -> bool:
    before = line[at - 1] if at > 0 else " "
    after = line[at + 1] if at + 1 < len(line) else " "
    return not before.isspace() and not after.isdigit()


def _trailing(line: str, labels: list[re.Match[str]]) -> list[bool]:
    """For each label, whether it follows a number, directly or after other labels that
    do (``8 \\text{ pounds} \\text{ (math)}``)."""
    out: list[bool] = []
    for k, match in enumerate(labels):
        after = _after_number(line, match.start())
        if not after and k and out[-1]:
            after = not line[labels[k - 1].end() : match.start()].strip()
        out.append(after)
    return out


def _after_number(line: str, at: int) -> bool:
    before = line[:at].rstrip()
    return bool(before) and (before[-1].isdigit() or before[-1] == "%")


def _unit(label: str) -> str | None:
    """A unit label's word, singular and lower-case; None for a parenthetical note."""
    text = label.strip()
    if not text or text.startswith("("):
        return None
    word = _UNIT_WORD.search(text)
    if word is None:
        return None
    unit = word.group().lower()
    return unit[:-1] if unit.endswith("s") and len(unit) > 3 else unit
