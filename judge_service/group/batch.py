"""``options.groupwise`` on a batch: the rollouts that share a `group_id` are judged as one
group (`judge.judging`, as ``/v1/judge/group`` judges them); the others as in any batch.

A bad group never fails the batch: its rollouts come back ``failed`` with the group's
error (rollouts of different prompts under one `group_id`, a group over
JUDGE_MAX_GROUP_SIZE or JUDGE_MAX_TOKENS_PER_GROUP), and the other groups are judged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from judge_service import credit as credit_mod
from judge_service import metrics
from judge_service.credit import GroupAdvantage
from judge_service.errors import InputError
from judge_service.group.judge import Judged, check_group, judging
from judge_service.pipeline import Engine, batch_stats
from judge_service.schemas import BatchResponse, GroupBlock, Options, Result, Rollout


def check_groupwise(options: Options, where: str) -> None:
    """Refuse options.groupwise where it is not built yet (a single rollout, jobs)."""
    if options.groupwise:
        raise InputError(
            f"groupwise judging is for /v1/judge/batch, /v1/judge/group and judge-service "
            f"judge; {where} does not support it yet",
            field="options.groupwise",
        )


async def judge_batch_groupwise(
    engine: Engine, rollouts: Sequence[Rollout], options: Options
) -> BatchResponse:
    """One result per rollout, in order; `groups` holds each group's block by group_id."""
    began = time.perf_counter()
    engine.check_batch_size(len(rollouts))
    members: dict[str, list[int]] = {}
    for i, rollout in enumerate(rollouts):
        if rollout.group_id is not None:
            members.setdefault(rollout.group_id, []).append(i)
    groups = {g: ix for g, ix in members.items() if len(ix) > 1}
    grouped = {i for ix in groups.values() for i in ix}
    singles = [i for i in range(len(rollouts)) if i not in grouped]
    # A lone rollout of a group_id has only itself to compare with: its advantage is 0.
    alone = credit_mod.group_advantages(
        [rollouts[i].reward for i in singles], [rollouts[i].group_id for i in singles]
    )
    judged: list[Judged | None] = [None] * len(rollouts)
    advantages: list[GroupAdvantage | None] = [None] * len(rollouts)
    blocks: dict[str, GroupBlock] = {}

    async def single(i: int, advantage: GroupAdvantage | None) -> None:
        judged[i] = await engine.judge_or_fail(
            rollouts[i], options, advantage, field=f"rollouts[{i}]"
        )
        advantages[i] = advantage

    async def group(group_id: str, indices: list[int]) -> None:
        part = [rollouts[i] for i in indices]
        fields = [f"rollouts[{i}]" for i in indices]
        try:
            check_group(part, engine, fields)
        except InputError as exc:
            for i in indices:
                failed = Result(id=rollouts[i].id, status="failed", error=f"{exc.field}: {exc}")
                metrics.observe(failed)
                judged[i] = (failed, None)
            return
        done = await judging(engine, part, options, fields)
        for k, i in enumerate(indices):
            judged[i], advantages[i] = done.judged[k], done.advantages[k]
        blocks[group_id] = done.block

    await asyncio.gather(
        *(single(i, adv) for i, adv in zip(singles, alone, strict=True)),
        *(group(g, ix) for g, ix in groups.items()),
    )
    complete = [j for j in judged if j is not None]
    assert len(complete) == len(rollouts)
    return BatchResponse(
        results=[r for r, _ in complete],
        stats=batch_stats(complete, advantages, began),
        groups=blocks,
    )
