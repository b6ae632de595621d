"""Judging: one rollout, or a batch in which a failing rollout never fails the others."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from judge_service.api.deps import EngineDep
from judge_service.api.responses import json_response
from judge_service.api.routing import OffLoopBodyRoute
from judge_service.credit import advantage_in_group
from judge_service.schemas import (
    ERROR_RESPONSES,
    BatchRequestBody,
    BatchResponse,
    GroupRequestBody,
    GroupResponse,
    JudgeRequestBody,
    Result,
)

router = APIRouter(prefix="/v1", tags=["judge"], route_class=OffLoopBodyRoute)

# The group judge (group/: its LLM session, tools, contrast; ~50 ms to import) is imported
# by the routes that judge groups, when they first run: a server's start does not wait for
# it, and its warm-up thread imports it right after start (heap.HOT_PATH_MODULES).


@router.post(
    "/judge",
    operation_id="judge_rollout",
    response_model=Result,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def judge_rollout(body: JudgeRequestBody, engine: EngineDep) -> Response:
    """Judge one rollout. Bad input is a 4xx naming the field; a judge failure is a
    ``fallback`` result, not an error."""
    if body.options.groupwise:  # refused here, as group/batch.py says
        from judge_service.group.batch import check_groupwise

        check_groupwise(body.options, "/v1/judge (one rollout)")
    advantage = advantage_in_group(
        body.rollout.reward, body.group_rewards, reward_field="rollout.reward"
    )
    result = await engine.judge_one(body.rollout, body.options, advantage, field="rollout")
    return await json_response(result, result.num_tokens)


@router.post(
    "/judge/batch",
    operation_id="judge_batch",
    response_model=BatchResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def judge_batch(body: BatchRequestBody, engine: EngineDep) -> Response:
    """Judge rollouts concurrently: one result per rollout, in order. Rollouts that share a
    ``group_id`` and carry a ``reward`` get Dr. GRPO advantages; with
    ``options.groupwise`` each such group is judged together, as by /v1/judge/group."""
    if body.options.groupwise:
        from judge_service.group.batch import judge_batch_groupwise

        response = await judge_batch_groupwise(engine, body.rollouts, body.options)
    else:
        response = await engine.judge_batch(body.rollouts, body.options)
    return await json_response(response, sum(r.num_tokens for r in response.results))


@router.post(
    "/judge/group",
    operation_id="judge_group",
    response_model=GroupResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def judge_group_route(body: GroupRequestBody, engine: EngineDep) -> Response:
    """Judge the G rollouts of one prompt together: per-rollout results as for a batch,
    plus the group block: each wrong rollout's divergence point from its correct siblings
    (credited on its step), and in an equal-reward group a ranking and zero-sum scores.
    Rollouts of different prompts are a 422 naming the first that differs."""
    from judge_service.group.judge import judge_group

    response = await judge_group(engine, body.rollouts, body.options)
    return await json_response(response, sum(r.num_tokens for r in response.results))
