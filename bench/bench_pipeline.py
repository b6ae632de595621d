"""The pipeline without the judge (decode, markers, validation, credit) on a 32k-token trace,
against a bare ``tokenizer.decode`` of the same ids, side by side in one run.

    .venv/bin/python bench/bench_pipeline.py [--tokens 32768] [--repeats 15]

Target (issue 2): at most 4x the bare decode.
"""

from __future__ import annotations

import argparse
import random

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
from _timing import median_ms

from judge_service import credit
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import TokenizerCache, mark
from judge_service.validate import validate_spans
from tests.harness.tokenizers import synthetic_trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32_768)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--spans", type=int, default=200)
    args = parser.parse_args()

    directory, ids = synthetic_trace(args.tokens)
    tok = TokenizerCache().get(str(directory))
    rng = random.Random(0)
    trace = tok.decode(ids)
    step = args.tokens // args.spans
    spans = [
        {
            "start": s,
            "end": s + step // 2,
            "label": rng.choice(list(DEFAULT_LABEL_SCORES)),
            "confidence": 0.9,
            "evidence": trace.span_text(s, s + step // 2)[:40],
        }
        for s in range(0, args.tokens - step, step)
    ]

    def bare() -> object:
        return tok.hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def pipeline() -> object:
        t = tok.decode(ids)
        mark(t)
        report = validate_spans(spans, t, DEFAULT_LABEL_SCORES)
        c = credit.token_credit(
            t.num_tokens,
            report.accepted,
            DEFAULT_LABEL_SCORES,
            lam=0.25,
            kappa=0.25,
            min_confidence=0.5,
        )
        return credit.encode(c.values, "base64-f32")

    stages = {
        "decode (char ranges)": lambda: tok.decode(ids),
        "markers": lambda: mark(trace),
        "validation": lambda: validate_spans(spans, trace, DEFAULT_LABEL_SCORES),
    }
    bare_ms = median_ms(bare, args.repeats)
    pipe_ms = median_ms(pipeline, args.repeats)
    print(
        f"trace: {args.tokens} tokens, {len(trace.text)} chars, {len(spans)} spans, "
        f"vocab {tok.vocab_size}, median of {args.repeats}"
    )
    print(f"bare tokenizer.decode     {bare_ms:8.2f} ms")
    for name, fn in stages.items():
        print(f"  {name:<22}  {median_ms(fn, args.repeats):8.2f} ms")
    print(f"pipeline without judge    {pipe_ms:8.2f} ms")
    print(f"ratio pipeline / bare     {pipe_ms / bare_ms:8.2f}x  (target <= 4x)")


if __name__ == "__main__":
    main()
