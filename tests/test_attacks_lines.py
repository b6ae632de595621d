"""The line rules of span validation (issue 25) against an adversarial judge behind `openai`.

As in test_attacks.py, the scripted server plays a judge that calls
``submit_spans`` and resubmits the same spans after the rejections come back.
Every hostile span is in range and quotes text really inside it, so only a line
rule stops it: a positive span on any token of a false line, on a line built on
a false value or on a wrong final answer; an unlock by a faint or slanderous
``invalid``; region labels past their shared budget; a point span over half of
a short trace; a quote repeated on every sub-line. The sound spans of the same
submission must survive. The property test at the end asks the same of random
arithmetic traces, with the false lines known by construction rather than from
the checker under test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.folding import fold
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Result, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import validate_spans
from tests.harness.attacks import quote_span
from tests.harness.attacks_lines import (
    ATTACK_NAMES,
    CORRECT_ANSWER,
    CORRECT_CASE,
    CORRECT_LINES,
    NOT_YET_READ,
    Case,
    LineAttack,
    line_attacks,
    line_tokens,
    measure,
)
from tests.harness.scripted import FakeProviderServer, call
from tests.harness.scripted.harness import llm_settings

JUDGE = "openai:gpt-test"
POSITIVE = [label for label, score in DEFAULT_LABEL_SCORES.items() if score > 0]


pytestmark = pytest.mark.usefixtures("provider_keys")


def _decode(bpe: LoadedTokenizer, text: str) -> Trace:
    return bpe.decode(bpe.hf.encode(text, add_special_tokens=False))


@pytest.fixture(scope="module")
def attacks(bpe: LoadedTokenizer) -> dict[str, LineAttack]:
    return {a.name: a for a in line_attacks(lambda text: _decode(bpe, text))}


def _key(span: Any) -> tuple[int, int, str]:
    if isinstance(span, dict):
        return span["start"], span["end"], span["label"]
    return span.start, span.end, span.label


async def _judge(
    server: FakeProviderServer,
    case: Case,
    trace: Trace,
    bpe_dir: Path,
    script: str,
    spans: list[Any],
) -> Result:
    """A judge that submits `spans`, and the same spans again as its repair."""
    submit = call("submit_spans", spans=spans)
    server.book.add(script, submit, submit)
    rollout = Rollout(
        id=script,
        problem=f"Compute 17 × 24. SCRIPT:{script}",
        response_token_ids=trace.token_ids.tolist(),
        tokenizer=str(bpe_dir),
        reward=case.reward,
        reference_answer=case.reference,
    )
    engine = Engine(llm_settings({"openai": server.url + "/v1"}), store=MemoryStore())
    options = Options(judge=JUDGE, fallback="zero", max_turns=4, deadline_s=10.0)
    return await engine.judge_one(rollout, options)


def _credit_on(result: Result, trace: Trace, lines: Sequence[str]) -> float:
    credit = np.asarray(result.credit)
    return float(sum(credit[a:b].sum() for a, b in line_tokens(trace, lines)))


def test_every_attack_is_in_range_and_quotes_its_own_span(attacks: dict[str, LineAttack]) -> None:
    """What makes each attack a test of one line rule: nothing older can stop it."""
    assert tuple(attacks) == ATTACK_NAMES
    assert not set(NOT_YET_READ) & {line for a in attacks.values() for line in a.case.false}
    for attack in attacks.values():
        trace, n = attack.trace, attack.trace.num_tokens
        assert len(attack.codes) == len(attack.hostile) > 0, attack.name
        keys = [_key(s) for s in attack.spans]
        assert len(set(keys)) == len(keys), attack.name
        for span in attack.spans:
            assert 0 <= span["start"] < span["end"] <= n, (attack.name, span)
            inside = fold(trace.span_text(span["start"], span["end"]), quote=False)
            for quote in (span["evidence"], span.get("evidence_end")):
                assert quote is None or fold(quote) in inside, (attack.name, span)
        for line in (*attack.case.false, *attack.case.true, *attack.case.tainted):
            assert line_tokens(trace, [line]), (attack.name, line)
    n = attacks["short_trace_cover"].trace.num_tokens
    cover = attacks["short_trace_cover"].hostile[0]
    assert n // 2 < cover["end"] - cover["start"] <= 512 and n <= 64
    for name in ("region_tiling", "region_tiling_mixed"):
        regions = [*attacks[name].hostile, *attacks[name].sound]
        lengths = [s["end"] - s["start"] for s in regions]
        assert all(k <= n // 2 for k in lengths) and sum(lengths) > n // 2, name
    repeated = attacks["repeated_line_cover"]
    over = repeated.hostile[0]
    # Over several 64-token sub-lines, yet under half the trace: only anchoring is left.
    assert 3 * 64 < over["end"] - over["start"] < repeated.trace.num_tokens // 2


@pytest.mark.parametrize("name", ATTACK_NAMES)
async def test_a_span_a_line_rule_stops_is_rejected_and_the_sound_ones_kept(
    name: str, servers: dict[str, FakeProviderServer], attacks: dict[str, LineAttack], bpe_dir: Path
) -> None:
    attack = attacks[name]
    trace = attack.trace
    result = await _judge(
        servers["openai"], attack.case, trace, bpe_dir, f"lines-{name}", attack.spans
    )
    assert result.status == "ok" and result.judge is not None, result
    allowed = {_key(s): codes for s, codes in zip(attack.hostile, attack.codes, strict=True)}
    unpinned = {_key(s) for s in attack.unpinned}
    for round_ in (1, 2):  # the first submission's rejections are kept beside the repair's
        got = {_key(r.span): r.code for r in result.rejected_spans if r.round == round_}
        accepted = [key for key in allowed if key not in got]
        assert not accepted, f"round {round_}: hostile spans accepted: {accepted}"
        if round_ == 1:
            assert result.judge.turns == 2
        wrong = {key: got[key] for key, codes in allowed.items() if got[key] not in codes}
        assert not wrong, f"round {round_}: rejected with another code: {wrong}"
        others = {key: code for key, code in got.items() if key not in allowed.keys() | unpinned}
        assert not others, f"round {round_}: sound spans rejected: {others}"
    assert result.judge.rejected == dict(Counter(r.code for r in result.rejected_spans))
    kept = {_key(s) for s in result.spans}
    assert {_key(s) for s in attack.sound} <= kept <= {_key(s) for s in attack.sound} | unpinned
    # Nothing of the hostile spans lands, on any line; a sound span (a kept region) may
    # still cost a true line, so only the false and tainted lines are bounded in total.
    assert set(measure(attack, result.spans).values()) == {0.0}
    assert _credit_on(result, trace, attack.case.false) <= 0
    assert _credit_on(result, trace, attack.case.tainted) <= 0
    if attack.error_line is not None and any(s["label"] == "invalid" for s in attack.sound):
        assert _credit_on(result, trace, [attack.error_line]) < 0


async def test_an_honest_submission_on_a_correct_trace_is_accepted_whole(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    """The rules that stop the attacks leave a right trace's own credit alone: every line's
    progress and the (right) final answer's are kept."""
    trace = _decode(bpe, CORRECT_CASE.text)
    spans = [quote_span(trace, line, "valid_progress", 0.8) for line in CORRECT_LINES]
    spans.append(quote_span(trace, CORRECT_ANSWER, "valid_progress", 0.8))
    result = await _judge(servers["openai"], CORRECT_CASE, trace, bpe_dir, "lines-honest", spans)
    assert result.status == "ok" and result.rejected_spans == []
    assert {_key(s) for s in result.spans} == {_key(s) for s in spans}
    answer = spans[-1]
    assert float(np.asarray(result.credit)[answer["start"] : answer["end"]].sum()) > 0


def _line_bounds(text: str) -> list[tuple[int, int]]:
    """The char range of each line of `text`, its newline left out."""
    bounds, base = [], 0
    for line in text.split("\n"):
        bounds.append((base, base + len(line)))
        base += len(line) + 1
    return bounds


@st.composite
def arithmetic(draw: st.DrawFn, bpe: LoadedTokenizer) -> tuple[Trace, list[Any], set[int]]:
    """A trace of `a × b = c.` lines, some with c wrong, random spans over them, and the
    numbers of the text lines that hold a false link (known by construction)."""
    rows = [
        (prefix, a, b, a * b + off)
        for prefix, a, b, off in draw(
            st.lists(
                st.tuples(
                    st.sampled_from(("", "Then ", "So ")),
                    st.integers(2, 99),
                    st.integers(2, 99),
                    st.sampled_from((0, 0, 0, 1, -1, 10)),
                ),
                min_size=2,
                max_size=7,
            )
        )
    ]
    lines = ["<think>", *(f"{p}{a} × {b} = {c}." for p, a, b, c in rows), "</think>"]
    false = {k + 1 for k, (_, a, b, c) in enumerate(rows) if a * b != c}
    trace = _decode(bpe, "\n".join(lines))
    bounds = _line_bounds(trace.text)
    spans: list[Any] = []
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(1, len(rows)))
        j = draw(st.integers(i, min(i + 1, len(rows))))  # one line, or into the next
        a = draw(st.integers(bounds[i][0], bounds[i][1] - 1))
        b = draw(st.integers(a + 1 if i == j else bounds[j][0] + 1, bounds[j][1]))
        start, end = trace.tokens_for_chars(a, b)
        spans.append(
            {
                "start": start,
                "end": end,
                "label": draw(st.sampled_from([*POSITIVE, "invalid"])),
                "confidence": draw(st.floats(0.5, 1.0)),
                "evidence": trace.span_text(start, end).strip(),
            }
        )
    return trace, spans, false


def test_no_accepted_positive_span_touches_a_false_line(bpe: LoadedTokenizer) -> None:
    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(arithmetic(bpe))
    def check(case: tuple[Trace, list[Any], set[int]]) -> None:
        trace, spans, false = case
        text_lines, bounds = trace.text.split("\n"), _line_bounds(trace.text)
        for span in validate_spans(spans, trace, DEFAULT_LABEL_SCORES).accepted:
            if DEFAULT_LABEL_SCORES[span.label] <= 0:
                continue
            low, high = trace.char_range(span.start, span.end)
            touched = {k for k, (x, y) in enumerate(bounds) if x < high and low < y}
            assert not touched & false, (
                f"{span.label} {trace.span_text(span.start, span.end)!r} accepted on "
                f"{[text_lines[k] for k in sorted(touched & false)]}"
            )

    check()
