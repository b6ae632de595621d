"""SkyRL: add the judge's credit to the advantages of ``RayPPOTrainer``.

SkyRL's registered estimators get only ``token_level_rewards``/``response_mask``/``index``
(``skyrl/backends/skyrl_train/utils/ppo_utils.py``, ``compute_advantages_and_returns``), and
its GRPO sums dense rewards, so the hook is the trainer method
``RayPPOTrainer.compute_advantages_and_returns(self, data)`` (``skyrl/train/trainer.py``,
SkyRL a956457), returned from ``BasePPOExp.get_trainer``
(``skyrl/train/entrypoints/main_base.py``)::

    from skyrl.train.trainer import RayPPOTrainer
    from judge_service_client.client import JudgeClient
    from judge_service_client.integrations.skyrl import add_judge_credit

    class JudgeTrainer(RayPPOTrainer):   # trainer.algorithm.grpo_norm_by_std=false
        def compute_advantages_and_returns(self, data):
            data = super().compute_advantages_and_returns(data)
            add_judge_credit(data, JudgeClient(URL), {"lambda": 0.5}, step=self.global_step)
            return data

Layout (``skyrl/train/dataset/preprocess.py``, ``convert_prompts_responses_to_batch_tensors``):
``sequences`` (B, S) is one left-padded block ``[pad… prompt response]``; the response
tensors (``response_mask``, ``loss_mask``, ``advantages``) are (B, R) and **right-aligned**:
row i's response is its last ``response_mask[i].sum()`` positions, ``sequences[i, -R:]`` at
the same places. Tool output stays in the response with ``loss_mask`` 0 and is sent as the
rollout's ``response_mask`` (context, zero credit). ``metadata["pad_size"]`` rows at the end
are padding copies and are not judged; ``metadata["uids"]`` are the group ids. Runs before
the trainer pops ``uids`` (the train loop calls this first). SkyRL may append an EOS it did
not sample (``skyrl_gym_generator.py``); it is judged like any token. With
``zero_variance_filter`` on, those groups' ``loss_mask`` is 0 and they get no credit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from judge_service_client.client import JudgeClient, credit_array
from judge_service_client.schemas import Options, Result

__all__ = ["add_judge_credit", "add_right_aligned", "right_aligned_rollouts"]


def right_aligned_rollouts(
    sequences: torch.Tensor,
    response_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    ids: Sequence[str],
    group_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One rollout per row (``len(ids)`` rows; the rest are padding): the response ids
    (right-aligned: the last ``response_mask[i].sum()`` of ``sequences[i, -R:]``) and the
    loss mask over them as ``response_mask``."""
    width = response_mask.shape[1]
    if loss_mask.shape != response_mask.shape or sequences.shape[1] < width:
        raise ValueError(
            f"response_mask {tuple(response_mask.shape)}, loss_mask {tuple(loss_mask.shape)} "
            f"and sequences {tuple(sequences.shape)} do not share one (B, R) response block"
        )
    responses = sequences[:, -width:]
    rollouts = []
    for i, rid in enumerate(ids):
        n = int(response_mask[i].sum())
        rollout: dict[str, Any] = {
            "id": str(rid),
            "response_token_ids": responses[i, width - n :].tolist(),
            "response_mask": [int(v) for v in loss_mask[i, width - n :].tolist()],
        }
        if group_ids is not None:
            rollout["group_id"] = str(group_ids[i])
        rollouts.append(rollout)
    return rollouts


def add_right_aligned(
    advantages: torch.Tensor, loss_mask: torch.Tensor, results: Sequence[Result]
) -> dict[str, int]:
    """``advantages[i, R-n:] += credit_i * loss_mask`` in place for result i (n = its
    num_tokens); failed results add nothing."""
    width = advantages.shape[1]
    counts = {"fallback": 0, "failed": 0}
    for i, result in enumerate(results):
        if result.status == "failed":
            counts["failed"] += 1
            continue
        counts["fallback"] += result.status == "fallback"
        credit = torch.from_numpy(credit_array(result)).to(advantages.device, advantages.dtype)
        n = credit.shape[0]
        if n > width:
            raise ValueError(f"result {result.id!r}: {n} values for a response block of {width}")
        advantages[i, width - n :] += credit * loss_mask[i, width - n :].to(advantages.dtype)
    return counts


def add_judge_credit(
    data: Any,
    client: JudgeClient,
    options: Options | Mapping[str, Any],
    *,
    step: int = 0,
    tokenizer: str | None = None,
) -> dict[str, int]:
    """Judge a SkyRL ``TrainingInputBatch`` (``sequences``, ``response_mask``,
    ``loss_mask``, ``advantages``, ``metadata``) and add the credit to its advantages in
    place. Returns counts of fallback and failed results."""
    metadata: Mapping[str, Any] = getattr(data, "metadata", None) or {}
    rows = data["sequences"].shape[0] - int(metadata.get("pad_size") or 0)
    uids = metadata.get("uids")
    rollouts = right_aligned_rollouts(
        data["sequences"],
        data["response_mask"],
        data["loss_mask"],
        [f"{step}-{i}" for i in range(rows)],
        list(uids)[:rows] if uids is not None else None,
    )
    if tokenizer:
        for rollout in rollouts:
            rollout["tokenizer"] = tokenizer
    if not rollouts:
        return {"fallback": 0, "failed": 0}
    results = client.judge_batch(rollouts, options).results
    return add_right_aligned(data["advantages"], data["loss_mask"], results)
