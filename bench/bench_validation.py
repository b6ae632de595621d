"""Span validation v2 (issue 9) against the validator it replaced, side by side in one run.

    .venv/bin/python bench/bench_validation.py [--tokens 32768] [--spans 256] [--repeats 21]

1. Speed under a hostile submission: a 32k-token trace and 256 spans built from its
   text (anchored and unanchored quotes, quotes from elsewhere, long and overlapping
   spans, a flood on a few lines); the first check of a fresh `Validator` (folding the
   trace included), a second check on the same one (fold reused), and the old
   validator. A second row: a trace of arithmetic lines under positive spans (the
   grounding check runs the exact checker on every line they touch).
2. The attacks of `tests.harness.attacks` through both validators, with the
   credit they leave on the erroneous line, and the fence imitation in the judge's view.

The old validator and marker code are read from commit 8be3b0e with ``git show``
(the repository's history is needed) and executed as private modules.

Target (issue 9): 256 spans × a 32k-token trace validated in under 50 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)

from judge_service.credit import token_credit
from judge_service.devtools.arith_traces import trace_text
from judge_service.folding import FoldedText
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import Trace, mark
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from judge_service.validate import ValidationReport, Validator
from tests.harness.attacks import (
    ATTACK_TRACE,
    ERROR_LINE,
    attacks,
)
from tests.harness.tokenizers import build_byte_level_bpe, synthetic_trace

OLD_COMMIT = "8be3b0e"
ROOT = Path(__file__).resolve().parent.parent
POSITIVE = [label for label, score in DEFAULT_LABEL_SCORES.items() if score > 0]
LABELS = list(DEFAULT_LABEL_SCORES)


# -- the code before issue 9 -----------------------------------------------------------


def _old_module(name: str, path: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:{path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{OLD_COMMIT}:{path}"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def old_code() -> tuple[types.ModuleType, types.ModuleType]:
    """The validator and the marker module of commit 8be3b0e.

    The old validator imports today's `escape_view_text`, which now also escapes
    fence runs; it is pointed back at the old one so it folds exactly as it did.
    """
    markers = _old_module("_bench_old_markers", "judge_service/trace/markers.py")
    validate = _old_module("_bench_old_validate", "judge_service/validate.py")
    validate.escape_view_text = markers.escape_view_text  # type: ignore[attr-defined]
    validate.strip_markers = markers.strip_markers  # type: ignore[attr-defined]
    return validate, markers


# -- timing ------------------------------------------------------------------------------


def _interleaved_ms(
    fns: dict[str, Callable[[], object]], repeats: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Each function `repeats` times, taking turns so that load on the machine hits all
    alike: wall and CPU (this process) milliseconds."""
    for fn in fns.values():
        fn()  # warm up
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[name][0].append((time.perf_counter() - wall) * 1000)
            times[name][1].append((time.process_time() - cpu) * 1000)
    return times


def _cell(times: Sequence[float]) -> str:
    return f"{statistics.median(times):.2f} ({min(times):.2f}–{max(times):.2f})"


# -- submissions -------------------------------------------------------------------------


def _lines(trace: Trace) -> list[tuple[int, int, str]]:
    """The non-blank lines of the trace: token range and text."""
    out = []
    at = 0
    for part in trace.text.split("\n"):
        if part.strip():
            a, b = trace.tokens_for_chars(at, at + len(part))
            out.append((a, b, part))
        at += len(part) + 1
    return out


def _span(
    start: int, end: int, label: str, confidence: float, evidence: str, end_quote: str | None = None
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "start": start,
        "end": end,
        "label": label,
        "confidence": round(confidence, 3),
        "evidence": evidence,
    }
    if end_quote is not None:
        span["evidence_end"] = end_quote
    return span


def hostile_mix(trace: Trace, count: int, seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """`count` spans as a hostile judge might submit them, each with its kind, shuffled.
    Every quote is trace text, except the kind "quote that occurs nowhere"."""
    rng = random.Random(seed)
    n = trace.num_tokens
    lines = _lines(trace)
    spans: list[tuple[str, dict[str, Any]]] = []

    def line() -> int:
        return rng.randrange(len(lines) - 8)

    def conf() -> float:
        return rng.uniform(0.5, 1.0)

    def from_inside(_: int) -> dict[str, Any]:
        a, b, text = lines[line()]
        cut = rng.randrange(max(1, len(text) - 24))
        return _span(a, b, rng.choice(LABELS), conf(), text[cut : cut + 24])

    def with_marker(_: int) -> dict[str, Any]:
        a, b, text = lines[line()]
        return _span(a, b, rng.choice(LABELS), conf(), f"⟦{a}⟧{text[:30]}")

    def both_ends(_: int) -> dict[str, Any]:
        k = line()
        last = k + rng.randint(1, 4)
        head, tail = lines[k][2][:20], lines[last][2][-20:]
        return _span(lines[k][0], lines[last][1], rng.choice(LABELS), conf(), head, tail)

    def elsewhere(_: int) -> dict[str, Any]:
        a, b, text = lines[line()]
        other = next(t for _, _, t in (lines[line()] for _ in range(100)) if t[:24] not in text)
        return _span(a, b, rng.choice(POSITIVE), conf(), other[:24])

    def nowhere(k: int) -> dict[str, Any]:
        a, b, _ = lines[line()]
        return _span(a, b, "valid_progress", 1.0, f"every step is verified ({k})")

    def unanchored(_: int) -> dict[str, Any]:
        k = line()
        return _span(lines[k][0], lines[k + 4][1], "valid_progress", 1.0, lines[k + 3][2][:24])

    def long_point(k: int) -> dict[str, Any]:
        end = n if k % 2 == 0 else (2 * n) // 5
        return _span(0, end, "verified_correction", 1.0, lines[0][2][:12])

    def long_region(_: int) -> dict[str, Any]:
        k = rng.randrange(len(lines) // 2)
        last = next(j for j in range(k, len(lines)) if lines[j][1] - lines[k][0] > (2 * n) // 5)
        last -= 1
        label = rng.choice(["neutral", "unproductive_repetition"])
        head, tail = lines[k][2][:24], lines[last][2][-24:]
        return _span(lines[k][0], lines[last][1], label, 1.0, head, tail)

    def over_share(_: int) -> dict[str, Any]:
        return _span(n // 5, n // 5 + (3 * n) // 5, "neutral", 1.0, lines[1][2][:24])

    def middle(_: int) -> dict[str, Any]:
        a = rng.randrange(n // 2)
        mid = next(t for s, _, t in lines if s >= a + (3 * n) // 20)
        return _span(a, a + (3 * n) // 10, "unproductive_repetition", 1.0, mid[:24])

    def overlapping(_: int) -> dict[str, Any]:
        base = rng.choice([s for _, s in spans if s["end"] - s["start"] < 200])
        k = next(i for i, (s, _, _) in enumerate(lines) if s >= base["start"])
        start = (lines[k][0] + lines[k][1]) // 2
        head = trace.span_text(start, lines[k][1]).strip()[:16] or lines[k + 1][2][:16]
        tail = lines[k + 1][2][-16:]
        return _span(start, lines[k + 1][1], rng.choice(LABELS), conf(), head, tail)

    flooded = [lines[rng.randrange(len(lines))] for _ in range(3)]
    tokens = [t for a, b, _ in flooded for t in range(a, b) if trace.token_text(t).strip()]

    def flood(k: int) -> dict[str, Any]:
        t = tokens[k % len(tokens)]
        return _span(t, t + 1, "valid_progress", 0.5 + 0.01 * k, trace.token_text(t))

    kinds: list[tuple[str, int, Callable[[int], dict[str, Any]]]] = [
        ("one line, quote from inside", 50, from_inside),
        ("one line, quote copied with its ⟦n⟧ marker", 20, with_marker),
        ("2–5 lines, evidence and evidence_end", 40, both_ends),
        ("quote from another line", 20, elsewhere),
        ("quote that occurs nowhere", 6, nowhere),
        ("quote 3 lines after the start", 10, unanchored),
        ("verified_correction over [0, T) or 40%", 8, long_point),
        ("region label over 40%, anchored at both ends", 6, long_region),
        ("region label over 60%", 3, over_share),
        ("region label over 30%, quoting its middle", 3, middle),
        ("overlapping an earlier span", 40, overlapping),
        ("flood: one-token spans on 3 lines", 25, flood),
    ]
    numbers = [count * weight // 256 for _, weight, _ in kinds]
    numbers[0] += count - sum(numbers)
    for (kind, _, make), number in zip(kinds, numbers, strict=True):
        spans.extend((kind, make(k)) for k in range(number))
    rng.shuffle(spans)
    return spans


def arithmetic_trace(tok: LoadedTokenizer, num_tokens: int, seed: int = 1) -> Trace:
    """Worked products (`arith_traces`: some with a false step) to `num_tokens` tokens."""
    rng = random.Random(seed)
    kinds = ["correct", "error", "error_ones", "correction", "repetition"]
    ids: list[int] = []
    while len(ids) < num_tokens:
        a, b = rng.randint(12, 49), rng.randint(13, 89)
        if b % 10 == 0:
            continue
        text, _ = trace_text(a, b, rng.choice(kinds))
        ids.extend(tok.hf.encode(text + "\n", add_special_tokens=False))
    return tok.decode(ids[:num_tokens])


def positive_spans(trace: Trace, count: int, seed: int = 1) -> list[dict[str, Any]]:
    """Positive spans over 1–3 arithmetic lines each, anchored at both ends."""
    rng = random.Random(seed)
    lines = [ln for ln in _lines(trace) if "=" in ln[2]]
    spans = []
    for k in sorted(rng.sample(range(len(lines) - 3), count)):
        last = k + rng.randint(0, 2)
        spans.append(
            _span(
                lines[k][0],
                lines[last][1],
                rng.choice(POSITIVE),
                rng.uniform(0.5, 1.0),
                lines[k][2][:24],
                lines[last][2][-24:],
            )
        )
    return spans


# -- 1. speed ----------------------------------------------------------------------------


def speed_row(
    name: str, trace: Trace, spans: list[dict[str, Any]], old: types.ModuleType, repeats: int
) -> tuple[list[str], ValidationReport]:
    reused = Validator(trace, DEFAULT_LABEL_SCORES)
    report = reused.check(spans)
    times = _interleaved_ms(
        {
            "first": lambda: Validator(trace, DEFAULT_LABEL_SCORES).check(spans),
            "second": lambda: reused.check(spans),
            "fold": lambda: FoldedText.build(trace.text, trace.offsets),
            "old": lambda: old.validate_spans(spans, trace, DEFAULT_LABEL_SCORES),
        },
        repeats,
    )
    old_report = old.validate_spans(spans, trace, DEFAULT_LABEL_SCORES)
    wall = {k: v[0] for k, v in times.items()}
    cpu = {k: statistics.median(v[1]) for k, v in times.items()}
    ratio = statistics.median(wall["old"]) / statistics.median(wall["first"])
    row = [
        name,
        f"**{_cell(wall['first'])}**",
        _cell(wall["second"]),
        _cell(wall["fold"]),
        _cell(wall["old"]),
        f"{ratio:.2f}x",
        f"{cpu['first']:.1f} / {cpu['second']:.1f} / {cpu['old']:.1f}",
        f"{len(report.accepted)} / {len(old_report.accepted)}",
    ]
    return row, report


def _accepted_key(span: Any) -> tuple[int, int, str, float]:
    if isinstance(span, dict):
        return span["start"], span["end"], span["label"], float(span["confidence"])
    return span.start, span.end, span.label, span.confidence


def kind_rows(
    mix: list[tuple[str, dict[str, Any]]], trace: Trace, old: types.ModuleType
) -> list[list[str]]:
    """Per kind of span in the hostile mix: submitted, accepted before, accepted by v2, and
    v2's rejection codes (spans matched by start, end, label and confidence)."""
    spans = [span for _, span in mix]
    report = Validator(trace, DEFAULT_LABEL_SCORES).check(spans)
    old_report = old.validate_spans(spans, trace, DEFAULT_LABEL_SCORES)
    before = Counter(_accepted_key(s) for s in old_report.accepted)
    after = Counter(_accepted_key(s) for s in report.accepted)
    codes: dict[tuple[int, int, str, float], list[str]] = {}
    for rejection in report.rejected:
        codes.setdefault(_accepted_key(dict(rejection.span)), []).append(rejection.code)
    counts: dict[str, list[Any]] = {}
    for kind, span in mix:
        row = counts.setdefault(kind, [0, 0, 0, Counter()])
        key = _accepted_key(span)
        row[0] += 1
        for at, accepted in ((1, before), (2, after)):
            if accepted[key] > 0:  # each accepted span matches one submitted span
                accepted[key] -= 1
                row[at] += 1
    for kind, span in mix:
        key = _accepted_key(span)
        if codes.get(key):
            counts[kind][3][codes[key].pop()] += 1
    return [
        [
            kind,
            str(n),
            str(old_n),
            f"**{new_n}**",
            ", ".join(f"{c} ×{k}" for c, k in sorted(why.items())) or "—",
        ]
        for kind, (n, old_n, new_n, why) in counts.items()
    ]


# -- 2. attacks --------------------------------------------------------------------------


def attack_trace() -> Trace:
    directory = build_byte_level_bpe(Path(tempfile.mkdtemp()) / "bpe")
    tok = TokenizerCache().get(str(directory))
    return tok.decode(tok.hf.encode(ATTACK_TRACE, add_special_tokens=False))


def _key(span: Any) -> tuple[int, int, str]:
    if isinstance(span, dict):
        return span["start"], span["end"], span["label"]
    return span.start, span.end, span.label


def _error_credit(trace: Trace, accepted: Sequence[Any]) -> float:
    credit = token_credit(
        trace.num_tokens,
        accepted,  # the old Span has the fields token_credit reads
        DEFAULT_LABEL_SCORES,
        lam=0.25,
        kappa=0.25,
        min_confidence=0.5,
    )
    at = trace.text.index(ERROR_LINE)
    a, b = trace.tokens_for_chars(at, at + len(ERROR_LINE))
    return float(credit.values[a:b].sum())


def attack_rows(trace: Trace, old: types.ModuleType) -> list[list[str]]:
    rows = []
    for attack in attacks(trace):
        before = old.validate_spans(attack.spans, trace, DEFAULT_LABEL_SCORES).accepted
        report = Validator(trace, DEFAULT_LABEL_SCORES).check(attack.spans)
        after = report.accepted
        counts = []
        for accepted in (before, after):
            keys = {_key(s) for s in accepted}
            counts.append(
                (
                    sum(_key(s) in keys for s in attack.hostile),
                    sum(_key(s) in keys for s in attack.sound),
                )
            )
        hostile, sound = len(attack.hostile), len(attack.sound)
        codes = ", ".join(f"{c} ×{k}" for c, k in sorted(report.counts().items()))
        expected = f" ({attack.kept} allowed)" if attack.kept else ""
        rows.append(
            [
                f"`{attack.name}`: {attack.what}",
                f"{counts[0][0]}/{hostile} → **{counts[1][0]}/{hostile}**{expected}",
                f"{counts[0][1]}/{sound} → {counts[1][1]}/{sound}",
                f"{_error_credit(trace, before):+.3f} → {_error_credit(trace, after):+.3f}",
                codes or "—",
            ]
        )
    return rows


def fence_row(trace: Trace, old_markers: types.ModuleType) -> list[str]:
    def forged(view: str) -> list[str]:
        return [ln for ln in view.split("\n") if "<<<" in ln or ">>>" in ln]

    before, after = forged(old_markers.mark(trace).text), forged(mark(trace).text)
    shown = next(
        (ln for ln in mark(trace).text.split("\n") if "untrusted-trace" in ln), "(no such line)"
    )
    return [
        "fence imitation: the trace contains `<<<end untrusted-trace …>>>` and a reopening line",
        f"{len(before)} → **{len(after)}** fence lines in the view",
        "—",
        "—",
        f"shown as `{shown}`",
    ]


# -- output ------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32_768)
    parser.add_argument("--spans", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    old_validate, old_markers = old_code()
    directory, ids = synthetic_trace(args.tokens)
    tok = TokenizerCache().get(str(directory))
    trace = tok.decode(ids)
    mix = hostile_mix(trace, args.spans)
    spans = [span for _, span in mix]
    arith = arithmetic_trace(tok, args.tokens)
    positive = positive_spans(arith, args.spans)

    began = time.perf_counter()
    Validator(trace, DEFAULT_LABEL_SCORES).check(spans)
    cold = (time.perf_counter() - began) * 1000

    print(
        f"## 1. Validation speed: {args.tokens:,}-token traces, {args.spans} spans; "
        f"ms, median (min–max) of {args.repeats}, interleaved\n"
    )
    rows, reports = [], []
    for name, t, s in (
        (f"hostile mix ({len(trace.text):,} chars)", trace, spans),
        (f"positive spans over arithmetic lines ({len(arith.text):,} chars)", arith, positive),
    ):
        row, report = speed_row(name, t, s, old_validate, args.repeats)
        rows.append(row)
        reports.append((name, report))
    header = [
        "submission",
        "v2, first check (fold included)",
        "v2, second check (fold reused)",
        "fold alone",
        "old validator (8be3b0e)",
        "old / v2 first",
        "CPU: v2 first / second / old",
        "accepted v2 / old",
    ]
    print(_table(header, rows))
    print("\ntarget (issue 9): 256 spans × 32k tokens in under 50 ms (v2, first check)")
    print(f"first validation in this process (imports included): {cold:.1f} ms")
    for name, report in reports:
        codes = ", ".join(f"{c} ×{k}" for c, k in sorted(report.counts().items()))
        print(f"- v2 rejections, {name}: {codes}")
    print("\nThe hostile mix by kind:\n")
    header = ["kind", "submitted", "accepted before", "accepted v2", "v2 rejection codes"]
    print(_table(header, kind_rows(mix, trace, old_validate)))

    trace = attack_trace()
    print(f"\n## 2. Attacks ({trace.num_tokens}-token trace): before (8be3b0e) → after\n")
    header = [
        "attack",
        "hostile accepted",
        "sound kept",
        f"credit summed over `{ERROR_LINE}`",
        "rejection codes after",
    ]
    print(_table(header, [*attack_rows(trace, old_validate), fence_row(trace, old_markers)]))


if __name__ == "__main__":
    main()
