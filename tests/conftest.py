"""Shared fixtures: tokenizers built locally and loaded through `transformers` from a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_service.devtools.tokenizers import build_byte_level_bpe, build_metaspace_bpe
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="session")
def bpe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer directory (GPT-2 / Qwen / Llama 3 style)."""
    return build_byte_level_bpe(tmp_path_factory.mktemp("tok") / "bpe")


@pytest.fixture(scope="session")
def metaspace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentencePiece-style tokenizer directory (Metaspace with byte fallback)."""
    return build_metaspace_bpe(tmp_path_factory.mktemp("tok") / "sp")


@pytest.fixture(scope="session")
def tokenizer_cache() -> TokenizerCache:
    return TokenizerCache()


@pytest.fixture(scope="session")
def bpe(bpe_dir: Path, tokenizer_cache: TokenizerCache) -> LoadedTokenizer:
    return tokenizer_cache.get(str(bpe_dir))
