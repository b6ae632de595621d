"""Stored judgments by cache key (the ``cache_key`` of a result)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import HTMLResponse

from judge_service.api.deps import SettingsDep, StoreDep, TenantDep
from judge_service.api.responses import html_page
from judge_service.config import Settings
from judge_service.errors import InputError, NotFoundError
from judge_service.judgment import Judgment, to_result
from judge_service.resolve import resolve
from judge_service.schemas import ERROR_RESPONSES, CreditEncoding, ErrorBody, Options, Result
from judge_service.store import Store

router = APIRouter(prefix="/v1/judgments", tags=["judgments"])
_KEY = re.compile(r"sha256:[0-9a-f]{64}")

RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    404: {"model": ErrorBody, "description": "No stored judgment under this key for this API key."},
    503: {"model": ErrorBody, "description": "The store (Redis) is unavailable; retry."},
}


@router.get(
    "/{key}", operation_id="get_judgment", response_model_exclude_none=True, responses=RESPONSES
)
async def get_judgment(
    key: Annotated[str, Path(max_length=80)],
    store: StoreDep,
    tenant: TenantDep,
    settings: SettingsDep,
    credit_encoding: Annotated[CreditEncoding, Query()] = "dense",
) -> Result:
    """The judgment stored under a result's ``cache_key``, as it was first judged (its usage
    and transcript, if one was kept, included), with credit under the label scores it was
    judged with and the server's default λ, κ and min_confidence. Only ``ok`` judgments are
    stored; ``use_cache: false`` stores nothing."""
    return _as_result(await _stored(store, tenant, key), key, settings, credit_encoding)


@router.get(
    "/{key}/view",
    operation_id="view_judgment",
    response_class=HTMLResponse,
    responses=RESPONSES,
)
async def view_judgment(
    key: Annotated[str, Path(max_length=80)],
    store: StoreDep,
    tenant: TenantDep,
    settings: SettingsDep,
) -> HTMLResponse:
    """The stored judgment as an HTML page: the decoded response with each accepted span
    shaded in its label's colour and its credit's intensity, evidence quotes highlighted,
    rejected spans outlined with their reason and the ⟦n⟧ token positions on hover; the
    problem, answers, usage and the judge's transcript when one was kept. Everything from
    the trace or the judge is escaped, and a strict Content-Security-Policy allows no script
    and no request. A judgment stored before the text was kept renders without it."""
    from judge_service.view.html import page_html  # on first use (api/responses.py: why)
    from judge_service.view.model import build_page

    judgment = Judgment.loads(await _stored(store, tenant, key))
    result = _result_of(judgment, key, settings, "spans")
    return html_page(page_html(build_page(result, judgment.source, key=key)))


def _as_result(data: str, key: str, settings: Settings, encoding: CreditEncoding) -> Result:
    return _result_of(Judgment.loads(data), key, settings, encoding)


def _result_of(
    judgment: Judgment, key: str, settings: Settings, encoding: CreditEncoding
) -> Result:
    options = Options(credit_encoding=encoding, label_scores=judgment.label_scores)
    resolved = replace(resolve(options, settings), include_transcript=True)
    result, _ = to_result(
        judgment,
        rollout_id=judgment.rollout_id,
        resolved=resolved,
        advantage=None,
        key=key,
        began=0.0,
        hit=False,
    )
    return result


async def _stored(store: Store, tenant: str, key: str) -> str:
    if not _KEY.fullmatch(key):
        raise InputError("a cache key looks like sha256:<64 hex digits>", field="key")
    data = await store.get_judgment(tenant, key)
    if data is None:
        raise NotFoundError(f"no stored judgment {key}", field="key")
    return data
