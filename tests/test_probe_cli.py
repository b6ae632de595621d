"""`judge-service probe` and `lockin` end to end on a tiny model saved as a model directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from judge_service.cli.main import main  # noqa: E402
from judge_service.probe.endings import ENDING_FAMILIES, encode_suffix  # noqa: E402
from judge_service.probe.progress import normalize_answer, wrong_answer  # noqa: E402
from judge_service.probe.scorer import LMScorer  # noqa: E402
from judge_service.trace.tokenizer import TokenizerCache  # noqa: E402
from tests.test_probe_support import tiny_model_dir  # noqa: E402

TRACES = [
    ("ok", 1.0, "I need 17 × 24.\n17 × 20 = 340.\n17 × 4 = 68.\nSo 340 + 68 = 408.\n\\boxed{408}"),
    ("bad", 0.0, "I need 17 × 24.\n17 × 20 = 350.\n17 × 4 = 68.\nSo 350 + 68 = 418.\n\\boxed{418}"),
    ("fixed", 1.0, "17 × 24 = 418.\nWait, 17 × 20 = 340, so 17 × 24 = 408.\n\\boxed{408}"),
]


def _write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    model = tiny_model_dir()
    tok = TokenizerCache().get(str(model))
    folder = tmp_path_factory.mktemp("probe-cli")
    rollouts, results = [], []
    for rid, reward, text in TRACES:
        ids = tok.hf(text, add_special_tokens=False)["input_ids"]
        rollouts.append(
            {
                "id": rid,
                "group_id": "mul",
                "problem": "What is 17 × 24?",
                "response_token_ids": ids,
                "tokenizer": str(model),
                "reward": reward,
                "reference_answer": "408",
            }
        )
        third = len(ids) // 3
        results.append(
            {
                "id": rid,
                "status": "ok",
                "num_tokens": len(ids),
                "spans": [
                    {
                        "start": 0,
                        "end": third,
                        "label": "valid_progress",
                        "score": 0.5,
                        "confidence": 0.9,
                    },
                    {
                        "start": third,
                        "end": len(ids),
                        "label": "invalid",
                        "score": -1.0,
                        "confidence": 0.9,
                    },
                ],
            }
        )
    rollouts.append({**rollouts[0], "id": "no-ref", "reference_answer": None})
    results.append({"id": "no-ref", "status": "ok", "spans": []})
    rollouts.append({**rollouts[0], "id": "judge-failed"})
    results.append({"id": "judge-failed", "status": "failed", "spans": []})
    return {
        "model": model,
        "tok": tok,
        "rollouts": _write(folder / "rollouts.jsonl", rollouts),
        "results": _write(folder / "results.jsonl", results),
        "folder": folder,
        "raw": rollouts,
    }


def test_probe_command(files: dict[str, Any]) -> None:
    out = files["folder"] / "probe.jsonl"
    code = main(
        [
            "probe",
            str(files["rollouts"]),
            str(files["results"]),
            "--model",
            str(files["model"]),
            "-o",
            str(out),
            "--no-progress",
            "--chunk-size",
            "5",
        ]
    )
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [
        "ok",
        "bad",
        "fixed",
    ]  # no reference, judge failed: skipped
    ok, bad, _ = records
    assert ok["ending_family"] == "think" and not ok["mapped_tokenizer"]
    assert bad["answers"]["wrong"] == "418" and bad["answers"]["wrong_source"] == "final_answer"
    # A correct trace's wrong answer is the one its group wrote, never a made-up near miss.
    assert ok["answers"]["wrong_source"] == "group" and ok["answers"]["wrong"] == "418"
    assert ok["correct"] is True and bad["correct"] is False and ok["finished"] is True
    for record in records:
        cuts = record["cuts"]
        spans = record["spans"]
        assert cuts[0] == 0 and cuts[-1] == record["num_tokens"]
        assert {s["start"] for s in spans} | {s["end"] for s in spans} <= set(cuts)
        values = record["values"]
        assert set(values) == {"reference", "wrong", "reference_alt", "wrong_alt"}
        for span in spans:
            a, b = cuts.index(span["start"]), cuts.index(span["end"])
            ref = values["reference"][b] - values["reference"][a]
            wrong = values["wrong"][b] - values["wrong"][a]
            assert span["progress"] == pytest.approx(ref, abs=1e-5)
            assert span["progress_rel"] == pytest.approx(ref - wrong, abs=1e-5)
            assert 0 < span["position"] < 1


def test_probe_values_match_a_naive_pass_over_prompt_and_trace(files: dict[str, Any]) -> None:
    from transformers import AutoModelForCausalLM

    out = files["folder"] / "probe.jsonl"
    if not out.exists():
        test_probe_command(files)
    record = json.loads(out.read_text().splitlines()[1])
    tok = files["tok"]
    scorer = LMScorer(AutoModelForCausalLM.from_pretrained(str(files["model"])), tok.hf)
    rollout = files["raw"][1]
    prompt = tok.hf("What is 17 × 24?\n\n")["input_ids"]
    context = prompt + rollout["response_token_ids"]
    cut = record["cuts"][1]
    suffix = encode_suffix(tok, ENDING_FAMILIES["think"].default, "408")
    naive = scorer.score_naive(context, [len(prompt) + cut], [suffix])
    assert record["values"]["reference"][1] == pytest.approx(naive.mean_logprob[0, 0], abs=1e-4)


def test_probe_maps_a_different_policy_tokenizer(files: dict[str, Any], bpe_dir: Path) -> None:
    other = TokenizerCache().get(str(bpe_dir))
    # The session tokenizer in conftest is trained like the model's; retrain to make it differ.
    from tests.harness.tokenizers import build_byte_level_bpe

    policy_dir = build_byte_level_bpe(files["folder"] / "policy", vocab_size=300)
    policy = TokenizerCache().get(str(policy_dir))
    assert policy.hf.get_vocab() != other.hf.get_vocab()
    text = TRACES[0][2]
    ids = policy.hf(text, add_special_tokens=False)["input_ids"]
    rollouts = _write(
        files["folder"] / "mapped.jsonl",
        [
            {
                "id": "m",
                "problem": "What is 17 × 24?",
                "response_token_ids": ids,
                "tokenizer": str(policy_dir),
                "reward": 1.0,
                "reference_answer": "408",
            }
        ],
    )
    results = _write(
        files["folder"] / "mapped-results.jsonl",
        [
            {
                "id": "m",
                "status": "ok",
                "spans": [
                    {"start": 3, "end": len(ids) - 2, "label": "valid_progress", "score": 0.5}
                ],
            }
        ],
    )
    out = files["folder"] / "mapped-probe.jsonl"
    assert (
        main(
            [
                "probe",
                str(rollouts),
                str(results),
                "--model",
                str(files["model"]),
                "-o",
                str(out),
                "--no-progress",
                "--no-second-wording",
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert record["mapped_tokenizer"] is True
    # Cuts stay in the policy's tokens: the span's, the ends, and the one before the answer.
    expected = {0, 3, len(ids) - 2, len(ids), record["answer_cut"], record["gate_cut"]}
    assert record["cuts"] == sorted(expected)
    assert 3 < record["answer_cut"] < len(ids)
    assert set(record["values"]) == {"reference"}  # no group, no wrong answer of its own


def test_lockin_command(files: dict[str, Any]) -> None:
    out = files["folder"] / "lockin.jsonl"
    code = main(
        [
            "lockin",
            str(files["rollouts"]),
            "--model",
            str(files["model"]),
            "-o",
            str(out),
            "--every",
            "8",
            "--no-progress",
        ]
    )
    assert code == 0
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    ok = records["ok"]
    assert ok["answer"] == "408" and ok["status"] == "ok"
    assert ok["cuts"][:3] == [0, 8, 16] and ok["cuts"][-1] == ok["num_tokens"]
    assert len(ok["probability"]) == len(ok["cuts"])
    assert all(0 <= p <= 1 for p in ok["probability"])
    # A random tiny model never reaches 0.9: nothing locks in.
    assert ok["locked_at"] is None and ok["tokens_after_lockin"] == 0
    # Lock-in is on the right answer (the reference) unless --answer final says otherwise.
    assert records["bad"]["answer"] == "408" and records["bad"]["answer_source"] == "reference"
    own = files["folder"] / "lockin-own.jsonl"
    args = ["lockin", str(files["rollouts"]), "--model", str(files["model"]), "-o", str(own)]
    assert main([*args, "--every", "8", "--no-progress", "--answer", "final"]) == 0
    by_id = {r["id"]: r for r in map(json.loads, own.read_text().splitlines())}
    assert by_id["bad"]["answer"] == "418" and by_id["bad"]["answer_source"] == "final"
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["n_traces"] == 5 and summary["n_locked"] == 0


def test_wrong_answer_choice() -> None:
    assert normalize_answer(" $408$. ") == "408"
    assert wrong_answer("408", "418", False) == ("418", "final_answer")
    assert wrong_answer("408", "418", False, "500") == ("418", "final_answer")
    assert wrong_answer("408", "408", True, "418") == ("418", "group")
    assert wrong_answer("408", "408", True) == (None, None)  # no reference + 10 any more
    assert wrong_answer("408", "408", True, "408") == (None, None)
    assert wrong_answer("1/2", None, None) == (None, None)
