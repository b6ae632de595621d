"""CSCR as its paper: the privileged shift of each token against the plain prompt, on a
tiny random Llama (its own tokenizer is the policy's), checked against naive full passes;
the condition option, a rollout without a reward, the diagnostics, and the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from judge_service import credit as credit_mod  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.methods.models import MODELS  # noqa: E402
from judge_service.methods.rescoring import naive_response_logprobs  # noqa: E402
from judge_service.methods.reweight import (  # noqa: E402
    CSCR_CORRECT,
    CSCR_INCORRECT,
    compute_signal,
    parse_spec,
)
from judge_service.methods.weights import bounded_weights  # noqa: E402
from judge_service.pipeline import Engine  # noqa: E402
from judge_service.schemas import Options, Result, ReweightOptions, Rollout  # noqa: E402
from judge_service.store import open_store  # noqa: E402
from tests.test_credit_methods import TEXT  # noqa: E402
from tests.test_probe_support import tiny_model_dir  # noqa: E402

PROBLEM = "What is 17 × 24?"


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="module")
def settings(model_dir: Path) -> Settings:
    return Settings(default_tokenizer=str(model_dir), allowed_scorer_models=[str(model_dir)])


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Engine:
    return Engine(settings, store=open_store(settings))


@pytest.fixture(scope="module")
def rows(model_dir: Path, settings: Settings) -> dict[str, np.ndarray]:
    """log p of each response token under the plain / correct / incorrect prompt, by one
    full pass each (the policy tokenizer is the model's: one model token per policy token)."""
    model = MODELS.get(str(model_dir), settings)
    response = model.scorer.hf_tokenizer.encode(TEXT, add_special_tokens=False)
    texts = [PROBLEM, f"{PROBLEM}\n\n{CSCR_CORRECT}", f"{PROBLEM}\n\n{CSCR_INCORRECT}"]
    prompts = [model.aligner.prompt_ids(t) for t in texts]
    plain, correct, incorrect = naive_response_logprobs(model.scorer, prompts, response)
    return {"plain": plain, "correct": correct, "incorrect": incorrect, "ids": np.asarray(response)}


def _rollout(rows: dict[str, np.ndarray], **extra: Any) -> Rollout:
    fields: dict[str, Any] = {
        "id": "r1",
        "problem": PROBLEM,
        "response_token_ids": rows["ids"].tolist(),
        "reference_answer": "408",
        "reward": 1.0,
        **extra,
    }
    return Rollout.model_validate(fields)


def _signal(
    engine: Engine, settings: Settings, model_dir: Path, rollout: Rollout, **options: Any
) -> np.ndarray:
    spec = parse_spec(f"cscr:{model_dir}", ReweightOptions(**options), settings)
    model = MODELS.get(str(model_dir), settings)
    trace = engine.decode(rollout)
    policy = engine.tokenizers.get(str(model_dir))
    return compute_signal(model, spec, rollout, trace, policy, settings, "rollout")


def _judge(engine: Engine, rollout: Rollout, options: dict[str, Any]) -> Result:
    advantage = credit_mod.advantage_in_group(rollout.reward, [1.0, 0.0], reward_field="reward")
    return asyncio.run(engine.judge_one(rollout, Options.model_validate(options), advantage))


def test_the_signal_is_the_shift_of_the_verdicts_assertion_against_the_plain_prompt(
    engine: Engine, settings: Settings, model_dir: Path, rows: dict[str, np.ndarray]
) -> None:
    shift_c = rows["correct"] - rows["plain"]
    shift_i = rows["incorrect"] - rows["plain"]
    right = _signal(engine, settings, model_dir, _rollout(rows, reward=1.0))
    np.testing.assert_allclose(right, -np.abs(shift_c), atol=1e-4, rtol=0)
    wrong = _signal(engine, settings, model_dir, _rollout(rows, reward=0.0))
    np.testing.assert_allclose(wrong, -np.abs(shift_i), atol=1e-4, rtol=0)
    # Not the old contrast of the two privileged rows, in which their shared shift cancels.
    old = -np.abs(rows["correct"] - rows["incorrect"])
    assert np.abs(right - old).max() > 1e-2
    mean = _signal(engine, settings, model_dir, _rollout(rows), condition="mean")
    np.testing.assert_allclose(mean, -(np.abs(shift_c) + np.abs(shift_i)) / 2, atol=1e-4, rtol=0)
    assert np.abs(mean - right).max() > 1e-3


def test_diagnostics_through_the_engine_are_the_rows_contrast(
    engine: Engine, model_dir: Path, rows: dict[str, np.ndarray]
) -> None:
    n = rows["ids"].shape[0]
    mask = [0 if 5 <= t < 12 else 1 for t in range(n)]
    rollout = _rollout(rows, id="diag", reward=0.0, response_mask=mask)
    result = _judge(engine, rollout, {"reweight": f"cscr:{model_dir}"})
    assert result.status == "ok", result.error
    found = result.reweight_diagnostics
    assert found is not None
    assert (found.condition, found.condition_used) == ("verdict", "incorrect")
    keep = np.asarray(mask) > 0
    c = (rows["correct"] - rows["plain"])[keep]
    i = (rows["incorrect"] - rows["plain"])[keep]
    assert found.mean_abs_shift_correct == pytest.approx(np.abs(c).mean(), abs=1e-4)
    assert found.mean_abs_shift_incorrect == pytest.approx(np.abs(i).mean(), abs=1e-4)
    assert found.mean_abs_difference == pytest.approx(np.abs(c - i).mean(), abs=1e-4)
    both = (np.abs(c) > 1e-3) & (np.abs(i) > 1e-3)
    assert found.compared_tokens == pytest.approx(both.sum(), abs=2)  # 1e-4 noise at 1e-3
    share = float((np.sign(c[both]) != np.sign(i[both])).mean())
    assert found.sign_reversal_share == pytest.approx(share, abs=0.05)
    # w is the bounded map of -|shift_incorrect| over the masked tokens.
    w = np.asarray(result.weights)
    signal = -np.abs(rows["incorrect"] - rows["plain"])
    expected = bounded_weights(
        signal, np.asarray(mask, float), temperature=1.0, min_weight=0.5, max_weight=2.0, strength=1
    )
    np.testing.assert_allclose(w, expected, atol=1e-3)
    cort = _judge(engine, _rollout(rows, rubric="Multiplies."), {"reweight": f"cort:{model_dir}"})
    assert cort.status == "ok" and cort.reweight_diagnostics is None


def test_a_rollout_without_a_reward_takes_the_mean_and_says_so(
    engine: Engine, settings: Settings, model_dir: Path, rows: dict[str, np.ndarray]
) -> None:
    rollout = _rollout(rows, id="unrewarded", reward=None)
    result = asyncio.run(
        engine.judge_one(rollout, Options.model_validate({"reweight": f"cscr:{model_dir}"}), None)
    )
    assert result.status == "ok", result.error
    assert result.reweight_diagnostics is not None
    assert result.reweight_diagnostics.condition == "verdict"
    assert result.reweight_diagnostics.condition_used == "mean"
    mean = _signal(engine, settings, model_dir, rollout, condition="mean")
    np.testing.assert_allclose(_signal(engine, settings, model_dir, rollout), mean, atol=1e-12)


def test_the_cache_holds_both_shifts(
    engine: Engine, settings: Settings, model_dir: Path, rows: dict[str, np.ndarray]
) -> None:
    """A second request with the other condition is answered from the cached shifts."""
    model = MODELS.get(str(model_dir), settings)
    rollout = _rollout(rows, id="cached", problem="What is 24 × 17, cached?", reward=1.0)
    model.scorer.forward_tokens = 0
    verdict = _judge(engine, rollout, {"reweight": f"cscr:{model_dir}"})
    assert model.scorer.forward_tokens > 0  # the first request rescored
    model.scorer.forward_tokens = 0
    options = {"reweight": f"cscr:{model_dir}", "reweight_options": {"condition": "mean"}}
    mean = _judge(engine, rollout, options)
    assert model.scorer.forward_tokens == 0
    assert mean.reweight_diagnostics is not None
    assert mean.reweight_diagnostics.condition_used == "mean"
    assert verdict.reweight_diagnostics is not None
    assert verdict.reweight_diagnostics.condition_used == "correct"
    # The diagnostics need both shifts, and the cached ones give the same numbers.
    assert mean.reweight_diagnostics.mean_abs_difference == pytest.approx(
        verdict.reweight_diagnostics.mean_abs_difference, abs=1e-12
    )
    assert np.abs(np.asarray(mean.weights) - np.asarray(verdict.weights)).max() > 1e-3
    signal = _signal(engine, settings, model_dir, rollout, condition="mean")
    knobs = {"temperature": 1.0, "min_weight": 0.5, "max_weight": 2.0, "strength": 1.0}
    np.testing.assert_allclose(mean.weights, bounded_weights(signal, None, **knobs), atol=1e-9)
