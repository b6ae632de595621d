"""POW3R: policy-aware rubric criterion weights for one group (methods/pow3r.py)."""

from __future__ import annotations

from fastapi import APIRouter

from judge_service.methods.pow3r import RubricWeightsRequest, RubricWeightsResponse, rubric_weights
from judge_service.schemas import ERROR_RESPONSES

router = APIRouter(prefix="/v1", tags=["rubric"])


@router.post(
    "/rubric/weights",
    operation_id="rubric_weights",
    response_model=RubricWeightsResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def weights(body: RubricWeightsRequest) -> RubricWeightsResponse:
    """Criterion weights that emphasise the criteria separating this group's rollouts, with
    the human weights' category totals kept, and each rollout's scalar reward under them.
    At most 64 criteria and 1024 rollouts: a few microseconds of numpy, on the loop."""
    return rubric_weights(body)
