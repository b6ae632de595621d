"""The one reader of written numbers: every form a trace, an answer or a reference uses.

The audit's gate (`probe.answer_cut`), the rules judge's checker form (`judges.rules.forms`,
through `fold_digits`), the alignment of sibling steps (`alignment.steps`) and the
final-answer locator read numbers here, so a form that one of them reads as a number the
others read too (issue 43). Read, each as an exact `Fraction` with its char range:

- digits, decimals and thousands groups: ``1,000``, ``1{,}000``, ``1\\,000``, ``32,\\!349``
  (``32,\\! 349`` too: TeX ignores the space after a control symbol),
  a thin or no-break space between groups (``1 000`` with U+2009/U+202F/U+00A0; a plain
  space is two numbers, as in a list ``1 000``);
- digits of any script or width (``７``, ``٣``, ``𝟕``: `fold_digits`, char for char);
- fractions: ``3/4``, ``\\frac{3}{4}``, ``\\dfrac``/``\\tfrac``/``\\cfrac``, the shorthand
  ``\\frac12``, ``\\tfrac34``, ``\\frac1{2}``;
- numbers in words: ``seven``, ``twenty-one``, ``one hundred and five``,
  ``three thousand four hundred``, ``two million``.

A number inside a longer number or word is not one (``118`` holds no ``18``, ``someone``
no ``one``, ``twentieth`` is no number). Signs are not part of the value: callers that
compare magnitudes (the gate) need none, and ``-`` is often a dash or list marker.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = ["Number", "fold_digits", "number_value", "read_numbers", "word_numbers"]

# Chars read as one ASCII char, beside every other-script digit (unicodedata.decimal).
_ONE_CHAR = {
    0x3000: " ",  # ideographic space
    0x2012: "-",  # figure dash
    0xFE63: "-",  # small hyphen-minus
    0x2796: "-",  # heavy minus sign
    0x2715: "×",
    0x2716: "×",
    0xFE66: "=",  # small equals sign
}


@lru_cache(maxsize=4096)
def _char(code: int) -> str | None:
    """The one ASCII char a non-ASCII char is read as, or None (left as it is)."""
    if code in _ONE_CHAR:
        return _ONE_CHAR[code]
    if 0xFF01 <= code <= 0xFF5E:  # fullwidth ASCII
        return chr(code - 0xFEE0)
    digit = unicodedata.decimal(chr(code), None)  # decimal digits only: not ² (that is No)
    return None if digit is None else str(digit)


class _Table(dict[int, str]):
    """A `str.translate` table computed per code point on first sight, then kept."""

    def __missing__(self, code: int) -> str:
        mapped = _char(code) if code >= 0x80 else None
        self[code] = chr(code) if mapped is None else mapped
        return self[code]


FOLD_TABLE = _Table()  # public: the compiled line scan (rules/_lines.pyx) asks it per char


def fold_digits(text: str) -> str:
    """`text` with every decimal digit of another script or width as its ASCII digit and
    fullwidth ASCII as ASCII; the same length, and the same object when nothing changed."""
    if text.isascii():
        return text
    folded = text.translate(FOLD_TABLE)
    return text if folded == text else folded


@dataclass(frozen=True)
class Number:
    start: int  # chars of the text read, end exclusive
    end: int
    value: Fraction  # the magnitude
    form: str  # "digits", "fraction" or "words"


_UNITS = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen"),
    *("eighteen", "nineteen"),
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUE = {w: k for k, w in enumerate(_UNITS)} | {w: 20 + 10 * k for k, w in enumerate(_TENS)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}

_SEP = r"(?:,|\{,\}|\\,|,\\! ?|[\u2009\u202f\u00a0])"
_ALONE_BEFORE = r"(?<![\w.])"
_ALONE_AFTER = r"(?![\w]|[.,]\d)"
_DECIMAL = rf"\d{{1,3}}(?:{_SEP}\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_ARG = r"(?:\{\s*(\d+)\s*\}|(\d))"  # a \frac argument: braced digits or one bare digit
_FRACTION = re.compile(
    rf"\\[dtc]?frac\s*{_ARG}\s*{_ARG}|{_ALONE_BEFORE}(\d+)\s*/\s*(\d+){_ALONE_AFTER}"
)
_DIGITS = re.compile(_ALONE_BEFORE + "(" + _DECIMAL + ")" + _ALONE_AFTER)
# Digits as parts: inside a fraction, or a coefficient before one variable letter (`5J`).
_PARTS = re.compile(r"(?<![\w.])(" + _DECIMAL + r")(?:(?=[A-Za-z](?![A-Za-z]))|(?![\w]|[.,]\d))")
_GROUP = re.compile(r"\{,\}|,\\! ?|\\,|[,\u2009\u202f\u00a0]")
_WORD = re.compile(r"[A-Za-z]+")
_NUMBER_WORDS = frozenset(_WORD_VALUE) | frozenset(_SCALES)


def _decimal(raw: str) -> Fraction:
    return Fraction(_GROUP.sub("", raw))


def word_numbers(text: str) -> Iterator[Number]:
    """Numbers written in words: a run of number words (hyphens and spaces between, ``and``
    after a scale word) read as one value; ``one hundred and five`` is 105."""
    words = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    i = 0
    while i < len(words):
        if words[i][2] not in _WORD_VALUE or _inside_word(text, words[i][0], words[i][1]):
            i += 1
            continue
        total, current, last_end, j, scaled = 0, 0, words[i][1], i, False
        while j < len(words):
            start, end, word = words[j]
            if j > i and not _joined(text[last_end:start], word, scaled):
                break
            if word == "and":
                if j + 1 >= len(words) or words[j + 1][2] not in _WORD_VALUE:
                    break
                last_end = end
                j += 1
                continue
            if word in _WORD_VALUE:
                value, low = _WORD_VALUE[word], current % 100
                if low if value >= 10 else low % 10 or 0 < low < 20:
                    break  # "five six", "twenty thirty": two numbers, not one
                current += value
            elif word in _SCALES:
                if not current and not scaled:
                    break
                scale = _SCALES[word]
                if scale == 100:
                    current = (current or 1) * 100
                else:
                    total += (current or 1) * scale
                    current = 0
                scaled = True
            else:
                break
            last_end = end
            j += 1
        if _inside_word(text, words[i][0], last_end):
            i += 1
            continue
        yield Number(words[i][0], last_end, Fraction(total + current), "words")
        i = max(j, i + 1)


def _joined(gap: str, word: str, scaled: bool) -> bool:
    """Whether `word` after `gap` continues the number being read."""
    if word == "and":
        return scaled and gap.strip() == ""
    if word not in _NUMBER_WORDS:
        return False
    return gap in (" ", "-") or gap.strip() == ""


def _inside_word(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return before.isalnum() or before == "_" or after.isalnum() or after == "_"


def read_numbers(text: str, *, words: bool = True, parts: bool = False) -> list[Number]:
    """Every number written in `text`, in order of where it starts (a fraction, not its
    parts: ``3/4`` is one number, 3/4; with `parts`, its numerator and denominator too,
    and a coefficient such as the 5 of ``5J``). Offsets are `text`'s."""
    form = fold_digits(text)
    found: list[Number] = []
    covered: list[tuple[int, int]] = []
    for match in _FRACTION.finditer(form):
        top, bottom = (g for g in match.groups() if g is not None)
        if int(bottom):
            found.append(
                Number(match.start(), match.end(), Fraction(int(top), int(bottom)), "fraction")
            )
            covered.append(match.span())
    for match in (_PARTS if parts else _DIGITS).finditer(form):
        if parts or not any(lo <= match.start() < hi for lo, hi in covered):
            found.append(Number(match.start(), match.end(), _decimal(match.group(1)), "digits"))
    if words:
        found.extend(word_numbers(form))
    found.sort(key=lambda n: n.start)
    return found


_WRAPPED = re.compile(r"^\s*(?:\$+|\\[(\[])?\s*(?:\\boxed\s*\{(.*)\})?", re.DOTALL)


def number_value(answer: str) -> Fraction | None:
    """The magnitude of an answer that is one number and nothing else (``-1,000``,
    ``\\frac{3}{4}``, ``\\tfrac34``, ``$5$``, ``2/3``, ``twenty-one``), else None."""
    text = answer.strip()
    boxed = _WRAPPED.match(text)
    if boxed and boxed.group(1) is not None:
        text = boxed.group(1)
    text = text.strip().strip("$").strip().rstrip(".").lstrip("+-−").strip()
    text = re.sub(r"^\\[(\[]|\\[)\]]$", "", text).strip()
    numbers = read_numbers(text)
    if len(numbers) == 1 and numbers[0].start == 0 and numbers[0].end == len(text):
        return numbers[0].value
    return None
