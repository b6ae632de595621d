"""`judge-service sample`: samples from a (tiny) local LM, scored by the equivalence checker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge_service.probe.sampling import PROBLEMS, Problem, extract_answer, rollout_record

torch = pytest.importorskip("torch")


def test_extract_answer() -> None:
    assert extract_answer("so \\boxed{81} and 7") == "81"
    assert extract_answer("23 + 58 = 81. The answer is 81.") == "81"
    assert extract_answer("it is 1,000.") == "1000"
    assert extract_answer("no numbers") is None
    assert extract_answer("\\boxed{} then 5") == "5"  # an empty box is no answer


@pytest.fixture(scope="module")
def checker() -> Iterator[object]:
    from judge_service.equivalence import EquivalenceChecker

    with EquivalenceChecker(pool_size=1, timeout_s=10.0) as found:
        yield found


def test_rewards_come_from_the_equivalence_checker(checker: object) -> None:
    problem = Problem("half", "What is half of 1?", "0.5")

    def record(response: str, finish: str = "stop") -> dict[str, object]:
        return rollout_record(problem, "q", response, [1, 2], finish, checker, "x", "tok", {})

    right = record("Half of 1 is \\boxed{\\frac{1}{2}}.")
    assert right["reward"] == 1.0 and right["final_answer"] == "\\frac{1}{2}"
    wrong = record("It is 2.")
    assert wrong["reward"] == 0.0 and wrong["final_answer"] == "2"
    assert wrong["metadata"]["equivalence"] == "not_equivalent"  # type: ignore[index]
    cut_off = record("It is 0.5 and then", finish="length")  # no box: no final answer
    assert cut_off["final_answer"] is None and cut_off["reward"] == 0.0
    # No criteria were in the prompt, so the rollout claims none (CoRT refuses it).
    assert right["group_id"] == "half" and right["rubric"] is None
    graded = rollout_record(
        problem, "q", "1/2", [1], "stop", checker, "y", "tok", {}, rubric="1. x"
    )
    assert graded["problem"] == "q" and graded["rubric"] == "1. x"


def _sample(model: Path, out: Path, seed: int) -> list[dict[str, object]]:
    from judge_service.cli.main import main

    code = main(
        [
            "sample",
            "-o",
            str(out),
            "--model",
            str(model),
            "--problems",
            "2",
            "--samples",
            "3",
            "--max-new-tokens",
            "6",
            "--seed",
            str(seed),
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_sample_command_is_reproducible(tmp_path: Path) -> None:
    from judge_service.trace.tokenizer import TokenizerCache
    from tests.test_probe_support import tiny_model_dir

    model = tiny_model_dir()
    first = _sample(model, tmp_path / "a" / "rollouts.jsonl", seed=0)
    again = _sample(model, tmp_path / "b" / "rollouts.jsonl", seed=0)
    other = _sample(model, tmp_path / "c" / "rollouts.jsonl", seed=1)
    ids = [r["response_token_ids"] for r in first]
    assert [r["response_token_ids"] for r in again] == ids  # same seed, same tokens
    assert [r["response_token_ids"] for r in other] != ids
    assert [r["group_id"] for r in first] == [PROBLEMS[0].id] * 3 + [PROBLEMS[1].id] * 3
    assert len({tuple(i) for i in ids[:3]}) > 1  # G real samples, not one repeated
    tokenizer = TokenizerCache().get(str(first[0]["tokenizer"]))
    for r in first:
        assert (
            r["reward"] in (0.0, 1.0)
            and r["reference_answer"]
            == PROBLEMS[0 if r["group_id"] == PROBLEMS[0].id else 1].answer
        )
        assert 0 < len(r["response_token_ids"]) <= 6  # type: ignore[arg-type]
        assert tokenizer.decode(r["response_token_ids"]).num_tokens == len(
            r["response_token_ids"]  # type: ignore[arg-type]
        )
