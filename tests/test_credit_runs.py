"""The devtool that turns CSCR / CoRT weights and span judges' results into spans for
``audit --compare``: line segments, A·(mean w − 1), and score-0 fill of unjudged lines."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from judge_service.devtools.credit_runs import advantages, fill_gaps, weight_spans
from judge_service.trace.tokenizer import LoadedTokenizer

TEXT = "17 × 20 = 340.\n17 × 4 = 68.\nSo 340 + 68 = 408.\nThe answer is 408."


def _trace(bpe: LoadedTokenizer):  # type: ignore[no-untyped-def]
    return bpe.decode(bpe.hf(TEXT, add_special_tokens=False)["input_ids"])


def test_weight_spans_tile_the_trace_with_the_extra_credit(bpe: LoadedTokenizer) -> None:
    trace = _trace(bpe)
    n = trace.num_tokens
    weights = np.linspace(0.5, 1.5, n)
    spans = weight_spans(trace, weights, -0.5, 64)
    assert spans[0]["start"] == 0 and spans[-1]["end"] == n and len(spans) >= 4
    assert all(a["end"] == b["start"] for a, b in itertools.pairwise(spans))
    for span in spans:
        mean = float(weights[span["start"] : span["end"]].mean())
        assert span["score"] == pytest.approx(-0.5 * (mean - 1.0), abs=1e-7)
    # Rising weights under a negative advantage: early lines get the least blame.
    assert spans[0]["score"] > 0 > spans[-1]["score"]
    assert all(s["score"] == 0 for s in weight_spans(trace, weights, 0.0, 64))


def test_fill_gaps_adds_unjudged_lines_only(bpe: LoadedTokenizer) -> None:
    trace = _trace(bpe)
    judged = [{"start": 1, "end": 3, "label": "invalid", "score": -1.0}]
    filled = fill_gaps(trace, judged, 64)
    assert filled[0] == judged[0]  # the first line is touched by the judge's span
    rest = filled[1:]
    assert rest and all(s["score"] == 0.0 and s["label"] == "unjudged" for s in rest)
    assert rest[-1]["end"] == trace.num_tokens
    assert all(s["start"] >= 3 for s in rest)


def test_advantages_are_reward_minus_the_group_mean() -> None:
    rows = [
        {"id": "a", "group_id": "g", "reward": 1.0},
        {"id": "b", "group_id": "g", "reward": 0.0},
        {"id": "c", "group_id": "g", "reward": 0.0},
        {"id": "d", "group_id": None, "reward": 1.0},
    ]
    assert advantages(rows) == pytest.approx({"a": 2 / 3, "b": -1 / 3, "c": -1 / 3, "d": 0.0})


def test_the_cscr_lines_carry_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from judge_service.devtools.credit_runs import main
    from tests.test_probe_support import tiny_model_dir

    model = tiny_model_dir()
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model)).encode(TEXT, add_special_tokens=False)
    rows = [
        {"id": "a", "group_id": "g", "problem": "Q?", "reward": 1.0, "rubric": "1. Adds."},
        {"id": "b", "group_id": "g", "problem": "Q?", "reward": 0.0},
    ]
    path = tmp_path / "rollouts.jsonl"
    lines = [json.dumps({**r, "response_token_ids": ids, "tokenizer": str(model)}) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main([str(path), "--model", str(model), "-o", str(tmp_path / "out")]) == 0
    cscr = [json.loads(x) for x in (tmp_path / "out" / "cscr.jsonl").read_text().splitlines()]
    used = [line["diagnostics"]["condition_used"] for line in cscr]
    assert used == ["correct", "incorrect"]
    compared = sum(line["diagnostics"]["compared_tokens"] for line in cscr)
    reversals = sum(
        line["diagnostics"]["sign_reversal_share"] * line["diagnostics"]["compared_tokens"]
        for line in cscr
    )
    err = capsys.readouterr().err
    assert f"sign reversals of the correct / incorrect shifts: {reversals / compared:.3f}" in err
    cort = (tmp_path / "out" / "cort.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in cort] == ["a"]  # b has no rubric to condition on
