"""OpenRLHF: add the judge's credit to the advantages of ``RemoteExperienceMaker``.

OpenRLHF has no per-token reward path (OpenRLHF#433) and no advantage registry (the
estimator is a CLI ``choices`` list, ``openrlhf/cli/train_ppo_ray.py``), so the hook is a
wrap of ``RemoteExperienceMaker.compute_advantages_and_returns``
(``openrlhf/trainer/ppo_utils/experience_maker.py``, OpenRLHF 3c3be62): after OpenRLHF has
computed its group baseline, returns and any whitening, the credit is added per token.

Layout, as ``_process_response_into_experience`` builds it
(``openrlhf/trainer/ppo_utils/samples_generator.py`` L247-302): ``sequences`` (B, T) are
prompt + response (right-padded when experiences are concatenated); ``action_mask``,
``advantages`` and ``returns`` are (B, T-1), **shifted by one**: ``action_mask =
action_mask[1:truncate_length]``, so ``action_mask[b, p-1]`` is about ``sequences[b, p]``.
Multi-turn environment tokens sit between actions with mask 0. Each row is sent as the
tokens from its first to its last action token, with ``response_mask`` = the action mask
there, so the judge reads the environment text and credits only actions. Cut at
``max_len``, the row is judged as kept.

Install inside the ``PPOTrainer`` Ray actor (it builds the experience maker,
``openrlhf/trainer/ppo_trainer.py``), e.g. from a Ray ``worker_process_setup_hook``::

    from judge_service_client.integrations.openrlhf import install
    install("http://judge:8000", {"lambda": 0.5})   # then: --algo.advantage.estimator dr_grpo

Use ``dr_grpo`` (or ``group_norm``): for ``reinforce_baseline`` OpenRLHF whitens before
this runs, so credit would join un-whitened advantages.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from judge_service_client.client import JudgeClient, credit_array
from judge_service_client.schemas import Options, Result

log = logging.getLogger(__name__)

__all__ = ["action_rollouts", "add_credit", "install", "judge_experiences", "with_judge_credit"]

Span = tuple[int, int, int]  # (row, first action position, end) in action_mask coordinates


def action_rollouts(
    sequences: torch.Tensor, action_mask: torch.Tensor, ids: Sequence[str]
) -> tuple[list[dict[str, Any]], list[Span]]:
    """One rollout per row with any action: the tokens of ``sequences[b, 1+first : 1+end]``
    (action positions shifted back by one) and their ``response_mask``; rows without an
    action are skipped. Returns the rollouts and where each one's credit goes."""
    if action_mask.shape != (sequences.shape[0], sequences.shape[1] - 1):
        raise ValueError(
            f"action_mask {tuple(action_mask.shape)} must be (B, T-1) for sequences "
            f"{tuple(sequences.shape)} (OpenRLHF shifts it by one)"
        )
    rollouts, spans = [], []
    for b in range(sequences.shape[0]):
        where = torch.nonzero(action_mask[b]).flatten()
        if where.numel() == 0:
            continue
        first, end = int(where[0]), int(where[-1]) + 1
        rollouts.append(
            {
                "id": str(ids[b]),
                "response_token_ids": sequences[b, first + 1 : end + 1].tolist(),
                "response_mask": [int(v) for v in action_mask[b, first:end].tolist()],
            }
        )
        spans.append((b, first, end))
    return rollouts, spans


def add_credit(
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    spans: Sequence[Span],
    results: Sequence[Result],
) -> dict[str, int]:
    """``advantages[b, first:end] += credit * action_mask`` in place; a failed result adds
    nothing. Returns counts of fallback and failed results."""
    counts = {"fallback": 0, "failed": 0}
    for (b, first, end), result in zip(spans, results, strict=True):
        if result.status == "failed":
            counts["failed"] += 1
            continue
        counts["fallback"] += result.status == "fallback"
        credit = torch.from_numpy(credit_array(result)).to(advantages.device, advantages.dtype)
        if credit.shape[0] != end - first:
            raise ValueError(f"result {result.id!r}: {credit.shape[0]} values for {end - first}")
        advantages[b, first:end] += credit * action_mask[b, first:end].to(advantages.dtype)
    return counts


def judge_experiences(
    experiences: Sequence[Any], client: JudgeClient, options: Options | Mapping[str, Any]
) -> dict[str, int]:
    """Judge every experience's rows in one batch and add the credit to their
    ``advantages``. Row ids are OpenRLHF's ``experience.index`` (the original sample
    order), with the ``prompts`` and ``labels`` as problem and reference answer."""
    rollouts: list[dict[str, Any]] = []
    where: list[tuple[Any, Span]] = []
    for e in experiences:
        index = getattr(e, "index", None) or list(range(e.sequences.shape[0]))
        rows, spans = action_rollouts(e.sequences, e.action_mask, [str(i) for i in index])
        for rollout, span in zip(rows, spans, strict=True):
            prompts, labels = getattr(e, "prompts", None), getattr(e, "labels", None)
            if prompts:
                rollout["problem"] = str(prompts[span[0]])
            if labels and labels[span[0]] is not None:
                rollout["reference_answer"] = str(labels[span[0]])
            rollouts.append(rollout)
            where.append((e, span))
    counts = {"fallback": 0, "failed": 0}
    if not rollouts:
        return counts
    results = client.judge_batch(rollouts, options).results
    for (e, span), result in zip(where, results, strict=True):
        for key, n in add_credit(e.advantages, e.action_mask, [span], [result]).items():
            counts[key] += n
    return counts


def with_judge_credit(
    compute: Callable[..., Any], client: JudgeClient, options: Options | Mapping[str, Any]
) -> Callable[..., Any]:
    """``compute_advantages_and_returns`` followed by ``judge_experiences``."""

    @functools.wraps(compute)
    def wrapped(self: Any, experiences: list[Any]) -> list[Any]:
        experiences = compute(self, experiences)
        counts = judge_experiences(experiences, client, options)
        if counts["failed"]:
            log.warning("judge: %d rows failed and train on OpenRLHF's advantage", counts["failed"])
        return experiences

    wrapped._judge_credit = True  # type: ignore[attr-defined]
    return wrapped


def install(
    judge_url: str, options: Options | Mapping[str, Any] | None = None, api_key: str | None = None
) -> None:
    """Wrap ``RemoteExperienceMaker.compute_advantages_and_returns`` (idempotent)."""
    from openrlhf.trainer.ppo_utils.experience_maker import (  # type: ignore[import-not-found]
        RemoteExperienceMaker,
    )

    current = RemoteExperienceMaker.compute_advantages_and_returns
    if getattr(current, "_judge_credit", False):
        return
    client = JudgeClient(judge_url, api_key=api_key, timeout=600.0)
    RemoteExperienceMaker.compute_advantages_and_returns = with_judge_credit(
        current, client, options or {}
    )
