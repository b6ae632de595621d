"""The compiled reader (judge_service/judges/rules/_reader.pyx) equals its definition,
`reader.PythonReader`: the same findings and the same state after every trace, and its two
char scanners equal the regex and string passes they replace. `.ci/run` sets
JUDGE_REQUIRE_NATIVE=1: there the module must be built, not skipped."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.grounding import TraceLinks
from judge_service.judges.rules import reader, rules_judge
from judge_service.judges.rules.repetition import repeated_sentences

try:
    from judge_service.judges.rules import _reader
except ImportError:  # pragma: no cover - an install without a C compiler
    if os.environ.get("JUDGE_REQUIRE_NATIVE") == "1":
        raise
    pytest.skip("the compiled reader is not built here", allow_module_level=True)

pytestmark = pytest.mark.native

STATE = ("findings", "errors", "tainted", "tainted_numbers", "claims", "rechecks")


def read(cls: Any, text: str) -> Any:
    """`rules_judge.read_trace`'s walk over `text` with the reader class `cls`."""
    found = rules_judge.line_sentences(text)
    flags = iter(repeated_sentences([t for *_, sentences in found for *_, t in sentences]))
    one = cls()
    one.read_lines(found, TraceLinks(text).links, flags)
    return one


def same_reading(text: str) -> None:
    native, python = read(_reader.Reader, text), read(reader.PythonReader, text)
    for name in STATE:
        assert getattr(native, name) == getattr(python, name), (name, text)


def test_the_judge_reads_with_the_compiled_reader() -> None:
    assert rules_judge.new_reader is _reader.Reader


# A small pool of numbers, so that errors, their tainted values, corrections and
# re-checks meet often.
small = st.integers(2, 12)
OPS = {"+": int.__add__, "-": int.__sub__, "×": int.__mul__, "*": int.__mul__}


@st.composite
def claim(draw: st.DrawFn) -> str:
    a, b = draw(small), draw(small)
    op = draw(st.sampled_from(sorted(OPS)))
    value = OPS[op](a, b) + draw(st.sampled_from([0, 0, 0, 1, -1, 10]))
    latex = " \\times " if op in "×*" else op
    spelled = draw(st.sampled_from([op, latex, " · " if op == "×" else op]))
    left = f"{a} {spelled.strip()} {b}" if draw(st.booleans()) else f"{a}{spelled.strip()}{b}"
    chain = f" = {value}" if draw(st.booleans()) else ""
    turned = draw(
        st.sampled_from(["", f" and {b} {op} {a} = {value}", f", so {value} / {b} = {a}"])
    )
    return f"{left} = {value}{chain}{turned}"


piece = st.one_of(
    claim(),
    st.builds(lambda a: f"{a}.5 × 2 = {2 * a + 1}.0", small),  # decimals
    st.builds(lambda a, b: f"{a} ÷ {b} = {a / b:.2f}", small, small),  # rounding
    st.builds(lambda a: f"So {a} is the result.", st.integers(2, 160)),  # restated values
    st.builds(lambda a: f"Wait, {a} is wrong.", st.integers(2, 160)),
    st.sampled_from(
        [
            "Let me check the numbers again carefully now.",
            "x = 5 and 3x - 5 = 10",
            "The value ١٢ + ٣ = ١٥ is written in other digits.",
            "Version 2.5.1 has a_3 = 4 and x²=9.",
            "−3 − 4 = −7, and -3 - 4 = -7!",
            "\\frac{6}{3} = 2 \\left( 1 + 1 \\right) = 4",
        ]
    ),
)


@st.composite
def traces(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 25))):
        if lines and draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(lines)))  # a line said again
            continue
        parts = draw(st.lists(piece, min_size=1, max_size=3))
        lines.append(draw(st.sampled_from([". ", ", then ", " "])).join(parts))
    return "\n".join(lines)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
@pytest.mark.slow
def test_the_compiled_reader_equals_its_definition(text: str) -> None:
    same_reading(text)


def test_a_trace_with_each_kind_of_finding_reads_alike() -> None:
    text = (
        "17 × 4 = 78.\n340 + 78 = 419.\nSo 78 is the part.\nWait, 17 × 4 = 68.\n"
        "17 × 4 = 68 and 4 × 17 = 68.\n68 / 4 = 17.\n17 × 4 = 68.\n17 × 4 = 68."
    )
    python = read(reader.PythonReader, text)
    labels = {label for *_, label, _ in python.findings}
    assert {"invalid", "unsupported", "verified_correction", "unproductive_repetition"} <= labels
    same_reading(text)


# The scanners' alphabets: word chars beyond ASCII ("_", "²" and "Ⅻ" are \w but no
# decimal, "١" is a decimal digit), ".", signs, and whitespace that str.split drops
# ("\x1c", "\u2003") or keeps (the zero-width space).
number_text = st.text(st.sampled_from([*"0123456789-.._ aZ²Ⅻ١٣,;/", "\u2003"]), max_size=30)
side_text = st.text(st.sampled_from([*"12 ×*·÷−-+/\\x{}()", "\x1c", "\u2003", "\u200b", "\t"]))


@settings(max_examples=3000, deadline=None)
@given(number_text)
def test_numbers_equals_its_regex(text: str) -> None:
    assert _reader.numbers(text) == reader.python_numbers(text)


@settings(max_examples=2000, deadline=None)
@given(side_text)
def test_normal_equals_its_definition(text: str) -> None:
    assert _reader.normal(text) == reader.python_normal(text)


def test_numbers_and_normal_on_the_cases_their_passes_turn_on() -> None:
    cases = ["-5.25.", "a-5", "3.14.15", "x2 2x 2_ _2 2.", "1.5e3", "١٢.٥", "-.5", "7²"]
    for text in cases:
        assert _reader.numbers(text) == reader.python_numbers(text), text
    assert _reader.numbers("So -12.5 and 3.") == ["-12.5", "3"]
    assert _reader.normal("17 · 4 * 2 ÷ 1 − 3") == "17×4×2/1-3"
    assert _reader.normal("17 \\cdot 4") == reader.python_normal("17 \\cdot 4") == "17×4"
