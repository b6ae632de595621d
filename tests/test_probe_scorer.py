"""The cached scorer gives the naive full-prefix numbers, at every cut, for a batch of answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from judge_service.probe.endings import ENDING_FAMILIES, Ending, encode_suffix  # noqa: E402
from judge_service.probe.scorer import LMScorer  # noqa: E402
from judge_service.trace.tokenizer import LoadedTokenizer  # noqa: E402
from tests.test_probe_support import tiny_model  # noqa: E402

ANSWERS = ["408", "-5", "\\frac{5}{6}", "très", "数"]


def _suffixes(tok: LoadedTokenizer) -> list:
    pair = ENDING_FAMILIES["think"]
    # Two wordings × several answers: two groups sharing an ending, rows of unequal length.
    return [encode_suffix(tok, e, a) for e in (pair.default, pair.alternative) for a in ANSWERS]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("chunk_size", [7, 1024])
@pytest.mark.slow
def test_cached_equals_naive_at_every_cut(bpe: LoadedTokenizer, arch: str, chunk_size: int) -> None:
    scorer = LMScorer(tiny_model(bpe.vocab_size, arch), bpe.hf)
    rng = np.random.default_rng(1)
    context = rng.integers(0, bpe.vocab_size, 160).tolist()
    cuts = list(range(1, 161))  # every cut, out of order and repeated below
    cuts = cuts[80:] + cuts[:80] + [17, 17]
    suffixes = _suffixes(bpe)
    cached = scorer.score_cuts(context, cuts, suffixes, chunk_size=chunk_size)
    naive = scorer.score_naive(context, cuts, suffixes)
    assert cached.cuts == tuple(cuts)
    assert cached.logprob_sum.shape == (len(cuts), len(suffixes))
    np.testing.assert_allclose(cached.logprob_sum, naive.logprob_sum, atol=1e-4, rtol=0)
    # The numbers are not degenerate: answers and cuts differ.
    assert np.ptp(cached.logprob_sum[:, 0]) > 1e-3
    assert np.ptp(cached.logprob_sum[0]) > 1e-3


def test_cache_is_reused(bpe: LoadedTokenizer) -> None:
    scorer = LMScorer(tiny_model(bpe.vocab_size), bpe.hf)
    context = list(range(10, 410))
    suffixes = [encode_suffix(bpe, ENDING_FAMILIES["think"].default, a) for a in ("408", "418")]
    cuts = list(range(25, 401, 25))
    scorer.score_cuts(context, cuts, suffixes)
    cached_tokens = scorer.forward_tokens
    scorer.forward_tokens = 0
    scorer.score_naive(context, cuts, suffixes)
    naive_tokens = scorer.forward_tokens
    # One pass over the context plus a short pass per cut: far below one pass per cut.
    longest = max(s.answer_end for s in suffixes)
    assert cached_tokens <= 400 + len(cuts) * 2 * longest
    assert naive_tokens > 5 * cached_tokens


def test_answer_starting_the_suffix_uses_the_context_logits(bpe: LoadedTokenizer) -> None:
    scorer = LMScorer(tiny_model(bpe.vocab_size), bpe.hf)
    bare = encode_suffix(bpe, Ending("", "}"), "408")
    assert bare.answer_start == 0
    context = list(range(30, 90))
    cached = scorer.score_cuts(context, [1, 30, 60], [bare])
    naive = scorer.score_naive(context, [1, 30, 60], [bare])
    np.testing.assert_allclose(cached.logprob_sum, naive.logprob_sum, atol=1e-4, rtol=0)


def test_mean_logprob_and_probability(bpe: LoadedTokenizer) -> None:
    scorer = LMScorer(tiny_model(bpe.vocab_size), bpe.hf)
    suffix = encode_suffix(bpe, ENDING_FAMILIES["think"].default, "\\frac{5}{6}")
    scores = scorer.score_cuts(list(range(5, 40)), [10], [suffix])
    total = scores.logprob_sum[0, 0]
    assert scores.mean_logprob[0, 0] == pytest.approx(total / suffix.num_answer_tokens)
    assert scores.probability[0, 0] == pytest.approx(np.exp(total))
    assert suffix.num_answer_tokens > 1


def test_bad_cuts_and_sliding_windows_are_refused(bpe: LoadedTokenizer) -> None:
    scorer = LMScorer(tiny_model(bpe.vocab_size), bpe.hf)
    suffix = encode_suffix(bpe, ENDING_FAMILIES["think"].default, "7")
    with pytest.raises(ValueError, match="outside"):
        scorer.score_cuts([1, 2, 3], [0], [suffix])
    with pytest.raises(ValueError, match="outside"):
        scorer.score_cuts([1, 2, 3], [4], [suffix])
    sliding = LMScorer(
        tiny_model(
            bpe.vocab_size, "qwen2", use_sliding_window=True, sliding_window=16, max_window_layers=0
        ),
        bpe.hf,
    )
    with pytest.raises(ValueError, match="sliding"):
        sliding.score_cuts(list(range(40)), [20], [suffix])


def test_gguf_sources_are_recognised(tmp_path: Path) -> None:
    from judge_service.probe.loading import resolve_source

    gguf = tmp_path / "m.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_source(str(gguf)).gguf_file == "m.Q4.gguf"
    assert resolve_source(str(tmp_path)).gguf_file == "m.Q4.gguf"  # a folder with one GGUF
    (tmp_path / "config.json").write_text("{}")
    assert resolve_source(str(tmp_path)).gguf_file is None  # a transformers folder wins
    assert resolve_source("org/model").location == "org/model"
