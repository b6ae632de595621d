"""The piece-table decoder for non-byte-level tokenizers: the same text as the
tokenizer's own decode, char ranges that tile it and agree with the sliding window,
on SentencePiece-style, Metaspace and WordPiece vocabularies built here and loaded
through `transformers` from a directory."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from judge_service.trace.decode import Trace
from judge_service.trace.detokenize import LoadedTokenizer
from judge_service.trace.tokenizer import TokenizerCache
from tests.harness.tokenizers import build_wordpiece, math_corpus

TEXTS = [
    "Let me compute 17 × 24 = 408 😀 and \\boxed{-5}.\nNext line",
    "漢字かな 🎉🎉 ok",  # unseen: byte fallback, multi-byte chars over 3 and 4 tokens
    "  two leading spaces, and  inner  ones  ",
    "数学题：3 + 5 = 8。",
    "I don't think it's done. Isn't it? We've seen they're right!",
]


def _save(tokenizer: object, path: Path, **special: str) -> Path:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special)  # type: ignore[no-untyped-call]
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def _byte_fallback_bpe(path: Path, decoder: object) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoder  # type: ignore[assignment]
    specials = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, min_frequency=2)
    tokenizer.train_from_iterator(math_corpus(), trainer=trainer)
    return _save(tokenizer, path, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def tokenizers(
    metaspace_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, LoadedTokenizer]:
    from tokenizers import decoders

    root = tmp_path_factory.mktemp("pieces")
    cache = TokenizerCache()
    gemma = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    return {
        "llama": cache.get(str(metaspace_dir)),  # Replace, ByteFallback, Fuse, Strip
        "gemma": cache.get(str(_byte_fallback_bpe(root / "gemma", gemma))),
        "metaspace": cache.get(
            str(_byte_fallback_bpe(root / "ms", decoders.Metaspace(prepend_scheme="always")))
        ),
        "wordpiece": cache.get(str(build_wordpiece(root / "wp"))),
    }


NAMES = ["llama", "gemma", "metaspace", "wordpiece"]
# Code points at each UTF-8 length's edges, and some in between.
CHARS = [0x7F, 0x80, 0xE9, 0x3B1, 0x7FF, 0x800, 0x6F22, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]


def _reference(tok: LoadedTokenizer, ids: list[int]) -> str:
    return str(tok.hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))


def _assert_tiles(trace: Trace) -> None:
    offsets = trace.offsets
    assert offsets[0] == 0 and offsets[-1] == len(trace.text)
    assert np.all(np.diff(offsets) >= 0)
    assert "".join(trace.token_text(i) for i in range(trace.num_tokens)) == trace.text


def _byte_ids(tok: LoadedTokenizer, data: bytes) -> list[int]:
    return [tok.hf.convert_tokens_to_ids(f"<0x{b:02X}>") for b in data]


@pytest.mark.parametrize("name", NAMES)
def test_recognised_pipelines_use_the_piece_table(
    tokenizers: dict[str, LoadedTokenizer], name: str
) -> None:
    assert tokenizers[name].decoder_kind == "piece-table"


@pytest.mark.parametrize("name", NAMES)
def test_encoded_text_decodes_exactly_with_the_old_ranges(
    tokenizers: dict[str, LoadedTokenizer], name: str
) -> None:
    tok = tokenizers[name]
    for text in TEXTS:
        ids = tok.hf.encode(text, add_special_tokens=False)
        trace = tok.decode(ids)
        assert trace.text == _reference(tok, ids)
        _assert_tiles(trace)
        old = tok._decode_incremental(np.asarray(ids, np.int64))
        assert old.text == trace.text
        assert old.offsets.tolist() == trace.offsets.tolist()


@pytest.mark.parametrize("name", ["llama", "gemma"])
def test_a_split_character_belongs_to_the_byte_that_completes_it(
    tokenizers: dict[str, LoadedTokenizer], name: str
) -> None:
    tok = tokenizers[name]
    word = tok.hf.convert_tokens_to_ids("▁the") if "▁the" in tok.hf.get_vocab() else 3
    ids = [word, *_byte_ids(tok, "😀漢".encode()), word]
    trace = tok.decode(ids)
    assert trace.text == _reference(tok, ids)
    _assert_tiles(trace)
    owned = [trace.token_text(i) for i in range(1, 8)]
    assert owned == ["", "", "", "😀", "", "", "漢"]
    assert trace.tokens_for_chars(*_span(trace.text, "😀")) == (1, 5)


def _span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return start, start + len(part)


@pytest.mark.parametrize("name", ["llama", "gemma"])
@pytest.mark.parametrize(
    "data",
    [
        b"\xf0\x9f",  # a cut-short emoji
        b"\x9f\x98\x80",  # continuation bytes alone
        "数".encode() + b"\xff",  # valid, then a byte that spoils the run
        b"a\xe6\x95",  # valid ASCII, then a cut-short CJK char
        b"\x00\xc3\xa9",  # NUL is a char like any other
        "▁".encode(),  # the Metaspace char from bytes stays itself (Replace ran before)
    ],
)
def test_byte_runs_decode_as_the_tokenizer_does(
    tokenizers: dict[str, LoadedTokenizer], name: str, data: bytes
) -> None:
    tok = tokenizers[name]
    ids = _byte_ids(tok, data)
    for sequence in (ids, [*ids, 5, *ids], [5, *ids, *_byte_ids(tok, "é".encode())]):
        trace = tok.decode(sequence)
        assert trace.text == _reference(tok, sequence)
        _assert_tiles(trace)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        # The whole run is invalid: each byte owns one U+FFFD, as in the decoded text.
        trace = tok.decode(ids)
        assert [trace.token_text(i) for i in range(len(ids))] == ["\ufffd"] * len(ids)


def test_special_tokens_and_the_first_token_rules(tokenizers: dict[str, LoadedTokenizer]) -> None:
    for name in ("llama", "gemma", "metaspace"):
        tok = tokenizers[name]
        body = tok.hf.encode("Let me compute", add_special_tokens=False)
        space = tok.hf.convert_tokens_to_ids("▁")
        for ids in ([1, *body, 2], [*body, 2, *body], [space, *body], [space, space, *body]):
            trace = tok.decode(ids)
            assert trace.text == _reference(tok, ids), (name, ids)
            _assert_tiles(trace)
    wp = tokenizers["wordpiece"]
    body = wp.hf.encode("I don't think it's 408.", add_special_tokens=False)
    cls_id, sep_id = wp.hf.cls_token_id, wp.hf.sep_token_id
    continuation = next(i for t, i in wp.hf.get_vocab().items() if t.startswith("##"))
    for ids in ([cls_id, *body, sep_id], [continuation, *body], [*body, continuation, sep_id]):
        trace = wp.decode(ids)
        assert trace.text == _reference(wp, ids)
        _assert_tiles(trace)


@pytest.mark.parametrize("name", NAMES)
def test_random_ids_match_the_tokenizers_decode(
    tokenizers: dict[str, LoadedTokenizer], name: str
) -> None:
    tok = tokenizers[name]
    vocab = tok.hf.get_vocab()
    byte_ids = [i for t, i in vocab.items() if t.startswith("<0x")]
    words = [i for t, i in vocab.items() if not t.startswith("<0x")]
    rng = random.Random(16)
    compared = 0
    for k in range(300):
        size = rng.randrange(1, 50)
        if k % 3 == 0 or not byte_ids:  # anything in the vocabulary
            ids = [rng.randrange(tok.vocab_size) for _ in range(size)]
        elif k % 3 == 1:  # words and the bytes of whole multi-byte characters
            ids = []
            for _ in range(size):
                char = chr(rng.choice(CHARS))
                ids.extend(rng.choice([[rng.choice(words)], _byte_ids(tok, char.encode())]))
        else:  # bytes in any order: runs that fail to form characters
            ids = [rng.choice(byte_ids + words[:5]) for _ in range(size)]
        trace = tok.decode(ids)
        assert trace.text == _reference(tok, ids), ids
        _assert_tiles(trace)
        old = tok._decode_incremental(np.asarray(ids, np.int64))
        # The sliding window is exact while no U+FFFD is in play (it waits for a
        # piece that does not end in one); there both must give the same ranges.
        if "\ufffd" not in trace.text and old.text == trace.text:
            assert old.offsets.tolist() == trace.offsets.tolist(), ids
            compared += 1
    assert compared > 100


@pytest.mark.parametrize("name", ["llama", "wordpiece"])
def test_a_long_trace_is_exact(tokenizers: dict[str, LoadedTokenizer], name: str) -> None:
    tok = tokenizers[name]
    rng = random.Random(3)
    ids: list[int] = []
    while len(ids) < 20_000:
        ids.extend(
            tok.hf.encode(rng.choice([*TEXTS, *math_corpus(1)]) + "\n", add_special_tokens=False)
        )
    trace = tok.decode(ids)
    assert trace.text == _reference(tok, ids)
    _assert_tiles(trace)


def test_an_unknown_pipeline_keeps_the_sliding_window(tmp_path: Path) -> None:
    from tokenizers import decoders

    # CTC is a decoder this module does not reproduce: no table, same behaviour as before.
    tok = TokenizerCache().get(str(_byte_fallback_bpe(tmp_path / "ctc", decoders.CTC())))
    assert tok.decoder_kind == "incremental"
    ids = tok.hf.encode("Let me compute 17", add_special_tokens=False)
    assert tok.decode(ids).text == _reference(tok, ids)
    # Nor does a Strip that acts on each token (no Fuse before it).
    per_token = decoders.Sequence([decoders.Replace("▁", " "), decoders.Strip(" ", 1, 0)])
    tok = TokenizerCache().get(str(_byte_fallback_bpe(tmp_path / "strip", per_token)))
    assert tok.decoder_kind == "incremental"
