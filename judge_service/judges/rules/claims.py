"""Arithmetic equality links (`a = b`) in one line of reasoning text, checked exactly.

A wrong verdict costs a correct step -1 credit, so anything doubtful is skipped
(no `Link`), never guessed: a side touching a letter (`3x - 5`, `= 7x`, `f(2)`),
an operator after a word (`x - 5`), an operator word (`3 times 4`, `25% of 80`,
`= 3 remainder 1`), a bare number after a word (`the sum of 3 and 4 = 7`). A link
holds when a plausible reading holds: `%` as 1/100 or a unit label (`0.15 × 100 =
15%`), a line-start `- ` as a bullet or a sign. Rounding: a decimal literal side
with d >= 1 places matches within 0.5·10^-d (`22/7 = 3.14`), or 10^-d before an
ellipsis (`2/3 = 0.666...`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from judge_service.errors import ParseError
from judge_service.judges.rules import arithmetic as ar
from judge_service.judges.rules.algebra import algebra_links
from judge_service.judges.rules.arithmetic import Parsed, Token, lex, parse_tokens
from judge_service.judges.rules.exact import exact_equal
from judge_service.judges.rules.forms import checker_form, may_claim
from judge_service.judges.rules.links import (
    AND_CONTINUES,
    LEFT_STOP,
    MAX_READ_CHARS,
    RIGHT_STOP,
    SAFE_OTHER,
    Link,
)
from judge_service.judges.rules.plain_claims import plain_links
from judge_service.judges.rules.units import unit_links
from judge_service.lazy_sympy import sympy

__all__ = ["Link", "chained", "find_links", "lexed_links", "line_links", "may_claim"]


_WORDS = re.compile(r"[^\W\d_]+")
_DIGIT = re.compile(r"[0-9]")
_DECIMAL = re.compile(r"[-+−]?\s*[0-9,]*\.([0-9]+)\s*(\\?%)?")
_BEFORE_OUTER_OPENER = frozenset({ar.SPACE, ar.DELIM, ar.PUNCT, ar.OPEN, ar.REL, ar.EQ, ar.OP})
_HARD, _SIGN_OK, _SOFT = 2, 1, 0  # how strongly the text before a left side separates it


class _Side(NamedTuple):
    lo: int  # token range [lo, hi), no spaces at either end
    hi: int
    alt_lo: int = -1  # left only: start of the "line-start '- ' is a sign" reading
    level: int = _HARD  # left only: _HARD / _SIGN_OK / _SOFT
    bang: bool = False  # right only: followed by '!' (exclamation or factorial)
    ellipsis: bool = False  # a decimal literal followed by "..."


def find_links(line: str) -> list[Link]:
    """Every checkable `a = b` link in `line`, in order; a chain `a = b = c` gives two.
    The line is read in its checker form (`forms.checker_form`: words, fullwidth digits),
    which keeps every char's offset."""
    read = checker_form(line)
    if "=" not in read or _DIGIT.search(read) is None:
        return []
    plain = plain_links(read)
    links = chained(plain if plain is not None else lexed_links(read))
    # Quantities with units (units.py) and algebra in one letter (algebra.py), where no
    # arithmetic link was read (a line whose every "=" is a link has nothing left for them).
    # Both read one claim of a sentence (see MAX_READ_CHARS).
    rest = len(links) < read.count("=") and len(read) <= MAX_READ_CHARS
    for more in (unit_links(read), algebra_links(read)) if rest else ():
        if more:
            taken = [(lk.left_start, lk.right_end) for lk in links]
            links = sorted(
                links
                + [m for m in more if all(m.right_end <= a or b <= m.left_start for a, b in taken)],
                key=lambda lk: lk.left_start,
            )
    if read is not line:  # the sides as written ("17 times 4"): the offsets are the same
        links = [
            lk._replace(
                left_text=line[lk.left_start : lk.left_end],
                right_text=line[lk.right_start : lk.right_end],
            )
            for lk in links
        ]
    return links


def chained(links: list[Link]) -> list[Link]:
    """`links` with a chain's bare step that does not hold (the ``= 5`` of ``2 + 2 = 4 =
    5``) made non-trivial: it claims the chain's value is another number, a false
    computation, not a trivial ``4 = 5``."""
    if len(links) < 2:  # most lines: no chain to read
        return links
    for k in range(1, len(links)):
        link, before = links[k], links[k - 1]
        steps = link.left_start < before.right_end and not before.trivial
        if steps and link.trivial and not link.holds:
            links[k] = link._replace(trivial=False)
    return links


def lexed_links(line: str) -> list[Link]:
    """`find_links` for any line, token by token (`plain_links` is its fast path)."""
    toks = lex(line)
    links: list[Link] = []
    for k, t in enumerate(toks):
        left = _left(line, toks, k) if t.kind == ar.EQ else None
        right = _right(line, toks, k) if left is not None else None
        link = _link(line, toks, left, right) if left and right else None
        if link is not None:
            links.append(link)
    return links


def _skip(toks: Sequence[Token], i: int, step: int) -> int:
    """The first non-space index from i on in direction step (-1 or len(toks) if none)."""
    while 0 <= i < len(toks) and toks[i].kind == ar.SPACE:
        i += step
    return i


def _is_stars(line: str, t: Token) -> bool:
    return t.kind == ar.OP and line[t.start : t.end] in ("*", "**")


def _word(t: Token, last: bool) -> str:
    if t.kind == ar.WORD:
        return t.text.lower()
    words = _WORDS.findall(t.text) if t.kind == ar.TEXT else []
    return (words[-1] if last else words[0]).lower() if words else ""


def _brackets(toks: list[Token], lo: int, hi: int) -> tuple[list[int], int]:
    """Unmatched openers in [lo, hi) and the first unmatched closer (else hi); a crossed
    pair like "(3]" reports a closer at lo, so the side is empty."""
    stack: list[int] = []
    for idx in range(lo, hi):
        t = toks[idx]
        if t.kind == ar.OPEN:
            stack.append(idx)
        elif t.kind == ar.CLOSE:
            if not stack:
                return stack, idx
            if ar.CLOSER[toks[stack.pop()].text] != t.text:
                return [], lo
    return stack, hi


def _left(line: str, toks: list[Token], k: int) -> _Side | None:
    hi = _skip(toks, k - 1, -1) + 1
    ellipsis = hi >= 2 and toks[hi - 1].kind == ar.PUNCT and toks[hi - 1].text == "..."
    if ellipsis:  # "0.333... = 1/3"; tokens are contiguous, so a space would be a token
        hi -= 1
        if toks[hi - 1].kind != ar.NUM:
            return None
    lo = hi
    while lo > 0 and toks[lo - 1].kind in ar.MATH_KINDS:
        lo -= 1
    lo = _skip(toks, lo, 1)
    openers, end = _brackets(toks, lo, hi)
    if lo >= hi or end != hi:
        return None  # also "(x+1) + 4 =", "f(3, 4) =": the side began in non-math text
    if openers:
        # "(3 + 4 = 7)": the opener is outside the claim, unless it is an argument
        # list or a factor ("f(", "2(", "\frac{").
        cut = openers[-1]
        if cut > 0 and toks[cut - 1].kind not in _BEFORE_OUTER_OPENER:
            return None
        lo = _skip(toks, cut + 1, 1)
        return _Side(lo, hi, ellipsis=ellipsis) if lo < hi else None
    alt_lo, p, attached = -1, _skip(toks, lo - 1, -1), lo > 0 and toks[lo - 1].kind != ar.SPACE
    first = toks[lo]
    if p < 0 and first.kind == ar.OP and lo + 1 < hi and toks[lo + 1].kind == ar.SPACE:
        # Markdown bullet at line start; "- 3 + 4" may also be a signed sum.
        if first.text == "-":
            alt_lo = lo
        elif line[first.start : first.end] not in ("+", "*"):
            return None
        lo = _skip(toks, lo + 1, 1)
    elif _is_stars(line, first) and lo + 1 < hi and attached != (toks[lo + 1].kind != ar.SPACE):
        # Markdown emphasis: "**Check:** 3 + 4" (closing) or "so **3 + 4" (opening).
        lo, p, attached = _skip(toks, lo + 1, 1), _skip(toks, lo - 1, -1), False
    level = _left_level(toks, p, attached) if alt_lo < 0 and p >= 0 else _HARD
    if level is None or lo >= hi:
        return None
    first = toks[lo]
    if first.kind == ar.OP and (first.text not in "+-" or level == _SOFT):
        return None  # "x - 5 = 7", "\cdots + 10 = 55", "3! × 2 = 12"
    return _Side(lo, hi, alt_lo, level, False, ellipsis)


def _left_level(toks: list[Token], p: int, attached: bool) -> int | None:
    prev = toks[p]
    if prev.kind in (ar.DELIM, ar.EQ, ar.REL):
        return _HARD
    if prev.kind == ar.PUNCT:
        if prev.text == ":":
            # "Check: 408 = 17 × 24" yes; "3:4 + 1" no; after a number ("Step 2: 3 + 4",
            # "ratio 3 : 4 = 0.75") the side must carry its own operator.
            if attached and p > 0 and toks[p - 1].kind != ar.SPACE:
                return None
            q = _skip(toks, p - 1, -1)
            return _SOFT if q >= 0 and toks[q].kind in ar.MATH_KINDS else _HARD
        if attached:
            return None
        return _SIGN_OK if prev.text in ",;" else _SOFT
    if prev.kind in (ar.WORD, ar.TEXT):
        if prev.kind == ar.TEXT and attached:
            attached = not prev.text[-1:].isspace()
        word = _word(prev, last=True)
        if attached or len(word) == 1:
            return None
        if word in LEFT_STOP and not (word == "and" and _conjunction(toks, p)):
            return None
        return _SOFT
    if prev.kind == ar.OTHER and not attached and prev.text in SAFE_OTHER:
        return _HARD
    return None


def _conjunction(toks: list[Token], p: int) -> bool:
    """Whether "and" at p joins two claims ("= 4, and 3 + 5", "= 4 and 3 + 5")."""
    q = _skip(toks, p - 1, -1)
    if q < 0:  # "and 340 + 68 = 408" opening a line
        return True
    if toks[q].kind == ar.PUNCT:
        return toks[q].text in ",;"
    while q >= 0 and toks[q].kind in ar.MATH_KINDS:
        q -= 1
    return q >= 0 and toks[q].kind == ar.EQ


def _right(line: str, toks: list[Token], k: int) -> _Side | None:
    n = len(toks)
    lo = hi = _skip(toks, k + 1, 1)
    while hi < n and toks[hi].kind in ar.MATH_KINDS:
        hi += 1
    hi = _skip(toks, hi - 1, -1) + 1
    if lo >= hi:
        return None
    attached, follow, last = hi < n and toks[hi].kind != ar.SPACE, hi, toks[hi - 1]
    if _is_stars(line, last) and hi - 1 > lo:
        # Closing emphasis ("= 408**", "= 408**.") or opening the next word
        # ("= 408 **Note**"); "= 2**x" is a power.
        after = toks[hi].kind if hi < n else ar.SPACE
        if (toks[hi - 2].kind != ar.SPACE) != (after in (ar.WORD, ar.TEXT)):
            hi, follow, attached = _skip(toks, hi - 2, -1) + 1, hi, False
    openers, end = _brackets(toks, lo, hi)
    if end < hi:  # "(3 + 4 = 7)", "\boxed{17 \times 24 = 408}"
        if end == lo or openers:
            return None
        return _Side(lo, _skip(toks, end - 1, -1) + 1)
    if openers:
        # "= 0.33 (rounded)": a spaced opener followed by a plain word is an aside;
        # "= 3 (x + 1)" or "= 1 (mod 5)" is not.
        cut = openers[0]
        w = _skip(toks, cut + 1, 1)
        word = _word(toks[w], last=False) if w < n else ""
        if cut == lo or toks[cut - 1].kind != ar.SPACE or len(word) < 3 or word in LEFT_STOP:
            return None
        return _Side(lo, _skip(toks, cut - 1, -1) + 1) if word not in RIGHT_STOP else None
    return _right_follow(toks, lo, hi, follow, attached)


def _right_follow(toks: list[Token], lo: int, hi: int, follow: int, attached: bool) -> _Side | None:
    q = _skip(toks, follow, 1)
    nxt = toks[q] if q < len(toks) else None
    glued = toks[q + 1].kind if q + 1 < len(toks) else ar.SPACE  # what touches `nxt`
    bang = ellipsis = False
    if nxt is None or nxt.kind in (ar.DELIM, ar.EQ, ar.REL):
        pass
    elif nxt.kind == ar.PUNCT:
        if attached and nxt.text == "!":
            if glued != ar.SPACE and glued in ar.MATH_KINDS:
                return None  # "5!/3!"
            bang = True
        elif attached and nxt.text == "...":
            ellipsis = toks[hi - 1].kind == ar.NUM
        elif attached and nxt.text == ":" and glued == ar.NUM:
            return None  # a ratio or a time: "= 3:1"
    elif nxt.kind in (ar.WORD, ar.TEXT):
        if nxt.kind == ar.TEXT and attached:
            attached = not nxt.text[:1].isspace()
        word = _word(nxt, last=False)
        if attached or len(word) == 1:
            return None
        if word == "and":  # a conjunction, unless "= 3 and a half", "= 3 and 1/2"
            w = min(_skip(toks, q + 1, 1), len(toks) - 1)
            continues = toks[w].kind == ar.NUM or _word(toks[w], False) in AND_CONTINUES
            word = "and" if continues and not _starts_claim(toks, w) else ""
        if word in RIGHT_STOP:
            return None
    elif not (nxt.kind == ar.OTHER and not attached and nxt.text in SAFE_OTHER):
        return None
    return _Side(lo, hi, bang=bang, ellipsis=ellipsis)


def _starts_claim(toks: list[Token], w: int) -> bool:
    """Whether the math from w on reaches its own "=": "= 340 and 17 × 4 = 68"."""
    while w < len(toks) and toks[w].kind in ar.MATH_KINDS:
        w += 1
    w = _skip(toks, w, 1)
    return w < len(toks) and toks[w].kind == ar.EQ


def _tolerance(text: str, ellipsis: bool, scale: Any) -> Any:
    """Rounding tolerance when the side is a signed decimal literal (`-0.333`, `33.3%`)."""
    m = _DECIMAL.fullmatch(text)
    if m is None:
        return None
    tol = sympy.Rational(1 if ellipsis else 5, 10 ** (len(m[1]) + (0 if ellipsis else 1)))
    return tol * scale if m[2] else tol


def _within(diff: Any, tol: Any) -> bool:
    if diff.is_Rational:
        return bool(abs(diff) <= tol)
    n = diff.evalf(30)  # not abs(diff): a symbolic Abs costs milliseconds
    # The hair absorbs evalf's last-digit noise for irrational values.
    return bool(n.is_Number and abs(n) <= tol * sympy.Rational(10**12 + 1, 10**12))


def _carried(toks: Sequence[Token], lv: Any, rv: Any) -> bool:
    """Whether lv != rv may come from operands rounded earlier ("2 × 33.33 = 66.67" for
    2 × 100/3): within twice the first-order error of its decimals with 2+ places."""
    rel = sympy.Integer(0)
    for t in toks:
        places = len(t.text) - t.text.find(".") - 1 if t.kind == ar.NUM and "." in t.text else 0
        if places >= 2 and (x := ar.literal_value(t.text)) != 0:
            rel += sympy.Rational(1, 10**places) / abs(x)
    size = max(abs(lv.evalf(20)), abs(rv.evalf(20)))
    return bool(rel) and _within(lv - rv, rel * size)


def _link(line: str, toks: list[Token], left: _Side, right: _Side) -> Link | None:
    rtoks = toks[right.lo : right.hi]
    pct = any(t.kind == ar.OP and t.text == "%" for t in toks[left.lo : left.hi] + rtoks)
    starts = (left.lo,) if left.alt_lo < 0 else (left.lo, left.alt_lo)
    results: list[tuple[int, Parsed, Parsed, bool | None, bool]] = []
    scales = (ar.percent(), sympy.Integer(1)) if pct else (ar.percent(),)  # "15%" may be a label
    for scale, lo in itertools.product(scales, starts):
        ltoks = toks[lo : left.hi]
        try:
            lp, rp = parse_tokens(ltoks, scale), parse_tokens(rtoks, scale)
        except ParseError:
            if not results:
                return None
            continue
        if not results and lp.ops == 0 and left.level != _HARD:
            return None  # "of 3 and 4 = 7", "times 4 = 12": a bare operand
        holds, approx = exact_equal(lp.value, rp.value), False
        if not holds:
            texts = ((line[toks[s.lo].start : toks[s.hi - 1].end], s) for s in (right, left))
            tols = (_tolerance(text, s.ellipsis, scale) for text, s in texts)
            if any(t is not None and _within(lp.value - rp.value, t) for t in tols):
                holds, approx = True, True
            elif holds is False:
                operands = (ltoks if lp.ops else []) + (rtoks if rp.ops else [])
                holds = None if _carried(operands, lp.value, rp.value) else False
        results.append((lo, lp, rp, holds, approx))
        if holds:
            break
    lo, lp, rp, holds, approx = results[-1]
    if not holds:
        if right.bang or any(r[3] is None for r in results):
            return None  # "= 4!" may be a factorial; an undecided reading may be the meant one
        lo, lp, rp, holds, approx = results[0]
    ls, le = toks[lo].start, toks[left.hi - 1].end
    rs, re_ = toks[right.lo].start, toks[right.hi - 1].end
    trivial, lv, rv = lp.ops == 0 and rp.ops == 0, lp.value, rp.value
    return Link(ls, le, rs, re_, line[ls:le], line[rs:re_], lv, rv, bool(holds), trivial, approx)


def python_line_links(text: str, base: int, stop: int) -> list[Link]:
    """The links of the line ``text[base:stop]`` (its ``\r\n`` end not read), offsets
    relative to the line. The definition, which the compiled `_lines.line_links` equals:
    it decides the lines that need no rewrite in one scan and hands every other line here."""
    line = text[base:stop].rstrip("\r\n")
    return find_links(line) if may_claim(line) else []


try:  # the compiled scan (_lines.pyx), where the install could build it
    from judge_service.judges.rules._lines import line_links
except ImportError:  # pragma: no cover - a build without a C compiler
    line_links = python_line_links
