"""CoRT in its own setting: the criteria are in the prompt the policy samples from, through
the one template CoRT's rubric row uses; the bundled rubric file, its 0/1 criterion scores
and the POW3R group bodies made from the bundled samples."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_service.methods.pow3r import RubricWeightsRequest
from judge_service.probe.rubric_scores import (
    criteria_texts,
    group_bodies,
    load_rubrics,
    score,
)
from judge_service.probe.sampling import (
    INSTRUCTION,
    PROBLEMS,
    SampleSettings,
    criteria_free,
    rubric_prompt,
    sample_group,
)

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SAMPLED = ROOT / "examples" / "sampled"


@pytest.fixture(scope="module")
def rubrics() -> dict[str, Any]:
    return load_rubrics(SAMPLED / "rubrics.json")


def test_the_bundled_rubrics_fit_the_problems(rubrics: dict[str, Any]) -> None:
    assert set(rubrics) == {p.id for p in PROBLEMS}
    for problem in PROBLEMS:
        criteria = rubrics[problem.id]
        assert len(criteria) == 3 and all(c.weight > 0 for c in criteria)
        assert {c.check for c in criteria} == {"answer", "boxed", "regex"}
        answer = next(c for c in criteria if c.check == "answer")
        assert problem.answer in answer.text  # specific to the problem, not one generic rubric
    apples = {c.check: c for c in rubrics["apples"]}
    assert score(apples["regex"], "12 - 5 = 7, so \\boxed{7}", 1.0) == 1.0
    assert score(apples["regex"], "112 - 5 = 107", 0.0) == 0.0
    assert score(apples["boxed"], "so \\boxed{7}", 0.0) == 1.0
    assert score(apples["boxed"], "so 7", 1.0) == 0.0
    assert score(apples["answer"], "7", 1.0) == 1.0 and score(apples["answer"], "7", None) == 0.0


def test_a_bad_rubric_file_names_the_criterion(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"x": {"criteria": [{"name": "a", "weight": 1, "text": "t"}]}}))
    with pytest.raises(ValueError, match=r"x\[0\]"):
        load_rubrics(path)
    bad = {"name": "a", "weight": 1, "text": "t", "check": "regex", "pattern": "("}
    path.write_text(json.dumps({"x": {"criteria": [bad]}}))
    with pytest.raises(re.error):
        load_rubrics(path)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from tests.test_probe_support import tiny_model_dir

    return tiny_model_dir()


def test_the_sampled_prompt_is_cort_s_rubric_row(model_dir: Path, rubrics: dict[str, Any]) -> None:
    from judge_service.config import Settings
    from judge_service.methods.models import MODELS
    from judge_service.methods.reweight import parse_spec, prompts
    from judge_service.probe.sampling import prompt_ids
    from judge_service.schemas import Rollout

    settings = Settings(allowed_scorer_models=[str(model_dir)])
    model = MODELS.get(str(model_dir), settings)
    hf = model.scorer.hf_tokenizer
    spec = parse_spec(f"cort:{model_dir}", None, settings)
    texts = criteria_texts(rubrics)
    problem = PROBLEMS[6]
    question = problem.question + INSTRUCTION
    sampled = rubric_prompt(question, texts[problem.id])  # what the policy saw
    rollout = Rollout(id="a", problem=sampled, rubric=texts[problem.id], response_token_ids=[1])
    with_rubric, plain = (model.aligner.prompt_ids(t) for t in prompts(spec, rollout))
    assert with_rubric == prompt_ids(hf, sampled)
    assert plain == prompt_ids(hf, question) == prompt_ids(hf, rubric_prompt(question, None))
    assert with_rubric != plain
    # CSCR's plain row is the prompt the policy saw too, criteria included.
    cscr = prompts(parse_spec(f"cscr:{model_dir}", None, settings), rollout)
    assert cscr[0] == sampled and all(p.startswith(sampled) for p in cscr)
    # A rubric attached after sampling (not in the problem) goes through the same template.
    late = Rollout(id="b", problem=question, rubric=texts[problem.id], response_token_ids=[1])
    assert prompts(spec, late) == [sampled, question]
    assert "Subtracts the 5 apples" in rubric_prompt(question, texts[problem.id])


def _sample(model: Path, out: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    from judge_service.cli.main import main

    argv = ["sample", "-o", str(out), "--model", str(model), "--problems", "2"]
    argv += ["--samples", "2", "--max-new-tokens", "6", "--seed", "3", "--device", "cpu"]
    code = main([*argv, *extra])
    if code != 0:
        return code, []
    return code, [json.loads(line) for line in out.read_text().splitlines()]


def test_sample_with_a_rubric_samples_from_the_rubric_prompt(
    model_dir: Path, tmp_path: Path, rubrics: dict[str, Any]
) -> None:
    from judge_service.probe.loading import load_scorer

    code, rollouts = _sample(
        model_dir, tmp_path / "r" / "rollouts.jsonl", "--rubric", str(SAMPLED / "rubrics.json")
    )
    assert code == 0
    texts = criteria_texts(rubrics)
    scorer = load_scorer(str(model_dir), device="cpu")
    settings = SampleSettings(samples=2, max_new_tokens=6, seed=3)
    for k, problem in enumerate(PROBLEMS[:2]):
        group = [r for r in rollouts if r["group_id"] == problem.id]
        question = problem.question + INSTRUCTION
        assert [r["problem"] for r in group] == [rubric_prompt(question, texts[problem.id])] * 2
        assert [r["rubric"] for r in group] == [texts[problem.id]] * 2
        assert all(r["metadata"]["rubric_in_prompt"] for r in group)
        assert criteria_free(group[0]["problem"], group[0]["rubric"]) == question
        # The rollout's problem, sampled again with the group's seed, gives the same
        # tokens: it is the prompt the policy saw.
        again = sample_group(
            scorer.model, scorer.hf_tokenizer, str(group[0]["problem"]), settings, 3 + k
        )
        assert [ids for ids, _ in again] == [r["response_token_ids"] for r in group]
    code, plain = _sample(model_dir, tmp_path / "p" / "rollouts.jsonl")
    assert code == 0 and all(r["rubric"] is None for r in plain)
    assert [r["response_token_ids"] for r in plain] != [r["response_token_ids"] for r in rollouts]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({PROBLEMS[0].id: {"criteria": [rubrics_raw()[0]]}}))
    code, _ = _sample(model_dir, tmp_path / "x" / "rollouts.jsonl", "--rubric", str(partial))
    assert code == 2  # the second problem has no criteria


def rubrics_raw() -> list[dict[str, Any]]:
    raw = json.loads((SAMPLED / "rubrics.json").read_text(encoding="utf-8"))
    return list(raw[PROBLEMS[0].id]["criteria"])


@pytest.fixture(scope="module")
def bundled() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLED / "rollouts.jsonl").read_text().splitlines()]


def test_the_bundled_samples_had_their_rubric_in_the_prompt(
    bundled: list[dict[str, Any]], rubrics: dict[str, Any]
) -> None:
    texts = criteria_texts(rubrics)
    questions = {p.id: p.question + INSTRUCTION for p in PROBLEMS}
    assert len(bundled) == 64
    for r in bundled:
        assert r["problem"] == rubric_prompt(questions[r["group_id"]], texts[r["group_id"]])
        assert r["rubric"] == texts[r["group_id"]]
        assert r["metadata"]["rubric_in_prompt"] is True


def _texts(rollouts: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    from judge_service.trace.tokenizer import TokenizerCache

    cache = TokenizerCache()
    for r in rollouts:
        yield (
            str(r["id"]),
            cache.get(str(SAMPLED / "tokenizer")).decode(r["response_token_ids"]).text,
        )


def test_the_pow3r_groups_file_is_the_bundled_samples_scored(
    bundled: list[dict[str, Any]], rubrics: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from judge_service.cli.main import main

    lines = (SAMPLED / "pow3r_groups.jsonl").read_text(encoding="utf-8").splitlines()
    bodies = [RubricWeightsRequest.model_validate_json(line) for line in lines]
    assert len(bodies) == len(PROBLEMS)
    assert sorted(i for b in bodies for i in b.rollout_ids or []) == sorted(
        r["id"] for r in bundled
    )
    texts = dict(_texts(bundled))
    again = group_bodies(bundled, rubrics, lambda r: texts[str(r["id"])])
    assert [json.loads(line) for line in lines] == again
    group_of = {r["id"]: r["group_id"] for r in bundled}
    for body in bodies:
        group = rubrics[group_of[(body.rollout_ids or [""])[0]]]
        assert [c.name for c in body.criteria] == [c.name for c in group]
    assert main(["rubric-weights", str(SAMPLED / "pow3r_groups.jsonl")]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == len(PROBLEMS) and all(len(o["rewards"]) == 4 for o in out)
