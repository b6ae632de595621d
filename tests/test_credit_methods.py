"""CSCR and CoRT reweighting and the value judge, through the Engine (the normal pipeline,
its cache and validation) on a tiny random Llama saved with a local BPE tokenizer: the
issue's invariants, the cached rescoring against a naive one, and the 4xx of bad input."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from judge_service import credit as credit_mod  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.errors import InputError, LimitError  # noqa: E402
from judge_service.methods.models import MODELS  # noqa: E402
from judge_service.methods.reweight import compute_signal, parse_spec  # noqa: E402
from judge_service.methods.weights import bounded_weights  # noqa: E402
from judge_service.pipeline import Engine  # noqa: E402
from judge_service.probe.endings import encode_suffix, resolve_family  # noqa: E402
from judge_service.schemas import Options, Result, Rollout  # noqa: E402
from judge_service.store import open_store  # noqa: E402
from tests.test_probe_support import tiny_model_dir  # noqa: E402

TEXT = (
    "<think>\nWe need 17 × 24.\n17 × 20 = 340.\n\n17 × 4 = 68.\n"
    "340 + 68 = 408.\nCheck: 24 × 17 is the same product.\n</think>\n"
    "The answer is \\boxed{408}."
)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="module")
def settings(model_dir: Path) -> Settings:
    return Settings(default_tokenizer=str(model_dir), allowed_scorer_models=[str(model_dir)])


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Engine:
    return Engine(settings, store=open_store(settings))


def _rollout(model_dir: Path, **extra: Any) -> Rollout:
    model = MODELS.get(str(model_dir), Settings(allowed_scorer_models=[str(model_dir)]))
    ids = model.scorer.hf_tokenizer.encode(TEXT, add_special_tokens=False)
    fields: dict[str, Any] = {
        "id": "r1",
        "problem": "What is 17 × 24?",
        "response_token_ids": ids,
        "reference_answer": "408",
        "reward": 1.0,
        **extra,
    }
    return Rollout.model_validate(fields)


def _judge(engine: Engine, rollout: Rollout, options: dict[str, Any], **kw: Any) -> Result:
    adv = credit_mod.advantage_in_group(rollout.reward, kw.get("group"), reward_field="reward")
    return asyncio.run(engine.judge_one(rollout, Options.model_validate(options), adv))


def _check_weights(w: np.ndarray, mask: np.ndarray, low: float, high: float) -> None:
    keep = mask > 0
    assert (w >= 0).all()
    np.testing.assert_array_equal(w[~keep], 0.0)
    assert w[keep].min() >= low - 1e-9 and w[keep].max() <= high + 1e-9
    assert w[keep].mean() == pytest.approx(1.0, abs=1e-9)
    for a in (0.75, -0.5):  # A_i·w keeps A_i's sign and its budget T_masked·|A_i|
        aw = a * w[keep]
        assert (np.sign(aw[aw != 0]) == np.sign(a)).all()
        assert np.abs(aw).sum() == pytest.approx(keep.sum() * abs(a), rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_the_weight_map_keeps_sign_budget_and_bounds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    signal = rng.normal(0, [0.01, 1, 30, 500][seed % 4], n)
    mask = (rng.random(n) > 0.3).astype(float)
    mask[0] = 1.0
    low, high = [(0.5, 2.0), (0.0, 4.0), (0.9, 1.1), (1.0, 1.0), (0.2, 50.0), (0.5, 2.0)][seed]
    knobs = {"temperature": 0.5 + seed, "min_weight": low, "max_weight": high}
    w = bounded_weights(signal, mask, strength=1.0, **knobs)
    _check_weights(w, mask, low, high)
    # Monotone in the signal (larger signal, no less weight) among the masked tokens.
    keep = mask > 0
    order = np.argsort(signal[keep], kind="stable")
    assert (np.diff(w[keep][order]) >= -1e-12).all()
    # A strength s moves the bounded map s of the way from 1.
    half = bounded_weights(signal, mask, strength=0.5, **knobs)
    np.testing.assert_allclose(half[keep], 1 + 0.5 * (w[keep] - 1), atol=1e-12)
    np.testing.assert_allclose(bounded_weights(np.zeros(n), mask, strength=1.0, **knobs), mask)


def test_cached_rescoring_equals_a_naive_recomputation(model_dir: Path) -> None:
    from judge_service.methods.rescoring import naive_response_logprobs, response_logprobs

    model = MODELS.get(str(model_dir), Settings(allowed_scorer_models=[str(model_dir)]))
    hf = model.scorer.hf_tokenizer
    prompts = [model.aligner.prompt_ids(p) for p in ("Q? It is correct.", "Q? It is wrong!!")]
    response = hf.encode(TEXT, add_special_tokens=False)
    naive = naive_response_logprobs(model.scorer, prompts, response)
    for chunk in (7, 256):
        model.scorer.forward_tokens = 0
        cached = response_logprobs(model.scorer, prompts, response, chunk_size=chunk)
        np.testing.assert_allclose(cached, naive, atol=1e-4, rtol=0)
    assert np.ptp(naive[0] - naive[1]) > 1e-3  # the prompts do change the numbers
    # The common prefix ran once: fewer tokens than two full passes.
    assert model.scorer.forward_tokens < 2 * (len(prompts[0]) + len(response))


@pytest.mark.parametrize("method", ["cscr", "cort"])
def test_reweight_through_the_engine(
    engine: Engine, settings: Settings, model_dir: Path, method: str
) -> None:
    n = len(_rollout(model_dir).response_token_ids)
    mask = [0 if 10 <= t < 16 else 1 for t in range(n)]  # a tool output in the middle
    rollout = _rollout(model_dir, response_mask=mask, rubric="Shows the partial products.")
    options = {"reweight": f"{method}:{model_dir}", "credit_encoding": "dense"}
    result = _judge(engine, rollout, options, group=[1.0, 0.0, 0.0, 0.0])
    assert result.status == "ok", result.error
    w = np.asarray(result.weights)
    credit = np.asarray(result.credit)
    advantage = np.asarray(result.advantage)
    m = np.asarray(mask, float)
    _check_weights(w, m, 0.5, 2.0)
    assert np.ptp(w[m > 0]) > 1e-3  # not flat: the two prompts disagree on some tokens
    np.testing.assert_allclose(advantage, (0.75 * w + credit) * m, atol=1e-12)
    # w is the bounded map of the method's signal: decreasing in CSCR's |Δ log p|,
    # increasing in CoRT's contrast.
    spec = parse_spec(options["reweight"], None, settings)
    model = MODELS.get(str(model_dir), settings)
    trace = engine.decode(rollout)
    signal = compute_signal(
        model, spec, rollout, trace, engine.tokenizers.get(str(model_dir)), settings, "rollout"
    )
    keep = m > 0
    order = np.argsort(signal[keep], kind="stable")
    assert (np.diff(w[keep][order]) >= -1e-9).all()
    # Knobs are applied per request on the cached signal: a sweep gives other weights.
    tight = _judge(
        engine,
        rollout,
        {**options, "reweight_options": {"min_weight": 0.9, "max_weight": 1.1}},
        group=[1.0, 0.0, 0.0, 0.0],
    )
    _check_weights(np.asarray(tight.weights), m, 0.9, 1.1)


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        ({"reweight": "cort:{model}"}, "rollout.rubric", ""),
        ({"reweight": "cscr:{other}"}, "options.reweight", "JUDGE_ALLOWED_SCORER_MODELS"),
        ({"reweight": "magic:{model}"}, "options.reweight", ""),
        ({"judge": "value:{other}"}, "options.judge", ""),
        ({"reweight_options": {"strength": 0.5}}, "options.reweight_options", ""),
    ],
)
def test_reweight_input_errors(
    engine: Engine,
    model_dir: Path,
    tmp_path: Path,
    options: dict[str, Any],
    field: str,
    says: str,
) -> None:
    filled = {
        k: v.format(model=model_dir, other=tmp_path) if isinstance(v, str) else v
        for k, v in options.items()
    }
    with pytest.raises(InputError) as caught:
        _judge(engine, _rollout(model_dir), filled)
    assert caught.value.field == field
    assert says in caught.value.message


def test_the_token_cap(model_dir: Path) -> None:
    settings = Settings(
        default_tokenizer=str(model_dir),
        allowed_scorer_models=[str(model_dir)],
        scorer_max_tokens=40,
    )
    engine = Engine(settings)
    rollout = _rollout(model_dir, reward=1.0)
    with pytest.raises(LimitError) as caught:
        _judge(engine, rollout, {"reweight": f"cscr:{model_dir}"})
    assert caught.value.field == "rollout.response_token_ids"
    with pytest.raises(LimitError) as caught:
        _judge(engine, rollout, {"judge": f"value:{model_dir}"})
    assert caught.value.field == "rollout.response_token_ids"


def _values_naive(model_dir: Path, rollout: Rollout, cuts: list[int]) -> list[float]:
    """V at policy boundaries by full passes (the same tokenizer: cut = prompt + t)."""
    model = MODELS.get(str(model_dir), Settings(allowed_scorer_models=[str(model_dir)]))
    prompt = model.aligner.prompt_ids(rollout.problem)
    family = resolve_family(model.scorer.hf_tokenizer, model.scorer.model_type)
    suffix = encode_suffix(model.aligner.probe, family.default, "408")
    context = [*prompt, *rollout.response_token_ids]
    naive = model.scorer.score_naive(context, [len(prompt) + c for c in cuts], [suffix])
    return [float(v) for v in naive.mean_logprob[:, 0]]


def test_value_judge_segments_telescope(engine: Engine, model_dir: Path) -> None:
    rollout = _rollout(model_dir)
    n = len(rollout.response_token_ids)
    options = {"judge": f"value:{model_dir}", "lambda": 0.5, "kappa": 10.0, "use_cache": False}
    result = _judge(engine, rollout, options, group=[1.0, 0.0])
    assert result.status == "ok", result.error
    assert result.judge is not None and result.judge.name == f"value:{model_dir}"
    assert result.rejected_spans == []  # every segment passed the normal validation
    spans = result.spans
    assert len(spans) >= 5
    for span in spans:
        assert span.label == ("valid_progress" if span.score > 0 else "invalid")
        assert span.confidence == 1.0
    # The spans tile the trace in order (a flat segment would be left out, none is here).
    assert spans[0].start == 0 and spans[-1].end == n
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))
    # Scores are V(end) - V(start); their sum (before λ) is V(T) - V(0).
    v0, vt = _values_naive(model_dir, rollout, [0, n])
    assert sum(s.score for s in spans) == pytest.approx(vt - v0, abs=1e-4)
    inner = _values_naive(model_dir, rollout, [spans[2].start, spans[2].end])
    assert spans[2].score == pytest.approx(inner[1] - inner[0], abs=1e-4)
    # λ applies as for any judge (κ does not bind here): credit[t] = λ·score of t's span.
    credit = np.asarray(result.credit)
    for span in spans:
        np.testing.assert_allclose(credit[span.start : span.end], 0.5 * span.score, atol=1e-12)
    assert result.credit_scale == 1.0
    capped = _judge(engine, rollout, {**options, "kappa": 1e-4}, group=[1.0, 0.0])
    assert np.abs(np.asarray(capped.credit)).mean() == pytest.approx(1e-4, rel=1e-6)


def test_value_judgment_is_cached_with_its_scores(engine: Engine, model_dir: Path) -> None:
    rollout = _rollout(model_dir, id="cached")
    options = {"judge": f"value:{model_dir}"}
    first = _judge(engine, rollout, options)
    second = _judge(engine, rollout, options)
    assert (first.cache, second.cache) == ("miss", "hit")
    assert [s.score for s in second.spans] == [s.score for s in first.spans]
    assert second.credit == first.credit


def test_value_judge_needs_a_reference(engine: Engine, model_dir: Path) -> None:
    rollout = _rollout(model_dir, reference_answer=None)
    with pytest.raises(InputError) as caught:
        _judge(engine, rollout, {"judge": f"value:{model_dir}"})
    assert caught.value.field == "rollout.reference_answer"


def test_a_policy_tokenizer_other_than_the_models(
    engine: Engine, model_dir: Path, metaspace_dir: Path, tokenizer_cache: Any
) -> None:
    """A SentencePiece-style policy under the byte-level model: the text is re-tokenized once
    and each policy boundary mapped; weights and value spans are still per policy token."""
    policy = tokenizer_cache.get(str(metaspace_dir))
    ids = policy.hf.encode(TEXT, add_special_tokens=False)
    rollout = Rollout.model_validate(
        {
            "id": "sp",
            "problem": "What is 17 × 24?",
            "response_token_ids": ids,
            "tokenizer": str(metaspace_dir),
            "reference_answer": "408",
            "reward": 1.0,
        }
    )
    model = MODELS.get(str(model_dir), Settings(allowed_scorer_models=[str(model_dir)]))
    assert not model.same_tokenizer(policy)
    result = _judge(engine, rollout, {"reweight": f"cscr:{model_dir}"}, group=[1.0, 0.0])
    w = np.asarray(result.weights)
    assert w.shape == (len(ids),)
    _check_weights(w, np.ones(len(ids)), 0.5, 2.0)
    valued = _judge(engine, rollout, {"judge": f"value:{model_dir}"})
    assert valued.status == "ok" and len(valued.spans) >= 3
    assert valued.spans[-1].end == len(ids)


def test_an_allowed_model_that_cannot_load(model_dir: Path, tmp_path: Path) -> None:
    """An allowed spec naming no model: a 4xx naming options.reweight; the value judge is a
    judge failure, so the rules fallback stands in and the result names the error."""
    settings = Settings(
        default_tokenizer=str(model_dir), allowed_scorer_models=[str(model_dir), str(tmp_path)]
    )
    engine = Engine(settings)
    rollout = _rollout(model_dir)
    with pytest.raises(InputError) as caught:
        _judge(engine, rollout, {"reweight": f"cscr:{tmp_path}"})
    assert caught.value.field == "options.reweight" and "cannot load" in caught.value.message
    result = _judge(engine, rollout, {"judge": f"value:{tmp_path}"})
    assert result.status == "fallback" and result.judge is not None
    assert result.judge.name == "rules" and "cannot load" in (result.error or "")
