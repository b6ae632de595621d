"""``audit --compare`` with groupwise sources (issue 30): the share of equal-reward groups
whose tokens get non-zero credit (Wilson CI) per source, and a judged run read for its
per-token credit (``credit_runs --judged-credit``), where groupwise judging puts the
equal-reward term g·λ·s_i that no span carries."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service.devtools.credit_runs import credit_spans, fill_gaps, main
from judge_service.probe.audit import AuditSettings
from judge_service.probe.compare import compare_runs, equal_reward_credit
from judge_service.probe.stats import wilson_ci
from judge_service.trace.tokenizer import LoadedTokenizer

TEXT = "17 × 20 = 340.\n17 × 4 = 68.\nSo 340 + 68 = 408.\nThe answer is 408."
FAST = AuditSettings(permutations=199, bootstrap=200)


def _record(rid: str, group: str, reward: float, spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": rid, "group_id": group, "reward": reward, "correct": reward > 0, "spans": spans}


def _span(start: int, score: float, progress: float = 0.0) -> dict[str, Any]:
    return {
        "start": start,
        "end": start + 5,
        "score": score,
        "progress": progress,
        "progress_rel": progress,
        "position": (start + 2.5) / 60,
        "length": 5,
        "overlaps_final": False,
        "mentions_answer": False,
    }


def test_wilson_interval_matches_published_values() -> None:
    # 1 of 2: the textbook Wilson interval [0.0945, 0.9055] at 95%.
    assert wilson_ci(1, 2) == pytest.approx((0.094531, 0.905469), abs=1e-6)
    assert wilson_ci(1, 1) == pytest.approx((0.206549, 1.0), abs=1e-6)
    assert wilson_ci(0, 3) == pytest.approx((0.0, 0.561497), abs=1e-6)
    assert all(math.isnan(v) for v in wilson_ci(0, 0))


def test_equal_reward_share_counts_groups_with_any_nonzero_credit() -> None:
    records = [
        # An equal-reward group with credit on one span of one rollout: credited.
        _record("a0", "a", 0.0, [_span(0, 0.0), _span(5, 0.1)]),
        _record("a1", "a", 0.0, [_span(0, 0.0)]),
        # An equal-reward group whose spans all score 0: not credited.
        _record("b0", "b", 1.0, [_span(0, 0.0)]),
        _record("b1", "b", 1.0, []),
        # Mixed rewards, and a group of one: not equal-reward groups at all.
        _record("c0", "c", 1.0, [_span(0, 1.0)]),
        _record("c1", "c", 0.0, [_span(0, -1.0)]),
        _record("d0", "d", 0.0, [_span(0, 1.0)]),
    ]
    found = equal_reward_credit(records)
    assert found["n_groups"] == 2 and found["n_credited"] == 1
    assert found["share"] == pytest.approx(0.5)
    assert found["ci"] == pytest.approx([0.094531, 0.905469], abs=1e-6)
    assert found["interval"] == "wilson"
    none = equal_reward_credit([r for r in records if r["group_id"] in ("c", "d")])
    assert none["n_groups"] == 0 and none["share"] is None and none["ci"] == [None, None]


def _runs() -> dict[str, list[dict[str, Any]]]:
    """Ten groups of three; group g0 has one reward and no credit from the single source.
    Groupwise adds a zero-sum constant per rollout on g0's spans (g·λ·s_i), as the
    service does, and nothing elsewhere."""
    rng = np.random.default_rng(3)
    single, groupwise = [], []
    for g in range(10):
        for k in range(3):
            reward = 0.0 if g == 0 else float(k == 0)
            spans = []
            for j in range(6):
                score = 0.0 if g == 0 else float(rng.choice([-1.0, 0.0, 0.5, 1.0]))
                spans.append(_span(5 * j, score, 0.5 * score + float(rng.normal(0, 0.2))))
            single.append(_record(f"g{g}-{k}", f"g{g}", reward, spans))
            term = (0.1, 0.0, -0.1)[k] if g == 0 else 0.0
            shifted = [{**s, "score": s["score"] + term} for s in spans]
            groupwise.append(_record(f"g{g}-{k}", f"g{g}", reward, shifted))
    return {"single": single, "groupwise": groupwise}


def test_a_per_rollout_term_moves_the_share_and_not_the_within_trace_slope() -> None:
    runs = compare_runs(_runs(), FAST)["runs"]
    single, groupwise = runs["single"], runs["groupwise"]
    assert single["equal_reward_credited"]["n_credited"] == 0
    assert single["equal_reward_credited"]["ci"] == pytest.approx([0.0, 0.793451], abs=1e-6)
    assert groupwise["equal_reward_credited"]["n_credited"] == 1
    assert groupwise["equal_reward_credited"]["share"] == 1.0
    assert groupwise["equal_reward_credited"]["ci"] == pytest.approx([0.206549, 1.0], abs=1e-6)
    # Trace fixed effects absorb a constant per rollout: the slope is the single source's.
    assert groupwise["slope"]["slope"] == pytest.approx(single["slope"]["slope"], abs=1e-6)
    assert groupwise["slope"]["p_value"] == single["slope"]["p_value"]


def test_compare_json_and_html_carry_the_share_per_source(tmp_path: Path) -> None:
    from judge_service.cli.main import main as cli

    args = ["audit", "--compare"]
    for name, records in _runs().items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        args.append(f"{name}={path}")
    out = tmp_path / "compare.html"
    assert cli([*args, "-o", str(out), "--permutations", "99", "--bootstrap", "50"]) == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    for name, credited in (("single", 0), ("groupwise", 1)):
        found = summary["runs"][name]["equal_reward_credited"]
        assert (found["n_groups"], found["n_credited"]) == (1, credited)
    html = out.read_text()
    assert "equal-reward groups credited" in html and "1 of 1 (1.000)" in html
    assert "0 of 1 (0.000)" in html and "[0.207, 1.000]" in html


def _trace(bpe: LoadedTokenizer):  # type: ignore[no-untyped-def]
    return bpe.decode(bpe.hf(TEXT, add_special_tokens=False)["input_ids"])


def _result(n: int, term: float, encoding: str = "dense") -> dict[str, Any]:
    """A judged result: λ = 0.25 times an `invalid` span's −1 on [1, 3), plus `term` on
    every token (the equal-reward term of a groupwise run)."""
    credit = np.full(n, term, np.float64)
    credit[1:3] += -0.25
    payload: Any = credit.tolist()
    if encoding == "base64-f32":
        payload = base64.b64encode(credit.astype("<f4").tobytes()).decode()
    spans = [{"start": 1, "end": 3, "label": "invalid", "score": -1.0, "evidence": "×"}]
    return {"id": "r", "status": "ok", "num_tokens": n, "spans": spans, "credit": payload}


@pytest.mark.parametrize("encoding", ["dense", "base64-f32"])
def test_credit_spans_score_each_unit_by_its_per_token_credit(
    bpe: LoadedTokenizer, encoding: str
) -> None:
    trace = _trace(bpe)
    spans = credit_spans(trace, _result(trace.num_tokens, 0.05, encoding), 64)
    units = fill_gaps(trace, _result(trace.num_tokens, 0.05)["spans"], 64)
    assert [(s["start"], s["end"]) for s in spans] == [(s["start"], s["end"]) for s in units]
    assert spans[0]["label"] == "invalid" and spans[0]["label_score"] == -1.0
    assert spans[0]["score"] == pytest.approx(-0.2, abs=1e-7)
    # The unjudged lines carry the term a span-only reading would score 0.
    assert all(s["score"] == pytest.approx(0.05, abs=1e-7) for s in spans[1:])
    with pytest.raises(ValueError, match="credit has"):
        credit_spans(trace, {**_result(trace.num_tokens + 1, 0.0), "num_tokens": 0}, 64)


def test_judged_credit_option_writes_credit_scored_spans(
    tmp_path: Path, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    ids = bpe.hf(TEXT, add_special_tokens=False)["input_ids"]
    rollouts = tmp_path / "rollouts.jsonl"
    row = {"id": "r", "group_id": "g", "reward": 0.0, "tokenizer": str(bpe_dir)}
    rollouts.write_text(json.dumps({**row, "response_token_ids": ids}) + "\n")
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(_result(len(ids), 0.05)) + "\n")
    out = tmp_path / "out"
    argv = [str(rollouts), "--model", "unused", "-o", str(out), "--methods", ""]
    argv += ["--judged", f"labels={results}", "--judged-credit", f"credit={results}"]
    assert main(argv) == 0
    labels = json.loads((out / "labels.jsonl").read_text())["spans"]
    credit = json.loads((out / "credit.jsonl").read_text())["spans"]
    assert [s["score"] for s in labels][:2] == [-1.0, 0.0]
    assert [s["score"] for s in credit][:2] == pytest.approx([-0.2, 0.05])
