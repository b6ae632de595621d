"""Cuts fall on the rollout's own token boundaries; a different probe tokenizer maps them back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge_service.probe.alignment import Aligner, map_boundaries
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from tests.harness.tokenizers import build_byte_level_bpe, math_corpus

TEXT = (
    "<think>\nI need 17 × 24. Split 24 into 20 + 4.\n17 × 20 = 340 and 17 × 4 = 68.\n"
    "Première étape : 数学 π ≈ 3.14.\n</think>\n\nThe answer is \\boxed{408}."
)


@pytest.fixture(scope="module")
def other_bpe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second byte-level BPE with a different vocabulary (the 'probe' tokenizer)."""
    corpus = [line.upper() for line in math_corpus(5)] + math_corpus(3)
    return build_byte_level_bpe(
        tmp_path_factory.mktemp("tok") / "other", vocab_size=350, corpus=corpus
    )


def test_same_tokenizer_passes_ids_through(bpe_dir: Path, bpe: LoadedTokenizer) -> None:
    aligner = Aligner(bpe.hf, str(bpe_dir), TokenizerCache())
    # Sampled ids are often not the canonical tokenization: spell "17" digit by digit.
    ids = bpe.hf("I need ", add_special_tokens=False)["input_ids"]
    ids += [bpe.hf.convert_tokens_to_ids(c) for c in "17"]
    ids += bpe.hf(" × 24 = 408", add_special_tokens=False)["input_ids"]
    assert bpe.hf(bpe.hf.decode(ids), add_special_tokens=False)["input_ids"] != ids
    aligned = aligner.align({"response_token_ids": ids, "tokenizer": str(bpe_dir), "problem": "P"})
    assert not aligned.mapped
    assert aligned.context_ids[aligned.prompt_length :] == ids
    assert aligned.boundaries.tolist() == list(range(len(ids) + 1))
    assert aligned.context_cut(3) == aligned.prompt_length + 3


def test_identical_vocabulary_counts_as_same(bpe: LoadedTokenizer, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    bpe.hf.save_pretrained(str(copy))
    aligner = Aligner(bpe.hf, "some/probe-name", TokenizerCache())
    assert aligner.is_same(str(copy))


def _check_mapping(policy: LoadedTokenizer, aligner: Aligner, ids: list[int]) -> None:
    aligned = aligner.align({"response_token_ids": ids, "tokenizer": policy.name, "problem": ""})
    assert aligned.mapped
    trace = aligned.trace
    probe_ids = aligned.context_ids[aligned.prompt_length :]
    probe_bytes = [aligner.probe._byte_table[i] for i in probe_ids]  # type: ignore[index]
    text_bytes = trace.text.encode()
    assert b"".join(probe_bytes) == text_bytes  # the text was tokenized once, whole
    for cut in range(trace.num_tokens + 1):
        k = int(aligned.boundaries[cut])
        prefix = b"".join(probe_bytes[:k])
        policy_prefix = trace.span_text(0, cut).encode()
        # Never past the cut, and never ending inside a character.
        assert policy_prefix.startswith(prefix)
        prefix.decode("utf-8")
        # The last boundary at or before the cut: one more probe token would cross it
        # (or only add bytes of a character the cut does not complete).
        if k < len(probe_bytes):
            longer = prefix + probe_bytes[k]
            crosses = not policy_prefix.startswith(longer)
            partial = len(longer) <= len(policy_prefix) and _is_partial(longer)
            assert crosses or partial


def _is_partial(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_different_tokenizer_maps_each_cut_to_the_last_boundary_before_it(
    bpe: LoadedTokenizer, other_bpe_dir: Path
) -> None:
    cache = TokenizerCache()
    probe = cache.get(str(other_bpe_dir))
    aligner = Aligner(probe.hf, str(other_bpe_dir), cache)
    ids = bpe.hf(TEXT, add_special_tokens=False)["input_ids"]
    assert not aligner.is_same(bpe.name)
    _check_mapping(bpe, aligner, ids)


def test_policy_cut_inside_a_split_character(bpe: LoadedTokenizer, other_bpe_dir: Path) -> None:
    cache = TokenizerCache()
    probe = cache.get(str(other_bpe_dir))
    aligner = Aligner(probe.hf, str(other_bpe_dir), cache)
    # "π" as two byte tokens in the policy's ids: a cut between them.
    table = {b: i for i, b in enumerate(bpe._byte_table or []) if b is not None}
    ids = bpe.hf("pi is ", add_special_tokens=False)["input_ids"]
    ids += [table[bytes([b])] for b in "π".encode()] + bpe.hf(" ok", add_special_tokens=False)[
        "input_ids"
    ]
    _check_mapping(bpe, aligner, ids)


def test_map_boundaries_takes_the_earliest_of_equal_offsets() -> None:
    probe = np.array([0, 3, 5, 5, 6, 9], dtype=np.int64)  # tokens 2 and 3 split the char at 5
    policy = np.array([0, 2, 5, 6, 8, 9], dtype=np.int64)
    assert map_boundaries(policy, probe).tolist() == [0, 0, 2, 4, 4, 5]


def test_prompt_is_never_empty(bpe: LoadedTokenizer, bpe_dir: Path) -> None:
    aligner = Aligner(bpe.hf, str(bpe_dir), TokenizerCache())
    assert len(aligner.prompt_ids("")) >= 1
    assert aligner.prompt_ids("What is 2 + 2?")[-1] == bpe.hf("\n\n")["input_ids"][-1]
