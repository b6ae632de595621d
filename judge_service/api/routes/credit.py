"""Credit from spans the caller already has: no tokenizer, no judge."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import Response

from judge_service import credit as credit_mod
from judge_service.api.deps import SettingsDep
from judge_service.api.responses import json_response
from judge_service.api.routing import OffLoopBodyRoute
from judge_service.config import Settings
from judge_service.errors import InputError, LimitError
from judge_service.offload import OFFLOAD_TOKENS
from judge_service.resolve import resolve
from judge_service.schemas import (
    ERROR_RESPONSES,
    CreditRequestBody,
    CreditResponse,
    RejectedSpan,
)
from judge_service.validate import validate_spans

router = APIRouter(prefix="/v1", tags=["credit"], route_class=OffLoopBodyRoute)

# Validating a few hundred spans and painting a short trace take well under a
# millisecond, less than a thread hop; beyond these sizes the work goes to a thread so
# that the event loop (and /healthz) never waits for it.
OFFLOAD_SPANS = 512


@router.post(
    "/credit",
    operation_id="compute_credit",
    response_model=CreditResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def compute_credit(body: CreditRequestBody, settings: SettingsDep) -> Response:
    """Per-token credit for spans over ``num_tokens`` tokens. Bounds, labels, confidence,
    span sizes, structure (a correction needs an earlier invalid) and overlaps are validated
    as for a judge; evidence and lines are not (there is no text). At most
    ``JUDGE_MAX_SPANS`` spans per call (413 beyond)."""
    if body.num_tokens > settings.max_tokens_per_rollout:
        raise InputError(
            f"exceeds the limit of {settings.max_tokens_per_rollout} tokens", field="num_tokens"
        )
    if len(body.spans) > settings.max_spans:
        # Checked before any span is looked at: the request's cost is bounded up front,
        # and a response never lists thousands of rejections.
        raise LimitError(
            f"{len(body.spans)} spans exceed the limit of {settings.max_spans} per call "
            "(JUDGE_MAX_SPANS)",
            field="spans",
        )
    if body.num_tokens >= OFFLOAD_TOKENS or len(body.spans) >= OFFLOAD_SPANS:
        response = await asyncio.to_thread(_credit, body, settings)
    else:
        response = _credit(body, settings)
    return await json_response(response, body.num_tokens)


def _credit(body: CreditRequestBody, settings: Settings) -> CreditResponse:
    if body.options.reweight is not None:  # weights come from rescoring the response's tokens
        raise InputError(
            "reweighting needs the response: use /v1/judge or /v1/judge/batch",
            field="options.reweight",
        )
    resolved = resolve(body.options, settings)
    base = credit_mod.advantage_in_group(body.reward, body.group_rewards, reward_field="reward")
    if resolved.kappa_mode == "relative" and base is None:
        raise InputError(
            "kappa_mode relative needs reward and group_rewards", field="options.kappa_mode"
        )
    report = validate_spans(
        [s.model_dump(exclude_none=True) for s in body.spans],
        None,
        resolved.label_scores,
        num_tokens=body.num_tokens,
        limits=resolved.span_limits,
    )
    credit = credit_mod.token_credit(
        body.num_tokens,
        report.accepted,
        resolved.label_scores,
        lam=resolved.lam,
        kappa=resolved.kappa,
        min_confidence=resolved.min_confidence,
        kappa_mode=resolved.kappa_mode,
        group_scale=None if base is None else base.group_scale,
    )
    advantage = None
    if base is not None:
        advantage = credit_mod.encode(credit.values + base.value, resolved.encoding)
    return CreditResponse(
        credit=credit_mod.encode(credit.values, resolved.encoding),
        credit_scale=credit.scale,
        advantage=advantage,
        rejected_spans=[
            RejectedSpan(span=dict(r.span), code=r.code, reason=r.reason) for r in report.rejected
        ],
    )
