"""Audit v2: the gate reads the probe before the final answer, answer spans are set apart,
and ``audit --compare`` puts credit sources side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service.probe.answer_cut import char_to_cut, final_answer_start, mentions
from judge_service.probe.audit import AuditSettings, gate, run_audit
from judge_service.probe.compare import compare_runs, credit_shares, lock_cut

BOXED = "17 × 20 = 340.\n17 × 4 = 68.\nSo 340 + 68 = 408.\nThe answer is $\\boxed{408}$."
THINK = (
    "<think>\n17 × 20 = 340, 17 × 4 = 68, total 408.\n</think>\n\n"
    "The final answer is $\\boxed{408}$."
)
PLAIN = "17 × 20 = 340.\n17 × 4 = 68.\nAdding them gives 408.\nThe final answer is 408."
BOLD = "17 × 24 = 408.\n**Final Answer**\n408"
BARE = "17 × 24 is 340 + 68, which is 408. Not 4080."


@pytest.mark.parametrize(
    ("text", "expected", "rule"),
    [
        (BOXED, BOXED.index(" $\\boxed{408}"), "boxed"),
        (THINK, THINK.index("</think>"), "think"),
        (PLAIN, PLAIN.index("The final answer"), "final_answer"),
        (BOLD, BOLD.index("**Final Answer**"), "final_answer"),
        (BARE, BARE.index("408."), "answer_string"),
    ],
)
def test_final_answer_start(text: str, expected: int, rule: str) -> None:
    found = final_answer_start(text, "408")
    assert found == (expected, rule)
    assert "408" in text[expected:]  # the answer block holds the answer


def test_final_answer_start_prefers_the_last_think_and_needs_some_marker() -> None:
    text = "</think> early\nmore\n</think>\nfinal answer: \\boxed{3}"
    assert final_answer_start(text, "3") == (text.rindex("</think>"), "think")
    assert final_answer_start("no answer here", None) is None
    # A phrase after other words on its line is cut at the phrase, not the line start.
    text = "So 2 + 1 = 3, and my final answer is 3"
    assert final_answer_start(text, "3") == (text.index("final answer"), "final_answer")


def test_char_to_cut_and_mentions() -> None:
    offsets = [0, 3, 3, 7, 12]
    assert char_to_cut(offsets, 0) == 0
    assert char_to_cut(offsets, 5) == 2
    assert char_to_cut(offsets, 7) == 3
    assert char_to_cut(offsets, 99) == 4
    assert mentions("so 340 + 68 = 408", ["408", None])
    assert not mentions("so 4080 is wrong", ["408"])
    assert not mentions("x = 1.408", ["408"])


# The token-level rule on a real tokenizer and the probe's own records.
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def probed() -> dict[str, Any]:
    from judge_service.probe.alignment import Aligner
    from judge_service.probe.endings import ENDING_FAMILIES
    from judge_service.probe.loading import load_scorer
    from judge_service.probe.progress import ProbeSettings, group_wrong_answers, probe_rollout
    from tests.test_probe_support import tiny_model_dir

    model = str(tiny_model_dir())
    scorer = load_scorer(model, device="cpu")
    aligner = Aligner(scorer.hf_tokenizer, model)
    settings = ProbeSettings(ENDING_FAMILIES["plain"], second_wording=False, chunk_size=7)
    rollouts = []
    for rid, text, reward in (
        ("boxed", BOXED, 1.0),
        ("think", THINK, 1.0),
        ("plain", PLAIN, 1.0),
        ("wrong", PLAIN.replace("408", "418"), 0.0),
    ):
        ids = scorer.hf_tokenizer(text, add_special_tokens=False)["input_ids"]
        rollouts.append(
            {
                "id": rid,
                "group_id": "g",
                "problem": "What is 17 × 24?",
                "response_token_ids": ids,
                "tokenizer": model,
                "reward": reward,
                "final_answer": "418" if rid == "wrong" else "408",
                "reference_answer": "408",
            }
        )
    wrong = group_wrong_answers(rollouts, aligner)
    records = {}
    for rollout in rollouts:
        n = len(rollout["response_token_ids"])
        result = {"spans": [{"start": 0, "end": n // 2, "score": 1.0, "label": "valid_progress"}]}
        result["spans"].append({"start": n // 2, "end": n, "score": -1.0, "label": "invalid"})
        records[rollout["id"]] = probe_rollout(
            scorer, aligner, rollout, result, settings, wrong.get("g")
        )
    return {"records": records, "aligner": aligner, "rollouts": rollouts, "wrong": wrong}


@pytest.mark.parametrize(
    ("rid", "marker"),
    [("boxed", " $\\boxed{"), ("think", "</think>"), ("plain", "The final answer")],
)
def test_probe_records_the_cut_before_the_final_answer(
    probed: dict[str, Any], rid: str, marker: str
) -> None:
    record = probed["records"][rid]
    rollout = next(r for r in probed["rollouts"] if r["id"] == rid)
    trace = (
        probed["aligner"]
        .policy_tokenizer(rollout["tokenizer"])
        .decode(rollout["response_token_ids"])
    )
    char = trace.text.rindex(marker)
    cut = record["answer_cut"]
    assert cut in record["cuts"]
    # The prefix ends at or before the marker, and the next token reaches into it.
    assert trace.offsets[cut] <= char < trace.offsets[cut + 1]
    assert marker.strip() not in trace.text[: trace.offsets[cut]][-len(marker) :]
    spans = record["spans"]
    assert spans[-1]["overlaps_final"] is True and spans[0]["overlaps_final"] is False
    assert spans[-1]["mentions_answer"] is True  # the answer block names 408


def test_wrong_answers_come_from_the_group(probed: dict[str, Any]) -> None:
    assert probed["wrong"] == {"g": "418"}
    assert probed["records"]["boxed"]["answers"]["wrong_source"] == "group"
    assert probed["records"]["wrong"]["answers"]["wrong_source"] == "final_answer"


def test_gate_uses_the_cut_before_the_answer(probed: dict[str, Any]) -> None:
    records = list(probed["records"].values())
    checked = gate(records, 0.9)
    assert checked["cut"] == "before_first_answer"
    values = []
    for r in records:
        assert r["gate_cut"] <= r["answer_cut"]
        values.append(r["values"]["reference"][r["cuts"].index(r["gate_cut"])])
    assert sorted(checked["final_values"]["correct"] + checked["final_values"]["wrong"]) == (
        pytest.approx(sorted(values), abs=1e-6)
    )


def _record(
    rid: str, correct: bool, before: float, end: float, spans: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": rid,
        "group_id": rid,
        "correct": correct,
        "finished": True,
        "model": "m",
        "answers": {"wrong_source": "group"},
        "answer_tokens": {"reference": 1},
        "cuts": [0, 50, 60],
        "answer_cut": 50,
        "values": {"reference": [-3.0, before, end]},
        "spans": spans,
    }


def _spans(
    rng: np.random.Generator, answer_slope: float, body_slope: float
) -> list[dict[str, Any]]:
    """Five body spans in [0, 50) and one final-answer span [50, 60)."""
    out = []
    for k in range(6):
        final = k == 5
        score = float(rng.choice([-1.0, 0.0, 0.5, 1.0]))
        slope = answer_slope if final else body_slope
        progress = slope * score + float(rng.normal(0, 0.02))
        start, end = (50, 60) if final else (10 * k, 10 * k + 10)
        out.append(
            {
                "start": start,
                "end": end,
                "label": "x",
                "score": score,
                "position": (start + end) / 120,
                "length": end - start,
                "progress": progress,
                "progress_rel": progress,
                "progress_alt": progress,
                "progress_rel_alt": progress,
                "overlaps_final": final,
                "mentions_answer": final,
            }
        )
    return out


def test_end_of_trace_auroc_is_reported_but_not_gated_on() -> None:
    rng = np.random.default_rng(0)
    # Copying: perfect separation at the end, none before the answer.
    records = [
        _record(f"r{k}", k % 2 == 0, float(rng.normal(-2, 0.5)), -0.1 if k % 2 == 0 else -4.0, [])
        for k in range(20)
    ]
    checked = gate(records, 0.9)
    assert checked["auroc_end"] == 1.0
    assert checked["auroc"] < 0.9 and checked["passed"] is False
    assert "before the answer block only" in checked["reason"]  # records without gate_cut


def test_effects_without_answer_spans_drop_the_copying_step() -> None:
    rng = np.random.default_rng(1)
    records = [
        _record(f"r{k}", k % 2 == 0, -0.5 if k % 2 == 0 else -3.0, -0.1, _spans(rng, 3.0, 0.0))
        for k in range(40)
    ]
    summary = run_audit(records, AuditSettings(permutations=199, bootstrap=100))
    assert summary["effects"]["reference"]["slope"] > 0.2  # driven by the answer span
    clean = summary["effects_clean"]["reference"]
    assert clean["n_spans"] == 200
    assert abs(clean["slope"]) < 0.05 and clean["ci"][0] < 0 < clean["ci"][1]
    assert summary["exclusions"]["without_final_answer_spans"]["n_spans"] == 200


def test_credit_shares_and_lock_in() -> None:
    spans = [
        {"start": 0, "end": 10, "score": 1.0},
        {"start": 10, "end": 20, "score": -0.5, "overlaps_final": True},
    ]
    record = {
        "id": "a",
        "correct": True,
        "answers": {},
        "answer_tokens": {"reference": 2},
        "cuts": [0, 5, 10, 20],
        "values": {"reference": [-3.0, -0.01, -0.02, -0.01]},  # p = e^(2·v) >= 0.9 from cut 5
        "spans": spans,
    }
    assert lock_cut(record, 0.9) == 5
    # The default is the right answer (the reference), whatever the verdict; the trace's own
    # answer is an option, and a trace without a verdict has none.
    assert lock_cut({**record, "correct": None}, 0.9) == 5
    assert lock_cut({**record, "correct": None}, 0.9, "final") is None
    wrong = {
        **record,
        "correct": False,
        "answers": {"wrong_source": "final_answer"},
        "answer_tokens": {"reference": 2, "wrong": 2},
        "values": {"reference": [-3.0, -2.0, -2.0, -2.0], "wrong": [-3.0, -0.01, -0.01, -0.01]},
    }
    assert lock_cut(wrong, 0.9) is None  # never near the right answer
    assert lock_cut(wrong, 0.9, "final") == 5  # locked in on its own wrong answer
    shares = credit_shares([record], 0.9)
    # |credit| mass: 10 + 5 = 15; after cut 5: 5·1 + 10·0.5 = 10; on the final span: 5.
    assert shares["share_after_lockin"] == pytest.approx(10 / 15)
    assert shares["share_on_final_answer"] == pytest.approx(5 / 15)
    assert shares["credit_per_token_final"] == pytest.approx(-0.5)
    assert shares["credit_per_token_rest"] == pytest.approx(1.0)


def test_audit_compare_cli(tmp_path: Path) -> None:
    from judge_service.cli.main import main

    rng = np.random.default_rng(2)
    paths = []
    for name, slope in (("rules", 0.6), ("value", 0.0)):
        records = [
            _record(f"r{k}", k % 2 == 0, -0.5, -0.1, _spans(rng, slope, slope)) for k in range(30)
        ]
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(path)
    out = tmp_path / "compare.html"
    args = ["audit", "--compare", str(paths[0]), f"flat={paths[1]}", "-o", str(out)]
    code = main([*args, "--permutations", "199", "--bootstrap", "100"])
    assert code == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    assert list(summary["runs"]) == ["rules", "flat"]
    rules, flat = summary["runs"]["rules"], summary["runs"]["flat"]
    assert rules["slope"]["slope"] == pytest.approx(0.6, abs=0.05)
    assert rules["slope"]["p_value"] < 0.01 and rules["slope_clean"]["slope"] > 0.5
    assert flat["slope"]["ci"][0] < 0 < flat["slope"]["ci"][1]
    assert 0 < rules["share_on_final_answer"] < 1
    html = out.read_text()
    assert "rules" in html and "flat" in html and html.count("<svg") >= 2
    # Without a probe file or --compare, the audit says what it needs.
    assert main(["audit", "-o", str(out)]) == 2


def test_compare_runs_keeps_order_and_handles_empty_runs() -> None:
    summary = compare_runs({"b": [], "a": []}, AuditSettings(permutations=9, bootstrap=9))
    assert list(summary["runs"]) == ["b", "a"]
    assert summary["runs"]["b"]["slope"]["slope"] is None
