"""Credit from spans the caller already has: no tokenizer, no judge."""

from __future__ import annotations

from fastapi import APIRouter

from judge_service import credit as credit_mod
from judge_service.api.deps import SettingsDep
from judge_service.errors import InputError
from judge_service.resolve import resolve
from judge_service.schemas import (
    ERROR_RESPONSES,
    CreditRequestBody,
    CreditResponse,
    RejectedSpan,
)
from judge_service.validate import validate_spans

router = APIRouter(prefix="/v1", tags=["credit"])


@router.post(
    "/credit",
    operation_id="compute_credit",
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
)
async def compute_credit(body: CreditRequestBody, settings: SettingsDep) -> CreditResponse:
    """Per-token credit for spans over ``num_tokens`` tokens. Bounds, labels, confidence and
    overlaps are validated as for a judge; evidence is not (there is no text to quote)."""
    if body.num_tokens > settings.max_tokens_per_rollout:
        raise InputError(
            f"exceeds the limit of {settings.max_tokens_per_rollout} tokens", field="num_tokens"
        )
    resolved = resolve(body.options, settings)
    report = validate_spans(
        [s.model_dump() for s in body.spans],
        None,
        resolved.label_scores,
        num_tokens=body.num_tokens,
    )
    credit = credit_mod.token_credit(
        body.num_tokens,
        report.accepted,
        resolved.label_scores,
        lam=resolved.lam,
        kappa=resolved.kappa,
        min_confidence=resolved.min_confidence,
    )
    base = credit_mod.advantage_in_group(body.reward, body.group_rewards, reward_field="reward")
    advantage = None if base is None else credit_mod.encode(credit.values + base, resolved.encoding)
    return CreditResponse(
        credit=credit_mod.encode(credit.values, resolved.encoding),
        credit_scale=credit.scale,
        advantage=advantage,
        rejected_spans=[RejectedSpan(span=dict(r.span), reason=r.reason) for r in report.rejected],
    )
