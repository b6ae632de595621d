"""The probe's cached scorer against naive full-prefix scoring, side by side in one run.

    .venv/bin/python bench/bench_probe.py [--tokens 4096] [--cuts 64] [--threads 1]

A 4,096-token trace from the local BPE, 64 evenly spaced cut points, the
reference and a wrong answer after the default forced ending, on a tiny Llama
(fp32, CPU). Naive: one full pass over prefix + suffix per cut and answer.
Cached: one running KV cache extended cut to cut, the suffixes batched at each
cut and cropped off again.

Targets (issue 6): at least 20x fewer forward tokens, at least 5x less wall
time, max |difference| of the summed answer log-probs at most 1e-4.
"""

from __future__ import annotations

import argparse
import time

import _root  # noqa: F401  (the repository root on sys.path: tests.harness)
import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from judge_service.probe.endings import ENDING_FAMILIES, encode_suffix
from judge_service.probe.scorer import LMScorer
from judge_service.trace import TokenizerCache
from tests.harness.tokenizers import synthetic_trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--cuts", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    directory, ids = synthetic_trace(args.tokens)
    tok = TokenizerCache().get(str(directory))

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=args.tokens + 64,
    )
    scorer = LMScorer(LlamaForCausalLM(config).float().eval(), tok.hf, name="tiny-llama")
    ending = ENDING_FAMILIES["think"].default
    suffixes = [encode_suffix(tok, ending, answer) for answer in ("408", "418")]
    step = args.tokens // args.cuts
    cuts = [step * (k + 1) for k in range(args.cuts)]  # the last cut is the whole trace

    scorer.score_cuts(ids[:256], [128, 256], suffixes)  # warm up both paths
    scorer.score_naive(ids[:256], [128], suffixes)

    scorer.forward_tokens = 0
    began = time.perf_counter()
    cached = scorer.score_cuts(ids, cuts, suffixes)
    cached_s = time.perf_counter() - began
    cached_tokens = scorer.forward_tokens

    scorer.forward_tokens = 0
    began = time.perf_counter()
    naive = scorer.score_naive(ids, cuts, suffixes)
    naive_s = time.perf_counter() - began
    naive_tokens = scorer.forward_tokens

    diff = float(np.max(np.abs(cached.logprob_sum - naive.logprob_sum)))
    token_ratio = naive_tokens / cached_tokens
    time_ratio = naive_s / cached_s
    print(
        f"trace {args.tokens} tokens, {args.cuts} cuts, {len(suffixes)} answers, tiny Llama "
        f"(hidden {args.hidden}, {args.layers} layers, vocab {tok.vocab_size}), fp32 CPU, "
        f"{args.threads} thread(s)"
    )
    print(f"naive : {naive_tokens:>9,} forward tokens  {naive_s:8.2f} s")
    print(f"cached: {cached_tokens:>9,} forward tokens  {cached_s:8.2f} s")
    print(
        f"forward-token ratio {token_ratio:.1f}x (target >= 20x)  "
        f"wall-time ratio {time_ratio:.1f}x (target >= 5x)  "
        f"max |diff| {diff:.2e} (target <= 1e-4)"
    )
    ok = token_ratio >= 20 and time_ratio >= 5 and diff <= 1e-4
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
