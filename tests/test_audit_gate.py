"""The audit's gate reads the probe before the answer is first written, leaves out traces that
write it before any token, and passes on its CI's lower bound; p-values are Holm-adjusted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from judge_service.probe.answer_cut import first_occurrence, gate_start
from judge_service.probe.audit import AuditSettings, gate, run_audit
from judge_service.probe.stats import holm
from judge_service.reading.numbers import number_value


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("so 6 × 3 = 18, and the answer is 18", "18", "18, and"),
        ("the total is 1,000 apples; answer 1000", "1000", "1,000"),
        ("half: 0.5, i.e. \\frac{1}{2}", "\\frac{1}{2}", "0.5"),
        ("one half is 1/2", "0.5", "1/2"),
        ("there are seven left, so 7", "7", "seven"),
        ("fullwidth １８ then 18", "18", "１８"),
        ("Arabic-Indic ١٨ then 18", "18", "١٨"),
        ("negative -5 is the result", "-5", "5 is"),
        ("we get x = 3 + y, so x=3", "x=3", "x = 3"),
        ("a \\dfrac{x}{2} here", "\\frac{x}{2}", "\\dfrac"),
    ],
)
def test_first_occurrence_reads_the_answer_as_the_checker_does(
    text: str, answer: str, expected: str
) -> None:
    assert first_occurrence(text, answer) == text.index(expected)


def test_a_hostile_trace_costs_one_pass() -> None:
    # 100k spaces between a near match and nothing: a nested quantifier would backtrack
    # exponentially here; the answer is not there, and the search says so.
    text = "x" + " " * 100_000 + "="
    assert first_occurrence(text, "x = y") is None
    assert first_occurrence("1 " * 50_000, "3") is None


def test_first_occurrence_ignores_longer_numbers_and_other_values() -> None:
    assert first_occurrence("4080 and 40.8 and 1408", "408") is None
    assert first_occurrence("408.5 then 408.", "408") == len("408.5 then ")
    assert first_occurrence("no answer", "") is None
    assert number_value("$\\boxed{12}$") == 12 and number_value("x=3") is None


def test_gate_start_is_the_first_of_final_reference_and_block() -> None:
    text = "17 × 24 = 408.\nCheck: 408.\nThe final answer is 418."
    # The wrong final answer 418 is written last; the reference 408 first.
    assert gate_start(text, "418", "408") == (text.index("408"), "first_reference")
    text = "Adding them gives 408.\nThe final answer is 408."
    assert gate_start(text, "408", "408") == (text.index("408"), "first_final")
    text = "The final answer is $\\boxed{408}$"
    assert gate_start(text, "408", "408") == (0, "final_answer")


def _record(rid: str, problem: str, correct: bool, value: float, gate_cut: int) -> dict[str, Any]:
    return {
        "id": rid,
        "group_id": problem,
        "correct": correct,
        "finished": True,
        "cuts": [0, 5, 9],
        "answer_cut": 9,
        "gate_cut": gate_cut,
        "values": {"reference": [value - 1.0, value, 0.0]},
        "spans": [],
    }


def test_traces_that_state_the_answer_before_any_token_are_left_out() -> None:
    rng = np.random.default_rng(0)
    records = []
    for p in range(40):
        for j in range(2):
            correct = j == 0
            value = float(rng.normal(0.0 if correct else -3.0, 0.3))
            records.append(_record(f"p{p}-{j}", f"p{p}", correct, value, 5))
    # Traces that open with their answer: at cut 0 their probe value would say the
    # opposite of their verdict; the gate must not read them.
    early = [
        _record(f"early-{k}", f"e{k}", k % 2 == 0, -3.0 if k % 2 == 0 else 0.0, 0)
        for k in range(30)
    ]
    checked = gate(records + early, 0.9, AuditSettings(bootstrap=300))
    assert checked["n"] == 80 and checked["n_excluded"] == 30
    # Cut 5 of an answer block at 9 is not far before it; cut 2 of 9 would be.
    assert checked["n_cut_far_before_answer"] == 0
    far = [{**r, "gate_cut": 2} for r in records[:3]]
    assert gate(far + records[3:], 0.9, AuditSettings(bootstrap=50))["n_cut_far_before_answer"] == 3
    assert checked["cut"] == "before_first_answer"
    assert checked["auroc"] == pytest.approx(1.0) and checked["passed"] is True
    assert checked["ci"][0] >= 0.9
    # Read at cut 0 as well, the same traces would sink the gate.
    as_read = [
        {
            **r,
            "gate_cut": 5,
            "cuts": [0, 5, 9],
            "values": {"reference": [0, r["values"]["reference"][0], 0]},
        }
        for r in early
    ]
    assert gate(records + as_read, 0.9, AuditSettings(bootstrap=300))["passed"] is False


def test_the_gate_passes_on_the_lower_bound_not_the_point_estimate() -> None:
    rng = np.random.default_rng(4)
    # Few problems, good but imperfect separation: the AUROC clears 0.9, its CI does not.
    records = []
    for p in range(6):
        for j in range(4):
            correct = j < 2
            value = float(rng.normal(0.0 if correct else -1.2, 0.5))
            records.append(_record(f"p{p}-{j}", f"p{p}", correct, value, 5))
    checked = gate(records, 0.9, AuditSettings(bootstrap=500))
    assert checked["auroc"] >= 0.9
    assert checked["ci"][0] < 0.9 and checked["passed"] is False
    assert "lower bound" in checked["reason"] and "n = 24" in checked["reason"]


def test_holm() -> None:
    assert holm([0.01, 0.04, None, 0.03, 0.5]) == pytest.approx([0.04, 0.09, None, 0.09, 0.5])
    assert holm([0.6, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1, never below a smaller p


def test_every_printed_effect_gets_a_holm_adjusted_p_value() -> None:
    rng = np.random.default_rng(2)
    records = []
    for k in range(24):
        spans = []
        for s in range(4):
            score = float(rng.choice([-1.0, 0.5, 1.0]))
            progress = 0.5 * score + float(rng.normal(0, 0.2))
            spans.append(
                {
                    "start": 10 * s, "end": 10 * s + 10, "label": "x", "score": score,
                    "position": (10 * s + 5) / 40, "length": 10, "progress": progress,
                    "progress_rel": progress, "progress_alt": progress,
                    "progress_rel_alt": progress, "overlaps_final": s == 3,
                    "mentions_answer": False,
                }
            )  # fmt: skip
        records.append({**_record(f"t{k}", f"g{k // 4}", k % 2 == 0, 0.0, 5), "spans": spans})
    summary = run_audit(records, AuditSettings(permutations=199, bootstrap=200))
    printed = [
        *summary["effects"].values(),
        *summary["effects_clean"].values(),
        *summary["exclusions"].values(),
        *summary["splits"].values(),
    ]
    ps = [e["p_value"] for e in printed if e["p_value"] is not None]
    assert len(ps) >= 10
    for item in printed:
        if item["p_value"] is not None:
            assert item["p_holm"] >= item["p_value"]
    smallest = min(printed, key=lambda e: e["p_value"] if e["p_value"] is not None else 2)
    assert smallest["p_holm"] == pytest.approx(min(1.0, len(ps) * smallest["p_value"]), abs=1e-6)
