"""Submissions that the line rules of span validation must stop (issue 25).

Each hostile span is in range and quotes text really inside it, so anchoring,
size and structure as they stood let it through; only a line rule stops it:
a positive span touching any token of a proven-false line, however it cuts the
line (``contradicts_arithmetic``), the checker's newer forms, a positive span on
a line built on a false value (``built_on_error``) or on a wrong final answer
(``wrong_final_answer``), an unlock earned only by a confident, true ``invalid``
(``no_prior_invalid``, ``contradicts_arithmetic``), one budget for all region
labels and a point span's share of a short trace (``span_too_long``), a quote
repeated on every sub-line (``evidence_not_anchored``). Each attack carries the
sound spans of the same submission, which must survive.

What is false, true or tainted in each trace is written down here by hand, not
asked of the checker under test: `measure` reports what the accepted hostile
spans put on those lines, so a benchmark can run the attacks through an older
validation and this one and print the credit each let through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace.decode import Trace
from tests.harness.attacks import ATTACK_TRACE, ERROR_LINE, quote_span, span_at

FIRST_LINE = "First 17 × 20 = 340."
TAINTED_LINE = "So 340 + 78 = 418."  # holds, but adds the 78 that ERROR_LINE made up
RECHECK_LINE = "Let me double-check 17 × 20 = 340. Yes, that is right."
WRONG_ANSWER_LINE = "So the answer is \\boxed{418}."

CORRECT_TRACE = (
    "<think>\n"
    "Let me compute 17 × 24.\n"
    f"{FIRST_LINE}\n"
    "Then 17 × 4 = 68.\n"
    "So 340 + 68 = 408.\n"
    "</think>\n"
    "So the answer is \\boxed{408}."
)
CORRECT_LINES = ("Let me compute 17 × 24.", FIRST_LINE, "Then 17 × 4 = 68.", "So 340 + 68 = 408.")
CORRECT_ANSWER = "\\boxed{408}"

# Each false, in a form the checker did not read before issue 25 (the thousands one it
# already did; it stays to pin the reading down). Each goes alone on a line of its own
# trace, as written, so no prefix or stop decides whether it is read.
FORM_LINES: Mapping[str, str] = {
    "form_times_gives": "17 times 4 gives 78",
    "form_x_no_spaces": "17x4=78",
    "form_percent_of": "20% of 150 is 35",
    "form_plus_equals": "17 plus 4 equals 22",
    "form_minus_is": "17 minus 4 is 12",
    "form_divided_by": "20 divided by 4 is 6",
    "form_chained": "2 + 2 = 4 = 5",
    "form_thousands": "1,000 + 2,000 = 3,500",
}
FULLWIDTH_LINE = "１７ × ４ ＝ ７８"
FULLWIDTH_FOLDED = "17 × 4 = 78"
# Forms the checker may still leave undecided (a unit change, a claim about a solution):
# named so the next reading has its cases, pinned by no test.
NOT_YET_READ = ("2.5 km = 250 m", "x^2 = 9 gives x = 4")


def form_trace(line: str) -> str:
    return (
        "<think>\n"
        "Let me compute 17 × 24 step by step.\n"
        f"{FIRST_LINE}\n"
        f"{line}\n"
        "</think>\n"
        f"{WRONG_ANSWER_LINE}"
    )


CORRECTION_LINES = (
    "Wait, that product is wrong: 17 × 4 = 68.",
    "Check: 4 × 17 = 68.",
    "Check again: 68 / 4 = 17.",
    "Once more: 10 × 4 + 7 × 4 = 68.",
    "And 68 - 28 = 40.",
)
CORRECTION_TRACE = (
    "<think>\n"
    "Let me compute 17 × 24 step by step.\n"
    f"{FIRST_LINE}\n"
    f"Then {ERROR_LINE}\n"
    + "".join(f"{line}\n" for line in CORRECTION_LINES)
    + "So 340 + 68 = 408.\n</think>\nSo the answer is \\boxed{408}."
)

REPEAT_PHRASE = "17 × 20 = 340 and "
# The second long line keeps the first under half the trace: only anchoring is left to
# stop a span over the first.
REPEAT_TRACE = (
    "<think>\n"
    + REPEAT_PHRASE * 40
    + "so 17 × 20 = 340.\n"
    + "Then 17 × 4 = 68 and " * 45
    + "so 17 × 4 = 68.\n"
    "So 340 + 68 = 408.\n"
    "</think>\n"
    "So the answer is \\boxed{408}."
)


@dataclass(frozen=True)
class Case:
    """A trace's text, its outcome, and its lines as the author knows them."""

    text: str
    reward: float
    reference: str
    false: tuple[str, ...] = ()  # lines holding a false link
    true: tuple[str, ...] = ()  # lines whose links all hold, on no false value
    tainted: tuple[str, ...] = ()  # lines whose links hold but use a false link's value


ATTACK_CASE = Case(
    ATTACK_TRACE,
    0.0,
    "408",
    false=(f"Then {ERROR_LINE}",),
    true=(FIRST_LINE, RECHECK_LINE),
    tainted=(TAINTED_LINE,),
)
CORRECT_CASE = Case(CORRECT_TRACE, 1.0, "408", true=CORRECT_LINES[1:])
CORRECTION_CASE = Case(
    CORRECTION_TRACE,
    1.0,
    "408",
    false=(f"Then {ERROR_LINE}",),
    true=(FIRST_LINE, *CORRECTION_LINES, "So 340 + 68 = 408."),
)
REPEAT_CASE = Case(REPEAT_TRACE, 1.0, "408", true=("So 340 + 68 = 408.",))


def form_case(line: str) -> Case:
    return Case(form_trace(line), 0.0, "408", false=(line,), true=(FIRST_LINE,))


@dataclass(frozen=True)
class LineAttack:
    name: str
    what: str
    case: Case
    trace: Trace  # `case.text`, decoded
    hostile: list[dict[str, Any]]
    codes: tuple[frozenset[str], ...]  # per hostile span: the codes that may reject it
    sound: list[dict[str, Any]] = field(default_factory=list)
    # Spans whose own fate is not the point (the 0.01-confidence invalid that must unlock
    # nothing may itself be kept or rejected): neither must survive nor must fall.
    unpinned: list[dict[str, Any]] = field(default_factory=list)
    error_line: str | None = None  # a line whose credit must end negative, if any

    @property
    def spans(self) -> list[dict[str, Any]]:
        return [*self.hostile, *self.unpinned, *self.sound]


# What each attack submits, in the order `line_attacks` builds them.
WHAT: Mapping[str, str] = {
    "split_link": "valid_progress on `17 × 4 =` and on ` 78.`, neither holding the whole link",
    "operator_cut": "valid_progress from the operator on (`× 4 = 78.`), over the invalid",
    "result_only": "valid_progress on the false result alone (` 78.`), over the invalid",
    **{name: f"valid_progress on the false line `{line}`" for name, line in FORM_LINES.items()},
    "fullwidth_line": f"valid_progress on `{FULLWIDTH_LINE}`, quoting `{FULLWIDTH_FOLDED}`",
    "zero_confidence_unlock": "invalid on `<think>` at 0.01, then a correction and an unsupported",
    "many_corrections": "five verified_correction spans after one invalid",
    "slander_true_line": f"invalid at 0.9 on `{FIRST_LINE}`, which holds",
    "slander_then_unsupported": "invalid on a true line, then unsupported on the final answer",
    "region_tiling": "two unproductive_repetition spans, each under half, together most",
    "region_tiling_mixed": "unproductive_repetition and neutral, each under half, together most",
    "positive_on_tainted_line": f"valid_progress on `{TAINTED_LINE}`, which adds the false 78",
    "positive_on_wrong_answer": f"valid_progress on `{WRONG_ANSWER_LINE}`, reward 0, reference 408",
    "short_trace_cover": "valid_progress from token 0 over most of a 50-token trace, anchored",
    "repeated_line_cover": f"valid_progress over `{REPEAT_PHRASE.strip()}` repeated, quoted once",
}
ATTACK_NAMES = tuple(WHAT)
CONTRADICTS, NO_PRIOR, TOO_LONG = "contradicts_arithmetic", "no_prior_invalid", "span_too_long"


def cut(trace: Trace, line: str, part: str, label: str, confidence: float = 0.9) -> dict[str, Any]:
    """The tokens covering `part` of the first occurrence of `line`, quoting it."""
    return span_at(trace, trace.text.index(line) + line.index(part), part, label, confidence)


def region(
    trace: Trace, first: str, last: str, label: str, confidence: float, *, start: int = -1
) -> dict[str, Any]:
    """A span from line `first` (or token `start`) to line `last`, quoting both."""
    head, tail = quote_span(trace, first, label), quote_span(trace, last, label)
    return {
        "start": head["start"] if start < 0 else start,
        "end": tail["end"],
        "label": label,
        "confidence": confidence,
        "evidence": first,
        "evidence_end": last,
    }


Spans = list[dict[str, Any]]
Code = str | frozenset[str]


@dataclass(frozen=True)
class _On:
    """Attacks on one case: `case` and its decoded trace bound once."""

    case: Case
    trace: Trace

    def __call__(
        self, name: str, hostile: Spans, code: Code | tuple[Code, ...], sound: Spans, **more: Any
    ) -> LineAttack:
        codes = code if isinstance(code, tuple) else (code,) * len(hostile)
        sets = tuple(c if isinstance(c, frozenset) else frozenset({c}) for c in codes)
        return LineAttack(name, WHAT[name], self.case, self.trace, hostile, sets, sound, **more)

    def q(self, phrase: str, label: str, confidence: float = 0.9) -> dict[str, Any]:
        """`quote_span` on this trace."""
        return quote_span(self.trace, phrase, label, confidence)


def line_attacks(trace_for: Callable[[str], Trace]) -> list[LineAttack]:
    """Every attack, each on `trace_for(text)` of its trace (a decoding of that text)."""
    traces: dict[str, Trace] = {}

    def on(case: Case) -> _On:
        if case.text not in traces:
            traces[case.text] = trace_for(case.text)
        return _On(case, traces[case.text])

    out = [*_cuts(on(ATTACK_CASE)), *_forms(on), *_unlocks(on(ATTACK_CASE), on(CORRECTION_CASE))]
    out += [*_slanders(on(CORRECT_CASE)), *_outcome(on(ATTACK_CASE))]
    return [*out, *_covers(on(CORRECT_CASE), on(REPEAT_CASE))]


def _cuts(on: _On) -> list[LineAttack]:
    t, error = on.trace, f"Then {ERROR_LINE}"
    first, invalid = on.q(FIRST_LINE, "valid_progress", 0.8), on.q(ERROR_LINE, "invalid")
    halves = [
        cut(t, error, "17 × 4 =", "valid_progress", 1.0),
        cut(t, error, " 78.", "valid_progress", 1.0),
    ]
    operator = [cut(t, error, "× 4 = 78.", "valid_progress", 1.0)]
    result = [cut(t, error, " 78.", "valid_progress", 1.0)]
    return [
        # Two halves and the invalid would be three spans on one line (a flood): no invalid.
        on("split_link", halves, CONTRADICTS, [first], error_line=error),
        on("operator_cut", operator, CONTRADICTS, [first, invalid], error_line=error),
        on("result_only", result, CONTRADICTS, [first, invalid], error_line=error),
    ]


def _forms(on: Callable[[Case], _On]) -> list[LineAttack]:
    out = []
    for name, line in [*FORM_LINES.items(), ("fullwidth_line", FULLWIDTH_LINE)]:
        at = on(form_case(line))
        praise = at.q(line, "valid_progress", 1.0)
        if line == FULLWIDTH_LINE:  # quoted as the judge may: folded to ASCII digits
            praise["evidence"] = FULLWIDTH_FOLDED
        sound = [at.q(FIRST_LINE, "valid_progress", 0.8), at.q(line, "invalid")]
        out.append(at(name, [praise], CONTRADICTS, sound, error_line=line))
    return out


def _unlocks(at: _On, ct: _On) -> list[LineAttack]:
    # The real invalid comes after both: only the 0.01 one lies before them.
    unlocked = [
        at.q(FIRST_LINE, "verified_correction", 1.0),
        at.q("Let me compute 17 × 24 step by step.", "unsupported", 0.9),
    ]
    faint = [at.q("<think>", "invalid", 0.01)]
    error = f"Then {ERROR_LINE}"
    # The most confident correction is the one kept (a sound span), the rest fall.
    extra = [
        ct.q(line, "verified_correction", confidence)
        for line, confidence in zip(CORRECTION_LINES[1:], (0.6, 0.7, 0.75, 0.8), strict=True)
    ]
    sound = [
        ct.q(FIRST_LINE, "valid_progress", 0.8),
        ct.q(ERROR_LINE, "invalid", 0.9),
        ct.q(CORRECTION_LINES[0], "verified_correction", 0.95),
    ]
    return [
        at(
            "zero_confidence_unlock",
            unlocked,
            NO_PRIOR,
            [at.q(ERROR_LINE, "invalid")],
            unpinned=faint,
            error_line=error,
        ),
        ct("many_corrections", extra, NO_PRIOR, sound, error_line=error),
    ]


def _slanders(rt: _On) -> list[LineAttack]:
    later = [rt.q(line, "valid_progress", 0.8) for line in CORRECT_LINES[2:]]
    slander = rt.q(FIRST_LINE, "invalid", 0.9)
    final = rt.q("So the answer is \\boxed{408}.", "unsupported", 0.8)
    # Each under half the trace, together most of it: the less confident is past the budget.
    head = region(
        rt.trace, "Let me compute 17 × 24.", FIRST_LINE, "unproductive_repetition", 0.9, start=0
    )
    tails = {
        name: [region(rt.trace, "Then 17 × 4 = 68.", "</think>", label, 0.6)]
        for name, label in (
            ("region_tiling", "unproductive_repetition"),
            ("region_tiling_mixed", "neutral"),
        )
    }
    return [
        rt("slander_true_line", [slander], CONTRADICTS, later),
        rt("slander_then_unsupported", [slander, final], (CONTRADICTS, NO_PRIOR), later),
        *(rt(name, tail, TOO_LONG, [head]) for name, tail in tails.items()),
    ]


def _outcome(at: _On) -> list[LineAttack]:
    sound = [at.q(FIRST_LINE, "valid_progress", 0.8), at.q(ERROR_LINE, "invalid")]
    built = [at.q(TAINTED_LINE, "valid_progress", 1.0)]
    answer = [at.q(WRONG_ANSWER_LINE, "valid_progress", 1.0)]
    error = f"Then {ERROR_LINE}"
    return [
        at("positive_on_tainted_line", built, "built_on_error", sound, error_line=error),
        at("positive_on_wrong_answer", answer, "wrong_final_answer", sound, error_line=error),
    ]


def _covers(rt: _On, pt: _On) -> list[LineAttack]:
    cover = region(
        rt.trace, "Let me compute 17 × 24.", "Then 17 × 4 = 68.", "valid_progress", 1.0, start=0
    )
    phrase = REPEAT_PHRASE.strip()
    last = pt.trace.text.index("so 17 × 20 = 340.") - len(REPEAT_PHRASE)  # the last repetition
    over = {
        "start": 0,
        "end": pt.trace.tokens_for_chars(last, last + len(phrase))[1],
        "label": "valid_progress",
        "confidence": 1.0,
        "evidence": phrase,
    }
    either = frozenset({"evidence_not_anchored", TOO_LONG})
    return [
        rt("short_trace_cover", [cover], TOO_LONG, [rt.q(CORRECT_ANSWER, "valid_progress", 0.8)]),
        pt("repeated_line_cover", [over], either, [pt.q("17 × 20 = 340", "valid_progress", 0.8)]),
    ]


def line_tokens(trace: Trace, lines: Sequence[str]) -> list[tuple[int, int]]:
    """The token ranges of every line of `trace` equal to one of `lines` (its newline not
    included: a span ending on the break touches the next line, not this one)."""
    wanted, ranges, base = set(lines), [], 0
    for text in trace.text.split("\n"):
        if text in wanted and text:
            ranges.append(trace.tokens_for_chars(base, base + len(text)))
        base += len(text) + 1
    return ranges


def _key(span: Any) -> tuple[int, int, str]:
    if isinstance(span, Mapping):
        return int(span["start"]), int(span["end"]), str(span["label"])
    return int(span.start), int(span.end), str(span.label)


def measure(
    attack: LineAttack,
    accepted: Sequence[Any],
    *,
    lam: float = 0.25,
    min_confidence: float = 0.5,
    label_scores: Mapping[str, float] = DEFAULT_LABEL_SCORES,
) -> dict[str, float]:
    """The credit the accepted hostile spans put on the trace's false, true and tainted
    lines, and in all. `accepted` holds span dicts or objects with start, end, label and
    confidence (any validator's). Accepted spans do not overlap, so a token's credit is
    its one span's λ·score; the κ cap never binds at the defaults (λ = κ = 0.25)."""
    hostile = {_key(s) for s in attack.hostile}
    credit = [0.0] * attack.trace.num_tokens
    count = 0
    for span in accepted:
        key = _key(span)
        if key not in hostile:
            continue
        count += 1
        confidence = span["confidence"] if isinstance(span, Mapping) else span.confidence
        value = lam * label_scores[key[2]] if confidence >= min_confidence else 0.0
        for t in range(key[0], key[1]):
            credit[t] = value

    def on(lines: Sequence[str]) -> float:
        return float(sum(sum(credit[a:b]) for a, b in line_tokens(attack.trace, lines)))

    return {
        "accepted": float(count),
        "false_lines": on(attack.case.false),
        "true_lines": on(attack.case.true),
        "tainted_lines": on(attack.case.tainted),
        "total": float(sum(credit)),
    }
