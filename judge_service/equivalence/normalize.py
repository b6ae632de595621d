"""Rewrite an answer string into the LaTeX that math-verify reads as intended.

math-verify extracts answers from model output; the judge hands it bare
answers ("1/2", "2^{-2}", "1.5e3"). Bare answers are wrapped in ``$...$`` so
the LaTeX parser, which reads more notation than the plain-expression one,
takes them. A few notations it misreads are rewritten first:

- ``1.5e3`` would be 1.5·e·3 (Euler's number): it becomes ``1.5\\times 10^{3}``.
- ``9^9^9^9`` would be ((9^9)^9)^9; a tower is read top-down, as in
  mathematics: ``9^{9^{9^{9}}}``.
- ``x = 3 or x = 4`` (or ``\\lor``, ``\\vee``) becomes the list ``x = 3, x = 4`` (and
  ``1, 2, and 3`` is ``1, 2, 3``).
- With ``degrees_as_radians``, a degree sign becomes ``\\cdot\\frac{\\pi}{180}``.
- A repeating decimal is its exact fraction: ``0.1\\overline{6}`` (or ``\\bar{6}``) becomes
  ``\\frac{1}{6}``; math-verify read it as 0.1 and dropped the bar.
- ``\\mathrm{e}`` (upright, as ISO typesets it) is Euler's number ``e``; math-verify read it
  as text and dropped it (``1 - \\frac{1}{\\mathrm{e}}`` was 1).
- An answer that is one number in digit groups split by spaces (``1 000``) is that number,
  as math-verify reads it in text; in LaTeX it would be the product 1·000.
- A run of more than 32 white-space chars keeps its first and last 16: math-verify's
  number pattern ends in ``\\s*(?:%|...|\\s*[Pp]ercentage)``, which costs the square of the
  run after every number (7,000 spaces: 0.7 s of a 1 s parse alarm). Its patterns read a
  run by ``\\s*``/``\\s+`` or by one or two chars, which the kept ends still hold.

`readings` adds a second reading where an answer is ambiguous: ``1000,99`` is 1000.99 with a
decimal comma (math-verify's reading) or the two items 1000 and 99 (LaTeX's); ``30^\\circ``
is 30 (math-verify's reading, which drops the sign) or the angle π/6 in radians, unless the
policy asks for radians only. An answer with no degree sign is never read as an angle:
90 and π/2 stay different.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from judge_service.equivalence.coverage import DECIMAL_COMMA, SPACED_GROUPS
from judge_service.equivalence.result import EquivalencePolicy

_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")
_SCIENTIFIC = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?|\.\d+)[eE]([+-]?\d+)(?![\w.])")
_DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\degree\b")
# The comma of "1, 2, and 3" goes with the connective: left behind, math-verify
# reads "1, 2,, 3" as 3 alone.
# Possessive, and starting after a non-space: a long run of spaces costs one pass, not a
# cube of its length (each start of a search rescanning it).
_CONNECTIVE = re.compile(r"(?<!\s)(?:\s*+,)?\s++(?:or|and)\s++")
# A word of four letters, or one with an apostrophe (`it's`): prose, not a formula
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z{])(?:[A-Za-z]{4,}|[A-Za-z]+'[A-Za-z]+)")
_TEXT_GROUP = re.compile(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{[^{}]*\}")
# Digits bounded: the fraction of a 5,000-digit period is past what int() converts.
_REPEATING = re.compile(
    r"(?<![\w.\\])(\d{0,40})\.(\d{0,40})\\(?:overline|bar)\s*"
    r"(?:\{\s*(\d{1,40})\s*\}|(\d))(?![\d.])"
)
_LOGICAL_OR = re.compile(r"\s*\\(?:lor|vee)(?![A-Za-z])\s*")
_UPRIGHT_E = re.compile(r"\\(?:mathrm|text|operatorname|mathit)\s*\{\s*e\s*\}")
_LONG_SPACE = re.compile(r"\s{33,}")
_ATOM = re.compile(r"\s*(\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+)")


def _closing(text: str) -> dict[int, int]:
    """For each ``{`` of `text` that is closed, the index just past its ``}``: one pass, so
    a text of unclosed groups costs no more than a short one."""
    found, opened = {}, []
    for index, char in enumerate(text):
        if char == "{":
            opened.append(index)
        elif char == "}" and opened:
            found[opened.pop()] = index + 1
    return found


def _exponent(text: str, start: int, closing: dict[int, int]) -> tuple[str, int] | None:
    """The exponent atom after a ``^`` at `start - 1`: a braced group, number, letter or command."""
    index = start
    while index < len(text) and text[index].isspace():
        index += 1
    if index < len(text) and text[index] == "{":
        end = closing.get(index)
        return None if end is None else (text[index + 1 : end - 1], end)
    match = _ATOM.match(text, start)
    return (match.group(1), match.end()) if match else None


def _euler(match: re.Match[str], text: str) -> str:
    """``e`` for ``\\mathrm{e}``, spaced from letters around it only: math-verify's parser
    loses ``\\frac{1}{ e }`` (and ``\\cdote`` is no command)."""
    start, end = match.start(), match.end()
    before = " " if start and text[start - 1].isalpha() else ""
    return before + ("e " if end < len(text) and text[end].isalpha() else "e")


def _repeating_fraction(match: re.Match[str]) -> str:
    whole, fixed, repeated = match[1] or "0", match[2], match[3] or match[4]
    value = int(whole) + Fraction(int(fixed or "0"), 10 ** len(fixed))
    value += Fraction(int(repeated), (10 ** len(repeated) - 1) * 10 ** len(fixed))
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def right_associate_powers(text: str) -> str:
    """``a^b^c`` → ``a^{b^{c}}``; single exponents are left as they are."""
    out: list[str] = []
    index = 0
    closing = _closing(text) if "^" in text else {}
    while index < len(text):
        if text[index] != "^":
            out.append(text[index])
            index += 1
            continue
        exponents: list[str] = []
        cursor = index
        while cursor < len(text) and text[cursor] == "^":
            atom = _exponent(text, cursor + 1, closing)
            if atom is None:
                break
            exponents.append(atom[0])
            cursor = atom[1]
        if len(exponents) < 2:
            end = max(cursor, index + 1)
            out.append(text[index:end])
            index = end
            continue
        nested = exponents[-1]
        for exponent in reversed(exponents[:-1]):
            nested = f"{exponent}^{{{nested}}}"
        out.append(f"^{{{nested}}}")
        index = cursor
    return "".join(out)


def readings(answer: str, policy: EquivalencePolicy) -> list[str]:
    """`answer` prepared for math-verify: one text, or two where it is ambiguous."""
    text = answer.strip()
    if _DEGREE.search(text) and not policy.degrees_as_radians:
        return [prepare(text, policy), prepare(text, replace(policy, degrees_as_radians=True))]
    if DECIMAL_COMMA.fullmatch(text.lstrip("+-")) is None:
        return [prepare(text, policy)]
    return [prepare(text, policy), prepare(text.replace(",", "."), policy)]


def prepare(answer: str, policy: EquivalencePolicy) -> str:
    text = _LONG_SPACE.sub(lambda m: m[0][:16] + m[0][-16:], answer.strip())
    if SPACED_GROUPS.fullmatch(text.lstrip("+-")):
        text = text.replace(" ", "")
    if policy.degrees_as_radians:
        text = _DEGREE.sub(r"\\cdot\\frac{\\pi}{180}", text)
    text = _UPRIGHT_E.sub(lambda m: _euler(m, text), text)
    text = _REPEATING.sub(_repeating_fraction, text)
    text = _SCIENTIFIC.sub(r"\1\\times 10^{\2}", text)
    text = right_associate_powers(text)
    if not _DELIMITED.search(text):
        text = _CONNECTIVE.sub(", ", _LOGICAL_OR.sub(" or ", text))
        if not _PROSE_WORD.search(_TEXT_GROUP.sub("", text)):
            text = f"${text}$"
    return text
