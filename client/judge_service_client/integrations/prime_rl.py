"""prime-rl (verifiers v1 traces): add the judge's credit to GRPO's per-token advantages.

``Algorithm.score_group(episodes)`` is where prime-rl assigns advantages, through
``assign_advantages(trace, values)``, which writes ``node.advantages`` in **compact
sampled-token order**: over ``trace.nodes`` that have any ``mask``, the tokens whose mask
is True (``src/prime_rl/orchestrator/algo/routing.py``; ``GRPOAlgorithm`` in
``algo/grpo.py``; prime-rl 559b447). Algorithms are a closed dict, ``ALGORITHM_CLASSES``
(``algo/__init__.py``), so the one-line patch is to put a ``GRPOAlgorithm`` subclass under
``"grpo"`` in the orchestrator process (``build_algorithm`` reads the dict at call time)::

    from prime_rl.orchestrator.algo import ALGORITHM_CLASSES
    from prime_rl.orchestrator.algo.base import iter_trainable_traces
    from prime_rl.orchestrator.algo.grpo import GRPOAlgorithm
    from judge_service_client.client import AsyncJudgeClient
    from judge_service_client.integrations.prime_rl import add_judge_credit

    class JudgeGRPO(GRPOAlgorithm):
        judge = AsyncJudgeClient("http://judge:8000")
        async def score_group(self, episodes):
            await super().score_group(episodes)          # A_i (mean-only, + length shaping)
            traces = [t for _, t in iter_trainable_traces(episodes)]
            await add_judge_credit(traces, self.judge, {"lambda": 0.5})

    ALGORITHM_CLASSES["grpo"] = JudgeGRPO

A trace is sent as its node tokens from the first node with a sampled token on, with the
node masks as ``response_mask`` (scaffold and tool tokens are context with zero credit), and
the credit of the masked-in tokens is added to ``node.advantages`` in the same compact
order. Branching traces (several ``trace.branches``) are refused: their nodes are not one
text. ``filter_zero_advantages`` now keeps credited tokens of equal-reward groups, which is
intended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge_service_client.client import AsyncJudgeClient, credit_array
from judge_service_client.schemas import Options, Result

__all__ = ["add_judge_credit", "compact_credit", "trace_rollout"]


def _nodes(trace: Any) -> list[Any]:
    branches = getattr(trace, "branches", None)
    if branches is not None and len(branches) > 1:
        raise ValueError(f"trace {trace.id!r} branches ({len(branches)}): judge each branch")
    nodes = list(trace.nodes)
    for node in nodes:
        if len(node.mask) != len(node.token_ids):
            raise ValueError(f"trace {trace.id!r}: a node's mask and token_ids differ in length")
    first = next((k for k, node in enumerate(nodes) if any(node.mask)), len(nodes))
    return nodes[first:]


def trace_rollout(trace: Any, group_id: str | None = None) -> dict[str, Any]:
    """The rollout for one linear trace: its tokens from the first sampled node on, with
    the sampled mask as ``response_mask`` and the trace's reward."""
    ids: list[int] = []
    mask: list[int] = []
    for node in _nodes(trace):
        ids.extend(int(t) for t in node.token_ids)
        mask.extend(int(bool(m)) for m in node.mask)
    rollout: dict[str, Any] = {
        "id": str(trace.id),
        "response_token_ids": ids,
        "response_mask": mask,
    }
    if group_id is not None:
        rollout["group_id"] = group_id
    reward = getattr(trace, "reward", None)
    if reward is not None:
        rollout["reward"] = float(reward)
    return rollout


def compact_credit(result: Result, trace: Any) -> list[float]:
    """The result's credit on the trace's sampled tokens, in compact order."""
    mask = np.asarray([bool(m) for node in _nodes(trace) for m in node.mask], dtype=bool)
    credit = credit_array(result)
    if credit.shape[0] != mask.shape[0]:
        raise ValueError(f"result {result.id!r}: {credit.shape[0]} values for {mask.shape[0]}")
    return [float(v) for v in credit[mask]]


async def add_judge_credit(
    traces: Sequence[Any],
    client: AsyncJudgeClient,
    options: Options | Mapping[str, Any],
    *,
    group_id: str | None = None,
) -> dict[str, int]:
    """Judge the group's traces and add each one's credit to the ``node.advantages``
    already assigned (call after ``GRPOAlgorithm.score_group``). A failed result leaves the
    trace's advantages as they were. Returns counts of fallback and failed results."""
    counts = {"fallback": 0, "failed": 0}
    if not traces:
        return counts
    rollouts = [trace_rollout(t, group_id) for t in traces]
    results = (await client.judge_batch(rollouts, options)).results
    for trace, result in zip(traces, results, strict=True):
        if result.status == "failed":
            counts["failed"] += 1
            continue
        counts["fallback"] += result.status == "fallback"
        credit = iter(compact_credit(result, trace))
        for node in _nodes(trace):
            if not any(node.mask):
                continue
            node.advantages = [a + next(credit) for a in node.advantages]
    return counts
