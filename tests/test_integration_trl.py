"""The TRL integration for real: TRL's GRPOTrainer trains a 2-layer Llama on the CPU, the
service (rules judge) runs on loopback, and the advantages that reach `_compute_loss` are
checked against the judge's own answer for the same token ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("trl")

import torch
from datasets import Dataset
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.integrations.drift import JudgeDriftError
from judge_service.integrations.trl import JudgeCreditGRPOTrainer
from tests.conftest import LiveServer
from tests.harness.drift import DRIFT_SETTINGS, turn_bad
from tests.readme_snippets import readme_block

PROBLEM = "What is 17 × 24?"
EOS = "<|endoftext|>"
# Fixed completions (rollout_func below): a false line, a true one, one with environment
# text the policy did not sample (env_mask 0), and a short one; all end in the sampled EOS.
COMPLETIONS = [
    ("17 × 24 = 400.\nSo the answer is \\boxed{400}." + EOS, None),
    ("17 × 24 = 408.\nThus 100 - 37 = 63.\nSo the answer is \\boxed{408}." + EOS, None),
    ("Let me compute 17 × 24.", "\n17 × 24 = 400.\n", "So the answer is \\boxed{408}." + EOS),
    ("\\boxed{408}" + EOS, None),
]


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with LiveServer(create_app(Settings())) as live:
        yield live


@pytest.fixture(scope="module")
def tiny_model_dir(bpe_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama saved with its tokenizer (under the server's tokenizer roots)."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(str(bpe_dir))
    tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def correct(completions: list[str], reference_answer: list[str], **_: Any) -> list[float]:
    pairs = zip(completions, reference_answer, strict=True)
    return [float(f"\\boxed{{{ref}}}" in c) for c, ref in pairs]


def config(tmp_path: Path, **overrides: Any) -> GRPOConfig:
    fields: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 12,
        "max_steps": 1,
        "learning_rate": 1e-4,
        "scale_rewards": "none",
        "loss_type": "dr_grpo",
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": True,
        "seed": 0,
    }
    return GRPOConfig(**{**fields, **overrides})


def dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [PROBLEM] * 4, "reference_answer": ["408"] * 4})


class Recording(JudgeCreditGRPOTrainer):
    """Keeps what TRL hands to the loss (a real subclass hook, the integration untouched)."""

    seen: list[dict[str, torch.Tensor]]

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        keep = ("advantages", "completion_ids", "completion_mask", "tool_mask")
        self.seen.append({k: inputs[k].detach().clone() for k in keep if k in inputs})
        return super()._compute_loss(model, inputs)  # type: ignore[no-any-return]


def fixed_rollouts(tokenizer: Any) -> tuple[list[list[int]], list[list[int]]]:
    ids, masks = [], []
    for parts in COMPLETIONS:
        row: list[int] = []
        mask: list[int] = []
        for k, part in enumerate(p for p in parts if p is not None):
            piece = tokenizer(part, add_special_tokens=False)["input_ids"]
            row += piece
            mask += [0 if k == 1 else 1] * len(piece)  # the middle part is environment text
        ids.append(row)
        masks.append(mask)
    return ids, masks


def fixed_rollout_func(
    tokenizer: Any,
) -> tuple[list[list[int]], list[list[int]], Callable[[list[Any], Any], dict[str, Any]]]:
    """The fixed completions, their env masks, and a TRL rollout_func that returns them."""
    fixed, env_masks = fixed_rollouts(tokenizer)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        prompt_ids = [tokenizer(p)["input_ids"] for p in prompts]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": fixed,
            "logprobs": None,
            "env_mask": env_masks,
        }

    return fixed, env_masks, rollout_func


def trained(
    server: LiveServer, model_dir: Path, tmp_path: Path, options: dict[str, Any]
) -> tuple[Recording, list[list[int]], list[list[int]]]:
    """One GRPO step on the fixed completions with the judge's `options`: the trainer (what
    reached the loss in `seen`), the completions and their env masks."""
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    fixed, env_masks, rollout_func = fixed_rollout_func(tokenizer)
    trainer = Recording(
        model=str(model_dir),
        reward_funcs=correct,
        args=config(tmp_path),
        train_dataset=dataset(),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        judge_url=server.url,
        judge_options=options,
    )
    trainer.seen = []
    trainer.train()
    return trainer, fixed, env_masks


def judged(
    server: LiveServer, ids: list[int], mask: list[int], tokenizer_dir: Path
) -> dict[str, Any]:
    """The service's own answer for one completion, asked directly over HTTP."""
    rollout = {
        "id": "x",
        "response_token_ids": ids,
        "response_mask": mask,
        "tokenizer": str(tokenizer_dir),
        "problem": PROBLEM,
        "reference_answer": "408",
    }
    body = {
        "rollouts": [rollout],
        "options": {"judge": "rules", "credit_encoding": "dense", "use_cache": False},
    }
    response = httpx.post(f"{server.url}/v1/judge/batch", json=body, timeout=60)
    response.raise_for_status()
    result: dict[str, Any] = response.json()["results"][0]
    return result


def test_advantages_reaching_the_loss_carry_the_judges_spans(
    server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    trainer, fixed, env_masks = trained(server, tiny_model_dir, tmp_path,
                                        {"judge": "rules", "lambda": 0.25})  # fmt: skip

    assert trainer.state.global_step == 1
    (batch,) = trainer.seen
    keys = ("advantages", "completion_ids", "completion_mask", "tool_mask")
    adv, ids, cm, tm = (batch[k] for k in keys)
    assert adv.shape == ids.shape and adv.dim() == 2  # (B, T)
    rewards = [1.0 if "\\boxed{408}" in "".join(p for p in c if p) else 0.0 for c in COMPLETIONS]
    mean = sum(rewards) / len(rewards)
    seen_rows = 0
    for b in range(ids.shape[0]):  # TRL shuffles rows: find each by its ids
        n = int(cm[b].sum())
        k = fixed.index(ids[b, :n].tolist())
        a_i = rewards[k] - mean  # Dr. GRPO: no division by the group's std
        result = judged(server, fixed[k], env_masks[k], tiny_model_dir)
        credit = torch.zeros(ids.shape[1])
        credit[:n] = torch.tensor(result["credit"])
        assert torch.allclose(adv[b], a_i + credit, atol=1e-6)
        assert torch.all(adv[b, n:] == a_i)  # padding: no credit
        assert torch.all(adv[b, :n][tm[b, :n] == 0] == a_i)  # environment text: no credit
        varying = {t for t in range(n) if abs(float(adv[b, t]) - a_i) > 1e-7}
        spans = {t for s in result["spans"] for t in range(s["start"], s["end"])}
        assert varying == {t for t in spans if env_masks[k][t]}
        seen_rows += 1
        if k == 0:  # the false line lowers the advantage on its tokens only
            invalid = [s for s in result["spans"] if s["label"] == "invalid"]
            assert invalid
            for t in range(invalid[0]["start"], invalid[0]["end"]):
                assert float(adv[b, t]) < a_i
        if k == 2:  # its false line is environment text: the judge flags it, no credit
            assert any(s["label"] == "invalid" for s in result["spans"])
    assert seen_rows == 4
    logged = next(entry for entry in trainer.state.log_history if "judge/share" in entry)
    assert 0.0 < logged["judge/share"] < 1.0
    assert logged["judge/fallback"] == 0 and logged["judge/failed"] == 0


def test_the_drift_verdict_is_logged_and_a_bad_one_stops_the_run_when_told(
    tiny_model_dir: Path, tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    _, _, rollout_func = fixed_rollout_func(tokenizer)
    with LiveServer(create_app(Settings(**DRIFT_SETTINGS))) as live:

        def run(stop: bool) -> Recording:
            trainer = Recording(
                model=str(tiny_model_dir),
                reward_funcs=correct,
                args=config(tmp_path),
                train_dataset=dataset(),
                processing_class=tokenizer,
                rollout_func=rollout_func,
                judge_url=live.url,
                judge_options={"judge": "rules"},
                judge_drift_every=1,
                judge_stop_on_bad=stop,
            )
            trainer.seen = []
            trainer.train()
            return trainer

        def drift_logged(trainer: Recording) -> float:
            entry = next(e for e in trainer.state.log_history if "judge/drift" in e)
            return float(entry["judge/drift"])

        assert drift_logged(run(stop=True)) == 0.0  # ok: trains
        turn_bad(live.url, example_rollouts)
        assert drift_logged(run(stop=False)) == 2.0  # bad: logged, trains on
        with pytest.raises(JudgeDriftError, match="bad") as stopped:
            run(stop=True)
        assert stopped.value.report.judges[0].judge == "rules"


def test_groupwise_sends_each_prompts_generations_as_one_group(
    server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    options = {"judge": "rules", "lambda": 0.25, "groupwise": True, "credit_encoding": "dense"}
    trainer, fixed, env_masks = trained(server, tiny_model_dir, tmp_path, options)
    assert trainer.last_judged is not None
    _rows, response = trainer.last_judged
    # The four generations of the one prompt went as one group, judged together.
    assert response.groups is not None and len(response.groups) == 1
    (block,) = response.groups.values()
    assert block.size == 4
    # The same four judged by /v1/judge/group: the credit that reached TRL is theirs.
    rollouts = [
        {"id": f"r{k}", "response_token_ids": ids, "response_mask": mask, "problem": PROBLEM,
         "tokenizer": str(tiny_model_dir), "reference_answer": "408"}
        for k, (ids, mask) in enumerate(zip(fixed, env_masks, strict=True))
    ]  # fmt: skip
    body = {"rollouts": rollouts, "options": {"judge": "rules", "lambda": 0.25}}
    group = httpx.post(f"{server.url}/v1/judge/group", json=body, timeout=60).json()
    assert group["group"]["correct"] == block.model_dump()["correct"]
    assert [r.credit for r in response.results] == [r["credit"] for r in group["results"]]


def test_generated_completions_keep_trls_eos_and_padding(
    server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Real `model.generate`: completions cut at the first EOS, right-padded; the judge
    reads exactly each completion's tokens (the trainer checks num_tokens) and credit is 0
    wherever the completion mask is."""
    eos = AutoTokenizer.from_pretrained(str(tiny_model_dir)).eos_token_id
    # Biased toward EOS so that some completions stop early and are padded, others not.
    biased = {"sequence_bias": [[[eos], 3.0]]}
    trainer = Recording(
        model=str(tiny_model_dir),
        reward_funcs=correct,
        args=config(tmp_path, max_completion_length=16, generation_kwargs=biased),
        train_dataset=dataset(),
        judge_url=server.url,
        judge_options={"judge": "rules"},
    )
    trainer.seen = []
    trainer.train()
    (batch,) = trainer.seen
    adv, cm = batch["advantages"], batch["completion_mask"]
    assert adv.shape == cm.shape
    # A random model never writes \\boxed{408}: every reward is 0, so A_i = 0 and the
    # advantages are the credit alone, which must be 0 past each completion's end.
    lengths = cm.sum(dim=1)
    assert int(lengths.min()) < adv.shape[1]  # at least one completion stopped and is padded
    for b in range(adv.shape[0]):
        assert torch.all(adv[b, int(lengths[b]) :] == 0)
    assert any("judge/share" in entry for entry in trainer.state.log_history)


def test_settings_other_than_dr_grpo_are_refused(
    server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    common: dict[str, Any] = {
        "model": str(tiny_model_dir),
        "reward_funcs": correct,
        "train_dataset": dataset(),
        "judge_url": server.url,
    }
    with pytest.raises(ValueError, match=r"scale_rewards='group'"):
        JudgeCreditGRPOTrainer(args=config(tmp_path, scale_rewards="group"), **common)
    with pytest.raises(ValueError, match=r"loss_type='grpo'"):
        JudgeCreditGRPOTrainer(args=config(tmp_path, loss_type="grpo"), **common)
    with pytest.warns(UserWarning, match="Dr. GRPO"):
        JudgeCreditGRPOTrainer(
            args=config(tmp_path, loss_type="grpo"), require_dr_grpo=False, **common
        )
    with pytest.raises(ValueError, match="judge_url"):
        JudgeCreditGRPOTrainer(args=config(tmp_path), **{**common, "judge_url": None})


def test_readme_trl_snippet_runs(
    server: LiveServer, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' TRL block (docs/trainers/trl.md), run as written, against the loopback server."""
    code = readme_block("trl")
    monkeypatch.setenv("MODEL", str(tiny_model_dir))
    monkeypatch.setenv("JUDGE_URL", server.url)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_trl"}
    exec(compile(code, "docs/trainers/trl.md", "exec"), namespace)
    trainer = namespace["trainer"]
    assert isinstance(trainer, JudgeCreditGRPOTrainer)
    assert trainer.state.global_step == trainer.args.max_steps
    assert any("judge/share" in entry for entry in trainer.state.log_history)
