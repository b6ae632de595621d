"""Two ways an answer writes more than its value, for the coverage rule (`coverage.py`).

- **A chain of equalities** (``x = 5+5+1 = 7 = 11``, ``1 = \\zzz = x = 0``) has one value,
  its last part: math-verify's own tests read it so, and the checker follows it where
  math-verify parses the chain whole. The parts before the last ``=`` say what the value
  is stated to equal; they are not looked for in the parse, like a label. Only the last
  part is ever compared, so a chain lets no second value through (``5`` against
  ``5 = \\zzz = 7`` is not equal). A head that holds a relation, prose or a word
  (``7 \\text{ if } n = \\zzz = 7``) is no chain head, and item breaks (``,`` ``;``
  ``and`` ``or``) end a chain, so a list or an alternative is still counted.
- **A numeral in base b** (``1112112_3``, ``59_{10}``): math-verify drops the subscript and
  compares the digits. That is right between two numerals in the same base (same digits,
  same value), so an answer that is one such numeral has its subscript accounted for
  here, and the worker compares only answers written in the same base (`numeral_base`).
  Only a lone numeral: in arithmetic (``5_9 + 5_9``) math-verify would add the digits in
  base ten.

Standard library only (the rules judge shares the coverage rule without math-verify).
"""

from __future__ import annotations

import re

__all__ = ["GLUED_CONNECTIVE", "blank_chain_heads", "numeral_base", "without_base"]

# ``or``/``and`` written against a number (``W(x)=1orW(x)=-1``, ``x=5orx=7``): math-verify
# reads the product o·r, the checker a connective; not the start of a word (``2order``).
GLUED_CONNECTIVE = r"(?<=\d)(?:or|and)(?=[A-Za-z](?![A-Za-z])|[^A-Za-z]|\Z)"
# What a chain's scan stops at: a break where a chain may start or must end (an item break
# or a math delimiter, at the top level), an escaped char, a bracket, an ``=``.
_TOKENS = re.compile(
    rf"(?P<brk>,|;|\$|\\[()\[\]]|\\q?quad(?![A-Za-z])|\band\b|\bor\b|{GLUED_CONNECTIVE})"
    r"|(?P<escape>\\.)|(?P<open>[{(\[])|(?P<close>[})\]])|(?P<equals>=)",
    re.DOTALL,
)
# A chain head holding one of these is no chain head: a relation other than ``=``, prose,
# a word (two letters or more, not a command's name).
_NOT_A_HEAD = re.compile(
    r"[<>]|\\(?:text\w*|mbox|mathrm|operatorname|le|leq|leqslant|ge|geq|geqslant|ne|neq|lt"
    r"|gt|approx|simeq|sim|equiv|in|notin|subset|subseteq|supset|supseteq|to|mapsto"
    r"|implies|iff|Rightarrow|Leftrightarrow|pm|mp)(?![A-Za-z])|(?<![\\A-Za-z])[A-Za-z]{2,}"
)

_NUMERAL = re.compile(
    r"\s*(?:\$|\\[(\[]|\\boxed\s*\{)*\s*(\d+)(_(?:\{\s*(\d{1,2})\s*\}|(\d)))"
    r"\s*(?:\}|\$|\\[)\]]|\s|\.)*"
)


def blank_chain_heads(text: str) -> str:
    """`text` with the head of each chain of equalities (all before its last ``=``) blanked."""
    if text.count("=") < 2:
        return text
    out = list(text)
    depth, start = 0, 0
    equals: list[int] = []  # where the current segment's top-level ``=`` signs stand

    def close() -> None:
        if len(equals) >= 2 and not _NOT_A_HEAD.search(text, start, equals[-1]):
            out[start : equals[-1] + 1] = " " * (equals[-1] + 1 - start)

    for token in _TOKENS.finditer(text):
        kind = token.lastgroup
        if kind == "brk" and depth == 0:
            close()
            start, equals = token.end(), []
        elif kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(0, depth - 1)
        elif kind == "equals" and depth == 0 and _plain_equals(text, token.start()):
            equals.append(token.start())
    close()
    return "".join(out)


def _plain_equals(text: str, index: int) -> bool:
    """``=`` alone, not part of ``<=``, ``>=``, ``!=``, ``==``, ``:=``."""
    before, after = text[index - 1 : index], text[index + 1 : index + 2]
    return not (before and before in "<>!=:") and after != "="


def numeral_base(text: str) -> int | None:
    """The base b of an answer that is one numeral written in base b (``1112112_3``,
    ``$\\boxed{101_{2}}$``: every digit below b, 2 ≤ b ≤ 36), else None; base ten is None
    too (``1121_{10}`` is the decimal 1121)."""
    match = _NUMERAL.fullmatch(text)
    base = None if match is None else _base(match)
    return None if base == 10 else base


def without_base(text: str) -> str:
    """`text` with the base subscript of a lone numeral blanked (see `numeral_base`)."""
    match = _NUMERAL.fullmatch(text)
    if match is None or _base(match) is None:
        return text
    start, end = match.span(2)
    return text[:start] + " " * (end - start) + text[end:]


def _base(match: re.Match[str]) -> int | None:
    base = int(match.group(3) or match.group(4))
    if not 2 <= base <= 36 or any(int(digit) >= base for digit in match.group(1)):
        return None
    return base
