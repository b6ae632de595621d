"""The seam rule: ending, answer and closer tokenized together; answer tokens overlap its chars."""

from __future__ import annotations

import pytest

from judge_service.probe.endings import (
    ENDING_FAMILIES,
    EncodedSuffix,
    Ending,
    encode_suffix,
    resolve_family,
)
from judge_service.trace.tokenizer import LoadedTokenizer

THINK = ENDING_FAMILIES["think"].default


def _pieces(tok: LoadedTokenizer, suffix: EncodedSuffix) -> list[bytes]:
    table = tok._byte_table
    assert table is not None
    return [table[i] or b"" for i in suffix.ids]


def _check_overlap_rule(tok: LoadedTokenizer, suffix: EncodedSuffix) -> None:
    """Answer tokens are exactly those whose bytes overlap the answer's bytes."""
    pieces = _pieces(tok, suffix)
    start = len(THINK.prefix.encode())
    end = start + len(suffix.answer.encode())
    position = 0
    overlapping = []
    for k, piece in enumerate(pieces):
        if position < end and position + len(piece) > start:
            overlapping.append(k)
        position += len(piece)
    assert (suffix.answer_start, suffix.answer_end) == (overlapping[0], overlapping[-1] + 1)
    assert (
        b"".join(pieces[suffix.answer_start : suffix.answer_end]).find(suffix.answer.encode()) >= 0
    )


def test_tokenized_together(bpe: LoadedTokenizer) -> None:
    suffix = encode_suffix(bpe, THINK, "408")
    together = bpe.hf(THINK.prefix + "408" + THINK.closer, add_special_tokens=False)["input_ids"]
    assert list(suffix.ids) == together
    assert suffix.text == THINK.prefix + "408" + THINK.closer


def test_negative_answer_takes_the_merged_brace_token(bpe: LoadedTokenizer) -> None:
    suffix = encode_suffix(bpe, THINK, "-5")
    pieces = _pieces(bpe, suffix)
    # The local BPE merges "{-" (as real BPEs do from "\boxed{-5}" in training text):
    assert pieces[suffix.answer_start] == b"{-"
    assert pieces[suffix.answer_start : suffix.answer_end] == [b"{-", b"5"]
    _check_overlap_rule(bpe, suffix)
    # Tokenized apart, the model would be scored on "{" "-" "5", a sequence it never writes.
    apart = (
        bpe.hf(THINK.prefix, add_special_tokens=False)["input_ids"]
        + bpe.hf("-5", add_special_tokens=False)["input_ids"]
    )
    assert apart != list(suffix.ids[: suffix.answer_end])


@pytest.mark.parametrize("answer", ["\\frac{5}{6}", "3/4", "-\\frac{1}{2}", "\\dfrac{13}{12}"])
def test_fractions(bpe: LoadedTokenizer, answer: str) -> None:
    suffix = encode_suffix(bpe, THINK, answer)
    _check_overlap_rule(bpe, suffix)
    assert suffix.num_answer_tokens >= 3


@pytest.mark.parametrize("answer", ["très", "数学", "π", "25 €", "x = -½"])
def test_non_ascii(bpe: LoadedTokenizer, answer: str) -> None:
    suffix = encode_suffix(bpe, THINK, answer)
    _check_overlap_rule(bpe, suffix)


def test_a_character_split_across_byte_tokens_is_all_answer(bpe: LoadedTokenizer) -> None:
    suffix = encode_suffix(bpe, THINK, "π")  # not in the training text: two byte tokens
    pieces = _pieces(bpe, suffix)[suffix.answer_start : suffix.answer_end]
    assert b"".join(pieces) == "π".encode()
    assert len(pieces) == 2


def test_empty_answer_is_refused(bpe: LoadedTokenizer) -> None:
    with pytest.raises(ValueError):
        encode_suffix(bpe, THINK, "")


def test_non_byte_level_tokenizer_uses_offsets(metaspace_dir: object) -> None:
    from judge_service.trace.tokenizer import TokenizerCache

    tok = TokenizerCache().get(str(metaspace_dir))
    ending = Ending("The answer is \\boxed{", "}")
    suffix = encode_suffix(tok, ending, "-12")
    text = tok.hf.decode(list(suffix.ids[suffix.answer_start : suffix.answer_end]))
    assert "-12" in text.replace(" ", "")
    before = tok.hf.decode(list(suffix.ids[: suffix.answer_start]))
    assert "12" not in before


def test_family_from_the_tokenizer(bpe: LoadedTokenizer) -> None:
    # The local BPE has "</think>" as one (special) token: a thinking model's ending.
    assert resolve_family(bpe.hf).family == "think"
    assert resolve_family(bpe.hf, "qwen3").family == "think"
    for pair in ENDING_FAMILIES.values():
        assert pair.default.prefix.endswith("\\boxed{")
        assert pair.alternative.prefix.endswith("\\boxed{")
        assert pair.default.prefix != pair.alternative.prefix
