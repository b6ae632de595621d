"""The compiled line scan (`judges/rules/_lines.pyx`) equals its definition,
`claims.python_line_links`: a line of a trace read in place for its links. It decides the
lines that need no rewrite and hands every other one to the definition, so the cases that
matter are the edges of "needs no rewrite": chars `fold_digits` changes, markup, list
markers, relation and operator words (and letters that match them ignoring case), chains,
lines the unit and algebra readers add to, and line ends. `.ci/run` sets
JUDGE_REQUIRE_NATIVE=1: there the module must be built, not skipped."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.grounding import TraceLinks
from judge_service.judges.rules import claims

try:
    from judge_service.judges.rules import _lines
except ImportError:  # pragma: no cover - an install without a C compiler
    if os.environ.get("JUDGE_REQUIRE_NATIVE") == "1":
        raise
    pytest.skip("the compiled scanners are not built here", allow_module_level=True)

pytestmark = pytest.mark.native


def same(text: str, base: int = 0, stop: int | None = None) -> list[claims.Link]:
    stop = len(text) if stop is None else stop
    native = _lines.line_links(text, base, stop)
    python = claims.python_line_links(text, base, stop)
    assert native == python, (text[base:stop], native, python)
    for a, b in zip(native, python, strict=True):
        assert type(a) is type(b) is claims.Link
    return native


def test_the_trace_reads_lines_with_the_compiled_scan() -> None:
    assert claims.line_links is _lines.line_links
    links = TraceLinks("So 17 × 24 = 408.\n2 + 2 = 5\n")
    assert [lk.holds for lk in links.links(0)] == [True]
    assert [lk.holds for lk in links.links(1)] == [False]


LINES = [
    # plain, decided in the scan
    "So 17 × 24 = 408.",
    "72 - 91 = -19.",
    "Then 12 - 5 = 7 = 7 so we are done",
    "2 + 2 = 4 = 5",  # a chain's false bare step becomes non-trivial
    "5 = 5",
    "3 = 4",
    "no digits = here",
    "nothing at all",
    "",
    "   ",
    "12345 the river quietly measured",
    # words to rewrite (the definition)
    "17 times 4 is 68",
    "17 times 4 = 68",
    "20% of 150 = 30",
    "17x4=68",
    "5 x 3 = 15",
    "0x1F = 31",
    "3 gives 3 + 0 = 3",
    "7 TIMES 3 = 21",
    "7\u00a0times 3 = 21",  # a no-break space is blank space to the regex
    "7 ımes 3 = 21",  # a dotless i: a letter past ASCII before a word
    "7\tequals 7",
    "(3 + 4) is 7",
    "50% is 1/2",
    # no "=": a word the trigger sees that makes no "=" (decided in the scan), or a
    # relation word that does (the definition)
    "38118 of thousand ancient mountain argument",
    "Patience a 76903 of “quoted” sudden variable → harbour;",
    "数学 yesterday 14365 of: Beautiful argument",
    "3 times a day, 4 plus more",
    "3 is 4",
    "3 is equal to 4 and 5 x 6",
    "3 is equal 4",
    "(2) yields (5)",
    "3 makes -4",
    "3 gives −4",
    "12 IS 12",
    "7 is　 8",
    "5 ıs 5",  # a dotless i
    "1. 3 is 4",
    "**3** is 4",
    "3 **is** 4",
    "$3$ is 4",
    "٣ is 4",
    "3 is ٤",
    "20% of 5 is 1",
    "3 ſ 4 and 5 of_ 6 and 7 ofé 8 and 9 tımes 2",
    "3 ıs 4 and 5 İs 6",
    "3 Keeps 4",
    # chars fold_digits changes (the definition)
    "１７ × ４ ＝ ７８",
    "٣ + ٤ = ٧",
    "3 ﹦ 3",
    "3 − 1 = 2",
    "3 ‒ 1 = 2",
    "café 3 + 4 = 7",
    "٣ times ٤ is ١٢",  # no "=" and no ASCII digit: the folded digits still make a claim
    "７ times ３ is ２１ — a product",
    "x ＝ 3 and 3 is 3",
    "数学 3 + 4 = 8",
    # markup and list markers (the definition)
    "1. 3 + 4 = 7",
    "2) 5 × 5 = 25",
    "+ 3 + 4 = 7",
    "• 3 + 4 = 7",
    "* 3 + 4 = 7",
    "12 × 3 = 36",  # a digit head that is no marker
    "$3 + 4 = 7$",
    "\\( 3 + 4 = 8 \\)",
    "**Step 3:** 3 + 4 = 7",
    "__3 + 4 = 7__",
    "# 3 + 4 = 7",
    "\\frac{1}{2} + \\frac{1}{2} = 1",
    # plain or not, units and algebra
    "2.5 km = 2500 m",
    "3 h 20 min = 200 min",
    "2x + 3 = 11 so x = 4",
    "x^2 = 9 gives x = 3",
    "The sum of 3 and 4 = 7",
    "3.5 + 1.5 = 5",
    "22/7 = 3.14",
    "1 + " * 150 + "1 = 151",
    "5 m = " * 500 + "5 m",
]


@pytest.mark.parametrize("line", LINES)
def test_each_kind_of_line(line: str) -> None:
    same(line)
    same(line + "\n")
    same(line + "\r\n")
    same("before\n" + line + "\r\r\nafter", 7, 7 + len(line) + 3)


def test_the_lines_it_decides_alone_are_read() -> None:
    assert [lk.holds for lk in same("So 17 × 24 = 408, then 340 + 68 = 409.")] == [True, False]
    chain = same("2 + 2 = 4 = 5")
    assert [(lk.holds, lk.trivial) for lk in chain] == [(True, False), (False, False)]
    assert same("17 times 4 is 68")[0].holds
    assert not same("1. 3 + 4 = 8")[0].holds


PIECES = [
    *"0123456789",
    " ",
    " = ",
    " + ",
    " - ",
    " × ",
    " * ",
    "=",
    ".",
    ",",
    "%",
    "(",
    ")",
    "\t",
    "\u00a0",
    "\u3000",
    "x",
    "X",
    " x ",
    "is",
    " is ",
    " times ",
    " of ",
    " gives ",
    " equals ",
    " yields ",
    " makes ",
    " is equal to ",
    "“",
    "→",
    "K",  # the Kelvin sign: folds to "k" ignoring case
    " of_",
    "2 x3",
    "So",
    "so",
    "the",
    "and",
    "m",
    " km",
    "h",
    "١",
    "７",
    "＝",
    "−",
    "é",
    "ı",
    "İ",
    "ſ",
    "$",
    "\\",
    "#",
    "**",
    "_",
    "__",
    "•",
    "1. ",
    "+ ",
    "^",
    "²",
    "\r",
]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(PIECES), max_size=24).map("".join),
    st.sampled_from(["", "\n", "\r\n", "\r"]),
)
@pytest.mark.slow
def test_generated_lines(line: str, end: str) -> None:
    same(line + end)


KIND_TRACES = [
    "17 × 20 = 350.\nThen 350 + 68 = 418.\nSo 2 + 2 = 4.\nNo claim here.\n\\boxed{418}",
    "3 + 4 = 8\nActually 3 + 4 = 7, so 7 × 2 = 14.\n8 × 2 = 16 = 16\n5 = 5\n2 + 2 = 4 = 5",
    "\n".join(
        f"{a} + {a} = {2 * a + (a % 5 == 0)}, then {2 * a} × 3 = {6 * a}." for a in range(60)
    ),
]


@pytest.mark.parametrize("text", KIND_TRACES, ids=range(len(KIND_TRACES)))
def test_the_compiled_reader_gives_each_link_the_kind_the_definition_gives(text: str) -> None:
    from judge_service.judges.rules import _reader
    from judge_service.judges.rules.reader import LinkKinds, PythonReader

    links = TraceLinks(text)
    lines = [(number, base, []) for number, base in enumerate(links.line_starts())]
    read: list[tuple[list[int], list[int], list[int]]] = []
    for reader in (_reader.Reader(), PythonReader()):
        kinds = LinkKinds()
        reader.read_lines(lines, links.links, iter(()), kinds)
        read.append((kinds.kinds, kinds.lows, kinds.highs))
    assert read[0] == read[1]
    assert {0, 2} <= set(read[0][0])  # false and true links among them
