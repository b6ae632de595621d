"""Other spellings of a claim, rewritten into the one the checker reads, char for char.

The exact checker (`claims.find_links`) reads ``17 × 4 = 78``. A judge that wants
credit on a false claim, or a policy that writes in words, spells the same claim
``17 times 4 gives 78``, ``17x4=78``, ``20% of 150 is 35`` or in fullwidth digits
``１７ × ４ ＝ ７８``. `checker_form` rewrites those spellings into the symbols the
checker reads, **keeping the length of the line**: every rewritten word is its
symbol followed by spaces, and every rewritten character is one character. So a
link found in the rewritten line has the char offsets of the original claim, and
the rules judge, validation's grounding and the quotes all point at the same text.

What is rewritten, and only between numbers (a digit or ``)`` before, a digit or
sign after), so that prose keeps its meaning:

- operator words: ``times``, ``multiplied by``, ``plus``, ``minus``, ``divided by``;
  ``x`` between two digits (``17x4``, ``5 x 3``; not a ``0x`` hex prefix); ``of`` after a
  percentage (``20% of 150``);
- relation words: ``is``, ``equals``, ``is equal to``, ``gives``, ``makes``, ``yields``;
- characters: every decimal digit of another script or width (``７``, ``٣``, ``𝟕``)
  as its ASCII digit, fullwidth ASCII (``＝``, ``＋``) as ASCII, the ideographic space
  as a space, the figure dash, small and heavy minus as ``-``, ``✕ ✖`` as ``×``.

A word after an ``=`` in the same clause stays a word (it goes on from a result
already given). Superscripts are left alone (the lexer reads ``3²``); anything the checker then
cannot read stays unread, never guessed: the rewritten line goes through the same
conservative reading as any other (a number beside a word is no operand).
"""

from __future__ import annotations

import re

from judge_service.reading.markup import mask_markup, may_have_markup
from judge_service.reading.numbers import fold_digits

__all__ = ["checker_form", "may_claim"]

_OPERATORS = {
    "times": "×",
    "multiplied by": "×",
    "plus": "+",
    "minus": "-",
    "divided by": "/",
}
_RELATIONS = ("is equal to", "equals", "is", "gives", "makes", "yields")

# A number (or a group) ends just before. Not a bare percentage: "30% is 72" says 30% of
# some whole is 72, not that 0.3 = 72.
_BEFORE = r"(?<=[0-9)])"
_AFTER = r"(?=\s+[-−(]?[0-9])"  # and a number starts just after
_WORDS = re.compile(
    rf"{_BEFORE}(?P<space>\s+)(?P<word>{'|'.join(_OPERATORS)}|{'|'.join(_RELATIONS)}){_AFTER}"
    rf"|(?<=%)(?P<of_space>\s+)(?P<of>of){_AFTER}"
    r"|(?<=[0-9])(?P<x>[xX])(?=[0-9])|(?<=[0-9] )(?P<spaced_x>[xX])(?= [0-9])",
    re.IGNORECASE,
)
# Where the rewrite makes an "=" in a line without one (the `_WORDS` branch of the
# relation words; no other branch makes one): the compiled line scan (_lines.pyx) asks it
# of a line that trips `REWRITE_TRIGGER` ("38118 of thousand", "3 times a day") but has
# no markup and no folded char, whose checker form is then the line itself rewritten.
RELATION_REWRITE = re.compile(
    rf"{_BEFORE}\s+(?:{'|'.join(_RELATIONS)}){_AFTER}",
    re.IGNORECASE,
)
# A cheap test first: most lines hold none of these, and the rewrite is then skipped. It
# reads ASCII digits: other digits are rewritten into them before it looks. The compiled
# line scan (_lines.pyx) reads it and RELATION_REWRITE char by char: a word changed here
# changes there (tests/test_rules_lines.py holds the two equal).
REWRITE_TRIGGER = re.compile(
    r"[0-9)%]\s+(?:times|multiplied|plus|minus|divided|is|equals|gives|makes|yields|of)\b"
    r"|[0-9] ?[xX] ?[0-9]",
    re.IGNORECASE,
)
_ASCII_DIGIT = re.compile("[0-9]")
_ANY_DIGIT = re.compile(r"\d")


def _replace(match: re.Match[str]) -> str:
    if match.group("spaced_x") is not None:
        return "×"
    if match.group("x") is not None:
        at = match.start()
        text = match.string
        # "0x1F": a hex prefix, not a product ("10x4" and "3.0x2" are products).
        if text[at - 1] == "0" and (at < 2 or not (text[at - 2].isdigit() or text[at - 2] == ".")):
            return match.group()
        return "×"
    if _after_equals(match.string, match.start()):
        return match.group()
    if match.group("of") is not None:
        return match.group("of_space") + "× "
    space, word = match.group("space"), match.group("word")
    symbol = _OPERATORS.get(word.lower(), "=")
    return space + symbol + " " * (len(word) - 1)


def _after_equals(text: str, at: int) -> bool:
    """Whether an ``=`` stands earlier in the clause of position `at`. There a word goes on
    from a result already given ("17 × 4 = 68 gives 68 + 340 = 408" is two true claims,
    not the chain "68 = 68 + 340"), so it is left a word: the claim stays unread, never
    misread."""
    start = max(text.rfind(mark, 0, at) for mark in (",", ";", ":", "(", ". "))
    return "=" in text[start + 1 : at]


def checker_form(line: str) -> str:
    """`line` with the spellings above rewritten and its markdown and LaTeX markup blanked
    (`reading.markup.mask_markup`); the same length, char for char."""
    line = fold_digits(line)  # the very object when unchanged: callers can tell
    if may_have_markup(line):
        line = mask_markup(line)
    if REWRITE_TRIGGER.search(line) is None:
        return line  # the same object: callers tell an unchanged line by identity
    return _WORDS.sub(_replace, line)


def may_claim(line: str) -> bool:
    """Whether `line` may hold a link in its checker form (a cheap test, never a false no:
    a link needs an equals sign, ASCII, fullwidth or small, or a relation word)."""
    if "=" in line or "＝" in line or "﹦" in line:
        return True
    # A relation word needs a digit before it: scan for one first (a plain class scans
    # several times faster than the trigger), and look for the words from there on.
    digit = _ASCII_DIGIT.search(line)
    if digit is None:
        if line.isascii() or _ANY_DIGIT.search(line) is None:
            return False
        line = fold_digits(line)
        digit = _ASCII_DIGIT.search(line)
        if digit is None:
            return False
    return REWRITE_TRIGGER.search(line, digit.start()) is not None
