"""The links of a *plain* line, found without lexing it: the common case, fast.

A plain line is words, integer claims and sentence punctuation, one space apart:

    So 17 × 24 = 408, then 340 + 68 = 408.
    72 - 91 = -19.
    Then 12 - 5 = 7 = 7 so we are done

Formally (`_PLAIN_LINE`): items separated by single spaces, each a word of ASCII letters
or a chain ``e = e (= e)*`` of integer expressions ``[sign]n (op n)*`` (``n`` without a
leading zero, at most 9 digits; ``op`` one of ``+ - * × · −`` with a space either side),
each item optionally followed by ``.``, ``,`` or ``;``, a chain without one never
directly followed by another chain, and at most `MAX_CHARS` characters. For such a line
`find_links`' rules come down to a few cases, decided here from the text around each
chain; a word touching a chain that is a stop word, "and" or a single letter makes the
line not plain (`plain_links` returns None and `find_links` reads it token by token).
`tests/test_rules_plain_claims.py` holds the two equal on generated lines.

The sides' values are Python ints, where `lexed_links` gives sympy Integers: they compare
and hash alike, and a long trace's thousands of claims skip sympy's constructor.
"""

from __future__ import annotations

import re

from judge_service.judges.rules.links import LEFT_STOP, RIGHT_STOP, Link

__all__ = ["MAX_CHARS", "plain_links", "python_plain_links"]

MAX_CHARS = 400  # far below the parser's 500-character expression bound
_NUMBER = r"(?:0|[1-9][0-9]{0,8})"
_OPERATOR = "[-+*×·−]"
_EXPRESSION = rf"[-+−]?{_NUMBER}(?: {_OPERATOR} {_NUMBER})*"
_CHAIN = rf"{_EXPRESSION}(?: = {_EXPRESSION})+"
_ITEM = rf"(?:[A-Za-z]+[.,;]?|{_CHAIN}(?:[.,;]|(?= [A-Za-z])|(?= *$)))"
_PLAIN_LINE = re.compile(rf"{_ITEM}(?: {_ITEM})* *", re.ASCII)
# Each chain with what touches it: the word or punctuation before, the word after.
_CHAIN_IN_LINE = re.compile(
    r"(?:(?P<word>[A-Za-z]+) |(?P<punct>[.,;]) |^)"
    rf"(?P<chain>{_CHAIN})(?:(?= (?P<after>[A-Za-z]+)))?",
    re.ASCII,
)
_NEGATIVE = {"-", "−"}
_TIMES = {"*", "×", "·"}
_NOT_BESIDE = LEFT_STOP | RIGHT_STOP  # beside a chain, any of these: not plain
_new_link = tuple.__new__


def python_plain_links(line: str) -> list[Link] | None:
    """`find_links(line)` when the line is plain, else None: the definition, which the
    compiled `_plain.plain_links` equals."""
    if len(line) > MAX_CHARS or _PLAIN_LINE.fullmatch(line) is None:
        return None
    links: list[Link] = []
    for m in _CHAIN_IN_LINE.finditer(line):
        word, punct, chain, after = m.group("word", "punct", "chain", "after")
        if word is not None and (len(word) == 1 or word.lower() in _NOT_BESIDE):
            return None
        if after is not None and (len(after) == 1 or after.lower() in _NOT_BESIDE):
            return None
        texts = chain.split(" = ")
        position = m.start("chain")
        # What the first side may be depends on what precedes it: at the line's start,
        # anything ("5 = 5", "-3 + 4 = 1"); after "," or ";" no bare number; after a word
        # or "." neither a bare number nor a sign ("So 3 + 4 = 7", not "So -3 + 4 = 1").
        lt = texts[0]
        lv, lops = python_value(lt)
        usable = (word is None and punct is None) or (
            lops > 0 and (punct in (",", ";") or lt[0].isdigit())
        )
        for rt in texts[1:]:
            rs = position + len(lt) + 3
            rv, rops = python_value(rt)
            if usable:
                holds, trivial = lv == rv, not (lops or rops)
                fields = (position, rs - 3, rs, rs + len(rt), lt, rt)
                values = (lv, rv, holds, trivial, False)
                links.append(_new_link(Link, fields + values))
            usable = True  # a later side follows an "=": anything may start its link
            position, lt, lv, lops = rs, rt, rv, rops
    return links


def python_value(expression: str) -> tuple[int, int]:
    """(value, operations) of ``[sign]n (op n)*``: products before sums, left to right; a
    sign is no operation."""
    parts = expression.split(" ")
    head = parts[0]
    first = -int(head[1:]) if head[0] == "−" else int(head)  # int() takes "-5", "+5"
    if len(parts) == 1:
        return first, 0
    if len(parts) == 3:  # the usual claim: "17 × 24"
        op, second = parts[1], int(parts[2])
        if op in _TIMES:
            return first * second, 1
        return (first - second if op in _NEGATIVE else first + second), 1
    total, term, sign = 0, first, 1
    for k in range(1, len(parts), 2):
        op, operand = parts[k], int(parts[k + 1])
        if op in _TIMES:
            term *= operand
        else:
            total += sign * term
            sign, term = (-1 if op in _NEGATIVE else 1), operand
    return total + sign * term, len(parts) // 2


try:  # the compiled scanner (_plain.pyx), where the install could build it
    from judge_service.judges.rules._plain import plain_links
except ImportError:  # pragma: no cover - a build without a C compiler
    plain_links = python_plain_links
