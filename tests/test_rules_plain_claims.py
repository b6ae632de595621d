"""The plain-line fast path finds exactly the links the token-by-token reading finds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.judges.rules.claims import chained, find_links, lexed_links
from judge_service.judges.rules.forms import checker_form
from judge_service.judges.rules.links import LEFT_STOP, RIGHT_STOP
from judge_service.judges.rules.plain_claims import MAX_CHARS, plain_links

# Near the plain grammar and across its edges: leading zeros, separators, decimals, ten
# digits, signs, "/", "**", "%", stop words, "and", one-letter words, ":" "!" "...".
NUMBERS = ["0", "7", "17", "408", "05", "1,000", "3.5", "1234567890", "999999999", "-5", "−3"]
NUMBERS += ["+2", "- 4"]
OPERATORS = ["+", "-", "*", "×", "·", "−", "/", "**", "%", "^"]
WORDS = ["So", "so", "then", "is", "Check", "done", "right", "Thus", "and", "of", "in", "I"]
WORDS += ["x", "times", "a", "half", "point", "add", "Yes"]
PUNCTUATION = [".", ",", ";", ":", "!", "...", "?", "**"]
SEPARATORS = [" ", " ", " ", " ", "", "  "]

token = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(OPERATORS),
    st.just("="),
    st.sampled_from(WORDS),
    st.sampled_from(PUNCTUATION),
)


@st.composite
def near_plain_lines(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(token, min_size=1, max_size=24))
    out = ""
    for t in tokens:
        out += t + draw(st.sampled_from(SEPARATORS))
    return out.rstrip() + draw(st.sampled_from(["", " ", "  "]))


@st.composite
def plain_lines(draw: st.DrawFn) -> str:
    """Lines of the plain grammar, every word beside a chain allowed there."""
    number = st.integers(0, 999_999_999).map(str)
    signed = st.tuples(st.sampled_from(["", "", "-", "+", "−"]), number).map("".join)
    ops = st.sampled_from(["+", "-", "*", "×", "·", "−"])

    def expression() -> str:
        rest = draw(st.lists(st.tuples(ops, number), max_size=3))
        return draw(signed) + "".join(f" {o} {n}" for o, n in rest)

    words = st.sampled_from(["So", "then", "is", "Check", "done", "right", "Thus", "We"])
    items: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            chain = " = ".join(expression() for _ in range(draw(st.integers(2, 4))))
            if items and items[-1][-1].isdigit():
                items[-1] += ","  # a chain right after a chain needs punctuation between
            items.append(chain + draw(st.sampled_from(["", ".", ",", ";"])))
        else:
            items.append(draw(words) + draw(st.sampled_from(["", "", ".", ",", ";"])))
    return " ".join(items)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_plain_lines())
@pytest.mark.slow
def test_a_line_taken_as_plain_gets_the_token_readings_links(line: str) -> None:
    plain = plain_links(line)
    if plain is not None:
        assert plain == lexed_links(line), line


@settings(max_examples=1500, deadline=None)
@given(plain_lines())
@pytest.mark.slow
def test_plain_lines_take_the_fast_path_and_agree(line: str) -> None:
    plain = plain_links(line) if len(line) <= MAX_CHARS else lexed_links(line)
    assert plain is not None, line
    assert plain == lexed_links(line), line
    if checker_form(line) == line:  # else find_links reads the rewritten line
        assert find_links(line) == chained(plain)


def test_the_fast_path_covers_the_common_claim_lines() -> None:
    for line in [
        "17 × 24 = 408.",
        "So 17 × 20 = 340, 17 × 4 = 68, so 340 + 68 = 408.",
        "72 - 91 = -19",
        "Check 3 + 4 = 7 = 7 right",
        "5 = 5",
        "So 17 × 24 = 408, then 340 + 68 = 408.",  # the module's examples
        "Then 12 - 5 = 7 = 7 so we are done",
    ]:
        links = plain_links(line)
        assert links is not None and links == lexed_links(line), line
    (wrong,) = plain_links("So 17 × 4 = 78.") or []
    assert not wrong.holds and not wrong.trivial and wrong.left_text == "17 × 4"
    assert int(wrong.left_value) == 68 and int(wrong.right_value) == 78


def test_doubtful_neighbours_leave_the_line_to_the_token_reading() -> None:
    # Stop words, "and", single letters beside a chain; decimals, leading zeros, division.
    for line in [
        "times 3 + 4 = 7",
        "3 + 4 = 7 and 5 - 1 = 4",
        "x 3 + 4 = 7",
        "3 + 4 = 7 in total",
        "0.5 + 1 = 1.5",
        "05 + 1 = 6",
        "8 / 2 = 4",
        "- 3 + 4 = 1",
        "3 + 4 = 7 5 + 1 = 6",
        "x" * MAX_CHARS + " 1 + 1 = 2",
    ]:
        assert plain_links(line) is None, line
        assert find_links(line) == lexed_links(line), line
    assert {"and", "times", "in", "of"} <= LEFT_STOP | RIGHT_STOP
