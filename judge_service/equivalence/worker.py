"""The comparison itself, run in a sandbox zygote's child (the zygote's handler).

math-verify's timeouts are ``signal.alarm`` calls, which only work in a
process's main thread; a forked child's only thread is its main thread, and
the zygote's hard kill backs them up when C code (a huge power) does not
return to the interpreter for the alarm to fire. The answers come from the
policy model's trace, so parsing them (which reaches sympy's ``parse_expr``,
an ``eval``) happens behind the same OS boundary as ``run_python``.

``verify(gold, pred)`` is asymmetric: the reference goes in as gold.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from typing import Any

from judge_service.equivalence.annotation import numeral_base
from judge_service.equivalence.clock import compare_times
from judge_service.equivalence.coverage import unaccounted
from judge_service.equivalence.normalize import readings
from judge_service.equivalence.result import EquivalencePolicy, EquivalenceResult

_MAX_FORM_CHARS = 500
_OR = re.compile(r"\bor\b|\\lor(?![A-Za-z])|\\vee(?![A-Za-z])")
# One word of letters and digits, with a run of two letters or more and a digit (``AZYUK2A``)
_CODE = re.compile(r"(?=[A-Za-z\d]*[A-Za-z]{2})(?=[A-Za-z\d]*\d)[A-Za-z\d]{3,64}")


def _alarm_seconds(budget_s: float, share: float) -> int:
    return max(1, math.floor(budget_s * share))


def _show(form: object) -> str:
    try:
        text = str(form)
    except Exception as exc:  # a form too large to print is still a form
        text = f"<{type(form).__name__}: {exc}>"
    return text if len(text) <= _MAX_FORM_CHARS else text[:_MAX_FORM_CHARS] + "..."


def _is_math(form: object) -> bool:
    return not isinstance(form, str)


def _strict_percent(form: Any) -> Any:
    from sympy import Basic, Rational, UnevaluatedExpr

    if isinstance(form, Basic):
        return form.xreplace({UnevaluatedExpr(Rational(1, 100)): Rational(1, 100)})
    return form


def _imaginary_exponents(form: Any) -> Any:
    """math-verify reads the i of ``e^{i\\pi}`` as a variable; in an exponent of e it is the
    imaginary unit (Euler's identity: ``e^{i\\pi} = -1``). An i elsewhere stays a variable."""
    from sympy import Basic, I, exp

    if not isinstance(form, Basic):
        return form
    names = [s for s in form.free_symbols if getattr(s, "name", None) == "i"]
    if not names:
        return form
    return form.replace(
        lambda x: isinstance(x, exp) and x.has(names[0]), lambda x: x.subs(names[0], I)
    )


def _bounds_one_variable(form: Any) -> bool:
    """Is `form` inequalities between one variable and constants, joined by and/or?"""
    from sympy import And, Eq, Or
    from sympy.core.relational import Relational

    if isinstance(form, And | Or):
        return all(_bounds_one_variable(arg) for arg in form.args)
    if not isinstance(form, Relational) or isinstance(form, Eq):
        return False
    return all(side.is_Symbol or not side.free_symbols for side in form.args)


def _as_interval(form: Any, other: Any, joined_by_or: bool) -> Any | None:
    """The set an inequality answer denotes, where the other side is a set: math-verify
    compares an inequality reference with an interval answer, but not the other way round
    (``[2, 5)`` against ``2 \\le x < 5``), nor a union with inequalities joined by "or" (read
    as a list). Constants only, so solving them is cheap."""
    from sympy import FiniteSet, Set, Union

    if not isinstance(other, Set):
        return None
    parts = list(form.args) if isinstance(form, FiniteSet) and joined_by_or else [form]
    if not all(_bounds_one_variable(part) for part in parts):
        return None
    if len(set().union(*(part.free_symbols for part in parts))) != 1:
        return None
    try:
        return Union(*(part.as_set() for part in parts))
    except (TypeError, ValueError, NotImplementedError):
        return None


def _exact_number(form: Any) -> Any | None:
    """`form` as an exact constant expression, or None (symbols, floats, percent, non-numbers)."""
    from sympy import Expr, Float, UnevaluatedExpr

    if not isinstance(form, Expr) or form.free_symbols:
        return None
    if form.has(Float) or form.has(UnevaluatedExpr):
        return None
    return form.doit()


def _exactly_different(gold: Any, pred: Any) -> bool:
    """True when both are exact constants that differ.

    math-verify compares numbers after ``evalf(chop=True)``, which rounds
    tiny values to zero: it calls 1/2^99 and 1/2^98 equal. Exact values get
    an exact check on top.
    """
    from sympy import N, Rational

    try:
        a, b = _exact_number(gold), _exact_number(pred)
        if a is None or b is None or not (a.is_finite and b.is_finite):
            return False
        difference = (a - b).doit()
        if isinstance(difference, Rational):
            return bool(difference != 0)
        value, scale = N(difference, 60), max(abs(N(a, 60)), abs(N(b, 60)))
        return bool(value.is_number and value != 0 and abs(value) > scale * N(10) ** -45)
    except (TypeError, ValueError, ArithmeticError):
        return False  # no exact verdict: math-verify's stands


def _within_tolerance(gold: Any, pred: Any, tolerance: float) -> bool:
    from sympy import Expr, N

    if not (isinstance(gold, Expr) and isinstance(pred, Expr)):
        return False
    if gold.free_symbols or pred.free_symbols:
        return False
    try:
        a, b = complex(N(gold.doit(), 30)), complex(N(pred.doit(), 30))
    except (TypeError, ValueError):
        return False
    return abs(a - b) <= tolerance * max(abs(a), abs(b), 1e-300)


def _whole_forms(name: str, text: str, forms: list[Any]) -> tuple[list[Any], str | None]:
    """The forms that account for all of `text`, and why the side counts as read only in
    part: when no form is whole, or math-verify's mathematics for it (not its text
    fallback) all left something out."""
    gaps = [unaccounted(text, form) for form in forms]
    whole = [form for form, gap in zip(forms, gaps, strict=True) if gap is None]
    telling = [(f, g) for f, g in zip(forms, gaps, strict=True) if _is_math(f) or not whole]
    if not telling or any(gap is None for _, gap in telling):
        return whole, None
    form, gap = telling[0]
    return whole, f"math-verify read only part of the {name}: its parse {_show(form)} {gap}"


def _whole_reading(
    name: str, text: str, forms: list[Any], span: tuple[int, int, bool] | None
) -> tuple[list[Any], str | None, str]:
    """`_whole_forms` on the answer math-verify read in `text`: all of it, or in prose the
    span it took its answer from (`extraction.surroundings`); and that answer's text."""
    from judge_service.equivalence import extraction

    if not forms:
        return [], None, text
    target, refused = (text, None) if span is None else extraction.surroundings(text, span)
    if refused is not None:
        return [], f"math-verify read only part of the {name}: {refused}", target
    return *_whole_forms(name, target, forms), target


def _is_code(name: str, text: str, golds: list[Any]) -> bool:
    """An answer in which math-verify finds nothing, that is one word of letters and digits
    with a word in it (``AZYUK2A``: math-verify declines a digit inside a word), is a code
    or a name, not a number: different from a reference read as mathematics, as ``ABC`` is
    (math-verify reads that as a product of letters). Anything else it finds nothing in
    stays unknown: ``√4`` and ``٢`` are 2."""
    return name == "answer" and bool(_CODE.fullmatch(text.strip())) and any(map(_is_math, golds))


def compare(gold: str, pred: str, policy: EquivalencePolicy, budget_s: float) -> EquivalenceResult:
    from math_verify import verify
    from math_verify.errors import TimeoutException

    from judge_service.equivalence import extraction

    started = time.perf_counter()

    def result(verdict: Any, reason: str, g: list[Any], p: list[Any]) -> EquivalenceResult:
        elapsed = (time.perf_counter() - started) * 1000
        shown_g, shown_p = [_show(x) for x in g], [_show(x) for x in p]
        return EquivalenceResult(verdict, reason, shown_g, shown_p, elapsed)

    timed = compare_times(gold, pred)
    if timed is not None:
        return result(timed[0], timed[1], [], [])
    parse_alarm = _alarm_seconds(budget_s, 0.2)
    sides: list[tuple[list[Any], list[Any], str | None]] = []  # forms, whole forms, gap

    def parsed_so_far() -> tuple[list[Any], list[Any]]:
        return (sides[0][0] if sides else []), []

    texts = {"reference": readings(gold, policy), "answer": readings(pred, policy)}
    bases: dict[str, set[int | None]] = {"reference": set(), "answer": set()}
    for name, readings_of_side in texts.items():
        forms, whole, gaps = [], [], []
        for text in readings_of_side:
            try:
                found, span = extraction.parse(text, parse_alarm)
            except TimeoutException:
                return result("unknown", f"parsing the {name} timed out", *parsed_so_far())
            except (MemoryError, RecursionError) as exc:
                reason = f"parsing the {name} ran out of resources ({type(exc).__name__})"
                return result("unknown", reason, *parsed_so_far())
            except Exception as exc:
                reason = f"cannot parse the {name}: {type(exc).__name__}: {exc}"
                return result("unknown", reason[:500], *parsed_so_far())
            if policy.percent == "strict":
                found = [_strict_percent(x) for x in found]
            reading_whole, gap, target = _whole_reading(name, text, found, span)
            reading_whole = [_imaginary_exponents(x) for x in reading_whole]
            forms += found
            whole += reading_whole
            gaps.append(gap)
            bases[name].add(numeral_base(target) if found else None)
        if not forms:
            if _is_code(name, pred, parsed_so_far()[0]):
                reason = "the answer is a word of letters and digits, not a number"
                return result("not_equivalent", reason, *parsed_so_far())
            return result("unknown", f"cannot parse the {name}", *parsed_so_far())
        sides.append((forms, whole, None if None in gaps else gaps[0]))
    (golds, golds_whole, gold_gap), (preds, preds_whole, pred_gap) = sides
    partial = gold_gap or pred_gap  # why a side was read only in part
    # math-verify compares a numeral's digits without its base: only within one base
    other_base = bases["reference"] != bases["answer"]
    if (partial is not None or other_base) and texts["reference"][0] == texts["answer"][0]:
        return result("equivalent", "the two answers are the same text", golds, preds)
    if other_base:
        reason = "the reference and the answer are not numerals in the same base"
        return result("unknown", reason, golds, preds)
    if partial is not None and not (golds_whole and preds_whole):
        return result("unknown", partial, golds, preds)

    verify_alarm = _alarm_seconds(budget_s, 0.5)
    stopped: str | None = None  # why a comparison could not finish, if one could not
    pairs = list(itertools.product(golds_whole, preds_whole))
    or_gold, or_pred = (_OR.search(text) is not None for text in (gold, pred))
    pairs += [(g, s) for g, p in pairs if (s := _as_interval(p, g, or_pred)) is not None] + [
        (s, p) for g, p in pairs if (s := _as_interval(g, p, or_gold)) is not None
    ]
    for g, p in pairs:
        try:
            same = verify(g, p, timeout_seconds=verify_alarm, raise_on_error=True)
        except TimeoutException:
            stopped = "the comparison timed out"
            continue
        except (MemoryError, RecursionError) as exc:
            stopped = f"the comparison ran out of resources ({type(exc).__name__})"
            continue
        except Exception:
            continue  # math-verify's own default: forms it cannot compare are not equal
        if same and not _exactly_different(g, p):
            return result("equivalent", "math-verify found them equal", golds, preds)
    if policy.tolerance is not None:
        for g, p in itertools.product(filter(_is_math, golds_whole), filter(_is_math, preds_whole)):
            if _within_tolerance(g, p, policy.tolerance):
                reason = f"equal within a relative tolerance of {policy.tolerance:g}"
                return result("equivalent", reason, golds, preds)
    if partial is not None:
        return result("unknown", partial, golds, preds)
    if stopped is not None:
        return result("unknown", stopped, golds, preds)
    if any(map(_is_math, golds_whole)) != any(map(_is_math, preds_whole)):
        side = "reference" if not any(map(_is_math, golds_whole)) else "answer"
        return result("unknown", f"the {side} could not be read as mathematics", golds, preds)
    return result("not_equivalent", "math-verify found them different", golds, preds)


# -- the zygote's handler interface -------------------------------------------

_WARMUP = [
    ("\\frac{1}{2}", "0.5"), ("x=3", "3"), ("[1,2)", "[1,2]"), ("\\{1,2\\}", "2, 1"),
    ("50\\%", "0.5"), ("(1,2,3)", "(1,2,3)"), ("x>5", "5<x"), ("2\\sqrt{2}", "\\sqrt{8}"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
]  # fmt: skip


def preload() -> None:
    import math_verify  # noqa: F401  (imported here so forked children start warm)

    for gold, pred in _WARMUP:
        compare(gold, pred, EquivalencePolicy(), budget_s=30)


def handle(payload: dict[str, Any], report: object) -> dict[str, Any]:
    policy = EquivalencePolicy.from_dict(payload.get("policy", {}))
    return compare(
        str(payload["gold"]), str(payload["pred"]), policy, float(payload["timeout_s"])
    ).to_dict()
