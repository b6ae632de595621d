"""slime: a ``--custom-advantage-function-path`` function that adds the judge's credit.

slime calls ``custom_fn(args, rollout_data)`` after the KL step, on the training side,
on every rank of the last pipeline stage (``slime/backends/megatron_utils/loss.py``,
``compute_advantages_and_returns``; help in ``slime/utils/arguments.py``; slime 624b824).
Its built-in GRPO is ``returns = ones_like(kl[i]) * rewards[i]`` (``slime/utils/ppo_utils.py``)
with ``rewards`` already group-normalised on the rollout side (``slime/ray/rollout.py``
``_post_process_rewards``). No per-token channel reaches the trainer from the rollout
(a fixed key list, ``_split_train_data_by_dp``), so this function judges on the trainer:
the service's content cache makes the repeat free when a ``--custom-rm-path`` already
judged the same ids with the same options, and makes the other TP ranks' calls hits.

Layout: ``tokens[i]`` is prompt + response (``total_lengths[i]``), the response is its last
``response_lengths[i]`` ids; ``loss_masks[i]`` has the response's length (0 on tool output
and on off-policy prefixes of partial rollouts); per-token tensors such as ``kl[i]`` are
**context-parallel sliced** to this rank's two chunks (``slice_log_prob_with_cp``,
``slime/backends/megatron_utils/cp_utils.py``), and so is the credit here (``cp_slice``, the
same arithmetic, with the rank and size read from Megatron's ``mpu``).

Run with::

    JUDGE_URL=http://judge:8000 JUDGE_OPTIONS='{"lambda": 0.5}' python train.py ... \\
      --custom-advantage-function-path judge_service_client.integrations.slime.judge_advantages \\
      --disable-grpo-std-normalization
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch

from judge_service_client.client import JudgeClient, credit_array
from judge_service_client.schemas import Options

__all__ = ["add_judge_credit", "cp_slice", "judge_advantages"]


def cp_slice(
    values: torch.Tensor, total_length: int, response_length: int, cp_rank: int, cp_size: int
) -> torch.Tensor:
    """This CP rank's part of a per-response-token tensor: slime's
    ``slice_log_prob_with_cp`` with ``get_logits_and_tokens_offset_with_cp`` inlined."""
    if values.shape[0] != response_length:
        raise ValueError(f"{values.shape[0]} values for a response of {response_length} tokens")
    if cp_size == 1:
        return values
    prompt_length = total_length - response_length
    chunk = (total_length + 2 * cp_size - 1) // (2 * cp_size)
    parts = []
    for start, end in (
        (cp_rank * chunk, (cp_rank + 1) * chunk),
        ((2 * cp_size - cp_rank - 1) * chunk, (2 * cp_size - cp_rank) * chunk),
    ):
        lo, hi = max(start, prompt_length - 1), min(end, total_length - 1)
        if lo >= hi:
            lo = hi = 0  # slime's empty chunk (it still slices, from a negative offset)
        parts.append(values[lo - (prompt_length - 1) : hi - (prompt_length - 1)])
    return torch.cat(parts, dim=0)


def _cp() -> tuple[int, int]:
    try:
        from megatron.core import mpu  # type: ignore[import-not-found]
    except ImportError:
        return 0, 1
    return int(mpu.get_context_parallel_rank()), int(mpu.get_context_parallel_world_size())


def add_judge_credit(
    rollout_data: dict[str, Any],
    client: JudgeClient,
    options: Options | Mapping[str, Any],
    *,
    cp_rank: int = 0,
    cp_size: int = 1,
) -> dict[str, int]:
    """Set ``rollout_data["advantages"]`` and ``["returns"]`` to slime's GRPO
    (``ones_like(kl[i]) * rewards[i]``) plus each sample's credit, masked by its loss mask
    and CP-sliced like ``kl[i]``. Returns counts of fallback and failed results."""
    kl, rewards = rollout_data["kl"], rollout_data["rewards"]
    totals, lengths = rollout_data["total_lengths"], rollout_data["response_lengths"]
    ids = rollout_data.get("sample_indices") or list(range(len(kl)))
    rollouts = []
    for i in range(len(kl)):
        n = int(lengths[i])
        tokens = rollout_data["tokens"][i]
        mask = rollout_data["loss_masks"][i]
        rollouts.append(
            {
                "id": str(ids[i]),
                "response_token_ids": [int(t) for t in tokens[len(tokens) - n :]],
                "response_mask": [int(m) for m in mask],
            }
        )
    results = client.judge_batch(rollouts, options).results if rollouts else []
    counts = {"fallback": 0, "failed": 0}
    advantages = []
    for i, result in enumerate(results):
        base = torch.ones_like(kl[i]) * rewards[i]
        if result.status == "failed":
            counts["failed"] += 1
            advantages.append(base)
            continue
        counts["fallback"] += result.status == "fallback"
        mask = torch.as_tensor(rollout_data["loss_masks"][i], dtype=torch.float32)
        credit = torch.from_numpy(credit_array(result)) * mask
        part = cp_slice(credit, int(totals[i]), int(lengths[i]), cp_rank, cp_size)
        advantages.append(base + part.to(base.device, base.dtype))
    rollout_data["advantages"] = advantages
    rollout_data["returns"] = advantages
    return counts


_client: JudgeClient | None = None


def judge_advantages(args: Any, rollout_data: dict[str, Any]) -> None:
    """The ``--custom-advantage-function-path`` entry: settings from ``JUDGE_URL``,
    ``JUDGE_API_KEY`` and ``JUDGE_OPTIONS`` (JSON), CP rank and size from Megatron."""
    global _client
    if _client is None:
        url = os.environ.get("JUDGE_URL")
        if not url:
            raise ValueError("judge_advantages needs JUDGE_URL (the judge-service base URL)")
        _client = JudgeClient(url, api_key=os.environ.get("JUDGE_API_KEY"), timeout=600.0)
    options = json.loads(os.environ.get("JUDGE_OPTIONS") or "{}")
    cp_rank, cp_size = _cp()
    add_judge_credit(rollout_data, _client, options, cp_rank=cp_rank, cp_size=cp_size)
