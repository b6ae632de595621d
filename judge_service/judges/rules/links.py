"""What a link is, and the words next to a number that decide whether it is one.

`claims.find_links` (every line) and `plain_claims.plain_links` (the plain lines, fast)
both build `Link`s and read these word lists, so they live here, apart from either.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["AND_CONTINUES", "LEFT_STOP", "MAX_READ_CHARS", "RIGHT_STOP", "SAFE_OTHER", "Link"]

# The longest line whose units and algebra are read (`claims.find_links`): they read one
# claim of a sentence, and a line past this is no such sentence (a hostile line of
# thousands of "5 m" terms is not run through their patterns).
MAX_READ_CHARS = 2000


class Link(NamedTuple):
    """One `left = right` link; offsets are char offsets into the line, end exclusive.
    (A named tuple: a long trace makes thousands, and a frozen dataclass's constructor
    costs five times as much.)"""

    left_start: int
    left_end: int
    right_start: int
    right_end: int
    left_text: str
    right_text: str
    left_value: Any  # sympy.Expr; an int (equal, same hash) from `plain_links`
    right_value: Any
    holds: bool
    trivial: bool  # neither side applies an operation ("5 = 5", "-3 = -3")
    approximate: bool  # holds only through the decimal rounding rule


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that make a number next to them an operand of something larger.
OPERATOR_WORDS = _wordset(
    """times plus minus over divided multiplied squared cubed factorial percent percentage mod
    modulo choose sqrt root roots log ln lg exp sin cos tan cot sec csc arcsin arccos arctan sinh
    cosh tanh gcd lcm max min floor ceil ceiling abs det power pi half halves twice double triple
    thrice negative less more than of by to from through into per with between and or"""
)
LEFT_STOP = OPERATOR_WORDS | _wordset(
    "add adding subtract subtracting multiply multiplying divide dividing square cube average"
    " mean avg exceeds under above below"
)
RIGHT_STOP = OPERATOR_WORDS | _wordset(
    """raised hundred hundreds thousand thousands million millions billion billions trillion
    dozen dozens third thirds quarter quarters fourth fourths fifth fifths sixth sixths eighth
    eighths tenth tenths hundredth hundredths thousandth thousandths point remainder rem in out"""
)
# After "= 3 and", these continue the number ("3 and a half", "3 and 1/2").
AND_CONTINUES = _wordset("a an one half quarter third two three four five")
# Non-math symbols that separate statements, so a claim may start or end next to them.
SAFE_OTHER = _wordset(
    r"""\implies \Rightarrow \Longrightarrow \rightarrow \Leftrightarrow \iff \therefore
    \because \checkmark → ⇒ ⟹ ⟶ ↔ ⇔ ∴ ∵ — ✓ ✔ ✗ ✘ ✅ ❌ • ◦ ▪"""
)
