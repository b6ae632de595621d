"""Decoding a 32k-token trace with a non-byte-level tokenizer (issue 16): the piece
table against the old sliding window, `tokenizers.decoders.DecodeStream`, and a bare
``tokenizer.decode`` of the same ids, side by side in one run.

    .venv/bin/python bench/bench_decode.py [--tokens 32768] [--repeats 7]

Tokenizers: SentencePiece style (Metaspace pre-tokenizer; Replace, ByteFallback, Fuse,
Strip decoder, as Llama 2 and Mistral ship) and BERT-style WordPiece, built locally.
The trace is math-like lines with some emoji and CJK that only byte fallback encodes.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import numpy as np
from _timing import median_ms

from judge_service.trace import TokenizerCache
from judge_service.trace.detokenize import LoadedTokenizer
from tests.harness.tokenizers import build_metaspace_bpe, build_wordpiece, math_corpus

EXTRA = ["Done 😀 — 漢字かな 🎉.", "Résumé: ça coûte 3 €."]


def _trace_ids(tok: LoadedTokenizer, tokens: int) -> list[int]:
    rng = random.Random(0)
    lines = [*math_corpus(1), *EXTRA]
    ids: list[int] = []
    while len(ids) < tokens:
        ids.extend(tok.hf.encode(rng.choice(lines) + "\n", add_special_tokens=False))
    return ids[:tokens]


def _stream(tok: LoadedTokenizer, ids: list[int]) -> list[str | None]:
    from tokenizers.decoders import DecodeStream

    stream = DecodeStream(skip_special_tokens=False)
    backend = tok.hf.backend_tokenizer
    return [stream.step(backend, i) for i in ids]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32_768)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp())
    cache = TokenizerCache()
    tokenizers = {
        "sentencepiece (byte fallback)": cache.get(
            str(build_metaspace_bpe(root / "sp", vocab_size=1000))
        ),
        "wordpiece": cache.get(str(build_wordpiece(root / "wp", vocab_size=1000))),
    }
    print(f"{args.tokens} ids, median of {args.repeats}")
    for name, tok in tokenizers.items():
        _report(name, tok, _trace_ids(tok, args.tokens), args.repeats)


def _report(name: str, tok: LoadedTokenizer, ids: list[int], repeats: int) -> None:
    array = np.asarray(ids, np.int64)

    def bare() -> str:
        return str(
            tok.hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        )

    new, old = tok.decode(ids), tok._decode_incremental(array)
    assert tok.decoder_kind == "piece-table" and new.text == bare()
    same = old.text == new.text and np.array_equal(old.offsets, new.offsets)
    bare_ms = median_ms(bare, repeats)
    rows = {
        "bare tokenizer.decode": bare_ms,
        "piece table (new)": median_ms(lambda: tok.decode(ids), repeats),
        "sliding window (old)": median_ms(lambda: tok._decode_incremental(array), repeats),
        "DecodeStream (pieces only)": median_ms(lambda: _stream(tok, ids), repeats),
    }
    print(f"\n{name}: {len(new.text)} chars; old and new ranges identical: {same}")
    for label, ms in rows.items():
        print(f"  {label:<28} {ms:8.2f} ms  {ms / bare_ms:5.2f}x bare")


if __name__ == "__main__":
    main()
